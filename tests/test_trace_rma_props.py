"""Property tests on random RMA traces: fence, post/start/complete/wait and lock epochs with random
timings on every rank.  Whatever the timings, every RMA wait is non-negative and no longer than the
call it is charged to, a sub-pattern never exceeds its parent, and the pairwise-sync counts are
whole numbers with unneeded <= all.  The JSON round trip gives the same cube."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalgraph.io.trace_read import read_trace, write_trace
from scalgraph.model import trace as tm
from scalgraph.trace import forward, patterns, rma
from tracebuild import Builder

WIN = 3


def random_rma_trace(seed: int) -> tm.Trace:
    rng = np.random.default_rng(seed)
    p = int(rng.integers(2, 5))
    b = Builder(p)
    clock = rng.uniform(0, 2, p)

    def call(r, name, peers=(-1,), kind=tm.RMA_SYNC, tag=0):
        t0 = clock[r] + rng.exponential(1.0)
        long = name in ("MPI_Win_fence", "MPI_Win_create", "MPI_Win_free")    # so that some overlap
        t1 = t0 + rng.exponential(4.0 if long else 0.5)
        b.enter(r, t0, name)
        for q in peers:
            b.ev(r, t0, kind, peer=q, comm=WIN, tag=tag, nbytes=8)
        b.exit(r, t1, name)
        clock[r] = t1

    def work(r):
        t0 = clock[r] + rng.exponential(0.3)
        t1 = t0 + rng.exponential(1.0)
        b.work(r, t0, t1, "compute")
        clock[r] = t1

    for r in range(p):
        call(r, "MPI_Win_create")
    for _ in range(int(rng.integers(1, 4))):
        phase = rng.integers(3)
        if phase == 0:                                  # fence epoch with random puts
            for r in range(p):
                call(r, "MPI_Win_fence")
                for q in rng.choice(p, int(rng.integers(0, p + 1))).tolist():
                    call(r, "MPI_Put", (q,), tm.RMA_PUT)
                work(r)
            for r in range(p):
                call(r, "MPI_Win_fence")
        elif phase == 1:                                # GATS over a random set of (origin, target) pairs
            pairs = [(o, t) for o in range(p) for t in range(p) if o != t and rng.random() < 0.6]
            for r in range(p):
                origins = [o for o, t in pairs if t == r]
                targets = [t for o, t in pairs if o == r]
                if origins:
                    call(r, "MPI_Win_post", origins)
                if targets:
                    call(r, "MPI_Win_start", targets)
                    for t in targets:
                        if rng.random() < 0.7:
                            call(r, "MPI_Get" if rng.random() < 0.3 else "MPI_Put", (t,),
                                 tm.RMA_GET if rng.random() < 0.3 else tm.RMA_PUT)
                    work(r)
                    call(r, "MPI_Win_complete")
                if origins:
                    work(r)
                    call(r, "MPI_Win_wait")
        else:                                           # lock epochs on random targets
            for r in range(p):
                for _ in range(int(rng.integers(0, 3))):
                    t = int(rng.integers(p))
                    tag = rma.LOCK_SHARED if rng.random() < 0.3 else rma.LOCK_EXCLUSIVE
                    call(r, "MPI_Win_lock", (t,), tag=tag)
                    if rng.random() < 0.8:
                        call(r, "MPI_Accumulate", (t,), tm.RMA_ACC)
                    call(r, "MPI_Win_unlock", (t,))
                work(r)
    for r in range(p):
        call(r, "MPI_Win_free")
    tr = b.build()
    tr.windows = {WIN: 0}
    return tr


RMA_KEYS = [p.key for p in patterns.PATTERNS if p.key.startswith("rma") and p.evaluate is not None]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_rma_waits_are_bounded_by_their_call(seed):
    fwd = forward.forward_replay(forward.build_context(random_rma_trace(seed)))
    w, ctx = fwd.waits, fwd.ctx
    duration = ctx.exit_time[w["op"]] - ctx.time[w["op"]]
    assert np.all(w["wait"] >= 0)
    assert np.all(w["wait"] <= duration + 1e-12)
    # all wait states of one call together fit in it too (e.g. Lock Contention + Wait for Progress),
    # counting only top-level patterns (sub-patterns repeat part of their parent's time)
    top = np.array([patterns.PATTERNS[i].parent in ("rma_active", "rma_passive", "rma_window", "rma_comm")
                    for i in w["pattern"]], bool)
    calls, inv = np.unique(w["op"][top], return_inverse=True)
    per_call = np.bincount(inv, weights=w["wait"][top])
    assert np.all(per_call <= ctx.exit_time[calls] - ctx.time[calls] + 1e-9)
    cube = fwd.cube
    for p in patterns.PATTERNS:
        if p.parent is not None:
            i, j = patterns.PATTERN_INDEX[p.key], patterns.PATTERN_INDEX[p.parent]
            assert np.all(cube[i] <= cube[j] + 1e-9), (p.key, p.parent)
    pairs = cube[patterns.PATTERN_INDEX["rma_pairwise_sync"]]
    unneeded = cube[patterns.PATTERN_INDEX["rma_unneeded_sync"]]
    assert np.all(pairs == np.round(pairs)) and np.all(unneeded <= pairs) and np.all(unneeded >= 0)
    # causers of RMA sync waits are real ranks with a real call
    sync = w[patterns.SYNC_PATTERNS[w["pattern"]]]
    rma_sync = sync[np.isin(sync["pattern"], [patterns.PATTERN_INDEX[k] for k in RMA_KEYS])]
    assert np.all((rma_sync["causer"] >= 0) & (rma_sync["causer"] < ctx.nranks))
    assert np.all(ctx.flat.rank[rma_sync["causer_op"]] == rma_sync["causer"])


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_rma_report_survives_json_round_trip(tmp_path_factory, seed):
    tr = random_rma_trace(seed)
    path = tmp_path_factory.mktemp("rma") / "t.json"
    write_trace(tr, str(path), "json")
    back = read_trace(str(path))
    a = forward.forward_replay(forward.build_context(tr)).cube
    b = forward.forward_replay(forward.build_context(back)).cube
    assert np.array_equal(a, b)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_full_analysis_of_rma_traces_conserves_waiting_time(seed):
    # RMA wait states with a causer take part in the delay analysis: Σ short + long + unexplained
    # = their waiting time, with and without clock correction
    from scalgraph.commands.trace import analyse
    for clock in (False, True):
        rep = analyse(random_rma_trace(seed), clock_correction=clock)
        cl = rep["delay"]["classification"]
        assert cl["short_term"] + cl["long_term"] + cl["unexplained"] == \
            pytest.approx(cl["waiting_time"], rel=1e-9, abs=1e-12)
        tree = {p["key"]: p["seconds"] for p in rep["patterns"]}
        assert tree["rma"] <= tree["mpi"] + 1e-9


def ring_trace(p: int, iterations: int, seed: int = 1) -> tm.Trace:
    """A large synthetic RMA trace built with numpy: p ranks x `iterations` of (fence, put to the right,
    fence, post for the left, start to the right, put, complete, wait) with random call times."""
    names = ["MPI_Win_fence", "MPI_Put", "MPI_Win_post", "MPI_Win_start", "MPI_Win_complete", "MPI_Win_wait"]
    rng = np.random.default_rng(seed)
    events = []
    for r in range(p):
        right, left = (r + 1) % p, (r - 1) % p
        one = [(0, -1, tm.RMA_SYNC), (1, right, tm.RMA_PUT), (0, -1, tm.RMA_SYNC), (2, left, tm.RMA_SYNC),
               (3, right, tm.RMA_SYNC), (1, right, tm.RMA_PUT), (4, -1, tm.RMA_SYNC), (5, -1, tm.RMA_SYNC)]
        n = len(one) * iterations
        t = np.cumsum(rng.exponential(1e-3, 2 * n)).reshape(n, 2)
        reg, peer, kind = (np.tile([c[i] for c in one], iterations) for i in range(3))
        ev = tm.make_events(3 * n)
        ev["time"][0::3], ev["time"][1::3], ev["time"][2::3] = t[:, 0], t[:, 0], t[:, 1]
        ev["kind"][0::3], ev["kind"][1::3], ev["kind"][2::3] = tm.ENTER, kind, tm.EXIT
        ev["region"][0::3], ev["region"][2::3] = reg, reg
        ev["peer"][1::3], ev["comm"][1::3] = peer, WIN
        events.append(ev)
    return tm.Trace(regions=[tm.Region(x, "MPI") for x in names], comms={0: list(range(p))}, events=events,
                    windows={WIN: 0})


def test_ring_trace_counts_every_pair():
    # GATS: one pair per rank and iteration, all needed (everyone puts to its right neighbour).
    # Fences: 2 per iteration, all but the first close an epoch and count p - 1 pairs per rank.
    #   the second fence of an iteration closes the fence epoch: only the left neighbour accessed l,
    #   p - 2 unneeded per rank;  the first fence of iterations 1.. closes an epoch whose only ops
    #   belong to GATS epochs: p - 1 unneeded = (p - 2) + 1 per rank
    p, it = 5, 40
    fwd = forward.forward_replay(forward.build_context(ring_trace(p, it)))
    cube = fwd.cube.sum(axis=(1, 2))
    fence_closing = 2 * it - 1
    assert cube[patterns.PATTERN_INDEX["rma_pairwise_sync"]] == p * it + fence_closing * p * (p - 1)
    assert cube[patterns.PATTERN_INDEX["rma_unneeded_sync"]] == fence_closing * p * (p - 2) + \
        (it - 1) * p          # the fence after each GATS exchange closes an epoch without fence ops
