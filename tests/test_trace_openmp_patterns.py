"""OpenMP patterns and their delay costs on small literal traces, worked out by hand (seed 000 §7,
shared/notes/trace-analysis-reference.md §3.3 and §4.5).  A rank's threads are locations; a parallel
region's fork and its barriers are collectives of the rank's team communicator, a lock hand-over a
message from the releasing to the acquiring thread (scalgraph/io/trace_omp.py), so the replay, the
delay analysis and the critical path treat them as any other synchronisation."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.model import trace as tm
from scalgraph.trace import critical_path, delay, forward, patterns

TEAM = tm.OMP_TEAM_BASE
REGIONS = [tm.Region("main", "a.c", 1), tm.Region("!$omp fork @a.c:5", "OMP", 5),
           tm.Region("!$omp parallel @a.c:5", "OMP", 5), tm.Region("!$omp implicit barrier @a.c:5", "OMP", 5),
           tm.Region("work", "a.c", 7), tm.Region("serial", "a.c", 3), tm.Region("omp_set_lock", "OMP", 9),
           tm.Region("omp_unset_lock", "OMP", 10), tm.Region("locked", "a.c", 11)]
MAIN, FORK, PAR, BAR, WORK, SERIAL, SET, UNSET, LOCKED = range(len(REGIONS))


def events(rows) -> np.ndarray:
    """(time, kind, region or -1, peer, comm) rows -> model events."""
    ev = tm.make_events(len(rows))
    for i, (t, k, reg, peer, comm) in enumerate(rows):
        ev[i]["time"], ev[i]["kind"], ev[i]["region"], ev[i]["peer"], ev[i]["comm"] = t, k, reg, peer, comm
        if k == tm.COLL_END and peer >= 0:
            ev[i]["bytes"] = 1
    return ev


def enter(t, reg):
    return (t, tm.ENTER, reg, -1, -1)


def leave(t, reg):
    return (t, tm.EXIT, reg, -1, -1)


def team_op(t0, t1, reg, root=-1, comm=TEAM):
    """ENTER .. COLL_BEGIN COLL_END EXIT of a team collective from t0 to t1."""
    return [enter(t0, reg), (t0, tm.COLL_BEGIN, -1, -1, comm), (t1, tm.COLL_END, -1, root, comm), leave(t1, reg)]


def analyse(master, worker):
    trace = tm.Trace(regions=REGIONS, comms={TEAM: [0, 1]}, events=[events(master), events(worker)],
                     locations=[(0, 0), (0, 1)])
    fwd = forward.forward_replay(forward.build_context(trace))
    return fwd, delay.delay_analysis(fwd)


def wait_of(fwd, key) -> list[tuple[int, float, int]]:
    w = fwd.waits[fwd.waits["pattern"] == patterns.PATTERN_INDEX[key]]
    return [(int(r["rank"]), float(r["wait"]), int(r["causer"])) for r in w]


def costs_by_region(fwd, dl) -> dict[tuple[str, int], float]:
    """(innermost region name, location) -> short + long delay cost."""
    cost = dl.short_term + dl.long_term
    out = {}
    for c, loc in zip(*np.nonzero(cost > 1e-12)):
        out[(REGIONS[fwd.ctx.nest.cp_region[c]].name, int(loc))] = float(cost[c, loc])
    return out


def test_idle_threads_and_barrier_wait_with_their_delay_costs():
    """The master runs serial code 0..4 while the worker idles (forked at 4), then both work in the
    region: the master 2 s, the worker 5 s; the master waits 3 s at the closing barrier.
      Idle Threads: worker, ω = min(En fork_master = 4, Ex = 4) - En = 0  ->  4, causer the master.
        Delay: the worker's interval is empty, the master's [start, 4] holds `serial` 4 s and no wait:
        ΣΔ = 4, s = 1/4, short-term cost of `serial` on the master = 4 · 4/4 = 4 (the (n - 1) = 1
        worker's idleness charged to the master's serial call path, seed 000 §7.1).
      Wait at OpenMP Barrier: master, ω = max En (9) - En (6) = 3, causer the last thread in (the worker).
        Delay: intervals start at the end of the previous team synchronisation (the fork, at 4):
        master [4, 6] work 2 s, worker [4, 9] work 5 s: Δ(work) = 3, s = 1/3, cost of the worker's
        `work` = 3 · 3/3 = 3.
      Conservation: 4 + 3 = 7 = all the waiting, nothing unexplained."""
    master = [enter(0, MAIN), enter(0, SERIAL), leave(4, SERIAL), *team_op(4, 4, FORK, root=0), enter(4, PAR),
              enter(4, WORK), leave(6, WORK), *team_op(6, 9, BAR), leave(9, PAR), leave(10, MAIN)]
    worker = [*team_op(0, 4, FORK, root=0), enter(4, PAR), enter(4, WORK), leave(9, WORK), *team_op(9, 9, BAR),
              leave(9, PAR)]
    fwd, dl = analyse(master, worker)
    assert wait_of(fwd, "omp_idle_threads") == [(1, 4.0, 0)]
    assert wait_of(fwd, "omp_barrier") == [(0, 3.0, 1)]
    costs = costs_by_region(fwd, dl)
    assert costs == pytest.approx({("serial", 0): 4.0, ("work", 1): 3.0})
    assert dl.total + dl.unexplained == pytest.approx(float(fwd.waits["wait"].sum())) == pytest.approx(7.0)
    # the critical path crosses threads: the master's end (9..10), back through the barrier to the last
    # thread in, the worker (its work 4..9), then through the fork to the master's serial code (0..4)
    cp = critical_path.critical_path(fwd)
    assert cp.length == pytest.approx(10.0)
    assert [(int(r), float(a), float(b)) for r, a, b in zip(cp.seg_rank, cp.seg_start, cp.seg_end)] == [
        (0, 9.0, 10.0), (1, 4.0, 9.0), (0, 0.0, 4.0)]
    # the report's tree: Idle Threads under Time, the barrier wait under OMP
    cube = fwd.cube.sum(axis=(1, 2))
    assert cube[patterns.PATTERN_INDEX["omp_idle_threads"]] == pytest.approx(4.0)
    assert cube[patterns.PATTERN_INDEX["omp_barrier"]] == pytest.approx(3.0)


def test_idle_time_that_the_master_spent_waiting_is_charged_further():
    """The master's serial section 0..4 is 1 s of `serial` and a 3 s wait of its own (a barrier
    wait stands in here for the MPI wait of a hybrid code: a region before, whose worker is late).
    Region 1: master works 0..1 and waits at its barrier 1..4 for the worker (works 0..4).  Region 2
    forks at 5 after `serial` 4..5; the worker idles from 4 to 5 (ω = 1).
      Idle wait (ω 1): the master's interval [4, 5] (from the end of the barrier's wait) holds `serial`
      1 s: s = 1, `serial` gets 1.
      Barrier wait (ω 3): worker's `work` 4 s vs the master's 1 s: Δ = 3, s = 1/3, the worker's
      `work` gets 3.  Total 4 = waiting."""
    master = [enter(0, MAIN), *team_op(0, 0, FORK, root=0), enter(0, PAR), enter(0, WORK), leave(1, WORK),
              *team_op(1, 4, BAR), leave(4, PAR), enter(4, SERIAL), leave(5, SERIAL), *team_op(5, 5, FORK, root=0),
              enter(5, PAR), *team_op(5, 5, BAR), leave(5, PAR), leave(6, MAIN)]
    worker = [*team_op(0, 0, FORK, root=0), enter(0, PAR), enter(0, WORK), leave(4, WORK), *team_op(4, 4, BAR),
              leave(4, PAR), *team_op(4, 5, FORK, root=0), enter(5, PAR), *team_op(5, 5, BAR), leave(5, PAR)]
    fwd, dl = analyse(master, worker)
    assert wait_of(fwd, "omp_idle_threads") == [(1, 1.0, 0)]
    assert wait_of(fwd, "omp_barrier") == [(0, 3.0, 1)]
    assert costs_by_region(fwd, dl) == pytest.approx({("serial", 0): 1.0, ("work", 1): 3.0})
    assert dl.total + dl.unexplained == pytest.approx(4.0)


def test_lock_contention_is_charged_to_the_holder():
    """The master takes the lock at 1 and holds it in `locked` until 3; the worker asks for it at 2
    after 2 s of `work` and gets it when the master releases it (the hand-over message, 3).
      OpenMP Lock Contention: worker, ω = min(r_prev = 3, Ex = 3) - En = 2  ->  1, causer the master.
      Delay (not clipped, like a collective): the master's interval up to its release holds `work`
      1 s and `locked` 2 s, the worker's `work` 2 s: Δ = {locked: 2} (work: 1 - 2 < 0), s = 1/2,
      `locked` gets 1.  (Both threads' call paths start at `work` here: Δ compares call paths.)"""
    master = [enter(0, WORK), leave(1, WORK), enter(1, SET), leave(1, SET), enter(1, LOCKED),
              leave(3, LOCKED), enter(3, UNSET), (3, tm.SEND, -1, 1, TEAM), leave(3, UNSET), enter(3, WORK),
              leave(4, WORK)]
    worker = [enter(0, WORK), leave(2, WORK), enter(2, SET), (3, tm.RECV, -1, 0, TEAM), leave(3, SET),
              enter(3, LOCKED), leave(4, LOCKED)]
    fwd, dl = analyse(master, worker)
    assert wait_of(fwd, "omp_lock_contention") == [(1, 1.0, 0)]
    assert wait_of(fwd, "late_sender") == []          # a lock hand-over is no MPI message
    assert costs_by_region(fwd, dl) == pytest.approx({("locked", 0): 1.0})
    # the critical path runs from the worker's end back through the hand-over to the master
    cp = critical_path.critical_path(fwd)
    assert cp.length == pytest.approx(4.0)


def test_mpi_only_traces_have_no_openmp_waits():
    trace = tm.Trace(regions=REGIONS, comms={}, events=[events([enter(0, MAIN), leave(1, MAIN)])])
    fwd = forward.forward_replay(forward.build_context(trace))
    for key in ("omp", "omp_barrier", "omp_lock_contention", "omp_idle_threads"):
        assert fwd.cube[patterns.PATTERN_INDEX[key]].sum() == 0.0


# --- property: random hybrid traces ----------------------------------------------------------------

ALLREDUCE = tm.Region("MPI_Allreduce", "MPI", 20)


def random_hybrid(seed: int):
    """R ranks x T threads, K iterations of: a parallel region with B barriers (random work per thread
    before each), the master's serial work, an MPI_Allreduce of the masters.  Returns the trace and
    the barrier waits simulated ((location, seconds) per barrier and thread)."""
    rng = np.random.default_rng(seed)
    nr, nt, k_iter = int(rng.integers(1, 3)), int(rng.integers(2, 4)), int(rng.integers(1, 4))
    regions = REGIONS + [ALLREDUCE]
    red = len(REGIONS)
    loc = lambda r, t: r if t == 0 else nr + r * (nt - 1) + (t - 1)  # noqa: E731
    rows = {(r, t): [] for r in range(nr) for t in range(nt)}
    expect = []
    now = [0.0] * nr
    idle_from = {(r, t): 0.0 for r in range(nr) for t in range(1, nt)}
    for r in range(nr):
        rows[(r, 0)].append(enter(0.0, MAIN))
    for _ in range(k_iter):
        for r in range(nr):
            f = now[r]
            rows[(r, 0)] += team_op(f, f, FORK, root=r, comm=TEAM + r)
            for t in range(1, nt):
                rows[(r, t)] += team_op(idle_from[(r, t)], f, FORK, root=r, comm=TEAM + r)
            cur = f
            for t in range(nt):
                rows[(r, t)].append(enter(f, PAR))
            for b in range(int(rng.integers(1, 3))):
                arrive = {t: cur + float(rng.uniform(0.1, 2.0)) for t in range(nt)}
                done = max(arrive.values())
                for t in range(nt):
                    rows[(r, t)] += [enter(cur, WORK), leave(arrive[t], WORK)]
                    rows[(r, t)] += [(arrive[t], tm.ENTER, BAR, -1, -1), (arrive[t], tm.COLL_BEGIN, -1, -1, TEAM + r),
                                     (done, tm.COLL_END, -1, -1, TEAM + r), (done, tm.EXIT, BAR, -1, -1)]
                    expect.append((loc(r, t), done - arrive[t]))
                cur = done
            for t in range(nt):
                rows[(r, t)].append(leave(cur, PAR))
                if t:
                    idle_from[(r, t)] = cur
            serial_end = cur + float(rng.uniform(0.0, 1.5))
            rows[(r, 0)] += [enter(cur, SERIAL), leave(serial_end, SERIAL)]
            now[r] = serial_end
        if nr > 1:
            out = max(now) + 0.01
            for r in range(nr):
                rows[(r, 0)] += [enter(now[r], red), (now[r], tm.COLL_BEGIN, -1, -1, 0),
                                 (out, tm.COLL_END, -1, -1, 0), leave(out, red)]
                now[r] = out
    for r in range(nr):
        rows[(r, 0)].append(leave(now[r] + 0.1, MAIN))
    order = [(r, 0) for r in range(nr)] + [(r, t) for r in range(nr) for t in range(1, nt)]
    evs = [events(rows[key]) for key in order]
    for (r, t), ev in zip(order, evs):       # the allreduce sends and receives 8 bytes
        ev["bytes_recv"][ev["kind"] == tm.COLL_END] = 8
        ev["bytes"][(ev["kind"] == tm.COLL_END) & (ev["comm"] == 0)] = 8
    comms = {TEAM + r: [loc(r, t) for t in range(nt)] for r in range(nr)}
    comms[0] = list(range(nr))
    trace = tm.Trace(regions=regions, comms=comms, events=evs, locations=order)
    return trace, expect


@pytest.mark.parametrize("seed", range(12))
def test_random_hybrid_traces_conserve_waiting(seed):
    """Barrier waits are what the simulation made them; the delay costs plus what no cause explains
    add up to all the waiting with a causer (barrier, idle, MPI), whatever the mix."""
    trace, expect = random_hybrid(seed)
    fwd = forward.forward_replay(forward.build_context(trace))
    got = sorted((int(w["rank"]), round(float(w["wait"]), 9)) for w in fwd.waits
                 if w["pattern"] == patterns.PATTERN_INDEX["omp_barrier"])
    assert got == sorted((r, round(x, 9)) for r, x in expect if x > 0)
    dl = delay.delay_analysis(fwd)
    waiting = float(dl.waits["wait"].sum())
    assert dl.total + dl.unexplained == pytest.approx(waiting, rel=1e-9, abs=1e-9)
    assert np.all(dl.short_term >= -1e-12) and np.all(dl.long_term >= -1e-12)
