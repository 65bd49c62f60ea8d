"""The hybrid controlled logical clock (seed 004 §IV-V, scalgraph/trace/clock_hybrid.py) on small
literal traces worked out by hand, one per rule, and on random hybrid traces.

Parameters of the hand-derived cases: delta = 0 and gamma = 1 (forward amortisation keeps every
interval: C_i = C_{i-1} + (t_i - t_{i-1}) unless t_i is later), l_min = 1 s for MPI, 0.5 s between
threads, backward slope 0.5, so the numbers stay round."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.model import trace as tm
from scalgraph.trace import clock, clock_hybrid, matching
from scalgraph.trace.clock import ClockParams, correct_clocks
from test_trace_openmp_patterns import random_hybrid

TEAM = tm.OMP_TEAM_BASE
P = ClockParams(delta=0.0, gamma=1.0, l_min_p2p=1.0, l_min_coll=1.0, slope=0.5, l_min_omp=0.5)
REGIONS = [tm.Region("MPI_Recv", "MPI", 1), tm.Region("MPI_Send", "MPI", 2), tm.Region("!$omp fork @a.c:5", "OMP", 5),
           tm.Region("!$omp parallel @a.c:5", "OMP", 5), tm.Region("!$omp barrier @a.c:6", "OMP", 6),
           tm.Region("work", "a.c", 7), tm.Region("omp_set_lock", "OMP", 8), tm.Region("omp_unset_lock", "OMP", 9)]
RECV, SEND, FORK, PAR, BAR, WORK, SET, UNSET = range(len(REGIONS))
E, X = tm.ENTER, tm.EXIT


def events(rows) -> np.ndarray:
    """(time, kind, region, peer, comm, bytes) rows -> model events."""
    ev = tm.make_events(len(rows))
    for i, (t, k, reg, peer, comm, nbytes) in enumerate(rows):
        ev[i]["time"], ev[i]["kind"], ev[i]["region"] = t, k, reg
        ev[i]["peer"], ev[i]["comm"], ev[i]["bytes"] = peer, comm, nbytes
    return ev


def ee(t, kind, reg):
    return (t, kind, reg, -1, -1, 0)


def barrier(t_in, t_out, comm=TEAM):
    return [ee(t_in, E, BAR), (t_in, tm.COLL_BEGIN, -1, -1, comm, 0), (t_out, tm.COLL_END, -1, -1, comm, 0),
            ee(t_out, X, BAR)]


def times(trace) -> list[list[float]]:
    return [e["time"].tolist() for e in trace.events]


def fork_after_late_message():
    """Seed 004 Fig. 2: rank 0's master receives a message (RECV at 2) that rank 1 sent at 5, then
    forks a team at 4; its worker (location 2) leaves the fork at 4.5 and runs the region to 8."""
    master = [ee(1, E, RECV), (2, tm.RECV, -1, 1, 0, 8), ee(3, X, RECV),
              ee(4, E, FORK), (4, tm.COLL_BEGIN, -1, -1, TEAM, 0), (4, tm.COLL_END, -1, 0, TEAM, 1), ee(4, X, FORK),
              ee(4, E, PAR), ee(8, X, PAR)]
    sender = [ee(4, E, SEND), (5, tm.SEND, -1, 0, 0, 8), ee(6, X, SEND)]
    worker = [ee(0, E, FORK), (0, tm.COLL_BEGIN, -1, -1, TEAM, 0), (4.5, tm.COLL_END, -1, 0, TEAM, 0),
              ee(4.5, X, FORK), ee(4.5, E, PAR), ee(8, X, PAR)]
    return tm.Trace(regions=REGIONS, comms={0: [0, 1], TEAM: [0, 2]},
                    events=[events(master), events(sender), events(worker)], locations=[(0, 0), (1, 0), (0, 1)])


def test_fork_and_join_follow_the_master_where_mpi_only_correction_leaves_the_worker_behind():
    """Forward: the RECV must be >= SEND + l_min = 6 (jump 4); the master's later events keep their
    intervals: EXIT 7, fork 8 (all four), ENTER parallel 8, EXIT parallel (join) 12.
      MPI only: the worker keeps 0 0 4.5 4.5 4.5 8, so it leaves the fork (4.5) before the master
      forked (8): one OpenMP violation, 3.5 s, that the pure MPI correction does not see.
      Hybrid: fork message 8 -> worker's COLL_END >= 8 + 0.5 = 8.5 (jump 4), its region follows:
      8.5 8.5 8.5 12 (EXIT 8 + 4); join message: master's EXIT >= the worker's 12 + 0.5 = 12.5 (jump
      0.5 over its 12).
    Backward: the RECV's ramp would start at 2 - 4/0.5 < 1 = the first event, so t_L = 1 and no
    event lies inside (1, 2); the worker's at t_L = 0 (nothing after 0 before 4.5); the join's ramp
    (12 - 0.5/0.5 = 11, 12) holds no event: nothing moves backward."""
    trace = fork_after_late_message()
    mpi, rep_mpi = correct_clocks(trace, P, openmp=False)
    assert times(mpi) == [[1, 6, 7, 8, 8, 8, 8, 8, 12], [4, 5, 6], [0, 0, 4.5, 4.5, 4.5, 8]]
    assert rep_mpi.openmp is None
    left = clock_hybrid.openmp_violations(mpi)
    assert [(int(v["kind"]), int(v["recv_rank"]), float(v["amount"])) for v in left] == [(clock_hybrid.FORK, 2, 3.5)]

    hyb, rep = correct_clocks(trace, P)
    assert times(hyb) == [[1, 6, 7, 8, 8, 8, 8, 8, 12.5], [4, 5, 6], [0, 0, 8.5, 8.5, 8.5, 12]]
    assert len(clock_hybrid.openmp_violations(hyb)) == 0
    assert rep.jumps == 3 and rep.max_jump == 4.0
    assert rep.as_dict()["openmp"] == {"logical_messages": {"fork": 1, "join": 1, "barrier": 0, "lock": 0}}
    assert rep.as_dict()["parameters"]["min_latency_openmp"] == 0.5
    assert "hybrid controlled logical clock" in rep.summary()


def test_barrier_exit_waits_for_the_last_thread_in():
    """A barrier recorded with the master leaving (2) before the worker entered (3): the exits are
    logical receives of all enters (max-reduction): master's COLL_END >= max(1, 3) + 0.5 = 3.5
    (jump 1.5), its EXIT follows at 3.5; the worker's COLL_END 3.5 already is >= 3.5.
    Backward: the master's ramp, t_L = 2 - 1.5/0.5 = -1 < 1 (first event): t_L = 1, nothing in
    (1, 2).  The pure MPI correction sees nothing to correct."""
    master = barrier(1, 2)
    worker = barrier(3, 3.5)
    trace = tm.Trace(regions=REGIONS, comms={TEAM: [0, 1]}, events=[events(master), events(worker)],
                     locations=[(0, 0), (0, 1)])
    out, rep = correct_clocks(trace, P)
    assert times(out) == [[1, 1, 3.5, 3.5], [3, 3, 3.5, 3.5]]
    assert [int(k) for k in rep.violations["kind"]] == [clock_hybrid.OMP_BARRIER]
    assert rep.violations["amount"][0] == pytest.approx(1.0)          # 3 - 2, at l_min 0
    same, rep_mpi = correct_clocks(trace, P, openmp=False)
    assert len(rep_mpi.violations) == 0 and times(same) == times(trace)


def lock_after_barrier(release_at: float):
    """Worker: work 0-1, barrier 1-2, then omp_set_lock from 2.5, acquiring at 3 the lock the master
    releases (SEND on the team communicator) at `release_at`; master: barrier 1.5-2, unset 3.6-4.4."""
    worker = [ee(0, E, WORK), ee(1, X, WORK), *barrier(1, 2), ee(2.5, E, SET), (3, tm.RECV, -1, 0, TEAM, 0),
              ee(3, X, SET)]
    master = [*barrier(1.5, 2), ee(3.6, E, UNSET), (release_at, tm.SEND, -1, 1, TEAM, 0), ee(4.4, X, UNSET)]
    return tm.Trace(regions=REGIONS, comms={TEAM: [0, 1]}, events=[events(master), events(worker)],
                    locations=[(0, 0), (0, 1)])


def test_lock_release_before_the_next_acquisition_and_the_backward_min_reduction():
    """The master releases at 4.3: the worker's acquisition (RECV at 3) must be >= 4.3 + 0.5 = 4.8,
    jump 1.8 (r* = 3), EXIT 3 -> 4.8.  The barrier holds (exits 2 >= max enter 1.5 + 0.5).
    Backward on the worker: t_L = 3 - 1.8/0.5 = -0.6 < 0 -> t_L = 0, m = 1.8/3 = 0.6.  The barrier
    ENTER at 1 is a logical send; its bound is the team's earliest exit (min-reduction) - 0.5 =
    min(2, 2) - 0.5 = 1.5, slack 0.5, m_1 = (1.8 - 0.5)/(3 - 1) = 0.65 > 0.6: it binds.  Events from
    that ENTER to the RECV: C += 0.5 + 0.65 (C - 1): ENTER, COLL_BEGIN 1 -> 1.5; COLL_END, EXIT
    2 -> 3.15; ENTER set_lock 2.5 -> 3.975.  Then the part before it: jump 0.5 at r* = 1, m = 0.5/(1 - 0)
    = 0.5: EXIT work 1 -> 1.5; ENTER work 0 = t_L stays.  The ENTER ends exactly at its bound."""
    out, rep = correct_clocks(lock_after_barrier(4.3), P)
    assert times(out)[0] == [1.5, 1.5, 2, 2, 3.6, 4.3, 4.4]
    assert times(out)[1] == pytest.approx([0, 1.5, 1.5, 1.5, 3.15, 3.15, 3.975, 4.8, 4.8], abs=1e-12)
    assert [int(k) for k in rep.violations["kind"]] == [clock_hybrid.LOCK]
    assert rep.as_dict()["openmp"]["logical_messages"] == {"fork": 0, "join": 0, "barrier": 1, "lock": 1}
    # the pure MPI correction treats the hand-over as internal: nothing moves, the violation stays
    same, rep_mpi = correct_clocks(lock_after_barrier(4.3), P, openmp=False)
    assert len(rep_mpi.violations) == 0 and times(same) == times(lock_after_barrier(4.3))
    assert [int(k) for k in clock_hybrid.openmp_violations(same)["kind"]] == [clock_hybrid.LOCK]


def test_lock_order_comes_from_the_recorded_acquisitions():
    """trace_omp orders a lock's acquisitions by their recorded times, before any correction: thread
    1 acquires at 2 and releases at 3, the master acquires at 4 after waiting from 1: one hand-over
    1 -> master (SEND at 3 on thread 1, RECV at 4 on the master), none back."""
    from scalgraph.io import trace_omp as om
    lock = 7

    def rec(rows):
        r = np.zeros(len(rows), om.RECORD_DTYPE)
        for i, (t, kind) in enumerate(rows):
            r[i]["time_ns"], r[i]["kind"], r[i]["arg"] = int(t * 1e9), kind, lock
        return r
    master = rec([(1, om.LOCK_WAIT), (4, om.LOCK_ACQUIRED), (5, om.LOCK_RELEASED)])
    worker = rec([(1.5, om.LOCK_WAIT), (2, om.LOCK_ACQUIRED), (3, om.LOCK_RELEASED)])
    out = {-1: [], 1: []}
    om._lock_events({-1: master, 1: worker}, out, lambda what, v: what, TEAM, 0, {1: 1}, {})
    msgs = lambda rows, k: [(r[0], r[4]) for r in rows if r[2] == k]   # noqa: E731
    assert msgs(out[1], tm.SEND) == [(3.0, 0)] and msgs(out[-1], tm.RECV) == [(4.0, 1)]
    assert msgs(out[-1], tm.SEND) == [] and msgs(out[1], tm.RECV) == []


def test_openmp_latency_is_a_parameter():
    """l_min between threads is its own parameter: at 0.25 the fork case's worker leaves the fork
    at 8 + 0.25 and ends its region at 8.25 + 3.5 = 11.75; the join needs 11.75 + 0.25 = 12, what
    the master has anyway (no jump)."""
    out, rep = correct_clocks(fork_after_late_message(), ClockParams(**{**P.__dict__, "l_min_omp": 0.25}))
    assert times(out)[2] == [0, 0, 8.25, 8.25, 8.25, 11.75] and times(out)[0][-1] == 12.0
    assert rep.jumps == 2
    with pytest.raises(Exception, match="l_min >= 0"):
        ClockParams(l_min_omp=-1.0)


def skewed_hybrid(seed: int, skew: float = 0.3):
    """random_hybrid with each rank's clock (all its threads alike) off by up to `skew` seconds."""
    trace, _ = random_hybrid(seed)
    rng = np.random.default_rng(seed + 100)
    off = rng.uniform(-skew, skew, 1 + max(r for r, _ in trace.locations))
    for loc, (r, _) in enumerate(trace.locations):
        trace.events[loc]["time"] += off[r]
    return trace


def test_random_hybrid_traces_keep_every_relation_after_the_hybrid_correction():
    """Random MPI + OpenMP traces whose ranks' clocks are skewed (a rank's threads share its clock):
    after the hybrid correction every logical message, MPI and OpenMP, holds with its l_min, events
    only move forward and keep their order.  The pure MPI correction of the same traces leaves
    OpenMP violations behind in some of them (seed 004 Table III: all original violations MPI, yet
    OpenMP ones after an MPI-only correction)."""
    params = ClockParams()
    induced = 0
    for seed in range(12):
        trace = skewed_hybrid(seed)
        out, rep = correct_clocks(trace, params, force=True)
        flat = matching.flatten(out)
        lm = clock_hybrid.hybrid_messages(out, flat, clock.logical_messages(out, params, flat), params)
        t = flat.ev["time"]
        member_max = np.maximum.reduceat(t[lm.set_members], lm.set_ptr[:-1])
        assert np.all(t[lm.recv_evt] >= member_max[lm.recv_set] + lm.set_lmin[lm.recv_set] - 1e-12)
        for before, after in zip(trace.events, out.events):
            assert np.all(after["time"] >= before["time"] - 1e-12)
            assert np.all(np.diff(after["time"]) > 0)
        assert len(clock_hybrid.openmp_violations(trace)) == 0     # the skew is per rank
        mpi, _ = correct_clocks(trace, params, openmp=False)
        induced += len(clock_hybrid.openmp_violations(mpi)) > 0
    assert induced >= 3


def test_command_line_sets_the_openmp_latency(tmp_path, capsys):
    """`scalgraph trace --clc-min-latency-omp` reaches the hybrid correction: the report shows the
    parameter and the OpenMP messages, and the corrected trace has the worker at 8 + 0.25."""
    import json
    from scalgraph import cli
    from scalgraph.io.trace_read import read_trace, write_trace
    path, fixed = tmp_path / "hybrid.json", tmp_path / "fixed.json"
    write_trace(fork_after_late_message(), str(path), "json")
    assert cli.main(["trace", str(path), "--json", "--clc-delta", "0", "--clc-gamma", "1", "--clc-min-latency", "1",
                     "--clc-min-latency-omp", "0.25", "--write-corrected", str(fixed)]) == 0
    clc = json.loads(capsys.readouterr().out)["clock_correction"]
    assert clc["parameters"]["min_latency_openmp"] == 0.25
    assert clc["openmp"]["logical_messages"]["fork"] == 1
    worker = read_trace(str(fixed)).events[2]["time"].tolist()
    assert worker[2] == pytest.approx(8.25)
