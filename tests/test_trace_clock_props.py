"""Property tests of the controlled logical clock on random valid traces.

A trace is simulated on a global clock (so it satisfies the clock condition with latency >= LAT):
blocking and non-blocking p2p, barrier / allreduce / bcast / reduce / scan on world and on
sub-communicators, MPI_Init/Finalize.  Then each rank's timestamps get an offset (and a drift),
as unsynchronised clocks would, which creates violations.

What is asserted after `correct_clocks` with the default parameters (delta 1 ns, gamma 0.99999,
l_min 1 us, slope 0.01):
  1. no logical message has C(recv) < C(send) + l_min - 1e-12 s (so no violation of any kind);
  2. every event's corrected time >= its time before correction (exact float comparison);
  3. times are strictly increasing per location;
  4. only timestamps change (kinds, regions, peers, ... are identical) and the result passes validation;
  5. the vectorised forward amortisation equals a plain per-event loop of the paper's recurrence;
  6. a trace without injected offsets has no violation and is returned unchanged.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalgraph.model import trace as tm
from scalgraph.trace import clock, matching
from scalgraph.trace.clock import ClockParams, correct_clocks, find_violations
from scalgraph.trace.validate import check_trace
from tracebuild import Builder

LAT = 5e-6      # simulated message latency, above the default l_min of 1 us


def simulate(nranks: int, nops: int, seed: int) -> tm.Trace:
    rng = np.random.default_rng(seed)
    sub = sorted(rng.choice(nranks, size=max(2, nranks // 2 + 1), replace=False).tolist())
    comms = {0: list(range(nranks)), 3: sub[::-1]}          # sub-communicator in reversed rank order
    b = Builder(nranks, comms=comms)
    now = rng.uniform(0, 1e-4, nranks)
    small = lambda: float(rng.uniform(1e-7, 2e-6))

    def coll(members, name, comm, root=-1):
        enters = {r: now[r] for r in members}
        exits = {}
        for i, r in enumerate(members):
            if name in ("MPI_Barrier", "MPI_Allreduce", "MPI_Init", "MPI_Finalize"):
                ready = max(enters.values()) + LAT
            elif name == "MPI_Scan":
                ready = max(enters[m] for m in members[:i + 1]) + LAT
            elif name == "MPI_Bcast":
                ready = enters[root] + LAT if r != root else enters[r]
            else:                                             # MPI_Reduce
                ready = max(enters.values()) + LAT if r == root else enters[r]
            exits[r] = max(enters[r], ready) + small()
        for r in members:
            if name in ("MPI_Init", "MPI_Finalize"):
                b.work(r, enters[r], exits[r], name)
            else:
                sent = 0 if (name == "MPI_Bcast" and r != root) else 8
                got = 0 if (name == "MPI_Bcast" and r == root) or (name == "MPI_Reduce" and r != root) else 8
                b.coll(r, enters[r], exits[r], name, comm=comm, root=root, sent=sent, recvd=got)
            now[r] = exits[r] + small()

    for r in range(nranks):
        b.enter(r, now[r], "main")
        now[r] += small()
    coll(list(range(nranks)), "MPI_Init", 0)
    req = 0
    for _ in range(nops):
        op = rng.integers(0, 5)
        if op == 0:                                           # computation
            r = int(rng.integers(nranks))
            d = float(rng.exponential(5e-5))
            b.work(r, now[r], now[r] + d, "work")
            now[r] += d + small()
        elif op in (1, 2):                                    # p2p, blocking or not
            s, d = (int(x) for x in rng.choice(nranks, 2, replace=False))
            tag = int(rng.integers(3))
            ts = now[s]
            if op == 1:
                b.send(s, ts, ts + small(), dst=d, tag=tag)
                t0 = now[d]
                t1 = max(t0, ts + LAT) + small()
                b.recv(d, t0, t1, src=s, tag=tag)
                now[s], now[d] = ts + 3e-6, t1 + small()
            else:
                req += 1
                b.isend(s, ts, ts + small(), dst=d, req=req, tag=tag)
                b.irecv(d, now[d], now[d] + small(), req=req)
                ws, wd = ts + 3e-6, max(now[d] + 3e-6, ts + small())
                b.wait(s, ws, ws + small(), [("send", req)], name="MPI_Wait")
                t1 = max(wd, ts + LAT) + small()
                b.wait(d, wd, t1, [("recv", req, s, tag)], name="MPI_Wait")
                now[s], now[d] = ws + 3e-6, t1 + small()
        else:                                                 # a collective
            name = ["MPI_Barrier", "MPI_Allreduce", "MPI_Bcast", "MPI_Reduce", "MPI_Scan"][int(rng.integers(5))]
            comm = int(rng.choice([0, 3]))
            members = comms[comm]
            root = int(rng.choice(members)) if name in ("MPI_Bcast", "MPI_Reduce") else -1
            coll(members, name, comm, root)
    coll(list(range(nranks)), "MPI_Finalize", 0)
    for r in range(nranks):
        b.exit(r, now[r], "main")
    return b.build()


def inject(trace: tm.Trace, offsets: list[float], drifts: list[float]) -> tm.Trace:
    events = [ev.copy() for ev in trace.events]
    for r, ev in enumerate(events):
        ev["time"] = ev["time"] * (1 + drifts[r % len(drifts)]) + offsets[r % len(offsets)]
    return tm.Trace(regions=trace.regions, comms=trace.comms, events=events, windows=trace.windows, meta=dict(trace.meta))


traces = st.builds(simulate, nranks=st.integers(2, 6), nops=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
offsets = st.lists(st.floats(-2e-4, 2e-4), min_size=1, max_size=6)
drifts = st.lists(st.floats(-1e-3, 1e-3), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(traces, offsets, drifts)
def test_clc_removes_every_violation_and_only_moves_forward(trace, offs, drs):
    skewed = inject(trace, offs, drs)
    params = ClockParams()
    out, report = correct_clocks(skewed, params)
    # 1. clock condition with minimum latency holds for every logical message
    # (the correction runs when a receive lies before its send; a receive less than l_min after its
    # send is no violation and alone starts no correction, but once it runs every message gets l_min)
    lm = clock.logical_messages(out, params)
    if report.corrected:
        assert len(find_violations(out, lm, l_min=params.l_min_p2p - 1e-12)) == 0
    assert len(find_violations(out, lm)) == 0
    for before, after in zip(skewed.events, out.events):
        # 2. no event moves backwards;  3. strictly increasing per location
        assert np.all(after["time"] >= before["time"])
        if report.corrected:
            assert np.all(np.diff(after["time"]) > 0)
        else:
            assert np.array_equal(after["time"], before["time"])
        # 4. only the timestamps changed
        for f in tm.EVENT_DTYPE.names:
            if f != "time":
                assert np.array_equal(after[f], before[f])
    check_trace(out)
    # corrections happen exactly when the skewed input had a violation
    assert report.corrected == (len(find_violations(skewed)) > 0)


@settings(max_examples=40, deadline=None)
@given(traces)
def test_a_consistent_trace_is_left_unchanged(trace):
    assert len(find_violations(trace, l_min=1e-6)) == 0       # the simulation respects latency >= 5 us
    out, report = correct_clocks(trace)
    assert not report.corrected
    for a, b in zip(trace.events, out.events):
        assert np.array_equal(a, b)


def forward_reference(t: np.ndarray, flat, lm: clock.LogicalMessages, p: ClockParams) -> np.ndarray:
    """The recurrence of seed 004 / the reference note, one event at a time, ranks visited round-robin
    until every receive's senders are done."""
    c = np.full(len(t), np.nan)
    waits: dict[int, list[int]] = {}
    for g, s in zip(lm.recv_evt.tolist(), lm.recv_set.tolist()):
        waits.setdefault(g, []).append(s)
    pos = flat.offsets[:-1].copy()
    progress = True
    while progress:
        progress = False
        for r in range(flat.nranks):
            while pos[r] < flat.offsets[r + 1]:
                i = int(pos[r])
                senders = [lm.set_members[lm.set_ptr[s]:lm.set_ptr[s + 1]] for s in waits.get(i, [])]
                if any(np.isnan(c[m]).any() for m in senders):
                    break
                if i == flat.offsets[r]:
                    value = t[i]
                else:
                    value = max(t[i], c[i - 1] + p.delta, c[i - 1] + p.gamma * (t[i] - t[i - 1]))
                for s, m in zip(waits.get(i, []), senders):
                    value = max(value, c[m].max() + lm.set_lmin[s])
                c[i] = value
                pos[r] += 1
                progress = True
    return c


@settings(max_examples=40, deadline=None)
@given(traces, offsets, drifts)
def test_vectorised_forward_pass_equals_the_per_event_recurrence(trace, offs, drs):
    skewed = inject(trace, offs, drs)
    p = ClockParams()
    lm = clock.logical_messages(skewed, p)
    flat = matching.flatten(skewed)
    t = flat.ev["time"].astype(float)
    fast, jumps = clock._forward(t, flat, lm, p)
    slow = forward_reference(t, flat, lm, p)
    assert not np.isnan(slow).any()
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
    for g, delta, r_star in jumps:
        assert delta > 0 and fast[g] == r_star + delta or abs(fast[g] - (r_star + delta)) < 1e-15


def test_the_generator_really_produces_every_kind_of_violation():
    """Guards the properties above against being vacuous: skewed simulated traces contain every
    kind of logical-message violation, and the CLC removes them."""
    seen = set()
    for seed in range(10):
        skewed = inject(simulate(5, 40, seed), [0, 1e-4, -1e-4, 5e-5, -2e-4], [0, 1e-3, -1e-3])
        v = find_violations(skewed)
        seen |= set(v["kind"].tolist())
        out, report = correct_clocks(skewed)
        assert report.corrected and report.jumps > 0 and len(find_violations(out)) == 0
    assert seen == set(range(clock.INIT_FINALIZE + 1))      # the MPI kinds (OpenMP ones: test_trace_clock_hybrid.py)


# delta is 0 or at least 1e-12 s: a smaller one vanishes in the float resolution of the timestamps
params_strategy = st.builds(ClockParams, delta=st.one_of(st.just(0.0), st.floats(1e-12, 1e-6)),
                            gamma=st.floats(0.9, 1.0),
                            l_min_p2p=st.floats(0, 1e-5), l_min_coll=st.floats(0, 1e-5),
                            slope=st.floats(1e-3, 1.0))


@settings(max_examples=40, deadline=None)
@given(traces, offsets, drifts, params_strategy)
def test_properties_hold_for_any_parameters(trace, offs, drs, params):
    """Same guarantees with random delta, gamma, l_min and slope (strictness only when delta > 0)."""
    skewed = inject(trace, offs, drs)
    out, report = correct_clocks(skewed, params, force=True)
    lm = clock.logical_messages(out, params)
    flat = matching.flatten(out)
    t = flat.ev["time"]
    member_max = np.maximum.reduceat(t[lm.set_members], lm.set_ptr[:-1])
    assert np.all(t[lm.recv_evt] >= member_max[lm.recv_set] + lm.set_lmin[lm.recv_set] - 1e-12)
    for before, after in zip(skewed.events, out.events):
        assert np.all(after["time"] >= before["time"])
        assert np.all(np.diff(after["time"]) >= 0)
        if params.delta > 0:
            assert np.all(np.diff(after["time"]) > 0)
