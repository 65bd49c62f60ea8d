"""The shim inside hostile or careless conditions: MPI calls from many short-lived threads are all
counted (pool slots come back at thread exit; threads beyond the pool get a private record), temporary
files are exclusive (a planted symlink is never followed), and a program run outside `scalgraph run`
writes nothing unless asked (SCALGRAPH_PROFILE=1)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import BIN, MPICC, MPIEXEC, require_tool
from scalgraph.io.profile_file import read_run


# THREADS threads per rank, at most AT_ONCE alive (created, joined, next batch), each making K
# MPI_Sendrecv calls with the same thread of the other rank (tag = thread number).
THREAD_PROGRAM = r"""
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int k_calls, peer;
static void *work(void *arg) {
    int tag = (int)(long)arg;
    for (int i = 0; i < k_calls; i++) {
        int x = i, y = -1;
        MPI_Sendrecv(&x, 1, MPI_INT, peer, tag, &y, 1, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (y != i) { fprintf(stderr, "wrong value\n"); abort(); }
    }
    return NULL;
}
int main(int argc, char **argv) {
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) { fprintf(stderr, "no MPI_THREAD_MULTIPLE\n"); return 3; }
    int total = atoi(argv[1]), at_once = atoi(argv[2]);
    k_calls = atoi(argv[3]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    peer = 1 - rank;
    pthread_t th[256];
    for (int first = 0; first < total; first += at_once) {
        int n = total - first < at_once ? total - first : at_once;
        for (int j = 0; j < n; j++)
            pthread_create(&th[j], NULL, work, (void *)(long)(first + j));
        for (int j = 0; j < n; j++)
            pthread_join(th[j], NULL);
    }
    MPI_Finalize();
    return 0;
}
"""

PLAIN_PROGRAM = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""


# One rank of three dies at iteration WHEN: SIGKILL (HOW=0), SIGSEGV (1) or MPI_Abort (2).
FAULT_PROGRAM = r"""
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int victim = atoi(argv[1]), when = atoi(argv[2]), how = atoi(argv[3]);
    for (int i = 0; i < 400; i++) {
        double x = i, y;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == victim && i == when) {
            if (how == 0) raise(SIGKILL);
            if (how == 1) raise(SIGSEGV);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        usleep(1000);
    }
    MPI_Finalize();
    return 0;
}
"""


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (mpicc/mpiexec)")
    from scalgraph.runtime.shim import link_flags, shim_library
    d = tmp_path_factory.mktemp("hard")
    lib = link_flags(shim_library(MPICC))
    for name, text in (("threads", THREAD_PROGRAM), ("plain", PLAIN_PROGRAM), ("fault", FAULT_PROGRAM)):
        (d / f"{name}.c").write_text(text)
        subprocess.run([MPICC, "-O1", "-pthread", str(d / f"{name}.c"), *lib, "-o", str(d / name)], check=True)
    return d


def _mpirun(exe, args, env, cwd, n=2):
    return subprocess.run([MPIEXEC, "-n", str(n), str(exe), *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=240)


def _root_calls(progs, tmp_path, total, at_once, k):
    out = tmp_path / f"out-{total}-{at_once}-{k}"
    env = dict(os.environ, SCALGRAPH_OUT=str(out), SCALGRAPH_HZ="0")
    res = _mpirun(progs / "threads", [total, at_once, k], env, tmp_path)
    assert res.returncode == 0, res.stderr
    prof = read_run(out)
    return [int(prof.calls[r].sum()) for r in range(2)]


@pytest.mark.parametrize("total,at_once", [(100, 4), (80, 80)])
def test_every_mpi_call_of_every_thread_is_counted(progs, tmp_path, total, at_once):
    """100 threads 4 at a time (slots must come back), and 80 alive at once (16 beyond the pool of
    64): the calls counted grow by exactly threads x K when every thread makes K more calls."""
    k = 7
    base = _root_calls(progs, tmp_path, total, at_once, 0)
    more = _root_calls(progs, tmp_path, total, at_once, k)
    assert [m - b for m, b in zip(more, base)] == [total * k, total * k]


def test_nothing_written_outside_scalgraph_run_unless_asked(progs, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SCALGRAPH_OUT", "SCALGRAPH_PROFILE")}
    work = tmp_path / "build-tree"
    work.mkdir()
    res = _mpirun(progs / "plain", [], env, work)
    assert res.returncode == 0, res.stderr
    assert list(work.iterdir()) == []
    res = _mpirun(progs / "plain", [], dict(env, SCALGRAPH_PROFILE="1"), work)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in (work / "scalgraph-profile").iterdir()) == ["rank-0.sgp", "rank-1.sgp"]
    assert "profile written to scalgraph-profile/" in res.stderr


def test_a_symlink_planted_at_the_old_temporary_name_is_not_followed(progs, tmp_path):
    """The old names rank-R.sgp.tmp.PID were guessable; now the temporary file is new and exclusive, so a
    link planted under any name in the directory is left alone and its target untouched."""
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    for r in range(2):                      # every pid a rank could get soon, for both ranks
        for pid in range(os.getpid(), os.getpid() + 200):
            os.symlink(victim, out / f"rank-{r}.sgp.tmp.{pid}")
    os.symlink(victim, out / "rank-0.sgp")  # a link at the final name is replaced, not written through
    res = _mpirun(progs / "plain", [], dict(os.environ, SCALGRAPH_OUT=str(out)), tmp_path)
    assert res.returncode == 0, res.stderr
    assert victim.read_text() == "precious\n"
    assert not (out / "rank-0.sgp").is_symlink() and read_run(out).nranks == 2
    assert not [p for p in out.iterdir() if ".tmp." in p.name and not p.is_symlink()]


def test_random_kills_leave_complete_files_and_clean_messages(progs, tmp_path, capsys):
    """A rank killed (SIGKILL, SIGSEGV, MPI_Abort) at a random iteration: `scalgraph run` reports the
    failed run without a traceback, every rank file left is complete (its checksum holds), and detect
    says in one line that there is no successful run.  (In-process: the commands start mpiexec.)"""
    import json
    import random

    from scalgraph import cli
    from scalgraph.analysis import synthetic as syn
    from scalgraph.io.profile_file import read_rank_file
    psg, _, _ = syn.cg_like()
    (progs / "fault.psg.json").write_text(json.dumps(psg.to_dict()))   # `run` wants the program's PSG
    rng = random.Random()
    for how in (0, 1, 2):
        victim, when = rng.randrange(3), rng.randrange(1, 300)
        exp = tmp_path / f"exp-{how}"
        code = cli.main(["run", "-n", "3", "--timeout", "120", "-o", str(exp), "--", str(progs / "fault"),
                         str(victim), str(when), str(how)])
        out, err = capsys.readouterr()
        trial = f"rank {victim} killed by {('SIGKILL', 'SIGSEGV', 'MPI_Abort')[how]} at iteration {when}"
        assert code == 1 and "Traceback" not in err and "1 of 1 runs failed" in err, (trial, err)
        desc = json.loads((exp / "experiment.json").read_text())
        assert [r["status"] for r in desc["runs"]] == ["failed"], trial
        for f in (exp / "scale-3" / "rep-0").glob("rank-*.sgp"):
            assert read_rank_file(f)["nranks"] == 3, (trial, f)
        code = cli.main(["detect", str(exp)])
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert code != 0 and len(lines) == 1 and "no successful runs" in lines[0], (trial, err)


def test_an_sgcc_program_runs_and_carries_its_psg_without_the_cache(tmp_path):
    """The PSG section survives the link (zig's lld collects unreferenced sections) and the shim is
    linked in statically: the executable copied alone, with no shim cache and no home, still runs,
    records, and `scalgraph psg` reads its graph from the executable itself."""
    import importlib.util

    from elftools.elf.elffile import ELFFile
    require_tool(MPIEXEC is not None and importlib.util.find_spec("ziglang") is not None, "no MPI or ziglang")
    (tmp_path / "app.c").write_text(PLAIN_PROGRAM)
    res = subprocess.run([str(BIN / "sgcc"), "-O1", "-o", "app", "app.c"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    shutil.copy(tmp_path / "app", alone / "app")
    with open(alone / "app", "rb") as fh:
        elf = ELFFile(fh)
        assert elf.get_section_by_name(".scalgraph.psgfull") is not None
        dynamic = elf.get_section_by_name(".dynamic")
        names = [t.needed if t.entry.d_tag == "DT_NEEDED" else t.runpath if t.entry.d_tag == "DT_RUNPATH"
                 else t.rpath if t.entry.d_tag == "DT_RPATH" else "" for t in dynamic.iter_tags()]
    from scalgraph.runtime.shim import cache_dir
    assert not [n for n in names if "libscalgraph" in n or str(cache_dir()) in n], names
    env = dict(os.environ, HOME=str(tmp_path / "no-home"), SCALGRAPH_CACHE=str(tmp_path / "no-cache"),
               SCALGRAPH_OUT=str(alone / "out"))
    res = _mpirun(alone / "app", [], env, alone)
    assert res.returncode == 0, res.stderr
    assert read_run(alone / "out").nranks == 2
    psg = subprocess.run([sys.executable, "-m", "scalgraph.cli", "psg", "app"], cwd=alone, env=env,
                         capture_output=True, text=True, timeout=120)
    assert psg.returncode == 0 and "MPI_Barrier" in psg.stdout, psg.stderr
