"""Every wait-state pattern on a tiny hand-made trace; expected values worked out by hand from the
definitions in shared/notes/trace-analysis-reference.md §3 (times in abstract units)."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.trace import forward, patterns, waitops
from tracebuild import Builder


def replay(b: Builder):
    return forward.forward_replay(forward.build_context(b.build()))


def waits_of(res, key):
    """{rank: (wait, causer, cp_causer)} for one pattern."""
    rows = res.waits[res.waits["pattern"] == patterns.PATTERN_INDEX[key]]
    return {int(r["rank"]): (round(float(r["wait"]), 9), int(r["causer"]), int(r["cp_causer"])) for r in rows}


def total(res, key):
    return float(res.cube[patterns.PATTERN_INDEX[key]].sum())


def test_pattern_table_is_a_tree_with_scalasca_names():
    names = {p.name for p in patterns.PATTERNS}
    for n in ("Late Sender", "Late Sender / Wrong Order", "Late Receiver", "Wait at Barrier",
              "Barrier Completion", "Wait at N x N", "N x N Completion", "Late Broadcast",
              "Early Reduce", "Early Scan"):
        assert n in names
    keys = {p.key for p in patterns.PATTERNS}
    assert all(p.parent is None or p.parent in keys for p in patterns.PATTERNS)
    assert patterns.PATTERNS[patterns.PATTERN_INDEX["late_sender_wrong_order"]].parent == "late_sender"


def test_late_sender():
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 5, "comp").send(0, 5, 5.5, dst=1).exit(0, 6, "main")
    b.enter(1, 0, "main").work(1, 0, 2, "comp").recv(1, 2, 6, src=0).exit(1, 6, "main")
    res = replay(b)
    assert waits_of(res, "late_sender") == {1: (3.0, 0, 0)}     # min(5, 6) - 2
    assert waits_of(res, "late_receiver") == {}
    names = res.ctx.nest
    cp = res.ctx.nest.callpath[res.waits["op"][0]]
    from scalgraph.trace.matching import callpath_names
    assert callpath_names(names, res.ctx.trace.regions)[cp] == "main/MPI_Recv"


def test_late_sender_waitall_counts_only_the_largest():
    b = Builder(3)
    b.send(0, 3, 3.1, dst=2)
    b.send(1, 5, 5.1, dst=2)
    b.irecv(2, 0, 0.1, req=1).irecv(2, 0.1, 0.2, req=2)
    b.wait(2, 1, 6, [("recv", 1, 0, 0), ("recv", 2, 1, 0)])
    res = replay(b)
    assert waits_of(res, "late_sender") == {2: (4.0, 1, 1)}     # max(3-1, 5-1), not the sum


def test_test_calls_never_wait():
    b = Builder(2)
    b.send(0, 5, 5.1, dst=1)
    b.irecv(1, 0, 0.1, req=1).wait(1, 1, 6, [("recv", 1, 0, 0)], name="MPI_Testall")
    assert waits_of(replay(b), "late_sender") == {}


def test_late_sender_wrong_order():
    b = Builder(3)
    b.send(0, 4, 4.1, dst=1, tag=1)
    b.send(2, 0, 0.1, dst=1, tag=2)
    b.recv(1, 1, 4.2, src=0, tag=1).recv(1, 5, 6, src=2, tag=2)
    res = replay(b)
    # first receive waits 4 - 1 = 3; a later receive gets a message sent at 0 < 4: wrong order
    assert waits_of(res, "late_sender") == {1: (3.0, 0, 0)}
    assert waits_of(res, "late_sender_wrong_order") == {1: (3.0, 0, 0)}
    assert waits_of(res, "late_sender_wrong_order_different") == {1: (3.0, 0, 0)}
    assert waits_of(res, "late_sender_wrong_order_same") == {}


def test_no_wrong_order_when_messages_arrive_in_send_order():
    b = Builder(3)
    b.send(0, 4, 4.1, dst=1, tag=1)
    b.send(2, 4.5, 4.6, dst=1, tag=2)
    b.recv(1, 1, 4.2, src=0, tag=1).recv(1, 5, 6, src=2, tag=2)
    assert waits_of(replay(b), "late_sender_wrong_order") == {}


def test_late_receiver():
    b = Builder(2)
    b.send(0, 1, 5, dst=1, name="MPI_Ssend")
    b.work(1, 0, 4, "comp").recv(1, 4, 5, src=0)
    res = replay(b)
    assert waits_of(res, "late_receiver") == {0: (3.0, 1, 1)}   # En(R) - En(S) = 4 - 1
    assert waits_of(res, "late_sender") == {}


def test_eager_send_finished_before_post_is_no_late_receiver():
    b = Builder(2)
    b.send(0, 1, 1.5, dst=1)
    b.recv(1, 4, 5, src=0)
    assert waits_of(replay(b), "late_receiver") == {}


def _coll_all(b, name, enters, exits, comm=0, root=-1, sent=None, recvd=None):
    for i, (r, en) in enumerate(enters.items()):
        b.coll(r, en, exits[r], name, comm=comm, root=root,
               sent=8 if sent is None else sent[r], recvd=8 if recvd is None else recvd[r])


def test_wait_at_barrier_and_barrier_completion():
    b = Builder(3)
    _coll_all(b, "MPI_Barrier", {0: 0, 1: 1, 2: 3}, {0: 4, 1: 4.5, 2: 5})
    res = replay(b)
    # ω = min(max En = 3, Ex) - En
    assert waits_of(res, "wait_barrier") == {0: (3.0, 2, 2), 1: (2.0, 2, 2)}
    # ω = Ex - max(min Ex = 4, max En = 3)
    assert {r: w for r, (w, _, _) in waits_of(res, "barrier_completion").items()} == {1: 0.5, 2: 1.0}


def test_wait_at_nxn_ignores_zero_byte_senders():
    b = Builder(3)
    _coll_all(b, "MPI_Allreduce", {0: 0, 1: 1, 2: 3}, {0: 4, 1: 4.5, 2: 5}, sent={0: 8, 1: 8, 2: 0})
    res = replay(b)
    # the last *sender* entered at 1: rank 0 waits 1; rank 2 (no data sent) cannot cause waiting
    assert waits_of(res, "wait_nxn") == {0: (1.0, 1, 1)}
    # completion over ranks that send and receive (0 and 1): Ex - max(min Ex = 4, max En = 1)
    assert {r: w for r, (w, _, _) in waits_of(res, "nxn_completion").items()} == {1: 0.5}


def test_late_broadcast_on_a_subcommunicator():
    b = Builder(4, comms={0: [0, 1, 2, 3], 5: [3, 1, 0]})
    _coll_all(b, "MPI_Bcast", {3: 1, 1: 4, 0: 2}, {3: 5, 1: 5, 0: 5}, comm=5, root=1,
              recvd={3: 8, 1: 0, 0: 8})
    res = replay(b)
    assert waits_of(res, "late_broadcast") == {3: (3.0, 1, 1), 0: (2.0, 1, 1)}


def test_early_reduce_waits_for_the_latest_sender_as_scout():
    b = Builder(3)
    _coll_all(b, "MPI_Reduce", {0: 0, 1: 2, 2: 3}, {0: 4, 1: 3.5, 2: 3.5}, root=0,
              recvd={0: 8, 1: 0, 2: 0})
    res = replay(b)
    # Scalasca 2.6: the root waits until the latest sender enters (3); that sender (rank 2) is the
    # causer of the delay (seed 000: the last to enter) and where the critical path continues
    assert waits_of(res, "early_reduce") == {0: (3.0, 2, 2)}


def test_early_scan():
    b = Builder(4)
    _coll_all(b, "MPI_Scan", {0: 2, 1: 0, 2: 3, 3: 1}, {r: 5 for r in range(4)})
    res = replay(b)
    # ω_l = min(max_{k<=l} En_k, Ex_l) - En_l: running max 2, 2, 3, 3
    assert waits_of(res, "early_scan") == {1: (2.0, 0, 0), 3: (2.0, 2, 2)}


def test_cube_groups_add_up():
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 5, "comp").send(0, 5, 5.5, dst=1).coll(0, 6, 7, "MPI_Barrier").exit(0, 7, "main")
    b.enter(1, 0, "main").recv(1, 0, 5.5, src=0).coll(1, 5.5, 7, "MPI_Barrier").exit(1, 7, "main")
    res = replay(b)
    assert total(res, "time") == pytest.approx(14.0)
    assert total(res, "mpi") == pytest.approx(0.5 + 1 + 5.5 + 1.5)
    assert total(res, "p2p") == pytest.approx(6.0)
    assert total(res, "late_sender") == pytest.approx(5.0)
    assert total(res, "wait_barrier") == pytest.approx(0.5)
    assert total(res, "p2p") + total(res, "synchronization") == pytest.approx(total(res, "mpi"))


def test_waitops_clamp_remote_after_exit():
    w = waitops.late_sender(np.array([1.0]), np.array([2.0]), np.array([5.0]))
    assert w[0] == 1.0
    assert waitops.clock_violations(np.array([5.0, 1.0]), np.array([2.0, 2.0])) == 1
    keep = waitops.keep_largest_per_group(np.array([3, 3, 4]), np.array([1.0, 2.0, 0.5]))
    assert keep.tolist() == [False, True, True]


def test_events_outside_any_call_are_not_timed():
    from scalgraph.model import trace as tm
    b = Builder(2)
    b.ev(0, 5, tm.SEND, peer=1, comm=0, nbytes=8)          # a SEND with no enclosing MPI call
    b.recv(1, 2, 6, src=0)
    res = replay(b)
    assert waits_of(res, "late_sender") == {} and waits_of(res, "late_receiver") == {}


from hypothesis import HealthCheck, given, settings  # noqa: E402

from test_trace_delay import build_random, random_programs  # noqa: E402


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_programs())
def test_waits_never_exceed_their_call_and_children_fit_their_parent(prog):
    res = replay(build_random(*prog))
    ctx, w = res.ctx, res.waits
    assert np.all(w["wait"] > 0)
    assert np.all(w["wait"] <= ctx.exit_time[w["op"]] - ctx.time[w["op"]] + 1e-12)
    for pat in patterns.PATTERNS:
        kids = patterns.children(pat.key)
        if kids:
            inner = sum(res.cube[patterns.PATTERN_INDEX[k]] for k in kids)
            assert np.all(inner <= res.cube[patterns.PATTERN_INDEX[pat.key]] + 1e-9)


def test_wrong_order_split_by_source():
    b = Builder(3)
    # rank 1 first waits for rank 0's tag-1 message (sent at 4), then receives an older message
    # from rank 0 (tag 2, sent at 0) and an older one from rank 2 (sent at 0.5)
    b.send(0, 0, 0.1, dst=1, tag=2).send(0, 4, 4.1, dst=1, tag=1)
    b.send(2, 0.5, 0.6, dst=1, tag=0)
    b.recv(1, 1, 4.2, src=0, tag=1).recv(1, 5, 6, src=0, tag=2).recv(1, 6, 7, src=2, tag=0)
    res = replay(b)
    assert waits_of(res, "late_sender_wrong_order") == {1: (3.0, 0, 0)}
    assert waits_of(res, "late_sender_wrong_order_same") == {1: (3.0, 0, 0)}
    assert waits_of(res, "late_sender_wrong_order_different") == {}


def test_messages_completed_by_one_waitall_are_not_wrong_order():
    b = Builder(3)
    b.send(0, 4, 4.1, dst=2).send(1, 1, 1.1, dst=2)
    b.irecv(2, 0, 0.1, req=1).irecv(2, 0.1, 0.2, req=2)
    # the Waitall lists rank 0's late message first, rank 1's older one second
    b.wait(2, 0.5, 5, [("recv", 1, 0, 0), ("recv", 2, 1, 0)])
    res = replay(b)
    assert waits_of(res, "late_sender") == {2: (3.5, 0, 0)}
    assert waits_of(res, "late_sender_wrong_order") == {}
