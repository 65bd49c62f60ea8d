! PSG test case (Fortran): loops, a branch, a subroutine with MPI, recursion, a procedure pointer.
program cases
  implicit none
  include 'mpif.h'
  abstract interface
    subroutine op_iface(x)
      double precision, intent(inout) :: x
    end subroutine op_iface
  end interface
  procedure(op_iface), pointer :: op => null()
  integer :: ierr, rank, nprocs, i, j
  double precision :: a(100), s, total
  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, rank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, nprocs, ierr)
  s = 0.0d0
  do i = 1, 10
    do j = 1, 100
      a(j) = dble(i * j + rank)
    end do
    s = s + sum(a)
    if (mod(i, 2) == 0) then
      call reduce_all(s, total)
    end if
  end do
  call countdown(3, s)
  op => halve
  call op(s)
  call mpi_barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print *, 'total =', total
  call mpi_finalize(ierr)
contains
  subroutine halve(x)
    double precision, intent(inout) :: x
    integer :: k
    do k = 1, 2
      x = x * 0.5d0
    end do
  end subroutine halve
  subroutine reduce_all(x, y)
    double precision, intent(in) :: x
    double precision, intent(out) :: y
    integer :: ierr2
    call mpi_allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr2)
  end subroutine reduce_all
  recursive subroutine countdown(n, x)
    integer, intent(in) :: n
    double precision, intent(inout) :: x
    integer :: ierr3
    if (n > 0) then
      call countdown(n - 1, x)
    else
      call mpi_bcast(x, 1, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr3)
    end if
  end subroutine countdown
end program cases
