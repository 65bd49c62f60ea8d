"""Fortran MPI calls (mpi_send_ ...) are recorded once each, with wildcards resolved, when the shim is
built for an MPI with Fortran bindings (Debian's MPICH + flang; pip's MPICH has no Fortran).
No probes here: everything lands on the root vertex."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import require_tool
from scalgraph.io.profile_file import read_run
from scalgraph.model.profile import DEP_COLL, DEP_RECV, DEP_SEND

MPICC = shutil.which("mpicc.mpich")
MPIRUN = shutil.which("mpirun.mpich") or shutil.which("mpiexec.mpich")
FLANG = shutil.which("flang-new-19") or shutil.which("flang-new") or shutil.which("flang")
MPICH_INC = "/usr/include/x86_64-linux-gnu/mpich"

SOURCE = """\
program ftest
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nranks, i, req(2), st(MPI_STATUS_SIZE)
  double precision :: a(10), b(10), s, t
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  a = rank
  do i = 1, 3
    if (rank == 0) then
      call MPI_Send(a, 10, MPI_DOUBLE_PRECISION, 1, 5, MPI_COMM_WORLD, ierr)
    else
      call MPI_Recv(b, 10, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st, ierr)
    end if
  end do
  call MPI_Irecv(b, 10, MPI_DOUBLE_PRECISION, 1 - rank, 6, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(a, 10, MPI_DOUBLE_PRECISION, 1 - rank, 6, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
  s = rank + 1
  call MPI_Allreduce(s, t, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  print '(a,i0,a,f4.1)', 'rank ', rank, ' sum ', t
  call MPI_Finalize(ierr)
end program
"""


def test_fortran_calls_are_recorded_once_with_wildcards_resolved(tmp_path):
    require_tool(bool(MPICC and MPIRUN and FLANG and os.path.isdir(MPICH_INC)),
                 "no MPI with Fortran bindings (Debian mpich + flang-new-19)")
    from scalgraph.runtime.shim import link_flags, shim_library
    lib = shim_library(MPICC)
    src = tmp_path / "ftest.f90"
    src.write_text(SOURCE)
    exe = tmp_path / "ftest"
    subprocess.run([FLANG, "-I", MPICH_INC, str(src), *link_flags(lib), "-L/usr/lib/x86_64-linux-gnu",
                    "-lmpichfort", "-lmpich", "-o", str(exe)], check=True)
    res = subprocess.run([MPIRUN, "-n", "2", str(exe)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, SCALGRAPH_OUT=str(tmp_path / "prof")), check=True)
    assert sorted(res.stdout.split("\n")[:2]) == ["rank 0 sum  3.0", "rank 1 sum  3.0"]
    prof = read_run(tmp_path / "prof")
    assert prof.nvertices == 1 and prof.meta["written_by"] == ["finalize", "finalize"]
    # Init, 3 x Send|Recv, Irecv, Isend, Waitall, Allreduce, Barrier, Finalize: each once
    assert prof.calls[:, 0].tolist() == [10, 10]
    rows = {(int(d["rank"]), int(d["kind"]), int(d["peer"]), int(d["tag"]), int(d["count"]), int(d["bytes"]))
            for d in prof.deps}
    assert rows == {
        (0, DEP_SEND, 1, 5, 3, 240), (0, DEP_SEND, 1, 6, 1, 80), (0, DEP_RECV, 1, 6, 1, 80),
        (0, DEP_COLL, -1, -1, 2, 8),
        (1, DEP_RECV, 0, 5, 3, 240), (1, DEP_SEND, 0, 6, 1, 80), (1, DEP_RECV, 0, 6, 1, 80),
        (1, DEP_COLL, -1, -1, 2, 8)}
    assert prof.meta["mpi_library"].startswith("MPICH")
