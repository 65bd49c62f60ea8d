"""sgcc -fopenmp (issue 12): the fork of a parallel region is a call of its outlined function in the
PSG, the program computes what a plain `mpicc -fopenmp` build computes, and the shim's OMPT tool
gives worker threads the fork's calling context, so their samples land in the right instance."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require_tool, venv_tool
from scalgraph.static.ir import parse_module_text
from scalgraph.static.openmp import forked_function



def one_instruction(line: str):
    mod = parse_module_text("define void @f() {\n" + line + "\n  ret void\n}\n")
    return mod.functions[0].blocks[0].instrs[0]


@pytest.mark.parametrize("line, want", [
    # clang -O1: attributes between the type and the value
    ("  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr nonnull @5, i32 1, ptr nonnull @main.omp_outlined, "
     "ptr nonnull %6), !dbg !70", "main.omp_outlined"),
    # clang -O0 and older clangs' dotted, quoted names
    ('  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @2, i32 0, ptr @".omp_outlined.")', ".omp_outlined."),
    ("  call void (ptr, i32, ptr, i32, ...) @__kmpc_fork_call_if(ptr @1, i32 1, ptr @g.omp_outlined, i32 %c, ptr %x)",
     "g.omp_outlined"),
    # not forks: a plain call, a reduction callback handed to the runtime, an indirect fork target
    ("  call void @work(ptr @main.omp_outlined)", None),
    ("  %r = call i32 @__kmpc_reduce_nowait(ptr @4, i32 %t, i32 1, i64 8, ptr %v, ptr @red, ptr @lock)", None),
    ("  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @5, i32 0, ptr %fp)", None),
])
def test_forked_function_reads_the_third_argument(line, want):
    assert forked_function(one_instruction(line)) == want


@pytest.mark.parametrize("name, want", [
    ("main.omp_outlined_debug__", "main"),      # clang >= 19: the body, inlined into main.omp_outlined
    ("main.omp_outlined", "main"),
    ("region.omp_outlined_debug__.1", "region"),  # a second region in the same function
    (".omp_outlined.", ".omp_outlined."),        # older clangs say nothing about the function
    ("work", "work"),
])
def test_source_function_of_outlined_bodies(name, want):
    from scalgraph.static.openmp import source_function
    assert source_function(name) == want


PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
/* integer work: the result does not depend on how the threads split or combine it */
static long region(long n, long salt) {
    long s = 0;
#pragma omp parallel for reduction(+:s) schedule(static)
    for (long i = 0; i < n; i++)
        s += (i * 7 + salt) % 13;
    return s;
}
int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long light = 0, heavy = 0, total;
    for (int it = 0; it < 10; it++) {
        light += region(20000L, it);        /* first call path: the outlined function's default instance */
        heavy += region(20000000L, it);     /* second call path: 1000x the work */
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Allreduce(&heavy, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("light %ld heavy %ld total %ld\n", light, heavy, total);
    MPI_Finalize();
    return 0;
}
"""


def openmp_available() -> bool:
    from scalgraph.static.toolchain import find_compiler
    try:
        cc = find_compiler("c")
    except Exception:
        return False
    out = subprocess.run([*cc.command, *cc.flags, "-print-file-name=libomp.so"], capture_output=True, text=True)
    return out.returncode == 0 and os.path.isabs(out.stdout.strip()) and os.path.isfile(out.stdout.strip())


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    require_tool(venv_tool("sgcc") is not None and venv_tool("mpiexec") is not None, "no sgcc/mpiexec")
    require_tool(openmp_available(), "no libomp for the clang sgcc uses (apt-get install libomp-19-dev)")
    d = tmp_path_factory.mktemp("omp")
    (d / "hybrid.c").write_text(PROGRAM)
    res = subprocess.run([venv_tool("sgcc"), "-fopenmp", "-O1", "-g", "hybrid.c", "-o", "hybrid"], cwd=d,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return d


def psg_of(exe: Path):
    from scalgraph.static import read_psg_from_executable
    return read_psg_from_executable(str(exe))


def parallel_loops(psg) -> list[int]:
    """The LOOP vertices of line 8 (the `parallel for` loop), in pre-order."""
    return [v for v in range(len(psg)) if psg.kind_name(v) == "LOOP" and psg.line_first[v] == 8]


def test_parallel_for_loop_hangs_under_the_fork_in_each_call_path(hybrid):
    psg = psg_of(hybrid / "hybrid")
    loops = parallel_loops(psg)
    assert len(loops) == 2, "one parallel-for loop per call path of region()"
    for v in loops:
        fn = psg.parent[v]
        call = psg.parent[fn]
        assert psg.kind_name(fn) == "FUNCTION" and psg.name[fn].endswith("omp_outlined")
        assert psg.kind_name(call) == "CALL" and psg.line_first[call] == 7      # the `#pragma omp parallel for` line
        assert psg.kind_name(psg.parent[call]) == "LOOP" and psg.line_first[psg.parent[call]] == 17   # main's MPI loop


def test_output_equals_the_plain_openmp_build(hybrid):
    mpicc = venv_tool("mpicc")
    require_tool(mpicc is not None, "no mpicc")
    res = subprocess.run([mpicc, "-fopenmp", "-O1", "hybrid.c", "-o", "plain"], cwd=hybrid, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"}
    outs = [subprocess.run([venv_tool("mpiexec"), "-n", "2", f"./{exe}"], cwd=hybrid, env=env, capture_output=True,
                           text=True, timeout=300) for exe in ("hybrid", "plain")]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert outs[0].stdout == outs[1].stdout and outs[0].stdout.startswith("light ")


def profile_samples(hybrid: Path, ompt: str):
    """Per-vertex samples of one rank run, written by the shim to SCALGRAPH_OUT."""
    from scalgraph.io.profile_file import read_rank_file
    out = hybrid / f"prof-{ompt}"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive", "SCALGRAPH_OMPT": ompt,
           "SCALGRAPH_OUT": str(out)}
    res = subprocess.run([venv_tool("mpiexec"), "-n", "1", "./hybrid"], cwd=hybrid, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return read_rank_file(out / "rank-0.sgp")["samples"]


def subtree_samples(psg, samples, v: int) -> int:
    todo, total = [v], 0
    while todo:
        x = todo.pop()
        total += int(samples[x])
        todo.extend(psg.children[x])
    return total


def test_worker_threads_are_sampled_in_the_forks_context(hybrid):
    psg = psg_of(hybrid / "hybrid")
    light, heavy = parallel_loops(psg)
    # With the OMPT tool both threads' samples of the heavy region go to the heavy call path's loop.
    s = [subtree_samples(psg, profile_samples(hybrid, "1"), v) for v in (light, heavy)]
    assert s[1] >= 0.95 * sum(s) and s[1] > 50, s
    # Without it a worker enters the outlined function with no context, so its samples go to the
    # function's default instance (the light path): about the worker's half of the work.  That they
    # show up at all also says the worker threads are sampled.
    s0 = [subtree_samples(psg, profile_samples(hybrid, "0"), v) for v in (light, heavy)]
    assert s0[0] >= 0.25 * sum(s0), s0


EARLY = r"""
#include <mpi.h>
#include <stdio.h>
static long region(long n) {
    long s = 0;
#pragma omp parallel for reduction(+:s) schedule(static)
    for (long i = 0; i < n; i++)
        s += (i * 7) % 13;
    return s;
}
int main(int argc, char **argv) {
    long warm = region(1000);        /* the team's threads are made here, before MPI_Init */
    MPI_Init(&argc, &argv);
    long s = 0;
    for (int it = 0; it < 10; it++)
        s += region(20000000L);
    printf("%ld %ld\n", warm, s);
    MPI_Finalize();
    return 0;
}
"""


def test_threads_made_before_mpi_init_are_sampled(hybrid):
    """Workers libomp makes before MPI_Init are sampled too (the sampler starts with the program,
    sg_writer.c, and thread_begin gives each OpenMP thread its event)."""
    (hybrid / "early.c").write_text(EARLY)
    res = subprocess.run([venv_tool("sgcc"), "-fopenmp", "-O1", "-g", "early.c", "-o", "early"], cwd=hybrid,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    psg = psg_of(hybrid / "early")
    warm, loop = [v for v in range(len(psg)) if psg.kind_name(v) == "LOOP" and psg.line_first[v] == 7]
    from scalgraph.io.profile_file import read_rank_file
    out = hybrid / "prof-early"
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive", "SCALGRAPH_OUT": str(out)}
    res = subprocess.run([venv_tool("mpiexec"), "-n", "1", "./early"], cwd=hybrid, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rank = read_rank_file(out / "rank-0.sgp")
    samples, cpu = rank["samples"], rank["sample_ns"]
    # the worker's half of the loop is sampled, in the loop's instance: the loop's sampled CPU is
    # about both threads' CPU, so well above the master's alone (half of it)
    in_loop = sum(int(cpu[x]) for x in range(len(psg)) if x == loop or loop in ancestors(psg, x))
    assert subtree_samples(psg, samples, loop) > 50
    assert in_loop >= 0.75 * int(cpu.sum()), (in_loop, int(cpu.sum()))
    assert subtree_samples(psg, samples, warm) <= 5


def ancestors(psg, v: int) -> list[int]:
    out = []
    while psg.parent[v] >= 0:
        v = psg.parent[v]
        out.append(v)
    return out


FORTRAN = """program hf
  use mpi
  implicit none
  integer :: ierr, rank, i
  integer(8) :: s, g
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  s = 0
  !$omp parallel do reduction(+:s)
  do i = 1, 1000000
    s = s + mod(i * 7, 13)
  end do
  !$omp end parallel do
  call MPI_Allreduce(s, g, 1, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print *, g
  call MPI_Finalize(ierr)
end program
"""


def test_sgfort_parallel_do_is_under_its_fork(hybrid):
    require_tool(venv_tool("sgfort") is not None and (shutil.which("flang-new-19") or shutil.which("flang-new")),
                 "no flang (apt-get install flang-19)")
    require_tool(shutil.which("mpif90") is not None, "no MPI with Fortran bindings")
    (hybrid / "hf.f90").write_text(FORTRAN)
    res = subprocess.run([venv_tool("sgfort"), "-fopenmp", "-O1", "hf.f90", "-o", "hf"], cwd=hybrid,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    psg = psg_of(hybrid / "hf")
    loops = [v for v in range(len(psg)) if psg.kind_name(v) == "LOOP"]
    assert len(loops) == 1
    fn = psg.parent[loops[0]]
    assert psg.kind_name(fn) == "FUNCTION" and psg.kind_name(psg.parent[fn]) == "CALL"
    assert psg.parent[psg.parent[fn]] == 0          # the fork is a call in the main program
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"}
    run = subprocess.run([venv_tool("mpiexec"), "-n", "2", "./hf"], cwd=hybrid, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.split() == [str(2 * sum((i * 7) % 13 for i in range(1, 1000001)))]


@pytest.mark.parametrize("env, ours", [({}, True), ({"SCALGRAPH_OMPT": "0"}, False),
                                       ({"OMP_TOOL_LIBRARIES": "/nonexistent/libmytool.so"}, False)])
def test_the_shim_is_the_tool_unless_declined_or_the_user_names_one(hybrid, env, ours):
    """libomp asks the program's ompt_start_tool first; ours yields to a tool the user names, so the
    runtime goes on to OMP_TOOL_LIBRARIES as it would without scalgraph."""
    run_env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive", "OMP_TOOL_VERBOSE_INIT": "stdout",
               "SCALGRAPH_OUT": str(hybrid / "prof-tool"), **env}
    res = subprocess.run([venv_tool("mpiexec"), "-n", "1", "./hybrid"], cwd=hybrid, env=run_env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert ("Search for OMP tool in current address space... Success" in res.stdout) == ours, res.stdout
    assert ("OMP_TOOL_LIBRARIES = /nonexistent/libmytool.so" in res.stdout) == ("OMP_TOOL_LIBRARIES" in env)
