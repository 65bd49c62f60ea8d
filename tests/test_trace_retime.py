"""What-if in trace mode (scalgraph/trace/retime.py): re-timing a trace with a cause shortened,
on literal traces whose new times are worked out by hand in the comments."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.trace.forward import build_context, forward_replay
from scalgraph.trace.matching import callpath_names
from scalgraph.trace.retime import retime, shrink_fractions, whatif_for_callpaths
from tracebuild import Builder
from test_trace_delay import figure3


def context(b: Builder):
    fwd = forward_replay(build_context(b.build()))
    names = callpath_names(fwd.ctx.nest, fwd.ctx.trace.regions)
    return fwd, {n: i for i, n in enumerate(names)}


def end_times(ctx, new) -> list[float]:
    off = ctx.flat.offsets
    return [float(new[off[r + 1] - 1]) for r in range(ctx.nranks)]


def test_figure3_with_a_g_brought_to_the_median():
    """Seed 000 Figure 3; g takes 3 on A, 0 on B, 0.5 on C: the lower median 0.5, so A's g shrinks by
    5/6 to 0.5 and A sends at 2.5.  B entered R3 at 2 and waited 3 for the send at 5, then took 1:
    now max(2 + 4 - 3, 2.5 + min(1, 4)) = 3.5; B sends at 3.5 and ends 1 later, 4.5.  C entered R4 at
    4 (it does not move), waited 2 for B's send at 6, took 0.5: now max(4 + 2.5 - 2, 3.5 + 0.5) = 4.5,
    ends 0.5 later at 5.0.  A ends 2 after its send: 4.5.  The run: 7 -> 5, a gain of 2."""
    fwd, cp = context(figure3())
    ctx = fwd.ctx
    frac = shrink_fractions(ctx, fwd.excl_time, [cp["main/g"]])
    assert frac.tolist() == pytest.approx([5 / 6, 0.0, 0.0])
    res = retime(ctx, [cp["main/g"]], frac)
    assert end_times(ctx, res.time) == pytest.approx([4.5, 4.5, 5.0])
    assert res.run_length == pytest.approx(7.0) and res.fixed_run_length == pytest.approx(5.0)
    assert res.gain == pytest.approx(2.0)


def test_nothing_shortened_gives_the_trace_back():
    fwd, cp = context(figure3())
    res = retime(fwd.ctx, [cp["main/g"]], np.zeros(3))
    assert res.time == pytest.approx(fwd.ctx.time) and res.gain == 0.0


def test_a_collective_waits_for_its_last_member_only():
    """Rank 0 works 4, ranks 1 and 2 work 1; all enter an Allreduce that ends 0.1 after the last
    entry (4.1).  Fixing rank 0's work (4 -> the median 1) makes everybody enter at 1: the
    Allreduce ends at 1.1 everywhere, a gain of 3."""
    b = Builder(3)
    for r, w in enumerate((4.0, 1.0, 1.0)):
        b.enter(r, 0, "main").work(r, 0, w, "solve").coll(r, w, 4.1, "MPI_Allreduce").exit(r, 4.1, "main")
    fwd, cp = context(b)
    info = whatif_for_callpaths(fwd.ctx, fwd.excl_time, [cp["main/solve"]])
    assert info["gain"] == pytest.approx(3.0) and info["fixed_run_length"] == pytest.approx(1.1)
    assert info["ranks_shortened"] == {"0": pytest.approx(0.75)}


def test_a_broadcast_waits_for_its_root_and_the_root_for_nobody():
    """Root 1 works 3 and broadcasts; ranks 0 and 2 work 1 and wait in MPI_Bcast until 3.2.  Fixing
    the root (3 -> 1): every rank enters at 1 and leaves 0.2 after the root entered: 1.2."""
    b = Builder(3)
    for r, w in enumerate((1.0, 3.0, 1.0)):
        b.enter(r, 0, "main").work(r, 0, w, "solve").coll(r, w, 3.2, "MPI_Bcast", root=1).exit(r, 3.2, "main")
    fwd, cp = context(b)
    res = retime(fwd.ctx, [cp["main/solve"]], shrink_fractions(fwd.ctx, fwd.excl_time, [cp["main/solve"]]))
    assert end_times(fwd.ctx, res.time) == pytest.approx([1.2, 1.2, 1.2])


def test_waiting_nobody_explains_stays():
    """Rank 1 waits for rank 0's message, which rank 0 sends after working 2; shortening rank 1's own
    work (it is not what anybody waited for) cannot move the receive: the run stays 3 long."""
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 2, "produce").send(0, 2, 2, dst=1).exit(0, 3, "main")
    b.enter(1, 0, "main").work(1, 0, 1, "consume").recv(1, 1, 2.5, src=0).exit(1, 3, "main")
    fwd, cp = context(b)
    res = retime(fwd.ctx, [cp["main/consume"]], np.array([0.0, 0.5]))
    assert end_times(fwd.ctx, res.time) == pytest.approx([3.0, 3.0]) and res.gain == pytest.approx(0.0)


def test_a_waitall_completes_when_its_latest_message_was_sent():
    """Rank 1 posts receives from ranks 0 and 2 at 0.1 and waits in MPI_Waitall until 3.1: rank 2 sent
    at 0.1, rank 0 only at 3.0 after working 3.  The shim stamps both completions at the Waitall's end,
    so the early message must not keep the late one's waiting.  Fixing rank 0's work (3 -> the median
    0.1): rank 0 sends at 0.1, the Waitall ends 0.1 after the last send, at 0.2."""
    b = Builder(3)
    b.enter(0, 0, "main").work(0, 0, 3.0, "solve").isend(0, 3.0, 3.0, dst=1, req=1)
    b.wait(0, 3.0, 3.1, [("send", 1)]).exit(0, 3.1, "main")
    b.enter(2, 0, "main").work(2, 0, 0.1, "solve").isend(2, 0.1, 0.1, dst=1, req=1)
    b.wait(2, 0.1, 3.1, [("send", 1)]).exit(2, 3.1, "main")
    b.enter(1, 0, "main").work(1, 0, 0.1, "solve").irecv(1, 0.1, 0.1, req=1).irecv(1, 0.1, 0.1, req=2)
    b.wait(1, 0.1, 3.1, [("recv", 2, 2, 0), ("recv", 1, 0, 0)]).exit(1, 3.1, "main")
    fwd, cp = context(b)
    res = retime(fwd.ctx, [cp["main/solve"]], shrink_fractions(fwd.ctx, fwd.excl_time, [cp["main/solve"]]))
    assert end_times(fwd.ctx, res.time)[1] == pytest.approx(0.2)


def test_a_call_whose_message_was_early_keeps_its_own_part_from_its_entry():
    """Rank 0 works 3 in solve, then receives a message rank 1 sent at 2 (early: no waiting), and the
    MPI_Recv still takes 0.5 (its own part); then it sends to rank 1, whose receive waited from 2 and
    completed 0.1 after that send (the transfer time the trace shows).  Fixing solve (3 -> the lower
    median 0): rank 0 enters the receive at 0; its own 0.5 runs while it waits for the send at 2, and
    the message arrives 0.1 after it: max(0 + 0.5, 2 + 0.1) = 2.1 (not 2 + 0.5).  Rank 0 sends at 2.1;
    rank 1's receive ends max(2 + 0.1, 2.1 + 0.1) = 2.2.  The run: 3.6 -> 2.2."""
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 3, "solve").recv(0, 3, 3.5, src=1).send(0, 3.5, 3.5, dst=1).exit(0, 3.5, "main")
    b.enter(1, 0, "main").work(1, 0, 2, "other").send(1, 2, 2, dst=0).recv(1, 2, 3.6, src=0).exit(1, 3.6, "main")
    fwd, cp = context(b)
    assert retime(fwd.ctx, [cp["main/solve"]], np.zeros(2)).time == pytest.approx(fwd.ctx.time)
    res = retime(fwd.ctx, [cp["main/solve"]], shrink_fractions(fwd.ctx, fwd.excl_time, [cp["main/solve"]]))
    assert end_times(fwd.ctx, res.time) == pytest.approx([2.1, 2.2])
    assert res.gain == pytest.approx(1.4)


def test_a_call_that_waited_takes_the_own_part_of_calls_that_did_not_once_its_message_is_early():
    """Rank 1 receives twice from rank 0: the first message (sent at 0) was there when rank 1 entered
    at 0.5, and that MPI_Recv took 0.1 (its own part); the second was sent at 3, after rank 0's work,
    and the MPI_Recv entered at 1 completed 0.5 after it (a transfer: on a crowded machine the waiting
    receiver runs again only later).  The trace does not show the second call's own part: it is the
    first's, 0.1, not the 0.5 that followed the send.  Fixing the work (3 -> the lower median 0): rank
    0 sends both at 0; the first receive ends max(0.5 + 0.1, 0 + min(0.1, 0.5)) = 0.6, the second
    max(1 + 0.1, 0 + 0.5) = 1.1 (keeping 0.5 from the entry would give 1.5).  The run: 3.5 -> 1.1."""
    b = Builder(2)
    b.enter(0, 0, "main").send(0, 0, 0, dst=1).work(0, 0, 3, "solve").send(0, 3, 3, dst=1).exit(0, 3, "main")
    b.enter(1, 0, "main").work(1, 0, 0.5, "other").recv(1, 0.5, 0.6, src=0).work(1, 0.6, 1, "other")
    b.recv(1, 1, 3.5, src=0).exit(1, 3.5, "main")
    fwd, cp = context(b)
    assert retime(fwd.ctx, [cp["main/solve"]], np.zeros(2)).time == pytest.approx(fwd.ctx.time)
    res = retime(fwd.ctx, [cp["main/solve"]], shrink_fractions(fwd.ctx, fwd.excl_time, [cp["main/solve"]]))
    assert end_times(fwd.ctx, res.time) == pytest.approx([0.0, 1.1])
    assert res.gain == pytest.approx(2.4)


def test_mpi_finalize_ends_when_the_last_rank_entered_it():
    """MPI_Finalize synchronises all ranks: rank 0 works 3 and is in MPI_Finalize [3, 3.2] (the last to
    enter: its own part 0.2); rank 1 entered at 1 and left at 3.3, 0.3 after rank 0's entry (its
    transfer; its own part, not shown, is rank 0's 0.2).  Fixing the work (3 -> the lower median 0):
    rank 0 ends max(0 + 0.2, 1 + min(0.2, 0.3)) = 1.2, rank 1 max(1 + 0.2, 1 + 0.3) = 1.3 (without
    the synchronisation rank 1 would keep its 2.3 s in the call).  The run: 3.3 -> 1.3."""
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 3, "solve").work(0, 3, 3.2, "MPI_Finalize").exit(0, 3.2, "main")
    b.enter(1, 0, "main").work(1, 0, 1, "other").work(1, 1, 3.3, "MPI_Finalize").exit(1, 3.3, "main")
    fwd, cp = context(b)
    assert retime(fwd.ctx, [cp["main/solve"]], np.zeros(2)).time == pytest.approx(fwd.ctx.time)
    res = retime(fwd.ctx, [cp["main/solve"]], shrink_fractions(fwd.ctx, fwd.excl_time, [cp["main/solve"]]))
    assert end_times(fwd.ctx, res.time) == pytest.approx([1.2, 1.3])
    assert res.gain == pytest.approx(2.0)


def test_one_sided_late_post_and_early_wait_move_with_the_post():
    """GATS: target 1 works 5 (late), posts [5, 5.1] and waits [5.1, 6.6]; origin 0 works 1, its
    MPI_Win_start [1, 5.3] waits for the post (ready 5, own 0.3), puts [5.3, 6], completes [6, 6.5]
    (the post long there: own 0.5).  Target 1's wait awaited the complete's entry 6 (own 0.6).  The
    one-sided calls that waited took 0.3 and 0.6 after: a transfer of 0.45 (their median).  Fixing
    rank 1's work (5 -> the lower median 0): the post enters at 0; the start ends max(1 + 0.3,
    0 + 0.3) = 1.3, the put [1.3, 2], the complete max(2 + 0.5, 0 + 0.45) = 2.5; the wait ends
    max(0.1 + 0.5, 2 + 0.6) = 2.6 (its own part not shown: the early call's 0.5, below the 0.6 it
    showed).  The run: 6.6 -> 2.6."""
    from test_trace_rma import build as rma_build, call, put
    b = Builder(2)
    b.enter(1, 0, "main").work(1, 0, 5, "late")
    call(b, 1, 5, 5.1, "MPI_Win_post", (0,))
    call(b, 1, 5.1, 6.6, "MPI_Win_wait")
    b.exit(1, 6.6, "main")
    b.enter(0, 0, "main").work(0, 0, 1, "other")
    call(b, 0, 1, 5.3, "MPI_Win_start", (1,))
    put(b, 0, 5.3, 6, 1)
    call(b, 0, 6, 6.5, "MPI_Win_complete")
    b.exit(0, 6.5, "main")
    fwd = forward_replay(build_context(rma_build(b)))
    names = callpath_names(fwd.ctx.nest, fwd.ctx.trace.regions)
    late = [names.index("main/late")]
    assert retime(fwd.ctx, late, np.zeros(2)).time == pytest.approx(fwd.ctx.time)
    res = retime(fwd.ctx, late, shrink_fractions(fwd.ctx, fwd.excl_time, late))
    assert end_times(fwd.ctx, res.time) == pytest.approx([2.5, 2.6])
    assert res.gain == pytest.approx(4.0)


def test_two_verdict_lines_of_one_loop_nest_are_fixed_together():
    """zeusmp: the boundary loop is a LOOP at lines 29-31 on the last rank and a COMP at 30-31 on rank 0
    (two inlined copies); each verdict line's what-if fixes both, so both ranks are shortened."""
    b = Builder(4)
    for r, (name, w) in enumerate((("bval_comp", 2.0), ("interior", 0.5), ("interior", 0.5), ("bval_loop", 2.0))):
        b.enter(r, 0, "main").work(r, 0, w, name).coll(r, w, 2.1, "MPI_Allreduce").exit(r, 2.1, "main")
    trace = b.build()
    vertex = {"bval_loop": 13, "bval_comp": 15, "interior": 20}
    for reg in trace.regions:
        reg.vertex = vertex.get(reg.name, -1)
    fwd = forward_replay(build_context(trace))
    spans = {13: ("zeusmp.c", 29, 31), 15: ("zeusmp.c", 30, 31), 20: ("zeusmp.c", 40, 41)}
    causes = [{"callpaths": ["main/bval_loop"], "vertex": 13}, {"callpaths": ["main/bval_comp"], "vertex": 15}]
    from scalgraph.trace.retime import add_whatif
    add_whatif(causes, fwd, spans)
    # both boundary ranks (0 and 3) lose their 2.0 (down to the lower median, 0): the Allreduce ends at
    # the interior ranks' entry, 0.5, + 0.1
    assert [c["whatif"]["fixed_run_length"] for c in causes] == pytest.approx([0.6, 0.6])
    add_whatif(causes, fwd, None)               # without the PSG each line fixes only its own rank
    assert [c["whatif"]["fixed_run_length"] for c in causes] == pytest.approx([2.1, 2.1])


def test_an_experiments_smaller_scale_gets_the_fix_diagnosed_at_the_largest():
    """zeusmp-like: at 4 ranks only rank 0 runs bval (2 s) before the Allreduce; at 2 ranks both do.
    Diagnosed at 4 ranks, the typical rank spends 0 s in bval, so the fix removes it at 2 ranks too
    (where both ranks' own median, 2 s, would keep it): there the run goes from 3.1 to 1.1."""
    from scalgraph.trace.retime import add_whatif, whatif_at_scales, whatif_line

    def trace(bval_ranks, n):
        b = Builder(n)
        for r in range(n):
            b.enter(r, 0, "main").work(r, 0, 1, "common")
            end = 3.0 if r in bval_ranks else 1.0
            if r in bval_ranks:
                b.work(r, 1, 3, "bval")
            b.coll(r, end, 3.1, "MPI_Allreduce").exit(r, 3.1, "main")
        return b.build()

    fwd = forward_replay(build_context(trace({0}, 4)))
    causes = [{"callpaths": ["main/bval"], "file": "zeusmp.c", "line": 29}]
    add_whatif(causes, fwd)
    w = causes[0]["whatif"]
    assert w["gain"] == pytest.approx(2.0) and w["typical_seconds"] == 0.0
    whatif_at_scales(causes, {2: trace({0, 1}, 2)}, 4)
    assert w["by_scale"]["2"] == {"gain": pytest.approx(2.0), "run_length": pytest.approx(3.1)}
    assert w["by_scale"]["4"]["gain"] == pytest.approx(2.0)
    assert "p=2: 2 s of 3.1 s" in whatif_line(causes[0])


def test_a_loop_every_rank_runs_keeps_its_scaling_at_the_smaller_scale():
    """balanced-like: every rank runs the loop, superlinear (1.0 s per rank at 4 ranks, 2.8 s at 2,
    not 2.0); at 4 ranks the last half of rank 3's block has twice the work per cell (1.5 s), at 2
    ranks that half block is the last quarter of rank 1's (2.8 + 0.7 = 3.5 s).  The extra is 1/9 of
    the loop's time summed over the ranks at both scales (0.5 of 4.5, 0.7 of 6.3).  Fixed, every
    rank enters the Allreduce at the typical rank's time, 1.0 and 2.8, and leaves 0.1 s later: the
    run goes from 1.6 to 1.1 at 4 ranks and from 3.6 to 2.9 at 2, gains of 0.5 and 0.7.  The former
    rule carried the typical rank of 4 ranks to 2 as ideal strong scaling would (1.0 x 4/2 = 2.0)
    and cut both ranks' loop to it: 3.6 -> 2.1, a gain of 1.5."""
    from scalgraph.trace.retime import add_whatif, whatif_at_scales

    def trace(loops):
        b = Builder(len(loops))
        for r, t in enumerate(loops):
            b.enter(r, 0, "main").work(r, 0, t, "loop").coll(r, t, max(loops) + 0.1, "MPI_Allreduce")
            b.exit(r, max(loops) + 0.1, "main")
        return b.build()

    fwd = forward_replay(build_context(trace([1.0, 1.0, 1.0, 1.5])))
    causes = [{"callpaths": ["main/loop"], "file": "balanced.c", "line": 19}]
    add_whatif(causes, fwd)
    w = causes[0]["whatif"]
    assert w["gain"] == pytest.approx(0.5) and w["extra_share"] == pytest.approx(1 / 9)
    whatif_at_scales(causes, {2: trace([2.8, 3.5])}, 4)
    assert w["by_scale"]["2"] == {"gain": pytest.approx(0.7), "run_length": pytest.approx(3.6)}


@pytest.mark.parametrize("seed", range(6))
def test_random_hybrid_traces_nothing_fixed_keeps_them_and_a_fix_never_lengthens(seed):
    """Random MPI + OpenMP traces (threads as locations, team barriers as collectives): with nothing
    shortened every event keeps its time; shortening any call path's excess never makes the run longer."""
    from test_trace_openmp_patterns import random_hybrid
    trace, _ = random_hybrid(seed)
    fwd = forward_replay(build_context(trace))
    ctx = fwd.ctx
    assert retime(ctx, [0], np.zeros(ctx.nranks)).time == pytest.approx(ctx.time)
    for c in range(ctx.ncallpaths):
        res = retime(ctx, [c], shrink_fractions(ctx, fwd.excl_time, [c]))
        assert res.fixed_run_length <= res.run_length + 1e-9


def loop_with_one_slow_rank(nranks: int, iters: int) -> Builder:
    """Every iteration each rank works 1 (rank 0: 2) and all enter an Allreduce that ends 0.1 after
    rank 0 entered it."""
    b = Builder(nranks)
    for r in range(nranks):
        b.enter(r, 0.0, "main")
        for i in range(iters):
            t0 = 2.1 * i
            w = 2.0 if r == 0 else 1.0
            b.work(r, t0, t0 + w, "solve").coll(r, t0 + w, t0 + 2.1, "MPI_Allreduce")
        b.exit(r, 2.1 * iters, "main")
    return b


def test_a_long_loop_is_retimed_with_few_bytes_per_event_held():
    """2 x 10^4 events: the re-timing's peak (its result of 8 bytes per event included) stays well
    below the 85 bytes per event it once took here (the gaps, a cut mask, gathers of the fractions by
    event, each event's anchor in int64), and the fix never lengthens the run."""
    import tracemalloc
    fwd, cp = context(loop_with_one_slow_rank(4, 800))
    ctx = fwd.ctx
    frac = shrink_fractions(ctx, fwd.excl_time, [cp["main/solve"]])
    assert frac[0] == pytest.approx(0.5) and not frac[1:].any()
    n = len(ctx.time)
    assert n >= 19000
    tracemalloc.start()
    try:
        res = retime(ctx, [cp["main/solve"]], frac)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.run_length == pytest.approx(2.1 * 800)
    assert res.fixed_run_length <= res.run_length + 1e-9
    assert peak / n < 56, f"{peak / n:.1f} bytes per event"
