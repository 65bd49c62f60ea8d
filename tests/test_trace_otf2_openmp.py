"""An OTF2 archive with OpenMP threads, as Score-P writes it with --thread=omp: several CPU-thread
locations per process location group, every thread of a team entering "!$omp parallel @file:line",
the implicit barrier at its end as a region "!$omp implicit barrier @file:line", the master's
ThreadFork / ThreadJoin around the region.  `scalgraph trace` reads the threads as locations (rank,
thread) and finds the OpenMP waits and their cause (scalgraph/io/trace_otf2.py, io/trace_omp.py).

The archive (2 ranks x 2 threads, times in ms), worked out by hand:
  every thread: parallel region 10..(closing barrier end); rank 0: both threads `work` 10..20;
  rank 1: master `work` 10..20, worker `work` 10..20 then `extra` 20..50 (the planted imbalance)
  closing barrier: rank 0: both 20..20; rank 1: master 20..50 (waits 30), worker 50..50
  then MPI_Allreduce: rank 0 enters at 20 (after leaving the region) and waits until rank 1 enters at 50.
  Workers idle from their rank's first event (0) until the fork (10): 10 ms each (Idle Threads).
Expected: Wait at OpenMP Barrier 30 ms on rank 1's master, caused by rank 1's worker; Wait at N x N
30 ms on rank 0; the verdict's first cause is `extra` (extra.c:20) on rank 1."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import require_tool


def write_hybrid_archive(anchor_dir, lock: bool = False) -> None:
    """`lock`: on rank 0, inside `work`, the master holds OpenMP lock 7 from 11 to 13 ms and the
    worker, asking from 12 ms, gets it at 13.5 and releases it at 15 (ThreadAcquireLock /
    ThreadReleaseLock with acquisition orders 0 and 1, inside omp_set_lock / omp_unset_lock)."""
    import otf2
    from otf2.enums import CollectiveOp, GroupType, LocationType, Paradigm, RegionRole
    ms = 1000                                               # ticks per ms (timer 1 MHz)
    with otf2.writer.open(str(anchor_dir), archive_name="traces", timer_resolution=1_000_000) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        groups = [d.location_group(f"MPI Rank {i}", system_tree_parent=node) for i in range(2)]
        masters = [d.location("Master thread", type=LocationType.CPU_THREAD, group=g) for g in groups]
        workers = [d.location("OMP thread 1", type=LocationType.CPU_THREAD, group=g) for g in groups]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=masters)
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                                       members=[0, 1]))

        def mpi(name, role=RegionRole.FUNCTION):
            return d.region(name, canonical_name=name, source_file="MPI", paradigm=Paradigm.MPI, region_role=role)
        main = d.region("main", source_file="extra.c", begin_line_number=1, paradigm=Paradigm.COMPILER)
        work = d.region("work", source_file="extra.c", begin_line_number=10, paradigm=Paradigm.COMPILER)
        extra = d.region("extra", source_file="extra.c", begin_line_number=20, paradigm=Paradigm.COMPILER)
        par = d.region("!$omp parallel @extra.c:5", source_file="extra.c", begin_line_number=5,
                       paradigm=Paradigm.OPENMP, region_role=RegionRole.PARALLEL)
        ibar = d.region("!$omp implicit barrier @extra.c:8", source_file="extra.c", begin_line_number=8,
                        paradigm=Paradigm.OPENMP, region_role=RegionRole.IMPLICIT_BARRIER)
        init, fin, allreduce = mpi("MPI_Init"), mpi("MPI_Finalize"), mpi("MPI_Allreduce", RegionRole.COLL_ALL2ALL)
        set_lock = d.region("omp_set_lock", source_file="OMP", paradigm=Paradigm.OPENMP)
        unset_lock = d.region("omp_unset_lock", source_file="OMP", paradigm=Paradigm.OPENMP)
        E = otf2.events
        for r in range(2):
            m, wk = w.event_writer_from_location(masters[r]), w.event_writer_from_location(workers[r])
            m(E.Enter(0, main)); m(E.Enter(0, init)); m(E.Leave(1 * ms, init))
            m(E.ThreadFork(10 * ms, Paradigm.OPENMP, 2))
            done = 50 * ms if r == 1 else 20 * ms           # the team leaves the closing barrier
            for t, out in ((0, m), (1, wk)):
                out(E.Enter(10 * ms, par))
                out(E.Enter(10 * ms, work))
                if lock and r == 0:
                    asked, got, gone = (11, 11, 13) if t == 0 else (12, 13.5, 15)
                    out(E.Enter(int(asked * ms), set_lock)); out(E.ThreadAcquireLock(int(got * ms), Paradigm.OPENMP, 7, t))
                    out(E.Leave(int(got * ms), set_lock)); out(E.Enter(int(gone * ms), unset_lock))
                    out(E.ThreadReleaseLock(int(gone * ms), Paradigm.OPENMP, 7, t)); out(E.Leave(int(gone * ms), unset_lock))
                out(E.Leave(20 * ms, work))
                arrive = 20 * ms
                if r == 1 and t == 1:
                    out(E.Enter(20 * ms, extra)); out(E.Leave(50 * ms, extra))
                    arrive = 50 * ms
                out(E.Enter(arrive, ibar)); out(E.Leave(done, ibar))
                out(E.Leave(done, par))
            m(E.ThreadJoin(done, Paradigm.OPENMP))
            m(E.Enter(done, allreduce)); m(E.MpiCollectiveBegin(done))
            m(E.MpiCollectiveEnd(50 * ms, CollectiveOp.ALLREDUCE, world, 0xFFFFFFFF, 8, 8)); m(E.Leave(50 * ms, allreduce))
            m(E.Enter(51 * ms, fin)); m(E.Leave(52 * ms, fin)); m(E.Leave(52 * ms, main))


def pattern(rep, name):
    return next(p for p in rep["patterns"] if p["name"] == name)


def test_scorep_openmp_archive_is_analysed(tmp_path):
    require_tool(importlib.util.find_spec("otf2") is not None, "no otf2 (pip install otf2)")
    write_hybrid_archive(tmp_path)
    from scalgraph.io.trace_read import read_trace
    trace = read_trace(tmp_path / "traces.otf2")
    assert trace.locations == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert "otf2_skipped_events" not in trace.meta
    res = subprocess.run([sys.executable, "-m", "scalgraph.cli", "trace", "--json", str(tmp_path / "traces.otf2")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    bar = pattern(rep, "Wait at OpenMP Barrier")
    assert bar["seconds"] == pytest.approx(0.030)
    assert bar["callpaths"][0]["ranks"]["max_rank"] == 1            # location 1: rank 1's master
    assert pattern(rep, "Idle Threads")["seconds"] == pytest.approx(2 * 0.010)
    assert pattern(rep, "Wait at N x N")["seconds"] == pytest.approx(0.030)
    instance = next(i for i in rep["instances"] if i["pattern"] == "Wait at OpenMP Barrier")
    assert (instance["rank"], instance["causer"]) == (1, 3)          # rank 1's worker is location 3
    top = rep["root_causes"][0]
    assert (top["file"], top["line"], top["rank"]) == ("extra.c", 20, 1), rep["root_causes"]
    text = subprocess.run([sys.executable, "-m", "scalgraph.cli", "trace", str(tmp_path / "traces.otf2")],
                          capture_output=True, text=True, timeout=300).stdout
    assert "2 ranks with 4 threads" in text and "rank 1 thread 1" in text


def test_openmp_lock_records_are_read_and_written_back(tmp_path):
    """Score-P's lock records: the worker's acquisition (order 1) waited for the master's release
    (order 0): a hand-over master -> worker, OpenMP Lock Contention = release 13 - asked 12 = 1 ms on
    rank 0's worker (location 2), caused by the master.  Writing the trace as OTF2 and reading it
    again gives the same events (the hand-over as lock records again), so the wait survives."""
    require_tool(importlib.util.find_spec("otf2") is not None, "no otf2 (pip install otf2)")
    import numpy as np
    from scalgraph.io.trace_read import read_trace, write_trace
    from scalgraph.model import trace as tm
    from scalgraph.trace import forward, patterns
    write_hybrid_archive(tmp_path, lock=True)
    trace = read_trace(tmp_path / "traces.otf2")
    assert trace.meta["openmp"]["lock_handovers"] == 1
    sends = [(loc, float(e["time"]), int(e["peer"]), int(e["tag"])) for loc, ev in enumerate(trace.events)
             for e in ev[ev["kind"] == tm.SEND]]
    recvs = [(loc, float(e["time"]), int(e["peer"]), int(e["tag"])) for loc, ev in enumerate(trace.events)
             for e in ev[ev["kind"] == tm.RECV]]
    assert sends == [(0, pytest.approx(0.013), 2, 7)] and recvs == [(2, pytest.approx(0.0135), 0, 7)]

    def lock_waits(tr):
        fwd = forward.forward_replay(forward.build_context(tr))
        w = fwd.waits[fwd.waits["pattern"] == patterns.PATTERN_INDEX["omp_lock_contention"]]
        return [(int(x["rank"]), round(float(x["wait"]), 9), int(x["causer"])) for x in w]
    assert lock_waits(trace) == [(2, 0.001, 0)]
    write_trace(trace, tmp_path / "again" / "traces.otf2", "otf2")
    back = read_trace(tmp_path / "again" / "traces.otf2")
    assert back.locations == trace.locations and back.comms == trace.comms
    name = lambda tr, ev: [tr.regions[g].name if g >= 0 else None for g in ev["region"].tolist()]  # noqa: E731
    for a, b in zip(trace.events, back.events):      # region indices differ (fork regions added at reading)
        assert name(trace, a) == name(back, b)
        for f in a.dtype.names:
            if f == "time":
                np.testing.assert_allclose(a[f], b[f], atol=1e-9)
            elif f != "region":
                np.testing.assert_array_equal(a[f], b[f], err_msg=f)
    assert lock_waits(back) == [(2, 0.001, 0)]


def test_openmp_lock_records_without_the_c_reader(tmp_path, monkeypatch):
    """libotf2's Python callbacks (no C compiler) read the same lock hand-over."""
    require_tool(importlib.util.find_spec("otf2") is not None, "no otf2 (pip install otf2)")
    from scalgraph.io import otf2_native
    from scalgraph.io.trace_read import read_trace
    from scalgraph.model import trace as tm
    write_hybrid_archive(tmp_path, lock=True)
    monkeypatch.setattr(otf2_native, "library", lambda: None)
    trace = read_trace(tmp_path / "traces.otf2")
    got = [(loc, int(e["kind"]), int(e["peer"]), int(e["tag"])) for loc, ev in enumerate(trace.events)
           for e in ev[(ev["kind"] == tm.SEND) | (ev["kind"] == tm.RECV)]]
    assert got == [(0, tm.SEND, 2, 7), (2, tm.RECV, 0, 7)]
