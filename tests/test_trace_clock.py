"""Clock-condition violations and the controlled logical clock on hand-made traces.

Expected values are derived by hand from the formulas in shared/notes/trace-analysis-reference.md §7
(restated in scalgraph/trace/clock.py).  Most tests use round parameters so the arithmetic is
readable: delta = 0, gamma = 1 (forward amortisation then shifts everything after a jump by the
jump), l_min = 1, initial backward slope m = 0.5 (ramp starts Delta/m before the pre-jump time r*).
Times are abstract units."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import clock
from scalgraph.trace.clock import ClockParams, correct_clocks, find_violations
from tracebuild import Builder

ROUND = ClockParams(delta=0.0, gamma=1.0, l_min_p2p=1.0, l_min_coll=1.0, slope=0.5)


def times(trace):
    return [ev["time"].tolist() for ev in trace.events]


def late_message() -> Builder:
    """Rank 0 sends at 10; rank 1 receives at 8 (its clock is behind): receive before send by 2."""
    b = Builder(2)
    b.enter(0, 0, "main").send(0, 10, 11, dst=1).exit(0, 20, "main")
    b.enter(1, 0, "main").work(1, 1, 5, "work").recv(1, 6, 8, src=0).exit(1, 20, "main")
    return b


def test_detects_receive_before_send():
    v = find_violations(late_message().build())
    assert len(v) == 1
    row = v[0]
    assert clock.MESSAGE_KINDS[row["kind"]] == "point-to-point receive before its send"
    assert (row["recv_rank"], row["recv_index"], row["send_rank"], row["send_index"]) == (1, 4, 0, 2)
    assert row["amount"] == 2.0
    # with a minimum latency of 3 the receive is 5 early
    assert find_violations(late_message().build(), l_min=3.0)["amount"].tolist() == [5.0]


def test_p2p_jump_forward_and_backward_amortisation():
    out, report = correct_clocks(late_message().build(), ROUND)
    # forward: RECV 8 -> 10 + l_min = 11 (jump 3, r* = 8); later events +3 (gamma = 1): 8 -> 11, 20 -> 23.
    # backward: t_L = r* - Delta/m = 8 - 6 = 2; events after t_L before the RECV: c += 0.5 (c - 2):
    # 5 -> 6.5, 6 -> 8.  Events at 0 and 1 stay.
    assert times(out)[1] == [0, 1, 6.5, 8, 11, 11, 23]
    assert times(out)[0] == [0, 10, 10, 11, 20]
    assert report.corrected and report.jumps == 1 and report.max_jump == 3.0 and report.max_shift == 3.0
    assert len(find_violations(out)) == 0


def test_backward_ramp_stops_at_a_send_bound():
    """Rank 1 also sends to rank 2 at 6; rank 2 receives it at 7.5, so that send may move to
    7.5 - l_min = 6.5 at most (slack 0.5).  The plain ramp would move it by 0.5 (6 - 2) = 2."""
    b = Builder(3)
    b.enter(0, 0, "main").send(0, 10, 11, dst=1).exit(0, 20, "main")
    b.enter(1, 0, "main").work(1, 1, 5, "work").send(1, 6, 6.5, dst=2).recv(1, 7, 8, src=0).exit(1, 20, "main")
    b.enter(2, 0, "main").recv(2, 7, 7.5, src=1).exit(2, 20, "main")
    out, _ = correct_clocks(b.build(), ROUND)
    # forward: RECV 8 -> 11 (Delta 3, r* 8); after it +3.  Backward from t_L = 2, m = 0.5:
    #   SEND at 6: slack 0.5, m_i = (3 - 0.5)/(8 - 6) = 1.25 > 0.5, so S* = SEND, m* = 1.25:
    #   [SEND, RECV) += 0.5 + 1.25 (c - 6): SEND 6 -> 6.5, EXIT 6.5 -> 7.625, ENTER Recv 7 -> 8.75;
    #   recurse on (t_L, SEND) with Delta 0.5, m = 0.5/(6 - 2) = 0.125: 5 -> 5.375, ENTER Send 6 -> 6.5.
    assert times(out)[1] == [0, 1, 5.375, 6.5, 6.5, 7.625, 8.75, 11, 11, 23]
    assert times(out)[2] == [0, 7, 7.5, 7.5, 20]
    sent = out.events[1]["time"][out.events[1]["kind"] == tm.SEND][0]
    received = out.events[2]["time"][out.events[2]["kind"] == tm.RECV][0]
    assert received - sent == 1.0                  # exactly at its bound, not past it


def test_forward_amortisation_formula_with_delta_and_gamma():
    """C_i = max(t_i, C_{i-1} + delta, C_{i-1} + gamma (t_i - t_{i-1})) after the jump."""
    b = Builder(2)
    b.enter(0, 0, "main").send(0, 10, 11, dst=1).exit(0, 20, "main")
    b.enter(1, 0, "main").recv(1, 6, 8, src=0).exit(1, 12, "main")
    out, _ = correct_clocks(b.build(), ClockParams(delta=0.01, gamma=0.5, l_min_p2p=1.0, slope=100.0))
    # rank 0: SEND has the same stamp as its ENTER (10): max(10, 10 + 0.01, 10 + 0) = 10.01;
    #   EXIT 11: max(11, 10.02, 10.01 + 0.5) = 11; EXIT main 20 stays.
    # rank 1: RECV (t 8): max(8, 6.01, 6 + 0.5 * 2) = 8 < 10.01 + 1 -> 11.01.
    #   EXIT Recv (t 8, dt 0): max(8, 11.02, 11.01 + 0) = 11.02.
    #   EXIT main (t 12, dt 4): max(12, 11.03, 11.02 + 0.5 * 4) = 13.02.
    # Backward with m = 100: t_L = 8 - 3.01/100 = 7.9699; no event lies between t_L and the RECV.
    assert times(out)[0] == pytest.approx([0, 10, 10.01, 11, 20], abs=1e-12)
    assert times(out)[1] == pytest.approx([0, 6, 11.01, 11.02, 13.02], abs=1e-12)


def test_barrier_exit_before_last_enter():
    b = Builder(3)
    for r, (t0, t1) in enumerate([(1, 5), (2, 5), (6, 7)]):
        b.enter(r, 0, "main").coll(r, t0, t1, "MPI_Barrier").exit(r, 20, "main")
    trace = b.build()
    v = find_violations(trace)
    assert [(int(x["recv_rank"]), int(x["send_rank"]), float(x["amount"])) for x in v] == [(0, 2, 1.0), (1, 2, 1.0)]
    assert set(clock.MESSAGE_KINDS[k] for k in v["kind"]) == {"collective exit before the last enter"}
    out, _ = correct_clocks(trace, ROUND)
    # exits must be >= last enter 6 + 1 = 7 -> rank 0 and 1 jump by 2 from r* = 5; t_L = 5 - 4 = 1.
    # rank 0: ENTER/BEGIN at 1 are not after t_L; COLL_END 5 -> 5 + 0.5 * 4 = 7; main exit 20 -> 22.
    # rank 1: ENTER/BEGIN 2 -> 2.5 (the ENTER is a logical send: bound 7 - 1 = 6, slack 4, no
    #         steeper slope needed); COLL_END 5 -> 7; EXIT 7; main 22.
    assert times(out) == [[0, 1, 1, 7, 7, 22], [0, 2.5, 2.5, 7, 7, 22], [0, 6, 6, 7, 7, 20]]


def test_one_to_n_and_n_to_one():
    b = Builder(3)
    # bcast from root 0, which enters at 6; rank 1 leaves at 3 (before the root entered)
    b.enter(0, 0, "main").coll(0, 6, 7, "MPI_Bcast", root=0, sent=8, recvd=0)
    b.enter(1, 0, "main").coll(1, 1, 3, "MPI_Bcast", root=0, sent=0, recvd=8)
    b.enter(2, 0, "main").coll(2, 1, 8, "MPI_Bcast", root=0, sent=0, recvd=8)
    # reduce to root 2, which leaves at 9 while rank 0 enters at 10
    b.coll(0, 10, 11, "MPI_Reduce", root=2, sent=8, recvd=0)
    b.coll(1, 4, 5, "MPI_Reduce", root=2, sent=8, recvd=0)
    b.coll(2, 8.5, 9, "MPI_Reduce", root=2, sent=8, recvd=8)
    for r in range(3):
        b.exit(r, 30, "main")
    trace = b.build()
    v = find_violations(trace)
    got = sorted((clock.MESSAGE_KINDS[x["kind"]], int(x["recv_rank"]), int(x["send_rank"]), float(x["amount"])) for x in v)
    assert got == [("1-to-N exit before the root's enter", 1, 0, 3.0),
                   ("N-to-1 root exit before a sender's enter", 2, 0, 1.0)]
    out, _ = correct_clocks(trace, ROUND)
    assert len(find_violations(out)) == 0
    exit_of = lambda r, name: out.events[r]["time"][(out.events[r]["kind"] == tm.EXIT) &
                                                     (out.events[r]["region"] == b.region(name))][0]
    assert exit_of(1, "MPI_Bcast") == 7.0          # root enter 6 + l_min
    assert exit_of(2, "MPI_Reduce") == 11.0        # rank 0's reduce enter 10 + l_min


def test_nonblocking_receive_completed_before_isend():
    b = Builder(2)
    b.enter(0, 0, "main").isend(0, 10, 11, dst=1, req=4).wait(0, 12, 13, [("send", 4)], name="MPI_Wait").exit(0, 20, "main")
    b.enter(1, 0, "main").irecv(1, 2, 3, req=9).wait(1, 5, 8, [("recv", 9, 0)], name="MPI_Wait").exit(1, 20, "main")
    trace = b.build()
    v = find_violations(trace)
    assert len(v) == 1 and v[0]["recv_rank"] == 1 and v[0]["amount"] == 2.0   # IRECV at 8, ISEND at 10
    out, _ = correct_clocks(trace, ROUND)
    irecv = out.events[1]["time"][out.events[1]["kind"] == tm.IRECV][0]
    assert irecv == 11.0 and len(find_violations(out)) == 0


def test_scan_and_init_finalize_are_logical_messages():
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 1, "MPI_Init").coll(0, 5, 6, "MPI_Scan").work(0, 7, 8, "MPI_Finalize").exit(0, 9, "main")
    b.enter(1, 0, "main").work(1, 2, 3, "MPI_Init").coll(1, 3.5, 4, "MPI_Scan").work(1, 7, 8, "MPI_Finalize").exit(1, 9, "main")
    v = find_violations(b.build())
    got = sorted((clock.MESSAGE_KINDS[x["kind"]], int(x["recv_rank"]), float(x["amount"])) for x in v)
    # Init: rank 0 leaves at 1 before rank 1 entered at 2.  Scan: rank 1 (comm rank 1) leaves at 4,
    # before rank 0 (comm rank 0 <= 1) entered at 5.  Rank 0's scan exit depends only on itself.
    assert got == [("MPI_Init/Finalize exit before the last enter", 0, 1.0),
                   ("scan exit before a lower rank's enter", 1, 1.0)]


def test_no_violation_leaves_the_trace_alone():
    b = Builder(2)
    b.enter(0, 0, "main").send(0, 1, 2, dst=1).exit(0, 9, "main")
    b.enter(1, 0, "main").recv(1, 1, 4, src=0).exit(1, 9, "main")
    trace = b.build()
    out, report = correct_clocks(trace)
    assert not report.corrected and len(report.violations) == 0
    assert times(out) == times(trace)
    assert "clock condition holds" in report.summary()
    # forced, with delta 0 and gamma 1 and slack everywhere, nothing moves either
    out, report = correct_clocks(trace, ClockParams(delta=0.0, gamma=1.0, l_min_p2p=1.0), force=True)
    assert report.corrected and report.jumps == 0 and times(out) == times(trace)


def test_linear_offset_interpolation_then_clc():
    """Rank 1's clock is 2 units behind at time 0 and 4 behind at time 20 (offset = reference -
    local = 2 ... 4), so t' = t + 2 + 0.1 t.  Its RECV at 8 becomes 10.8, after the SEND at 10:
    no receive precedes its send any more, so the CLC (which runs only when there is a violation)
    does not run, although 10.8 is closer than l_min = 1 to the send."""
    trace = late_message().build()
    trace.meta["clock_offsets"] = {"1": [[0.0, 2.0], [20.0, 4.0]]}
    out, report = correct_clocks(trace, ROUND)
    assert report.offsets_applied
    interpolated = [t + 2 + 0.1 * t for t in [0, 1, 5, 6, 8, 8, 20]]
    assert interpolated[4] == pytest.approx(10.8)
    assert len(report.violations) == 0
    assert not report.corrected
    assert times(out)[1] == pytest.approx(interpolated)
    assert "clock_offsets" not in out.meta and "clock_offsets" in trace.meta   # input untouched


def test_offset_interpolation_repairs_what_it_can_and_clc_the_rest():
    trace = late_message().build()
    trace.meta["clock_offsets"] = {"1": [[0.0, 1.0], [20.0, 1.0]]}     # constant +1: RECV 8 -> 9 < 10
    out, report = correct_clocks(trace, ROUND)
    assert report.offsets_applied and report.corrected and report.violations["amount"].tolist() == [1.0]
    # after +1: [1, 2, 6, 7, 9, 9, 21]; RECV 9 -> 11 (Delta 2, r* 9), t_L = 9 - 4 = 5:
    # 6 -> 6.5, 7 -> 8; after: 11, 23.
    assert times(out)[1] == [1, 2, 6.5, 8, 11, 11, 23]


def test_bad_parameters_and_offsets():
    with pytest.raises(UserError, match="gamma"):
        ClockParams(gamma=0.0)
    trace = late_message().build()
    trace.meta["clock_offsets"] = {"7": [[0, 1]]}
    with pytest.raises(UserError, match="not a rank of this trace"):
        correct_clocks(trace)
    trace.meta["clock_offsets"] = {"1": "soon"}
    with pytest.raises(UserError, match="pairs"):
        correct_clocks(trace)


def test_cyclic_messages_fail_cleanly_instead_of_hanging():
    """Both ranks receive before they send to each other: impossible in MPI (deadlock); the CLC
    cannot order it and says so."""
    b = Builder(2)
    b.enter(0, 0, "main").recv(0, 1, 2, src=1).send(0, 3, 4, dst=1).exit(0, 9, "main")
    b.enter(1, 0, "main").recv(1, 1, 2, src=0).send(1, 3, 4, dst=0).exit(1, 9, "main")
    with pytest.raises(UserError, match="cycle"):
        correct_clocks(b.build(), force=True)


def test_report_summary_names_counts():
    _, report = correct_clocks(late_message().build(), ROUND)
    text = report.summary()
    assert "1 clock-condition violations (1 point-to-point receive before its send)" in text
    assert "1 receives moved forward" in text
    assert "rank 1 event 4 is 2000000.000 us early for rank 0 event 2" in text    # units are seconds: 2 s
