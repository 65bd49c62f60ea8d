"""The shim's trace mode on real runs: what the raw per-rank files hold (scalgraph/io/trace_shim.py
reads them).  Counts are checked against what the sample programs do, not against recorded values."""
from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import pytest

from scalgraph.model import trace as tm
from conftest import sgcc_build
from test_e2e_samples import require_parts

P = 4


def run_traced(exe: pathlib.Path, out: pathlib.Path, *args: str, env_extra: dict | None = None):
    from scalgraph.runtime.launch import find_launcher
    launcher = find_launcher(str(exe))
    out.mkdir()
    env = {**launcher.environment(P), "SCALGRAPH_OUT": str(out), "SCALGRAPH_TRACE": "1", **(env_extra or {})}
    res = subprocess.run(launcher.command(P, [str(exe), *args]), env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return res


@pytest.fixture(scope="module")
def cg(tmp_path_factory, wrapped_sample):
    return tmp_path_factory.mktemp("rec-cg"), wrapped_sample("cg")


def mpi_enters(trace: tm.Trace, rank: int, name: str) -> int:
    ev = trace.events[rank]
    ids = [i for i, r in enumerate(trace.regions) if r.name == name]
    return int(np.isin(ev["region"][ev["kind"] == tm.ENTER], ids).sum())


def test_cg_trace_has_every_mpi_call_and_message(cg):
    from scalgraph.io.trace_shim import read_raw_rank, read_shim_trace
    from scalgraph.static import read_psg_from_executable
    from scalgraph.trace.validate import check_trace
    d, exe = cg
    iterations = 7
    run_traced(exe, d / "out", str(iterations))
    trace = read_shim_trace(d / "out", read_psg_from_executable(str(exe)))
    check_trace(trace, where="cg trace")
    assert trace.nranks == P and trace.comms[0] == list(range(P))
    for r in range(P):
        assert mpi_enters(trace, r, "MPI_Init") == 1 and mpi_enters(trace, r, "MPI_Finalize") == 1
        assert mpi_enters(trace, r, "MPI_Sendrecv") == 2 * iterations      # two halo exchanges per iteration
        # Allreduce: one before the loop, two per iteration; all on MPI_COMM_WORLD
        ends = trace.events[r][trace.events[r]["kind"] == tm.COLL_END]
        assert mpi_enters(trace, r, "MPI_Allreduce") == 1 + 2 * iterations
        assert set(ends["comm"].tolist()) == {0}
    # every message sent is received, with the same tag and size; MPI_PROC_NULL neighbours send nothing
    sends = [(r, int(e["peer"]), int(e["tag"]), int(e["bytes"])) for r in range(P)
             for e in trace.events[r][trace.events[r]["kind"] == tm.SEND]]
    recvs = [(int(e["peer"]), r, int(e["tag"]), int(e["bytes"])) for r in range(P)
             for e in trace.events[r][trace.events[r]["kind"] == tm.RECV]]
    assert sorted(sends) == sorted(recvs) and len(sends) == 2 * (P - 1) * iterations
    # the MPI regions carry the PSG vertex of their call site
    psg = read_psg_from_executable(str(exe))
    for reg in trace.regions:
        if reg.is_mpi:
            assert psg.kind_name(reg.vertex) == "MPI" and psg.name[reg.vertex] == reg.name
    raw = read_raw_rank(d / "out" / "rank-0.sgt")
    assert raw["samples"]["vertex"].max() < len(psg)
    # compact recording (delta times, varints): at most 16 bytes per event (the whole files: below)
    assert trace.meta["raw_event_bytes"] / trace.meta["raw_events"] <= 16, trace.meta


def test_filter_drops_the_listed_vertices_only(cg):
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.static import read_psg_from_executable
    d, exe = cg
    psg = read_psg_from_executable(str(exe))
    main = psg.function.index("main")      # the FUNCTION vertex of main
    flt = d / "filter.txt"
    flt.write_text(f"# drop main's ENTER/EXIT\n{main}\n")
    run_traced(exe, d / "filtered", "3", env_extra={"SCALGRAPH_TRACE_FILTER": str(flt)})
    trace = read_shim_trace(d / "filtered", psg)
    assert not any(r.name == "main" and not r.is_mpi and r.vertex == main for r in trace.regions)
    assert mpi_enters(trace, 0, "MPI_Sendrecv") == 6


def test_filter_with_a_name_is_reported(cg):
    d, exe = cg
    flt = d / "bad-filter.txt"
    flt.write_text("audit_residual\n")
    res = run_traced(exe, d / "badfilter", "2", env_extra={"SCALGRAPH_TRACE_FILTER": str(flt)})
    assert "is not a vertex id" in res.stderr


def test_untraced_run_writes_no_trace(cg):
    from scalgraph.runtime.launch import find_launcher
    d, exe = cg
    launcher = find_launcher(str(exe))
    out = d / "plain"
    out.mkdir()
    env = {k: v for k, v in launcher.environment(P).items() if k != "SCALGRAPH_TRACE"}
    env["SCALGRAPH_OUT"] = str(out)
    env.pop("SCALGRAPH_TRACE", None)
    res = subprocess.run(launcher.command(P, [str(exe), "2"]), env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0
    assert not list(out.glob("rank-*.sgt*")) and len(list(out.glob("rank-*.sgp"))) == P


@pytest.mark.parametrize("name", ["zeusmp", "masterworker"])
def test_nonblocking_and_wildcard_traces_replay(name, tmp_path, wrapped_sample):
    """zeusmp: Isend/Irecv/Waitall halo exchange; masterworker: receives from MPI_ANY_SOURCE.  Every
    message and request is paired, the structural checks pass and the replay runs."""
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.static import read_psg_from_executable
    from scalgraph.commands.trace import analyse
    exe = wrapped_sample(name)
    run_traced(exe, tmp_path / "out")
    trace = read_shim_trace(tmp_path / "out", read_psg_from_executable(str(exe)))
    kinds = np.concatenate([e["kind"] for e in trace.events])
    n = {k: int((kinds == getattr(tm, k)).sum()) for k in ("SEND", "RECV", "ISEND", "ISEND_COMPLETE",
                                                            "IRECV_REQUEST", "IRECV")}
    assert n["ISEND"] + n["SEND"] == n["IRECV"] + n["RECV"] > 0, n
    assert n["ISEND"] == n["ISEND_COMPLETE"] and n["IRECV_REQUEST"] == n["IRECV"], n
    assert (n["ISEND"] > 0) == (name == "zeusmp"), n
    rep = analyse(trace)
    assert rep["ranks"] == P and rep["events"] == sum(len(e) for e in trace.events)


def test_clock_offsets_measured_at_init_and_finalize(cg):
    """With the ping-pong forced on (one host would otherwise skip it: one clock), every rank but 0
    gets an offset pair at MPI_Init and at MPI_Finalize for the linear interpolation."""
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.trace.clock import correct_clocks
    d, exe = cg
    run_traced(exe, d / "synced", "2", env_extra={"SCALGRAPH_CLOCK_SYNC": "4"})
    trace = read_shim_trace(d / "synced")
    offsets = trace.meta.get("clock_offsets", {})
    assert "0" not in offsets          # rank 0 is the reference
    # the same host: the offsets are tiny but measured (a pair is left out only if exactly 0)
    assert any(len(offsets.get(str(r), [])) == 2 for r in range(1, P)), offsets
    for pairs in offsets.values():
        assert len(pairs) in (1, 2) and all(abs(o) < 0.01 for _, o in pairs), pairs
        assert len(pairs) == 1 or pairs[0][0] < pairs[1][0]
    correct_clocks(trace)   # accepted by the clock correction


def test_damaged_or_incomplete_raw_traces_are_refused_in_one_line(cg, tmp_path):
    import shutil
    from scalgraph.errors import UserError
    from scalgraph.io.trace_shim import read_shim_trace
    d, exe = cg
    src = d / "complete"
    run_traced(exe, src, "2")
    for name, damage, message in (("truncated", lambda p: p.write_bytes(p.read_bytes()[:-40]), "another raw trace"),
                                  ("missing", lambda p: p.unlink(), "ranks [1] are missing")):
        run = tmp_path / name
        shutil.copytree(src, run)
        damage(run / "rank-1.sgt")
        with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")) as e:
            read_shim_trace(run)
        assert "\n" not in str(e.value)


ROOTED_PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <time.h>
static void pause_ms(int ms) { struct timespec ts = {0, ms * 1000000L}; nanosleep(&ts, NULL); }
int main(int argc, char **argv) {
    int rank, size;
    double x = 1.0, sum = 0.0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 1) pause_ms(60);                       /* the root of the broadcast is late */
    MPI_Bcast(&x, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    if (rank != 2) pause_ms(60);                       /* the root of the reduction is early */
    MPI_Reduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, 2, MPI_COMM_WORLD);
    if (rank == 2) printf("sum %g\n", sum);
    MPI_Finalize();
    return 0;
}
"""


def test_rooted_collectives_record_root_and_direction(tmp_path):
    """Late Broadcast and Early Reduce need the root and which ranks send and receive."""
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.commands.trace import analyse
    require_parts("cg")
    src = tmp_path / "rooted.c"
    src.write_text(ROOTED_PROGRAM)
    exe = tmp_path / "rooted"
    sgcc_build(src, exe)
    run_traced(exe, tmp_path / "out")
    trace = read_shim_trace(tmp_path / "out")
    for r in range(P):
        ends = trace.events[r][trace.events[r]["kind"] == tm.COLL_END]
        assert ends["peer"].tolist() == [1, 2]                                   # the roots, as world ranks
        assert (ends["bytes"][0] > 0) == (r == 1) and (ends["bytes_recv"][0] > 0) == (r != 1)   # Bcast
        assert ends["bytes"][1] == 8 and (ends["bytes_recv"][1] > 0) == (r == 2)                # Reduce
    rep = analyse(trace)
    found = {(i["pattern"], i["rank"], i["causer"]) for i in rep["instances"] if i["seconds"] > 0.03}
    late_bcast = {(r, c) for pat, r, c in found if pat == "Late Broadcast"}
    # ranks time-share 2 cores, so one non-root may itself arrive late; the causer is always the root
    assert len(late_bcast) >= 2 and all(c == 1 and r != 1 for r, c in late_bcast), found
    early = [(r, c) for pat, r, c in found if pat == "Early Reduce"]   # the root waits for the first sender
    assert early and all(r == 2 and c != 2 for r, c in early), found


def test_run_trace_filter_resolves_names(cg, tmp_path):
    """`scalgraph run --trace --trace-filter`: names resolved against the PSG; the filtered vertex
    leaves no region (neither from ENTER/EXIT nor from samples); a wrong name stops before running."""
    import sys
    from scalgraph.io.trace_read import read_trace
    _, exe = cg
    flt = tmp_path / "filter"
    flt.write_text("# Score-P-like\nEXCLUDE comp@cg.c:21\n")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "scalgraph.cli", "run", "--trace", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
    res = run("--trace-filter", str(flt), "-n", str(P), "-o", str(tmp_path / "exp"), "--", str(exe), "6")
    assert res.returncode == 0, res.stderr
    run_dir = tmp_path / "exp" / f"scale-{P}" / "rep-0"
    ids = [int(x) for x in (run_dir / "trace-filter.ids").read_text().split() if x.isdigit()]
    assert ids
    trace = read_trace(run_dir / "trace.sgtrace")
    assert not [r for r in trace.regions if r.vertex in ids], [r for r in trace.regions if r.vertex in ids]
    assert mpi_enters(trace, 0, "MPI_Sendrecv") == 12

    flt.write_text("no_such_function\n")
    bad = run("--trace-filter", str(flt), "-n", str(P), "-o", str(tmp_path / "exp2"), "--", str(exe), "2")
    assert bad.returncode != 0 and "no_such_function" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "exp2").exists()


MANY_CALLS = r"""
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 20000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size, x = rank, y;
    for (int i = 0; i < n; i++)
        MPI_Sendrecv(&x, 1, MPI_INT, right, i & 7, &y, 1, MPI_INT, left, i & 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
"""


def test_full_buffer_is_flushed_and_nothing_is_lost(tmp_path):
    """20,000 exchanges = 80,000 events per rank: the 65,536-event buffer is written out while the
    program runs, and the file still holds every event in order, at most 16 bytes each."""
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.trace.validate import check_trace
    require_parts("cg")
    src = tmp_path / "many.c"
    src.write_text(MANY_CALLS)
    exe = tmp_path / "many"
    sgcc_build(src, exe)
    n = 20000
    run_traced(exe, tmp_path / "out", str(n))
    trace = read_shim_trace(tmp_path / "out")
    check_trace(trace, where="many-calls trace")
    assert trace.meta["buffer_flushes"] >= P
    assert trace.meta["raw_bytes"] / trace.meta["raw_events"] <= 16, trace.meta     # whole files, names, samples
    for r in range(P):
        ev = trace.events[r]
        assert mpi_enters(trace, r, "MPI_Sendrecv") == n
        sends = ev[ev["kind"] == tm.SEND]
        assert len(sends) == n and sends["tag"].tolist() == [i & 7 for i in range(n)]
        assert np.all(np.diff(ev["time"]) >= 0)


POLLING = pathlib.Path(__file__).resolve().parent.parent / "instrument" / "testprogs" / "polling.c"


def test_polling_trace_is_bounded_by_communication(tmp_path):
    """10^5 unsuccessful MPI_Test and as many MPI_Iprobe calls, then the test that completes the
    receive: the polls that found nothing are counted per call site, not recorded, so rank 1's file
    stays small; the completing MPI_Test holds the IRECV, the message pairs with its send, and the
    wait-state analysis finds the Late Sender where rank 0 waits, none at the polling receive."""
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.commands.trace import analyse
    from scalgraph.static import read_psg_from_executable
    from scalgraph.trace.validate import check_trace
    require_parts("cg")
    exe = tmp_path / "polling"
    sgcc_build(POLLING, exe)
    polls = 100_000
    res = run_traced(exe, tmp_path / "out", str(polls), "100")
    unsuccessful = int(res.stdout.split("unsuccessful tests ")[1].split()[0])
    assert unsuccessful >= polls // 2
    assert (tmp_path / "out" / "rank-1.sgt").stat().st_size < 8192      # 2*10^5 polls would be >= 1 MB
    trace = read_shim_trace(tmp_path / "out", read_psg_from_executable(str(exe)))
    check_trace(trace, where="polling trace")
    assert len(trace.events[1]) < 40
    counted = {}
    for p in trace.meta["unrecorded_polls"]:
        assert p["rank"] == 1 and p["seconds"] > 0
        counted[p["routine"]] = counted.get(p["routine"], 0) + p["calls"]
    assert counted == {"MPI_Test": unsuccessful, "MPI_Iprobe": polls // 2, "MPI_Testany": polls // 2000,
                       "MPI_Testsome": polls // 2000}, counted
    assert mpi_enters(trace, 1, "MPI_Test") == 1 and mpi_enters(trace, 1, "MPI_Iprobe") == 0
    ev = trace.events[1]
    test_enter = np.flatnonzero((ev["kind"] == tm.ENTER) & (ev["region"] == [i for i, r in enumerate(trace.regions)
                                                                          if r.name == "MPI_Test"][0]))[0]
    assert ev["kind"][test_enter + 1] == tm.IRECV and ev["peer"][test_enter + 1] == 0
    rep = analyse(trace)
    late = [(i["rank"], i["seconds"]) for i in rep["instances"] if i["pattern"] == "Late Sender"]
    assert late and all(r == 0 for r, _ in late), late          # rank 0 waits for the polls to end
    assert rep["events"] == sum(len(e) for e in trace.events)


USER_OP_PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
/* a user-defined reduction: MPI calls back into this (instrumented) function inside MPI_Allreduce */
__attribute__((noinline)) static void maxabs(void *in, void *inout, int *len, MPI_Datatype *type)
{
    double *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        double x = a[i] < 0 ? -a[i] : a[i], y = b[i] < 0 ? -b[i] : b[i];
        b[i] = x > y ? x : y;
    }
}
int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Op op;
    MPI_Op_create(maxabs, 1, &op);
    double v = -1.0 - rank, r = 0.0;
    for (int i = 0; i < 20; i++)
        MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    MPI_Op_free(&op);
    if (rank == 0)
        printf("%g\n", r);
    MPI_Finalize();
    return 0;
}
"""


def test_callbacks_from_inside_an_mpi_call_keep_the_trace_in_order(tmp_path):
    """hypre (LLNL AMG) reduces with its own MPI_Op: the library calls the program's function inside
    MPI_Allreduce, whose ENTER the shim writes when the call returns; the callback's events were written
    first and the rank's times ran backwards, so the trace could not be converted.  Events of calls made
    from inside MPI are not recorded (their time is the MPI call's)."""
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.trace.validate import check_trace
    require_parts("cg")
    src = tmp_path / "userop.c"
    src.write_text(USER_OP_PROGRAM)
    exe = tmp_path / "userop"
    sgcc_build(src, exe)
    res = run_traced(exe, tmp_path / "out")
    assert res.stdout.strip() == str(P)                      # max |-(rank+1)| over the ranks
    trace = read_shim_trace(tmp_path / "out")
    check_trace(trace, where="the user-op trace")            # raises on times running backwards
    for r in range(P):
        t = trace.events[r]["time"]
        assert np.all(np.diff(t) >= 0)
        assert mpi_enters(trace, r, "MPI_Allreduce") == 20
