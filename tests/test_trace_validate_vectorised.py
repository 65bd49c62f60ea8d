"""validate's vectorised request and message checks say exactly what the former per-event loop
(kept here as the reference only) and the per-key count comparison said, on random inputs."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import validate


def requests_reference(ev: np.ndarray, at: str) -> None:
    sel = np.flatnonzero(np.isin(ev["kind"], (tm.ISEND, tm.ISEND_COMPLETE, tm.IRECV_REQUEST, tm.IRECV)))
    open_send: set[int] = set()
    open_recv: set[int] = set()
    for i, kind, req in zip(sel.tolist(), ev["kind"][sel].tolist(), ev["request"][sel].tolist()):
        if kind == tm.ISEND:
            open_send.add(req)
        elif kind == tm.IRECV_REQUEST:
            open_recv.add(req)
        elif kind == tm.ISEND_COMPLETE:
            if req not in open_send:
                raise UserError(f"{at} event {i}: ISEND_COMPLETE of request {req} that no earlier ISEND opened")
            open_send.discard(req)
        else:
            if req not in open_recv:
                raise UserError(f"{at} event {i}: IRECV of request {req} that no earlier IRECV_REQUEST opened")
            open_recv.discard(req)


def outcome(check, *args) -> str | None:
    try:
        check(*args)
    except UserError as e:
        return str(e)
    return None


def random_requests(rng, n: int, weights) -> np.ndarray:
    ev = tm.make_events(n)
    ev["kind"] = rng.choice([tm.ISEND, tm.ISEND_COMPLETE, tm.IRECV_REQUEST, tm.IRECV, tm.ENTER], n, p=weights)
    ev["request"] = rng.choice([-1, 0, 1, 2, 2**40], n)
    return ev


def test_request_check_equals_the_loop():
    rng = np.random.default_rng(7)
    seen = {"ok": 0, "send": 0, "recv": 0}
    for k in range(1500):
        # opens more likely in half the cases, so that valid sequences are frequent too
        w = [0.3, 0.15, 0.3, 0.15, 0.1] if k % 2 else [0.2, 0.2, 0.2, 0.2, 0.2]
        ev = random_requests(rng, int(rng.integers(0, 25)), w)
        want = outcome(requests_reference, ev, "rank 0")
        assert outcome(validate._check_requests, ev, "rank 0") == want
        seen["ok" if want is None else "send" if "ISEND" in want else "recv"] += 1
    assert min(seen.values()) > 100


def p2p_trace(rng, lose: str) -> tm.Trace:
    nranks = 3
    events = [[] for _ in range(nranks)]
    for _ in range(int(rng.integers(1, 30))):
        src, dst = rng.choice(nranks, 2, replace=False)
        tag, comm = int(rng.choice([0, 5, -3, 2**30])), int(rng.choice([0, 1]))
        events[src].append((tm.SEND, int(dst), tag, comm))
        events[dst].append((tm.RECV, int(src), tag, comm))
    r = int(rng.integers(nranks))
    if lose and events[r]:
        i = int(rng.integers(len(events[r])))
        if lose == "drop":
            events[r].pop(i)
        else:                                    # same number of sends and receives, one tag off
            kind, peer, tag, comm = events[r][i]
            events[r][i] = (kind, peer, tag + 1, comm)
    out = []
    for rows in events:
        ev = tm.make_events(len(rows))
        for i, (kind, peer, tag, comm) in enumerate(rows):
            ev[i]["kind"], ev[i]["peer"], ev[i]["tag"], ev[i]["comm"] = kind, peer, tag, comm
        ev["time"] = np.arange(len(rows), dtype=float)
        out.append(ev)
    return tm.Trace(regions=[], comms={0: [0, 1, 2], 1: [2, 1, 0]}, events=out)


@pytest.mark.parametrize("lose", ["", "drop", "retag"])
def test_message_check_passes_matched_and_names_the_unmatched(lose):
    rng = np.random.default_rng(len(lose))
    for _ in range(200):
        tr = p2p_trace(rng, lose)
        sends = validate._message_keys(tr, validate._SENDS, True)
        recvs = validate._message_keys(tr, validate._RECVS, False)
        matched = sorted(map(tuple, sends.tolist())) == sorted(map(tuple, recvs.tolist()))
        got = outcome(validate._check_messages_matched, tr, "t")
        assert (got is None) == matched
        if not matched:
            assert got.startswith("t: unmatched messages from rank")


def test_packed_rows_fall_back_when_the_spans_do_not_fit():
    a = np.array([[0, 1, -2**31, 0], [1, 0, 2**31 - 1, 2**31 - 1]], np.int64)
    assert validate._packed_rows(a, a[::-1]) is None
    small = np.array([[0, 1, 5, 0], [1, 0, 7, 1]], np.int64)
    pa, pb = validate._packed_rows(small, small[::-1])
    assert sorted(pa.tolist()) == sorted(pb.tolist()) and pa[0] != pa[1]
