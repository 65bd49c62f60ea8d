"""Delay analysis (seed 000, Algorithm 1): the paper's Figure 3 worked example, hand-checked cases,
and property tests (costs + unexplained = total waiting time, under the paper's s = 1/(ΣΔ + W))."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalgraph.trace import delay, forward, patterns
from scalgraph.trace.matching import callpath_names
from tracebuild import Builder


def analyse(b: Builder):
    fwd = forward.forward_replay(forward.build_context(b.build()))
    return fwd, delay.delay_analysis(fwd)


def costs(fwd, res, which):
    """{(rank, call path name): cost} of the non-zero entries."""
    names = callpath_names(fwd.ctx.nest, fwd.ctx.trace.regions)
    arr = res.short_term if which == "short" else res.long_term
    return {(int(r), names[c]): round(float(arr[c, r]), 9) for c, r in zip(*np.nonzero(arr > 1e-12))}


def figure3() -> Builder:
    """Seed 000 Figure 3, built from the paper's text.  A = rank 0, B = rank 1, C = rank 2.
    A: f for 2, g for 3, then sends S3 to B.  B: h for 1, f for 1, then R3 from A (wait 3, processing 1),
    then sends S4 to C.  C: h 1.5, f 2, g 0.5 (f and g larger than on B), then R4 from B (wait 2).
    (The prose says g is absent on A; the numbers need g absent on B and 3 units on A.)"""
    b = Builder(3)
    b.enter(0, 0, "main").work(0, 0, 2, "f").work(0, 2, 5, "g").send(0, 5, 5, dst=1).exit(0, 7, "main")
    b.enter(1, 0, "main").work(1, 0, 1, "h").work(1, 1, 2, "f").recv(1, 2, 6, src=0)
    b.send(1, 6, 6, dst=2).exit(1, 7, "main")
    b.enter(2, 0, "main").work(2, 0, 1.5, "h").work(2, 1.5, 3.5, "f").work(2, 3.5, 4, "g")
    b.recv(2, 4, 6.5, src=1).exit(2, 7, "main")
    return b


def test_figure3_worked_example():
    """The paper's (and Scalasca's) accounting, the default: the non-waiting part of R3 is a delay
    of MPI_Recv, communication time that made C wait."""
    fwd, res = analyse(figure3())
    w = {int(r["rank"]): float(r["wait"]) for r in res.waits}
    assert w == {1: 3.0, 2: 2.0}                                   # R3 waits 3, R4 waits 2
    assert costs(fwd, res, "short") == {(0, "main/f"): 0.75, (0, "main/g"): 2.25, (1, "main/MPI_Recv"): 0.5}
    assert costs(fwd, res, "long") == {(0, "main/f"): 0.375, (0, "main/g"): 1.125}
    gamma = {int(r["rank"]): g for r, g in zip(res.waits, res.gamma)}
    assert gamma[1] == pytest.approx(1.5) and gamma[2] == 0.0     # Γ[R3] = 1.5, R4 is terminal
    assert res.total == pytest.approx(5.0) and res.unexplained == 0.0
    assert list(res.propagating) == [r["rank"] == 1 for r in res.waits]
    # R4: direct 0.5 (processing of R3), indirect 1.5 (propagated from R3's wait)
    by_rank = {int(r["rank"]): (d, i) for r, d, i in zip(res.waits, res.direct, res.indirect)}
    assert by_rank[2] == pytest.approx((0.5, 1.5)) and by_rank[1] == pytest.approx((3.0, 0.0))


def test_unclassified_mpi_time_is_a_communication_delay():
    """Rank 0 computes f for 1, then spends 2 in an MPI_Wait no pattern classifies (completing an
    Isend), then sends to rank 1, which has been waiting since t = 1.  As in Scalasca, the non-waiting
    time of MPI calls is communication that counts in the processing-time profiles: the excess of
    rank 0 over rank 1 in the interval is the Isend (0.1) and the Wait (2.0), so they share the 1.9
    in proportion; f (1 on both) is no excess."""
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 1, "f").isend(0, 1, 1.1, dst=1, req=5, tag=9)
    b.wait(0, 1.1, 3.1, [("send", 5)], name="MPI_Wait").send(0, 3.1, 3.2, dst=1).exit(0, 4, "main")
    b.enter(1, 0, "main").work(1, 0, 1, "f").recv(1, 1, 1.2, src=0, tag=9).recv(1, 1.2, 3.3, src=0)
    b.exit(1, 4, "main")
    fwd, res = analyse(b)
    assert [round(float(w), 9) for w in res.waits["wait"]] == [1.9]
    assert costs(fwd, res, "short") == {(0, "main/MPI_Isend"): round(1.9 * 0.1 / 2.1, 9),
                                        (0, "main/MPI_Wait"): round(1.9 * 2.0 / 2.1, 9)}
    assert res.total == pytest.approx(1.9) and res.unexplained == 0.0
    mpi = delay.mpi_callpaths(fwd.ctx)
    names = callpath_names(fwd.ctx.nest, fwd.ctx.trace.regions)
    assert {names[c] for c in range(len(names)) if mpi[c]} == {"main/MPI_Isend", "main/MPI_Wait", "main/MPI_Send",
                                                               "main/MPI_Recv"}


def test_message_without_wait_state_is_no_synchronisation_point():
    """Rank 0 runs an audit for 3 after f, receives rank 1's early message without waiting, then sends
    to rank 1, which waited 3.  The message rank 0 took without waiting synchronised nothing
    (Scalasca's rule), so rank 0's interval reaches back over the audit, which gets the cost in
    proportion to rank 0's excess: audit 3 and the receive's 0.1 of communication (rank 1's interval
    holds f and its own send, which rank 0's does not)."""
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 1, "f").work(0, 1, 4, "audit").recv(0, 4, 4.1, src=1)
    b.send(0, 4.1, 4.2, dst=1).exit(0, 5, "main")
    b.enter(1, 0, "main").work(1, 0, 1, "f").send(1, 1, 1.1, dst=0).recv(1, 1.1, 4.3, src=0)
    b.exit(1, 5, "main")
    fwd, res = analyse(b)
    assert [round(float(w), 9) for w in res.waits["wait"]] == [3.0]
    assert costs(fwd, res, "short") == {(0, "main/audit"): round(3.0 * 3.0 / 3.1, 9),
                                        (0, "main/MPI_Recv"): round(3.0 * 0.1 / 3.1, 9)}
    assert delay.synchronising_messages(fwd.ctx).tolist() == (fwd.ctx.msgs.src == 0).tolist()


def test_barrier_delay_goes_to_the_last_rank_in_proportion():
    # ranks 0 and 1 compute 1, rank 2 computes 1 in "f" and 2 in "g": both wait 2 at the barrier
    b = Builder(3)
    for r in (0, 1):
        b.enter(r, 0, "main").work(r, 0, 1, "f").coll(r, 1, 3.5, "MPI_Barrier").exit(r, 4, "main")
    b.enter(2, 0, "main").work(2, 0, 1, "f").work(2, 1, 3, "g").coll(2, 3, 3.5, "MPI_Barrier").exit(2, 4, "main")
    fwd, res = analyse(b)
    assert costs(fwd, res, "short") == {(2, "main/g"): 4.0}        # Δ = {g: 2}, each wait 2 → 4
    assert costs(fwd, res, "long") == {}
    by = res.short_by_pattern.sum(axis=(1, 2))
    assert by[patterns.PATTERN_INDEX["wait_barrier"]] == pytest.approx(4.0) and by.sum() == pytest.approx(4.0)


def test_interval_starts_after_previous_sync_with_the_same_peer():
    # two rounds 0 -> 1; in round 2 rank 0's excess is only the "g" after the first send
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 4, "f").send(0, 4, 4, dst=1).work(0, 4, 7, "g").send(0, 7, 7, dst=1)
    b.exit(0, 8, "main")
    b.enter(1, 0, "main").work(1, 0, 1, "f").recv(1, 1, 4, src=0).work(1, 4, 5, "g").recv(1, 5, 7, src=0)
    b.exit(1, 8, "main")
    fwd, res = analyse(b)
    # wait 1: 3 at t=1 caused by f (4 vs 1); wait 2: 2 at t=5 caused by g (3 vs 1) only, because
    # the interval starts at the end of the previous wait with that peer (t = 4 on both ranks)
    assert costs(fwd, res, "short") == {(0, "main/f"): 3.0, (0, "main/g"): 2.0}
    assert res.unexplained == 0.0


def test_isend_is_no_synchronisation_point():
    # two iterations of Irecv + Isend + Waitall between ranks 0 and 1; in iteration 2 rank 0 also runs
    # g for 1, so rank 1's Waitall waits 3.4 - 2.5 = 0.9.  Both intervals start at the iteration-1
    # Waitall (t = 1.2): the only excess of rank 0 over rank 1 there is g.
    b = Builder(2)
    for r in (0, 1):
        b.enter(r, 0, "main").work(r, 0, 1, "f")
        b.irecv(r, 1, 1.1, req=1).isend(r, 1.1, 1.2, dst=1 - r, req=2)
        b.wait(r, 1.2, 1.3, [("send", 2), ("recv", 1, 1 - r, 0)])
        b.work(r, 1.3, 2.3, "f")
    b.work(0, 2.3, 3.3, "g").irecv(0, 3.3, 3.4, req=1).isend(0, 3.4, 3.5, dst=1, req=2)
    b.wait(0, 3.5, 3.6, [("send", 2), ("recv", 1, 1, 0)]).exit(0, 4, "main")
    b.irecv(1, 2.3, 2.4, req=1).isend(1, 2.4, 2.5, dst=0, req=2)
    b.wait(1, 2.5, 3.6, [("send", 2), ("recv", 1, 0, 0)]).exit(1, 4, "main")
    fwd, res = analyse(b)
    assert [round(float(w), 9) for w in res.waits["wait"]] == [0.9]
    assert costs(fwd, res, "short") == {(0, "main/g"): 0.9}


# --- property: conservation on random valid traces ----------------------------------------------

@st.composite
def random_programs(draw):
    """A random SPMD-like run: per step either a message between two ranks or a collective,
    with random compute in random functions before it; timings follow the blocking semantics."""
    p = draw(st.integers(2, 4))
    steps = draw(st.lists(st.tuples(st.sampled_from(["msg", "nbmsg", "barrier", "allreduce", "bcast", "subreduce"]),
                                    st.integers(0, p - 1), st.integers(0, p - 1),
                                    st.lists(st.floats(0.0, 3.0).map(lambda x: round(x, 3)), min_size=p, max_size=p),
                                    st.lists(st.sampled_from("fgh"), min_size=p, max_size=p)),
                          min_size=1, max_size=12))
    return p, steps


def build_random(p, steps) -> Builder:
    b = Builder(p, comms={0: list(range(p)), 1: [1, 0]})      # comm 1: a sub-communicator in reverse order
    clock = [0.0] * p
    for r in range(p):
        b.enter(r, 0.0, "main")
    for kind, a, c, work, funcs in steps:
        for r in range(p):
            if work[r] > 0:
                b.work(r, clock[r], clock[r] + work[r], funcs[r])
                clock[r] += work[r]
        if kind == "msg":
            if a == c:
                continue
            ts, tr = clock[a], clock[c]
            b.send(a, ts, ts + 0.1, dst=c)
            done = max(ts, tr) + 0.2
            b.recv(c, tr, done, src=a)
            clock[a], clock[c] = ts + 0.1, done
        elif kind == "nbmsg":
            # a exchanges with c by Irecv + Isend + Waitall on both sides
            if a == c:
                continue
            t_a, t_c = clock[a], clock[c]
            for me, other, t0 in ((a, c, t_a), (c, a, t_c)):
                b.irecv(me, t0, t0 + 0.05, req=1).isend(me, t0 + 0.05, t0 + 0.1, dst=other, req=2)
            for me, t_me, t_other in ((a, t_a, t_c), (c, t_c, t_a)):
                other = c if me == a else a
                done = max(t_me, t_other) + 0.3
                b.wait(me, t_me + 0.1, done, [("send", 2), ("recv", 1, other, 0)])
                clock[me] = done
        elif kind == "subreduce":
            # MPI_Reduce to world rank 0 on the sub-communicator {1, 0}: the root leaves after the sender enters
            end = max(clock[0], clock[1]) + 0.1
            b.coll(1, clock[1], clock[1] + 0.05, "MPI_Reduce", comm=1, root=0, recvd=0)
            b.coll(0, clock[0], end, "MPI_Reduce", comm=1, root=0)
            clock[0], clock[1] = end, clock[1] + 0.05
        else:
            name = {"barrier": "MPI_Barrier", "allreduce": "MPI_Allreduce", "bcast": "MPI_Bcast"}[kind]
            if kind == "bcast":
                last = clock[a]
                ends = [max(clock[r], last) + 0.1 if r != a else clock[a] + 0.1 for r in range(p)]
                for r in range(p):
                    b.coll(r, clock[r], ends[r], name, root=a, recvd=0 if r == a else 8)
            else:
                end = max(clock) + 0.1
                for r in range(p):
                    b.coll(r, clock[r], end, name)
                ends = [end] * p
            clock = ends
    for r in range(p):
        b.exit(r, max(clock) + 1, "main")
    return b


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_programs())
def test_delay_costs_plus_unexplained_equal_total_waiting(prog):
    fwd, res = analyse(build_random(*prog))
    total_wait = float(res.waits["wait"].sum())
    assert res.total + res.unexplained == pytest.approx(total_wait, abs=1e-9)
    assert np.all(res.short_term >= -1e-12) and np.all(res.long_term >= -1e-12)
    assert np.all(res.gamma >= -1e-12)
    # each wait splits into its direct and indirect part unless nothing explains it
    split = res.direct + res.indirect
    explained = split > 0
    assert np.allclose(split[explained], res.waits["wait"][explained])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 5.0).map(lambda x: round(x, 3)), min_size=2, max_size=6))
def test_pipeline_chain_is_fully_explained(works):
    """A message chain 0 -> 1 -> ... -> n-1, each rank computing works[r] first: every wait has a
    causer with excess work, communication or waits in its interval, so under the paper's accounting
    (communication counts, the default) costs equal the waiting time exactly."""
    p = len(works)
    b = Builder(p)
    clock = 0.0
    for r in range(p):
        b.enter(r, 0, "main").work(r, 0, works[r], "f")
        if r > 0:
            done = max(clock, works[r]) + 0.1
            b.recv(r, works[r], done, src=r - 1)
            start = done
        else:
            start = works[r]
        if r < p - 1:
            b.send(r, start, start + 0.05, dst=r + 1)
            clock = start
        b.exit(r, 100, "main")
    fwd, res = analyse(b)
    assert res.unexplained == pytest.approx(0.0, abs=1e-12)
    assert res.total == pytest.approx(float(res.waits["wait"].sum()), abs=1e-9)
    p2p = {patterns.PATTERN_INDEX["late_sender"], patterns.PATTERN_INDEX["late_receiver"]}
    assert set(res.waits["pattern"].tolist()) <= p2p


def test_chunked_analysis_equals_one_chunk(monkeypatch):
    b = build_random(4, [("msg", 0, 1, [1.0, 0.2, 0.5, 0.1], "fgh" + "f"), ("barrier", 0, 0, [0.3, 2.0, 0.1, 0.4], "ffgh"),
                         ("msg", 1, 2, [0.5, 0.1, 1.5, 0.2], "ghff"), ("bcast", 3, 0, [0.2, 0.2, 0.9, 1.7], "fffg"),
                         ("allreduce", 0, 0, [1.1, 0.1, 0.1, 0.1], "hhhh")])
    fwd, whole = analyse(b)
    monkeypatch.setattr(delay, "CHUNK", 2)
    chunked = delay.delay_analysis(fwd)
    assert len(whole.waits) > 4
    assert np.allclose(whole.short_term, chunked.short_term) and np.allclose(whole.long_term, chunked.long_term)
    assert np.allclose(whole.gamma, chunked.gamma)


def test_gamma_solver_handles_out_of_order_and_cycles():
    # M[v, w]: wait 1 is charged for wait 0; keys put wait 1 first, so the triangular order fails
    gamma = delay._solve_gamma(np.array([1]), np.array([0]), np.array([0.5]), np.array([2.0, 1.0]),
                               np.array([5.0, 1.0]))
    assert gamma.tolist() == [0.0, 1.0]                  # Γ_1 = 0.5 · (ω_0 + Γ_0)
    from scalgraph.errors import UserError
    with pytest.raises(UserError, match="cycle"):
        delay._solve_gamma(np.array([1, 0]), np.array([0, 1]), np.array([1.0, 1.0]), np.array([2.0, 1.0]),
                           np.array([0.0, 1.0]))
