"""The vectorised backward amortisation of the controlled logical clock gives bit for bit what the
former loop over the moved receives gave (kept here as the reference only).

The reference is the one-jump-at-a-time loop of shared/notes/trace-analysis-reference.md §7
(backward amortisation): per moved receive a ramp of slope m from t_L = r* - Delta/m, steepened
where a logical send would pass its bound, recursing on the part before that send.  The vectorised
version runs the independent jumps at once; these tests compare every corrected timestamp exactly
(np.array_equal, no tolerance) on random skewed traces and random parameters."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalgraph.trace import clock, matching
from scalgraph.trace.clock import ClockParams
from test_trace_clock_props import inject, simulate


def backward_reference(c: np.ndarray, flat, lm: clock.LogicalMessages, jumps, p: ClockParams) -> None:
    """The loop over the moved receives that scalgraph used before the vectorised version."""
    if not jumps:
        return
    bound = np.full(len(c), np.inf)
    if len(lm.recv_evt):
        set_min_recv = np.full(lm.nsets, np.inf)
        np.minimum.at(set_min_recv, lm.recv_set, c[lm.recv_evt])
        set_id = np.repeat(np.arange(lm.nsets), np.diff(lm.set_ptr))
        np.minimum.at(bound, lm.set_members, set_min_recv[set_id] - lm.set_lmin[set_id])
    is_send = np.isfinite(bound)
    for g, delta, r_star in jumps:
        r = int(flat.rank[g])
        lo = int(flat.offsets[r])
        t_first = c[lo]
        m = p.slope
        t_left = r_star - delta / m
        if t_left < t_first:
            t_left = t_first
            if r_star - t_left <= 0:
                continue
            m = delta / (r_star - t_left)
        hi = g
        while delta > 0:
            seg = c[lo:hi]
            first = lo + int(np.searchsorted(seg, t_left, side="right"))
            cand = first + np.flatnonzero(is_send[first:hi] & (c[first:hi] < r_star))
            best, best_m = -1, m
            if len(cand):
                slack = bound[cand] - c[cand]
                mi = (delta - slack) / (r_star - c[cand])
                k = int(np.argmax(mi))
                if mi[k] > m:
                    best, best_m = int(cand[k]), float(mi[k])
            if best < 0:
                c[first:hi] += m * (c[first:hi] - t_left)
                break
            s_old = c[best]
            d_star = max(bound[best] - s_old, 0.0)
            c[best:hi] += d_star + best_m * (c[best:hi] - s_old)
            if d_star <= 0 or s_old <= t_left:
                break
            hi, r_star, delta, m = best, s_old, d_star, d_star / (s_old - t_left)
    for r in range(flat.nranks):
        seg = c[flat.offsets[r]:flat.offsets[r + 1]]
        np.maximum.accumulate(seg, out=seg)


def both(trace, p: ClockParams):
    flat = matching.flatten(trace)
    lm = clock.logical_messages(trace, p, flat)
    c, jumps = clock._forward(flat.ev["time"].astype(float), flat, lm, p)
    ref, new = c.copy(), c.copy()
    backward_reference(ref, flat, lm, jumps, p)
    clock._backward(new, flat, lm, jumps, p)
    return ref, new, c, jumps, flat


traces = st.builds(simulate, nranks=st.integers(2, 6), nops=st.integers(5, 60), seed=st.integers(0, 2**32 - 1))
params = st.builds(ClockParams, delta=st.sampled_from([0.0, 1e-9, 1e-7]), gamma=st.floats(0.9, 1.0),
                   l_min_p2p=st.floats(0, 1e-5), l_min_coll=st.floats(0, 1e-5),
                   slope=st.sampled_from([0.001, 0.01, 0.1, 1.0]))


@settings(max_examples=60, deadline=None)
@given(traces, st.lists(st.floats(-2e-4, 2e-4), min_size=1, max_size=6),
       st.lists(st.floats(-1e-3, 1e-3), min_size=1, max_size=4), params)
def test_vectorised_backward_equals_the_loop_bit_for_bit(trace, offs, drs, p):
    ref, new, _, _, _ = both(inject(trace, offs, drs), p)
    assert np.array_equal(ref, new)


def test_overlapping_ramps_are_covered_and_equal():
    """Guards the property above against being vacuous: the skewed traces here move many receives,
    some ramps reach back past the previous moved receive of their rank (a chain of dependent
    jumps) and some ramps stop at a send's bound; the results are still identical."""
    chained = stopped = moved = 0
    for seed in range(12):
        tr = inject(simulate(5, 60, seed), [0, 1e-4, -1e-4, 5e-5, -2e-4], [0, 1e-3, -1e-3])
        p = ClockParams(slope=0.001)
        ref, new, c, jumps, flat = both(tr, p)
        assert np.array_equal(ref, new)
        moved += len(jumps)
        js = sorted(jumps)
        for (g0, _, _), (g1, d1, r1) in zip(js, js[1:]):
            if flat.rank[g0] == flat.rank[g1] and max(r1 - d1 / p.slope, c[flat.offsets[flat.rank[g1]]]) < c[g0]:
                chained += 1
        # a ramp stopped by a bound leaves a send exactly at (or below) its bound with a kink: the
        # loop without the bound check would have moved it further
        plain = c.copy()
        for g, d, r in jumps:
            lo = int(flat.offsets[flat.rank[g]])
            tl = max(r - d / p.slope, c[lo])
            if r - tl > 0:
                sl = d / (r - tl)
                seg = slice(lo, g)
                mask = plain[seg] > tl
                plain[seg] = np.where(mask, plain[seg] + sl * (plain[seg] - tl), plain[seg])
        stopped += int(np.sum(new < plain - 1e-12))
    assert moved > 50 and chained > 5 and stopped > 0


def test_correction_leaves_its_input_alone_and_copies_only_moved_ranks():
    tr = inject(simulate(4, 40, 11), [0, 1e-4, -1e-4, 0], [0])
    before = [e.copy() for e in tr.events]
    out, report = clock.correct_clocks(tr)
    assert report.corrected
    for a, b in zip(tr.events, before):
        assert np.array_equal(a, b)                    # the input's arrays are untouched
    moved = [not np.array_equal(o["time"], b["time"]) for o, b in zip(out.events, before)]
    assert any(moved)
    for o, e, m in zip(out.events, tr.events, moved):
        assert (o is not e) == m                       # a rank without a moved time is shared, not copied
    consistent = simulate(3, 20, 5)
    same, rep = clock.correct_clocks(consistent)
    assert not rep.corrected and all(o is e for o, e in zip(same.events, consistent.events))
