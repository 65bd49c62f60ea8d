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


def write_hybrid_archive(anchor_dir) -> None:
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
        E = otf2.events
        for r in range(2):
            m, wk = w.event_writer_from_location(masters[r]), w.event_writer_from_location(workers[r])
            m(E.Enter(0, main)); m(E.Enter(0, init)); m(E.Leave(1 * ms, init))
            m(E.ThreadFork(10 * ms, Paradigm.OPENMP, 2))
            done = 50 * ms if r == 1 else 20 * ms           # the team leaves the closing barrier
            for t, out in ((0, m), (1, wk)):
                out(E.Enter(10 * ms, par))
                out(E.Enter(10 * ms, work)); out(E.Leave(20 * ms, work))
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
