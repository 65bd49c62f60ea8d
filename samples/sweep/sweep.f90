! sweep: a Sweep3D-style wavefront where a delay travels along the wave.
!
! The y extent of a fixed NX x NY x NZ grid is split over the ranks (strong scaling), which form a
! pipeline.  For each of the two sweep directions, each block of KB z-planes waits for the inflow
! face from the upstream rank (MPI_Recv), is computed, and its outflow face goes downstream
! (MPI_Send).  One rank (size/2) runs a negative-flux fixup of fixed size on every block it
! computes.  The delay travels with the wave: every downstream rank waits for it in MPI_Recv, block
! after block, and the final MPI_Allreduce waits for the last rank.
! Root cause: the fixup loop in subroutine fixup.
!
! usage: sweep [blocks-per-direction]
program sweep
  implicit none
  include 'mpif.h'
  integer, parameter :: nx = 256, ny_global = 384, kb = 4
  integer :: rank, nranks, ierr, ny, nblocks, dir, blk, upstream, downstream, slow
  integer :: status(MPI_STATUS_SIZE)
  character(len=32) :: arg
  double precision, allocatable :: phi(:, :, :), face(:, :)
  double precision :: local_sum, total_sum, fix

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  nblocks = 24
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) nblocks
  end if
  ny = ny_global / nranks
  slow = nranks / 2
  allocate (phi(nx, ny, kb), face(nx, kb))
  phi = 0.0d0
  local_sum = 0.0d0
  fix = 0.0d0

  do dir = 1, 2
    if (dir == 1) then
      upstream = rank - 1
      downstream = rank + 1
    else
      upstream = rank + 1
      downstream = rank - 1
    end if
    if (upstream < 0 .or. upstream >= nranks) upstream = MPI_PROC_NULL
    if (downstream < 0 .or. downstream >= nranks) downstream = MPI_PROC_NULL
    do blk = 1, nblocks
      face = 1.0d0 + dble(mod(blk + dir, 3))
      call MPI_Recv(face, nx * kb, MPI_DOUBLE_PRECISION, upstream, blk, MPI_COMM_WORLD, status, ierr)
      call sweep_block(phi, face, nx, ny, kb, dir)
      if (rank == slow .and. planted()) call fixup(phi, nx, ny, kb, blk, fix)
      call MPI_Send(face, nx * kb, MPI_DOUBLE_PRECISION, downstream, blk, MPI_COMM_WORLD, ierr)
      local_sum = local_sum + sum(face)
    end do
  end do

  local_sum = local_sum + fix
  call MPI_Allreduce(local_sum, total_sum, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) write (*, '(a,i0,a,i0,a,es14.6)') 'sweep: ranks=', nranks, ' blocks=', nblocks, &
      ' flux=', total_sum
  deallocate (phi, face)
  call MPI_Finalize(ierr)

contains

  ! Transport through one block: every cell takes the inflow of its upwind neighbour in y.
  subroutine sweep_block(phi, face, nx, ny, kb, dir)
    integer, intent(in) :: nx, ny, kb, dir
    double precision, intent(inout) :: phi(nx, ny, kb), face(nx, kb)
    integer :: i, j, jj, k
    do k = 1, kb
      do jj = 1, ny
        j = jj
        if (dir == 2) j = ny + 1 - jj
        do i = 1, nx
          phi(i, j, k) = 0.5d0 * (phi(i, j, k) + face(i, k)) + 1.0d-3 * dble(i + k)
          face(i, k) = 0.9d0 * phi(i, j, k)
        end do
      end do
    end do
  end subroutine sweep_block

  ! Negative-flux fixup on one rank: a fixed amount of work per block, whatever the rank count.
  subroutine fixup(phi, nx, ny, kb, blk, fix)
    integer, intent(in) :: nx, ny, kb, blk
    double precision, intent(in) :: phi(nx, ny, kb)
    double precision, intent(inout) :: fix
    integer :: n
    do n = 1, 4000000
      fix = fix + 1.0d-9 * phi(1 + mod(n, nx), 1 + mod(n + blk, ny), 1 + mod(n, kb))
    end do
  end subroutine fixup

  ! SAMPLE_FIXED=1 in the environment runs the fixed program: no fixup (what-if checks)
  logical function planted()
    integer :: length, stat
    call get_environment_variable('SAMPLE_FIXED', length=length, status=stat)
    planted = .not. (stat == 0 .and. length > 0)
  end function planted

end program sweep
