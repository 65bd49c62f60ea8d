"""sgfort as a drop-in mpifort: flang-19 to bitcode, Debian MPICH's Fortran bindings, real runs.
Outputs are compared with the same program built by the plain MPI Fortran wrapper (gfortran)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require_tool
from test_driver_build import HAVE_ZIG, MPIEXEC, instrumentation_available, mpirun, sg

FLANG = shutil.which("flang-new-19") or shutil.which("flang-new")
MPIFORT = shutil.which("mpif90.mpich") or shutil.which("mpifort") or shutil.which("mpif90")

USE_MPI = '''
program ring
  use mpi
  implicit none
  integer :: ierr, rank, nranks, token, status(MPI_STATUS_SIZE), i
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  token = 0
  do i = 1, 3
    if (rank == 0) then
      token = token + 1
      call MPI_Send(token, 1, MPI_INTEGER, mod(rank + 1, nranks), 7, MPI_COMM_WORLD, ierr)
      call MPI_Recv(token, 1, MPI_INTEGER, nranks - 1, 7, MPI_COMM_WORLD, status, ierr)
    else
      call MPI_Recv(token, 1, MPI_INTEGER, rank - 1, 7, MPI_COMM_WORLD, status, ierr)
      token = token + 1
      call MPI_Send(token, 1, MPI_INTEGER, mod(rank + 1, nranks), 7, MPI_COMM_WORLD, ierr)
    end if
  end do
  if (rank == 0) write (*, '(A,I0,A,I0)') 'ring ranks=', nranks, ' token=', token
  call MPI_Finalize(ierr)
end program ring
'''

MPIF_H = '''
      subroutine work(n, s)
      integer n, i
      double precision s
      s = 0d0
      do 10 i = 1, n
        s = s + dble(i) / 2d0
   10 continue
      end

      program fixed
      implicit none
      include 'mpif.h'
      integer ierr, rank, nranks
      double precision s, total
      call MPI_Init(ierr)
      call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
      call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
      call work(100 * (rank + 1), s)
      call MPI_Reduce(s, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0,
     &                MPI_COMM_WORLD, ierr)
      if (rank .eq. 0) write (*, '(A,F12.2)') 'fixed total=', total
      call MPI_Finalize(ierr)
      end
'''


@pytest.fixture(params=["plain", "instrumented"])
def mode(request):
    require_tool(FLANG is not None, "no flang-new-19 (apt-get install flang-19)")
    require_tool(MPIFORT is not None, "no MPI with Fortran bindings (apt-get install mpich libmpich-dev)")
    require_tool(MPIEXEC is not None and HAVE_ZIG, "no MPI/zig in the venv")
    if request.param == "instrumented":
        require_tool(instrumentation_available(), "static pass or runtime shim not installed")
    return request.param


def fortran_env() -> dict:
    return {"MPIFC": MPIFORT}


def reference_build(src: Path, out: str, cwd: Path) -> None:
    """The plain build to compare with: the MPI's own Fortran wrapper (gfortran) when it works, else
    flang with the wrapper's -I/-L/-l (only for programs that use mpif.h, not gfortran's mpi.mod)."""
    r = subprocess.run([MPIFORT, "-O2", str(src), "-o", out], cwd=cwd, capture_output=True, text=True)
    if r.returncode == 0:
        return
    show = subprocess.run([MPIFORT, "-show"], capture_output=True, text=True).stdout.split()
    where = [w for w in show if w.startswith(("-I", "-L", "-l"))]
    subprocess.run([FLANG, "-O2", str(src), *where, "-o", out], cwd=cwd, check=True)


def test_use_mpi_program(tmp_path, mode):
    (tmp_path / "ring.f90").write_text(USE_MPI)
    sg("sgfort", ["-O1", "ring.f90", "-o", "ring"], tmp_path, mode, env=fortran_env())
    for n in (2, 3):   # the token goes round the ring three times, +1 per rank
        assert mpirun(tmp_path / "ring", n, cwd=tmp_path) == f"ring ranks={n} token={3 * n}\n"


def test_include_mpif_h_fixed_form_program(tmp_path, mode):
    (tmp_path / "fixed.f").write_text(MPIF_H)
    sg("sgfort", ["-O1", "fixed.f", "-o", "fixed"], tmp_path, mode, env=fortran_env())
    total = sum(sum(i / 2 for i in range(1, 100 * (r + 1) + 1)) for r in range(3))
    assert mpirun(tmp_path / "fixed", 3, cwd=tmp_path) == f"fixed total={total:12.2f}\n"


def test_fortran_separate_compile_and_link(tmp_path, mode):
    (tmp_path / "fixed.f").write_text(MPIF_H)
    sg("sgfort", ["-c", "-O2", "fixed.f"], tmp_path, mode, env=fortran_env())
    assert (tmp_path / "fixed.o").is_file()
    sg("sgfort", ["fixed.o", "-o", "fx"], tmp_path, mode, env=fortran_env())
    total = sum(sum(i / 2 for i in range(1, 100 * (r + 1) + 1)) for r in range(2))
    assert mpirun(tmp_path / "fx", 2, cwd=tmp_path) == f"fixed total={total:12.2f}\n"


def test_fortran_compile_error_is_flangs_own(tmp_path, mode):
    (tmp_path / "bad.f90").write_text("program bad\n  call MPI_Init(\nend program bad\n")
    r = sg("sgfort", ["-c", "bad.f90"], tmp_path, mode, env=fortran_env(), check=False)
    direct = subprocess.run([FLANG, "-c", "bad.f90", "-o", "/dev/null"], cwd=tmp_path, capture_output=True,
                            text=True)
    assert r.returncode == direct.returncode != 0
    assert "error" in r.stderr and not (tmp_path / "bad.o").exists()


def test_sweep_sample_runs_like_the_mpifort_build(tmp_path, mode, samples_dir):
    src = samples_dir / "sweep" / "sweep.f90"
    require_tool(src.is_file(), "sweep sample not in this tree")
    reference_build(src, "plain", tmp_path)
    sg("sgfort", ["-O2", str(src), "-o", "wrapped"], tmp_path, mode, env=fortran_env())
    expected = mpirun(tmp_path / "plain", 4, "2", cwd=tmp_path)
    assert expected.strip()
    assert mpirun(tmp_path / "wrapped", 4, "2", cwd=tmp_path) == expected


MODULE = '''
module counters
  implicit none
contains
  subroutine add_one(x)
    integer, intent(inout) :: x
    x = x + 1
  end subroutine add_one
end module counters
'''
USES_MODULE = '''
program main
  use mpi
  use counters
  implicit none
  integer :: ierr, rank, v, total
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  v = rank
  call add_one(v)
  call MPI_Allreduce(v, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) write (*, '(A,I0)') 'total=', total
  call MPI_Finalize(ierr)
end program main
'''


def test_user_module_in_its_own_file_with_module_directory(tmp_path, mode):
    (tmp_path / "counters.f90").write_text(MODULE)
    (tmp_path / "main.f90").write_text(USES_MODULE)
    (tmp_path / "mods").mkdir()
    sg("sgfort", ["-c", "-J", "mods", "counters.f90"], tmp_path, mode, env=fortran_env())
    assert (tmp_path / "mods" / "counters.mod").is_file()
    sg("sgfort", ["-c", "-J", "mods", "main.f90"], tmp_path, mode, env=fortran_env())
    sg("sgfort", ["main.o", "counters.o", "-o", "app"], tmp_path, mode, env=fortran_env())
    assert mpirun(tmp_path / "app", 3, cwd=tmp_path) == f"total={sum(r + 1 for r in range(3))}\n"
