"""The loops in C (scalgraph/trace/kernels.c) give their numpy versions' values bit for bit, on a
randomised program with blocking and non-blocking messages, Waitall, rooted and all-to-all
collectives and MPI_Finalize: the re-timing's anchor rounds with several ranks shortened, and the
processing-time profiles of the delay costs and the critical path, and the region nesting."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.trace import clock, critical_path, delay, native, retime
from scalgraph.trace.forward import build_context, forward_replay
from scalgraph.errors import UserError
from scalgraph.trace.matching import callpath_names, flatten, match_regions
from tracebuild import Builder


def random_program(nranks: int = 6, iters: int = 40, seed: int = 3) -> Builder:
    """Per iteration: imbalanced work, a ring exchange (Isend/Irecv/Waitall on odd iterations,
    Send/Recv between rank pairs on even ones), then an Allreduce or a Bcast from a moving root;
    times follow the blocking semantics with small random call costs."""
    rng = np.random.default_rng(seed)
    b = Builder(nranks)
    clock = np.zeros(nranks)
    for r in range(nranks):
        b.enter(r, 0.0, "main")
    d = 1e-6
    for i in range(iters):
        work = rng.exponential(1e-3, nranks) * (1 + (np.arange(nranks) == i % nranks))
        start = clock + d
        for r in range(nranks):
            b.work(r, start[r], start[r] + work[r], "compute" if r % 2 else "solve")
        ready = start + work
        if i % 2:
            post = ready + 2 * d
            for r in range(nranks):
                right, left = (r + 1) % nranks, (r - 1) % nranks
                b.irecv(r, ready[r], ready[r] + d, req=0)
                b.isend(r, ready[r] + d, post[r], dst=right, req=1, tag=i)
            end = np.maximum(post, post[(np.arange(nranks) - 1) % nranks]) + rng.uniform(d, 4 * d, nranks)
            for r in range(nranks):
                b.wait(r, post[r], end[r], [("send", 1), ("recv", 0, (r - 1) % nranks, i)])
        else:
            end = ready.copy()
            for r in range(0, nranks - 1, 2):
                arrive = max(ready[r], ready[r + 1]) + rng.uniform(d, 3 * d)
                b.send(r, ready[r], ready[r] + d, dst=r + 1, tag=i)
                b.recv(r + 1, ready[r + 1], arrive, src=r, tag=i)
                end[r], end[r + 1] = ready[r] + d, arrive
        if i % 3 == 0:
            root = i % nranks
            out = np.maximum(end, end[root]) + rng.uniform(d, 2 * d, nranks)
            for r in range(nranks):
                b.coll(r, end[r], out[r], "MPI_Bcast", root=root)
        else:
            out = np.full(nranks, end.max() + 2 * d)
            for r in range(nranks):
                b.coll(r, end[r], out[r], "MPI_Allreduce")
        clock = out
    fin = clock.max() + 5 * d
    for r in range(nranks):
        b.enter(r, clock[r] + d, "MPI_Finalize").exit(r, fin, "MPI_Finalize").exit(r, fin + d, "main")
    return b


def test_the_c_rounds_give_the_numpy_rounds_times_bit_for_bit(monkeypatch):
    if native.library() is None:
        pytest.skip("no C compiler")
    fwd = forward_replay(build_context(random_program().build()))
    ctx = fwd.ctx
    names = callpath_names(ctx.nest, ctx.trace.regions)
    cps = {n: i for i, n in enumerate(names)}
    cases = [([cps["main/solve"]], retime.shrink_fractions(ctx, fwd.excl_time, [cps["main/solve"]])),
             ([cps["main/compute"]], np.linspace(0.0, 0.9, ctx.nranks)),
             ([cps["main/solve"], cps["main/compute"]], np.full(ctx.nranks, 0.5))]
    moved = 0
    for callpaths, frac in cases:
        fast = retime.retime(ctx, callpaths, frac)
        with monkeypatch.context() as m:
            m.setattr(native, "retime_rounds", lambda *a, **k: None)
            slow = retime.retime(ctx, callpaths, frac)
        assert fast.time.tobytes() == slow.time.tobytes()
        assert (fast.run_length, fast.fixed_run_length) == (slow.run_length, slow.fixed_run_length)
        moved += int((fast.time != ctx.time).sum())
    assert moved > 1000                        # the cases really move events (and waiting) around



def test_the_c_profiles_give_the_numpy_delay_costs_and_critical_path_bit_for_bit(monkeypatch):
    if native.library() is None:
        pytest.skip("no C compiler")
    fwd = forward_replay(build_context(random_program(seed=5).build()))
    ncalls = {"c": 0}
    kernel = native.interval_profiles

    def counted(*a, **k):
        ncalls["c"] += 1
        return kernel(*a, **k)
    monkeypatch.setattr(native, "interval_profiles", counted)
    fast = [delay.delay_analysis(fwd, delay.DelayOptions(sync_points=sp)) for sp in ("waits", "messages")]
    fast_path = critical_path.critical_path(fwd)
    assert ncalls["c"] >= 5
    monkeypatch.setattr(native, "interval_profiles", lambda *a, **k: None)
    slow = [delay.delay_analysis(fwd, delay.DelayOptions(sync_points=sp)) for sp in ("waits", "messages")]
    slow_path = critical_path.critical_path(fwd)
    for a, b in zip(fast, slow):
        for f in ("short_by_pattern", "long_by_pattern", "gamma", "direct", "indirect", "sum_delta",
                  "wait_in_interval", "distributed"):
            assert getattr(a, f).tobytes() == getattr(b, f).tobytes(), f
        assert a.unexplained == b.unexplained
        assert a.short_term.sum() > 0                     # real delay costs were compared
    for f in ("profile", "activity", "non_critical", "imbalance_impact", "time", "seg_start", "seg_end"):
        assert getattr(fast_path, f).tobytes() == getattr(slow_path, f).tobytes(), f


def test_the_c_region_pass_gives_the_numpy_nesting(monkeypatch):
    """Pairs, owners and call paths (ids in the same order) of nested regions, an MPI call inside
    user regions, and a region left open at the end of a rank (tolerated)."""
    if native.library() is None:
        pytest.skip("no C compiler")
    b = random_program(nranks=4, iters=12, seed=7)
    for r in range(4):
        t = 1.0 + r
        b.enter(r, t, "outer").enter(r, t, "inner").send(r, t, t, dst=(r + 1) % 4, tag=99).exit(r, t, "inner")
        b.enter(r, t, "inner").recv(r, t, t, src=(r - 1) % 4, tag=99).exit(r, t, "inner").exit(r, t, "outer")
    b.enter(3, 9.0, "left_open")
    flat = flatten(b.build())
    fast = match_regions(flat)
    monkeypatch.setattr(native, "match_regions", lambda *a, **k: None)
    slow = match_regions(flat)
    for f in ("partner", "owner", "callpath", "cp_after", "cp_parent", "cp_region"):
        assert np.array_equal(getattr(fast, f), getattr(slow, f)), f
    assert (fast.partner >= 0).sum() > 400 and fast.cp_region.size >= 8


def test_an_exit_closing_nothing_is_reported_the_same_by_both(monkeypatch):
    if native.library() is None:
        pytest.skip("no C compiler")
    b = Builder(1)
    b.enter(0, 0.0, "main").exit(0, 1.0, "main").exit(0, 2.0, "main")
    flat = flatten(b.build())
    with pytest.raises(UserError) as fast:
        match_regions(flat)
    monkeypatch.setattr(native, "match_regions", lambda *a, **k: None)
    with pytest.raises(UserError) as slow:
        match_regions(flat)
    assert str(fast.value) == str(slow.value) and "event 2" in str(fast.value)


def test_the_c_record_split_gives_numpys_columns(monkeypatch):
    """flatten's columns (and so the validation's) from packed records, bit for bit, including a
    location whose records are a strided view (the numpy copies then)."""
    if native.library() is None:
        pytest.skip("no C compiler")
    trace = random_program(nranks=3, iters=30, seed=2).build()
    trace.events[1] = trace.events[1][::1].copy()
    trace.events[2] = np.concatenate((trace.events[2], trace.events[2]))[::2]   # not contiguous
    fast = flatten(trace)
    monkeypatch.setattr(native, "split_records", lambda *a, **k: False)
    slow = flatten(trace)
    for name in fast.ev:
        assert fast.ev[name].tobytes() == slow.ev[name].tobytes(), name
    assert len(fast.ev) == sum(len(e) for e in trace.events) and np.isfinite(fast.ev["time"]).all()


def skewed_cases():
    """Skewed traces for the clock correction: the random program with per-rank offsets (receives
    before their sends, collectives' exits before their enters) and the property tests' simulated
    programs with offsets and drifts."""
    from test_trace_clock_props import inject, simulate
    rng = np.random.default_rng(11)
    for seed in range(3):
        tr = random_program(nranks=6, iters=40, seed=seed).build()
        for ev, off in zip(tr.events, rng.uniform(-4e-5, 4e-5, tr.nranks)):
            ev["time"] += off
        yield tr
    for seed in range(4):
        yield inject(simulate(5, 30, seed), [0, 3e-5, -4e-5, 1e-5, 2e-6], [0, 2e-4, -1e-4, 0, 5e-5])


def test_the_c_clock_rounds_give_the_numpy_rounds_bit_for_bit(monkeypatch):
    """clock._forward_rounds with the C rounds and with the numpy rounds: the same times and jumps
    bit for bit, also when the rounds are cut short (both give up: the caller falls back), and the
    whole correction the same with the kernel as without it."""
    if native.library() is None:
        pytest.skip("no C compiler")
    p = clock.ClockParams()
    jumps = rounds_cut = 0
    for tr in skewed_cases():
        flat = flatten(tr)
        lm = clock.logical_messages(tr, p, flat)
        t = flat.ev["time"].astype(float)
        for max_rounds in (clock.MAX_ROUNDS, 2, 0):
            fast = clock._forward_rounds(t, flat, lm, p, max_rounds=max_rounds)
            slow = clock._forward_rounds(t, flat, lm, p, max_rounds=max_rounds, use_native=False)
            assert (fast is None) == (slow is None)
            if fast is None:
                rounds_cut += 1
                continue
            assert fast[0].tobytes() == slow[0].tobytes()
            assert fast[1] == slow[1]
            jumps += len(fast[1]) if max_rounds == clock.MAX_ROUNDS else 0
        fast_tr, fast_rep = clock.correct_clocks(tr, p)
        with monkeypatch.context() as m:
            m.setattr(native, "clock_rounds", lambda *a, **k: None)
            slow_tr, slow_rep = clock.correct_clocks(tr, p)
        assert fast_rep.corrected and fast_rep.jumps == slow_rep.jumps > 0
        for a, b in zip(fast_tr.events, slow_tr.events):
            assert a["time"].tobytes() == b["time"].tobytes()
    assert jumps > 50 and rounds_cut >= 7            # real corrections compared, and the give-up path


def test_the_c_interval_starts_give_the_numpy_ones(monkeypatch):
    """delay.interval_starts with the C search and with the joint sort: the same starts, for both
    synchronisation-point rules and root-only collectives, with equal times (a zero-length call
    after a wait at the same instant) among them."""
    if native.library() is None:
        pytest.skip("no C compiler")
    b = random_program(nranks=6, iters=40, seed=9)
    for r in range(6):                                 # points at equal times: ties of the sort
        t = 1.0
        b.send(r, t, t, dst=(r + 1) % 6, tag=500).recv(r, t, t, src=(r - 1) % 6, tag=500)
    fwd = forward_replay(build_context(b.build()))
    ctx, waits = fwd.ctx, fwd.sync_waits[fwd.sync_waits["causer"] >= 0]
    q_rank = np.concatenate((waits["rank"], waits["causer"])).astype(np.int64)
    q_key = np.concatenate((waits["key"], np.where(waits["key"] >= ctx.nranks, waits["key"], waits["rank"])))
    q_time = np.concatenate((ctx.time[waits["op"]], ctx.time[waits["causer_op"]]))
    found = 0
    for opts in (delay.DelayOptions(), delay.DelayOptions(sync_points="messages"),
                 delay.DelayOptions(collectives="root")):
        fast = delay.interval_starts(ctx, waits, q_rank, q_key, q_time, opts)
        with monkeypatch.context() as m:
            m.setattr(native, "last_before", lambda *a, **k: None)
            slow = delay.interval_starts(ctx, waits, q_rank, q_key, q_time, opts)
        assert fast.tobytes() == slow.tobytes()
        found += int(np.isfinite(fast).sum())
    assert found > 500 and len(waits) > 100
