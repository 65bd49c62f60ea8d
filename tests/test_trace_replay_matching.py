"""Message, request, region and collective matching on hand-made traces."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import matching
from tracebuild import Builder


def _prep(b: Builder):
    tr = b.build()
    flat = matching.flatten(tr)
    nest = matching.match_regions(flat)
    return tr, flat, nest


def _local(flat, g):
    return (int(flat.rank[g]), int(g - flat.offsets[flat.rank[g]]))


def test_regions_pair_and_callpaths():
    b = Builder(1)
    b.enter(0, 0, "main").work(0, 1, 2, "f").enter(0, 3, "g").work(0, 4, 5, "f").exit(0, 6, "g").exit(0, 7, "main")
    tr, flat, nest = _prep(b)
    names = matching.callpath_names(nest, tr.regions)
    assert sorted(names) == ["main", "main/f", "main/g", "main/g/f"]
    # ENTER 0 pairs with the last EXIT
    assert nest.partner[0] == 7 and nest.partner[7] == 0
    assert names[nest.callpath[5]] == "main/g/f"
    # after g/f exits, the time is g's again; after main/f exits, it is main's
    assert names[nest.cp_after[5]] == "main/g" and names[nest.cp_after[2]] == "main"


def test_stray_exit_is_a_user_error():
    b = Builder(1)
    b.enter(0, 0, "main").exit(0, 1, "main").exit(0, 2, "main")
    with pytest.raises(UserError, match="EXIT without a matching ENTER"):
        _prep(b)


def test_non_overtaking_fifo_per_tag():
    b = Builder(2)
    # rank 0 sends tag 1, tag 2, tag 1; rank 1 receives tag 2 first, then both tag 1 in order
    b.send(0, 0, 1, dst=1, tag=1).send(0, 2, 3, dst=1, tag=2).send(0, 4, 5, dst=1, tag=1)
    b.recv(1, 0, 3, src=0, tag=2).recv(1, 4, 5, src=0, tag=1).recv(1, 6, 7, src=0, tag=1)
    tr, flat, nest = _prep(b)
    m = matching.match_messages(flat, nest)
    pairs = sorted((flat.ev["time"][s], flat.ev["time"][r]) for s, r in zip(m.send_evt, m.recv_evt))
    # send at 0 (tag 1) -> first tag-1 receive (event at 5); send at 2 (tag 2) -> receive at 3
    assert pairs == [(0.0, 5.0), (2.0, 3.0), (4.0, 7.0)]
    assert len(m.unmatched_send) == 0 and len(m.unmatched_recv) == 0


def test_nonblocking_matched_by_post_order_and_waitall():
    b = Builder(2)
    b.isend(0, 0, 1, dst=1, req=7, tag=0).isend(0, 1, 2, dst=1, req=8, tag=0)
    b.wait(0, 2, 3, [("send", 8), ("send", 7)])
    # receiver posts request 5 then 6; completes 6 first in one Waitall
    b.irecv(1, 0, 0.5, req=5).irecv(1, 0.5, 1, req=6)
    b.wait(1, 1, 4, [("recv", 6, 0, 0), ("recv", 5, 0, 0)])
    tr, flat, nest = _prep(b)
    m = matching.match_messages(flat, nest)
    req = flat.ev["request"]
    got = sorted((int(req[s]), int(req[r])) for s, r in zip(m.send_evt, m.recv_evt))
    assert got == [(7, 5), (8, 6)]          # first send -> first posted receive
    assert all(tr.regions[flat.ev["region"][o]].name == "MPI_Irecv" for o in m.post_op)
    assert all(tr.regions[flat.ev["region"][o]].name == "MPI_Waitall" for o in m.recv_op)
    pair = matching.match_requests(flat, tm.ISEND, tm.ISEND_COMPLETE)
    isends = np.flatnonzero(flat.ev["kind"] == tm.ISEND)
    assert all(flat.ev["request"][pair[i]] == flat.ev["request"][i] for i in isends)


def test_request_id_reuse_pairs_with_next_completion():
    b = Builder(2)
    b.isend(0, 0, 1, dst=1, req=3).wait(0, 1, 2, [("send", 3)], name="MPI_Wait")
    b.isend(0, 3, 4, dst=1, req=3).wait(0, 4, 5, [("send", 3)], name="MPI_Wait")
    b.recv(1, 0, 2, src=0).recv(1, 3, 5, src=0)
    tr, flat, nest = _prep(b)
    pair = matching.match_requests(flat, tm.ISEND, tm.ISEND_COMPLETE)
    t = flat.ev["time"]
    isends = np.flatnonzero(flat.ev["kind"] == tm.ISEND)
    assert [(t[i], t[pair[i]]) for i in isends] == [(0.0, 2.0), (3.0, 5.0)]


def test_unmatched_messages_reported():
    b = Builder(2)
    b.send(0, 0, 1, dst=1, tag=4)
    b.recv(1, 0, 1, src=0, tag=5)
    tr, flat, nest = _prep(b)
    m = matching.match_messages(flat, nest)
    assert len(m) == 0 and len(m.unmatched_send) == 1 and len(m.unmatched_recv) == 1


def test_collectives_per_communicator_in_call_order():
    b = Builder(3, comms={0: [0, 1, 2], 1: [2, 0]})
    for r in range(3):
        b.coll(r, r, 5, "MPI_Barrier", comm=0)
    b.coll(2, 6, 7, "MPI_Bcast", comm=1, root=2).coll(0, 6.5, 7, "MPI_Bcast", comm=1, root=2)
    b.coll(2, 8, 9, "MPI_Allreduce", comm=1).coll(0, 8, 9, "MPI_Allreduce", comm=1)
    tr, flat, nest = _prep(b)
    inst = {c.comm: c for c in matching.match_collectives(flat, nest, tr.comms)}
    assert inst[0].end_evt.shape == (1, 3)
    c1 = inst[1]
    assert list(c1.members) == [2, 0] and c1.end_evt.shape == (2, 2)
    names = [[tr.regions[flat.ev["region"][o]].name for o in row] for row in c1.op]
    assert names == [["MPI_Bcast", "MPI_Bcast"], ["MPI_Allreduce", "MPI_Allreduce"]]
    assert list(flat.rank[c1.end_evt[0]]) == [2, 0]


def test_collective_count_mismatch_and_unknown_comm():
    b = Builder(2)
    b.coll(0, 0, 1, "MPI_Barrier")
    with pytest.raises(UserError, match="different numbers of collectives"):
        tr, flat, nest = _prep(b)
        matching.match_collectives(flat, nest, tr.comms)
    b = Builder(2)
    b.coll(0, 0, 1, "MPI_Barrier", comm=9).coll(1, 0, 1, "MPI_Barrier", comm=9)
    tr, flat, nest = _prep(b)
    with pytest.raises(UserError, match="unknown communicator 9"):
        matching.match_collectives(flat, nest, tr.comms)
