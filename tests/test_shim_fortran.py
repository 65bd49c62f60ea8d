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


SOURCE2 = """\
program ftest2
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, other, sub, dup, idx, ntest, req(2), st(MPI_STATUS_SIZE)
  integer :: a(4), b(8), x, y
  logical :: flag
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  other = 1 - rank
  a = rank + 1
  call MPI_Sendrecv(a, 4, MPI_INTEGER, other, 7, b, 4, MPI_INTEGER, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, st, ierr)
  call MPI_Irecv(b, 4, MPI_INTEGER, other, 8, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(a, 4, MPI_INTEGER, other, 8, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitany(2, req, idx, st, ierr)
  call MPI_Waitany(2, req, idx, st, ierr)
  call MPI_Irecv(b, 4, MPI_INTEGER, other, 9, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Ssend(a, 4, MPI_INTEGER, other, 9, MPI_COMM_WORLD, ierr)
  ntest = 0
  flag = .false.
  do while (.not. flag)
    ntest = ntest + 1
    call MPI_Test(req(1), flag, st, ierr)
  end do
  call MPI_Send(a, 1, MPI_INTEGER, other, 10, MPI_COMM_WORLD, ierr)
  call MPI_Probe(MPI_ANY_SOURCE, 10, MPI_COMM_WORLD, st, ierr)
  call MPI_Recv(x, 1, MPI_INTEGER, st(MPI_SOURCE), 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Gather(a, 1, MPI_INTEGER, b, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call MPI_Scatter(b, 1, MPI_INTEGER, x, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call MPI_Allgather(a, 1, MPI_INTEGER, b, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_Alltoall(a, 1, MPI_INTEGER, b, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, rank, 0, sub, ierr)
  call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, sub, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Barrier(dup, ierr)
  call MPI_Comm_free(dup, ierr)
  call MPI_Comm_free(sub, ierr)
  print '(a,i0,a,i0,a,i0)', 'rank ', rank, ' tests ', ntest, ' y ', y
  call MPI_Finalize(ierr)
end program
"""


def build_and_run(tmp_path, source: str, name: str):
    require_tool(bool(MPICC and MPIRUN and FLANG and os.path.isdir(MPICH_INC)),
                 "no MPI with Fortran bindings (Debian mpich + flang-new-19)")
    from scalgraph.runtime.shim import link_flags, shim_library
    lib = shim_library(MPICC)
    src = tmp_path / f"{name}.f90"
    src.write_text(source)
    exe = tmp_path / name
    subprocess.run([FLANG, "-I", MPICH_INC, str(src), *link_flags(lib), "-L/usr/lib/x86_64-linux-gnu",
                    "-lmpichfort", "-lmpich", "-o", str(exe)], check=True)
    res = subprocess.run([MPIRUN, "-n", "2", str(exe)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, SCALGRAPH_OUT=str(tmp_path / f"{name}-prof")), check=True)
    return res.stdout, read_run(tmp_path / f"{name}-prof")


def test_more_fortran_routines_including_communicator_creation(tmp_path):
    out, prof = build_and_run(tmp_path, SOURCE2, "ftest2")
    tests = {int(w[1]): int(w[3]) for w in (line.split() for line in out.splitlines() if line.startswith("rank"))}
    assert sorted(tests) == [0, 1]
    assert prof.calls[:, 0].tolist() == [22 + tests[0], 22 + tests[1]]
    members = {tuple(m): c for c, m in prof.comm_members.items()}
    assert len(prof.comm_members) == 4 and set(members) == {(0, 1), (0,), (1,)}   # world, dup, two subs
    dup = [c for c, m in prof.comm_members.items() if m == [0, 1] and c != 0]
    assert len(dup) == 1
    for r in (0, 1):
        o = 1 - r
        sub = members[(r,)]
        rows = {(int(d["kind"]), int(d["peer"]), int(d["tag"]), int(d["comm"]), int(d["count"]), int(d["bytes"]))
                for d in prof.deps[prof.deps["rank"] == r]}
        assert rows == {(DEP_SEND, o, 7, 0, 1, 16), (DEP_RECV, o, 7, 0, 1, 16), (DEP_SEND, o, 8, 0, 1, 16),
                        (DEP_RECV, o, 8, 0, 1, 16), (DEP_SEND, o, 9, 0, 1, 16), (DEP_RECV, o, 9, 0, 1, 16),
                        (DEP_SEND, o, 10, 0, 1, 4), (DEP_RECV, o, 10, 0, 1, 4),
                        (DEP_COLL, -1, -1, 0, 4, 4 + 4 + 4 + 8), (DEP_COLL, -1, -1, sub, 1, 4),
                        (DEP_COLL, -1, -1, dup[0], 1, 0)}


def test_fortran_calls_are_recorded_once_with_wildcards_resolved(tmp_path):
    out, prof = build_and_run(tmp_path, SOURCE, "ftest")
    assert sorted(out.split("\n")[:2]) == ["rank 0 sum  3.0", "rank 1 sum  3.0"]
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


POLL = """\
program fpoll
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, n, x, st(MPI_STATUS_SIZE)
  logical :: flag
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  n = 0
  if (rank == 0) then
    flag = .false.
    do while (.not. flag)
      n = n + 1
      call MPI_Iprobe(1, 3, MPI_COMM_WORLD, flag, st, ierr)
    end do
    call MPI_Recv(x, 1, MPI_INTEGER, st(MPI_SOURCE), 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  else
    x = 42
    call MPI_Send(x, 1, MPI_INTEGER, 0, 3, MPI_COMM_WORLD, ierr)
  end if
  print '(a,i0,a,i0)', 'rank ', rank, ' probes ', n
  call MPI_Finalize(ierr)
end program
"""


def test_fortran_iprobe_is_counted_under_open_mpi(tmp_path):
    """Open MPI's Fortran bindings call PMPI directly: only the shim's mpi_iprobe_ sees a Fortran
    polling loop there (under MPICH the C wrapper would count it anyway)."""
    flang = shutil.which("flang-new-19") or shutil.which("flang-new")
    require_tool(bool(shutil.which("mpifort.openmpi") and shutil.which("mpirun.openmpi") and flang),
                 "no Open MPI with Fortran (openmpi-bin libopenmpi-dev flang-19)")
    from scalgraph.runtime.shim import link_flags, shim_library
    lib = shim_library("mpicc.openmpi", static=True)      # the one sgfort links under Open MPI: built once
    (tmp_path / "fpoll.f90").write_text(POLL)
    env = dict(os.environ, OMPI_FC=flang, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               SCALGRAPH_OUT=str(tmp_path / "prof"))
    # Debian's mpifort.openmpi names no -L for libmpi, and libmpi.so on the default path may be MPICH's
    libdirs = subprocess.run(["mpicc.openmpi", "--showme:libdirs"], capture_output=True, text=True).stdout.split()
    subprocess.run(["mpifort.openmpi", "fpoll.f90", *link_flags(lib), *(f"-L{d}" for d in libdirs), "-o", "fpoll"],
                   cwd=tmp_path, env=env, check=True)
    res = subprocess.run(["mpirun.openmpi", "--oversubscribe", "-n", "2", "./fpoll"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    probes = {int(w[1]): int(w[3]) for w in (line.split() for line in res.stdout.splitlines() if line.startswith("rank"))}
    assert probes[0] >= 1 and probes[1] == 0
    prof = read_run(tmp_path / "prof")
    assert prof.meta["mpi_library"].startswith("Open MPI")
    # Init, the probes, Recv, Finalize on rank 0; Init, Send, Finalize on rank 1
    assert prof.calls[:, 0].tolist() == [probes[0] + 3, 3]
    rows = {(int(d["rank"]), int(d["kind"]), int(d["peer"]), int(d["tag"])) for d in prof.deps}
    assert rows == {(0, DEP_RECV, 1, 3), (1, DEP_SEND, 0, 3)}


TESTALL = """
program tall
  use mpi
  implicit none
  integer :: rank, size, ierr, it, n, reqs(2)
  logical :: done
  double precision :: a(1000), b(1000)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  a = rank
  n = 0
  do it = 1, 20
    call MPI_Irecv(b, 1000, MPI_DOUBLE_PRECISION, mod(rank - 1 + size, size), 7, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Isend(a, 1000, MPI_DOUBLE_PRECISION, mod(rank + 1, size), 7, MPI_COMM_WORLD, reqs(2), ierr)
    done = .false.
    do while (.not. done)
      call MPI_Testall(2, reqs, done, MPI_STATUSES_IGNORE, ierr)
      n = n + 1
    end do
  end do
  print '(a,i0,a,f6.1)', 'rank ', rank, ' b ', b(1)
  call MPI_Finalize(ierr)
end program
"""


def test_fortran_testall_completes_traced_messages(tmp_path):
    """A halo exchange completed by MPI_TESTALL (TeaLeaf's): the Fortran binding calls PMPI directly, so
    without the shim's mpi_testall_ the trace had 20 sends and no receives and the run was refused."""
    import json
    import pathlib
    import sys
    require_tool(bool(MPIRUN and FLANG and os.path.isdir(MPICH_INC)),
                 "no MPI with Fortran bindings (Debian mpich + flang-new-19)")
    bindir = pathlib.Path(sys.executable).parent
    (tmp_path / "tall.f90").write_text(TESTALL)
    subprocess.run([str(bindir / "sgfort"), "-O2", "-o", "tall", "tall.f90"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=600)
    res = subprocess.run([str(bindir / "scalgraph"), "run", "--trace", "-n", "2", "-o", "exp", "./tall"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    out = subprocess.run([str(bindir / "scalgraph"), "trace", "--json", "exp"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    calls = {c["callpath"].split("/")[-1] for c in json.loads(out.stdout)["critical_path"]["callpaths"]}
    assert "MPI_Testall" in calls
