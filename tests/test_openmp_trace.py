"""Trace mode on the hybrid MPI + OpenMP samples (issue 12): `sgcc -fopenmp`, `scalgraph run --trace -n 2,4`
with 2 OpenMP threads per rank (each sample built and run once per module), then `scalgraph trace --json`
at 4 ranks and `scalgraph detect --json` (both scales).  The OMPT tool records every thread's parallel regions,
barriers and samples (instrument/sg_trace_omp.c); the converter makes each thread a location
(scalgraph/io/trace_omp.py), so the planted work -- run by the master of rank size/2 in hybrid_master,
by a worker thread in hybrid_imbalance -- is found through the OpenMP barrier and idle-thread waits it
causes (seed 000 §7).  Before threads were locations, hybrid_imbalance's trace named no cause: the
master sleeping at the barrier was charged to `main`."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import pathlib
import subprocess
import sys

import pytest
from openmp_builds import require_openmp_tools, sample_binary
from test_openmp_build import venv_tool
from test_openmp_e2e import OMP_ENV, expected, within

from conftest import require_tool

NAMES = ["hybrid_master", "hybrid_imbalance"]


def scalgraph(*args: str, cwd: pathlib.Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def json_of(*args: str) -> dict:
    """`scalgraph ARGS --json` run in this process (no interpreter start-up per call); paths absolute."""
    from scalgraph import cli
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main([*args, "--json"])
    assert code == 0, f"scalgraph {' '.join(args)} exited with {code}"
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """name -> (work dir, experiment traced at 2 and 4 ranks x 2 threads); run once, with the sgcc
    build shared with test_openmp_e2e.py (openmp_builds.py)."""
    done = {}

    def get(name: str):
        if name not in done:
            require_openmp_tools()
            want = expected(name)
            out = tmp_path_factory.mktemp(f"omp-trace-{name}")
            env = {**os.environ, **OMP_ENV, "OMP_NUM_THREADS": str(want["threads"])}
            sg = str(sample_binary(name, tmp_path_factory))
            res = scalgraph("run", "--trace", "-n", ",".join(map(str, want["scales"])), "-o", "exp", "--", sg,
                            cwd=out, env=env)
            assert res.returncode == 0, f"scalgraph run --trace failed:\n{res.stderr}"
            done[name] = out
        return done[name]
    return get


@pytest.fixture(scope="module")
def trace_report(traced):
    """name -> `scalgraph trace --json` of its largest traced scale, computed once."""
    done = {}

    def get(name: str) -> dict:
        if name not in done:
            p = expected(name)["scales"][-1]
            done[name] = json_of("trace", str(traced(name) / f"exp/scale-{p}/rep-0"))
        return done[name]
    return get


def listing(rep: dict) -> str:
    return "\n".join([f"  verdict {c['where']} {c['seconds']:.3f}s rank {c['rank']}" for c in rep["root_causes"][:4]]
                     + [f"  table {c['kind']} {c['callpath']} {c['seconds']:.3f}s" for c in rep["delay"]["root_causes"][:4]]
                     + [f"  note: {n}" for n in rep["notes"]])


def pattern(rep: dict, name: str) -> float:
    return next(p["seconds"] for p in rep["patterns"] if p["name"] == name)


@pytest.mark.parametrize("name", NAMES)
def test_trace_names_the_planted_line_first(name, trace_report):
    want = expected(name)
    p = want["scales"][-1]          # the largest scale, as for the MPI samples (test_e2e_trace.py)
    threads = want["threads"]
    rep = trace_report(name)
    # every OpenMP thread is a location (rank, thread), the ranks' MPI threads first
    assert rep["locations"][:p] == [[r, 0] for r in range(p)]
    assert sorted(map(tuple, rep["locations"])) == [(r, t) for r in range(p) for t in range(threads)]
    assert rep["root_causes"], f"{name} p={p}: no root cause\n{listing(rep)}"
    top, rc = rep["root_causes"][0], want["root_cause"]
    assert pathlib.Path(top["file"]).name == rc["file"] and rc["lines"][0] <= top["line"] <= rc["lines"][-1], (
        f"{name} p={p}: expected {rc['file']}:{rc['line']} first\n{listing(rep)}")
    assert top["rank"] == p // 2, f"{name} p={p}: the planted work runs on rank {p // 2}\n{listing(rep)}"
    assert rep["cpu_checked"], listing(rep)
    # the planted work leaves the other threads of its rank waiting at the region's closing barrier,
    # and the workers of every rank idle while their master waits in MPI
    assert pattern(rep, "Wait at OpenMP Barrier") > 0 and pattern(rep, "Idle Threads") > 0, listing(rep)
    # the MPI patterns stay with the MPI threads: Wait at Finalize is measured over the ranks only
    assert any(p_["name"] == "Wait at Finalize" for p_ in rep["patterns"])


@pytest.mark.parametrize("name", NAMES)
def test_detect_with_hybrid_traces_names_the_planted_line(name, traced):
    want = expected(name)
    rep = json_of("detect", str(traced(name) / "exp"))
    assert rep["evidence"]["waiting"] == "trace"
    top = rep["root_causes"][0]
    assert pathlib.Path(top["file"]).name == want["root_cause"]["file"] and within(top, want["root_cause"]["lines"])
    assert top["rank"] == want["scales"][-1] // 2


LOCKS_C = r"""
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
static double spin(long n) { double s = 0; for (long i = 0; i < n; i++) s += (double)(i & 7); return s; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    omp_lock_t lock;
    omp_init_lock(&lock);
    double total = 0;
    for (int it = 0; it < 4; it++) {
#pragma omp parallel reduction(+ : total)
        {
            if (omp_get_thread_num() == 0) {          /* the master takes the lock at once and holds it */
                omp_set_lock(&lock);
                total += spin(30000000);
                omp_unset_lock(&lock);
            } else {                                  /* the worker asks for it a little later */
                total += spin(1000000);
                omp_set_lock(&lock);
                total += 1;
                omp_unset_lock(&lock);
            }
        }
    }
    omp_destroy_lock(&lock);
    printf("locks: %s\n", total > 0 ? "ok" : "?");
    MPI_Finalize();
    return 0;
}
"""


def test_lock_contention_from_the_ompt_lock_callbacks(tmp_path):
    """One rank, 2 threads: the worker waits for the lock the master holds in each region.  The shim's
    mutex callbacks give the hand-over, the report OpenMP Lock Contention with the master as causer."""
    require_openmp_tools()
    (tmp_path / "locks.c").write_text(LOCKS_C)
    res = subprocess.run([venv_tool("sgcc"), "-fopenmp", "-O1", "-g", "locks.c", "-o", "locks"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    env = {**os.environ, **OMP_ENV}
    res = scalgraph("run", "--trace", "-n", "1", "-o", "exp", "--", "./locks", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "exp/scale-1/rep-0/stdout.txt").read_text() == "locks: ok\n"
    assert not list((tmp_path / "exp/scale-1/rep-0").glob("rank-*.sgomp"))      # converted, then removed
    rep = json_of("trace", str(tmp_path / "exp/scale-1/rep-0"))
    assert rep["locations"] == [[0, 0], [0, 1]]
    assert pattern(rep, "OpenMP Lock Contention") > 0.005, listing(rep)
    waits = [i for i in rep["instances"] if i["pattern"] == "OpenMP Lock Contention"]
    assert waits and max(waits, key=lambda i: i["seconds"])["causer"] == 0 and waits[0]["rank"] == 1


def test_otf2_export_of_threads_reads_back_with_the_same_waits(traced, trace_report):
    """OpenMP threads are written as Score-P writes them (more CPU threads per process, the constructs'
    regions); reading rebuilds the team synchronisation: same locations and events, same barrier waits,
    the same first cause."""
    require_tool(importlib.util.find_spec("otf2") is not None, "no otf2 (pip install otf2)")
    from scalgraph.io.trace_read import read_trace, write_trace
    out = traced("hybrid_imbalance")
    run = out / "exp/scale-4/rep-0"
    ours = read_trace(run / "trace.sgtrace")
    write_trace(ours, out / "otf2/traces.otf2", "otf2")
    back = read_trace(out / "otf2/traces.otf2")
    assert back.locations == ours.locations
    assert [len(e) for e in back.events] == [len(e) for e in ours.events]
    a, b = trace_report("hybrid_imbalance"), json_of("trace", str(out / "otf2/traces.otf2"))
    assert pattern(b, "Wait at OpenMP Barrier") == pytest.approx(pattern(a, "Wait at OpenMP Barrier"), abs=1e-6)
    assert b["root_causes"] and b["root_causes"][0]["line"] == a["root_causes"][0]["line"]
    # the forks are ThreadFork records: no worker reads back as started before its fork (the hybrid
    # clock correction would see one)
    assert b["clock_correction"]["violations_before_correction"] == a["clock_correction"]["violations_before_correction"]


def test_parallel_replay_of_a_hybrid_trace(traced, trace_report):
    """`scalgraph trace --parallel 2` on the 4 ranks x 2 threads trace: the same OpenMP and MPI
    patterns, delay costs and first cause as the serial command (tests/test_openmp_parallel.py
    compares whole reports on generated traces)."""
    require_tool(importlib.util.find_spec("mpi4py") is not None, "no mpi4py")
    out = traced("hybrid_master")
    res = scalgraph("trace", "--parallel", "2", "--json", "exp/scale-4/rep-0", cwd=out)
    assert res.returncode == 0, res.stderr
    par, ser = json.loads(res.stdout), trace_report("hybrid_master")
    assert par["locations"] == ser["locations"]
    assert {p["name"]: pytest.approx(p["seconds"], abs=1e-9) for p in ser["patterns"]} == \
        {p["name"]: p["seconds"] for p in par["patterns"]}
    assert pattern(par, "Wait at OpenMP Barrier") > 0 and pattern(par, "Idle Threads") > 0
    for a, b in zip(ser["delay"]["root_causes"][:3], par["delay"]["root_causes"][:3], strict=True):
        assert (b["callpath"], b["seconds"]) == (a["callpath"], pytest.approx(a["seconds"], rel=1e-9))
    assert par["root_causes"] and par["root_causes"][0]["line"] == ser["root_causes"][0]["line"]
