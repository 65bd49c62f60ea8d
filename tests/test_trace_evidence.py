"""Trace evidence for `scalgraph detect` (scalgraph/trace/evidence.py): the replay's wait states give
exact edges, MPI time no pattern classifies stays waiting, and an MPI vertex's own time is never
larger than in profile mode."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalgraph.model.profile import DEP_COLL, DEP_DTYPE, DEP_RECV, DEP_SEND, empty_profile
from scalgraph.trace import evidence, forward
from tracebuild import Builder


def profile(nranks: int, nvertices: int, rows: list[tuple]):
    """rows: (rank, vertex, kind, peer, wait); time = wait + 0.5 at each row's vertex."""
    prof = empty_profile(nranks, nvertices)
    deps = np.zeros(len(rows), DEP_DTYPE)
    for i, (r, v, k, q, w) in enumerate(rows):
        deps[i] = (r, v, k, q, 0, 0, 1, 8, w)
        prof.wait[r, v] += w
    prof.time[:] = prof.wait + 0.5
    prof.deps = deps
    return prof


def own(prof) -> np.ndarray:
    return np.maximum(prof.time - prof.wait, 0.0)


def test_unclassified_wait_completing_isends_stays_waiting():
    """Rank 0's MPI_Wait (vertex 5) blocked 2 s completing Isends to rank 1; the trace classifies
    nothing there: the waiting and the edge stay as the profile measured them."""
    prof = profile(2, 8, [(0, 5, DEP_SEND, 1, 2.0), (1, 6, DEP_RECV, 0, 0.3)])
    out = evidence.profile_with_trace_waits(prof, {(1, 6, DEP_RECV, 0): 0.0005})
    assert out.wait[0, 5] == 2.0 and own(out)[0, 5] == pytest.approx(0.5)
    assert out.deps["wait"].tolist() == [2.0, 0.3]
    assert out.wait[1, 6] == pytest.approx(0.3)


def test_exact_edges_and_the_profile_remainder():
    """A Waitall (rank 1, vertex 7) the profile split evenly over two senders; the trace says rank 0
    caused 1.8 s of it: rank 0's edge gets 1.8 plus its share of the unexplained 0.2."""
    prof = profile(3, 8, [(1, 7, DEP_RECV, 0, 1.0), (1, 7, DEP_RECV, 2, 1.0), (1, 7, DEP_SEND, 0, 0.0)])
    out = evidence.profile_with_trace_waits(prof, {(1, 7, DEP_RECV, 0): 1.8})
    assert out.deps["wait"] == pytest.approx([1.9, 0.1, 0.0])
    assert out.wait[1, 7] == pytest.approx(2.0)
    assert prof.deps["wait"].tolist() == [1.0, 1.0, 0.0]          # the input is not modified


def test_trace_waits_beyond_the_profile_raise_waiting():
    prof = profile(2, 4, [(1, 2, DEP_RECV, 0, 0.4)])
    out = evidence.profile_with_trace_waits(prof, {(1, 2, DEP_RECV, 0): 0.7})
    assert out.wait[1, 2] == pytest.approx(0.7) and out.deps["wait"] == pytest.approx([0.7])
    assert own(out)[1, 2] == pytest.approx(0.2)


def test_late_receiver_goes_to_the_send_row_and_collectives_to_the_coll_row():
    prof = profile(2, 6, [(0, 1, DEP_SEND, 1, 0.5), (0, 1, DEP_RECV, 1, 0.5), (0, 3, DEP_COLL, -1, 0.2)])
    out = evidence.profile_with_trace_waits(prof, {(0, 1, DEP_SEND, 1): 0.9, (0, 3, DEP_COLL, 1): 0.25,
                                                   (0, 3, DEP_COLL, -1): 0.05})
    assert out.deps["wait"] == pytest.approx([0.95, 0.05, 0.3])
    assert out.wait[0, 1] == pytest.approx(1.0) and out.wait[0, 3] == pytest.approx(0.3)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.sampled_from([DEP_SEND, DEP_RECV, DEP_COLL]),
                          st.integers(-1, 2), st.floats(0, 3)), min_size=1, max_size=12),
       st.dictionaries(st.tuples(st.integers(0, 2), st.integers(0, 3), st.sampled_from([DEP_SEND, DEP_RECV, DEP_COLL]),
                                 st.integers(-1, 2)), st.floats(0, 3), max_size=8))
def test_never_less_waiting_than_the_profile(rows, waits):
    prof = profile(3, 4, rows)
    out = evidence.profile_with_trace_waits(prof, waits)
    assert np.all(out.wait >= prof.wait) and np.all(own(out) <= own(prof) + 1e-12)
    for r in range(3):
        for v in range(4):
            at = (prof.deps["rank"] == r) & (prof.deps["vertex"] == v)
            before, after = prof.deps["wait"][at].sum(), out.deps["wait"][at].sum()
            assert after >= before - 1e-9                                     # edges keep the profile's waiting
            assert after <= max(before, sum(x for k, x in waits.items() if k[:2] == (r, v))) + 1e-9


def test_waits_by_vertex_from_a_replay():
    """Late Sender at rank 1's MPI_Recv (vertex 4) caused by rank 0, and Late Receiver at rank 0's
    MPI_Ssend (vertex 3), keyed by the row kind the waiting rank records."""
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 2, "f").send(0, 2, 2.1, dst=1, tag=1)
    b.send(0, 2.1, 3.2, dst=1, tag=2, name="MPI_Ssend").exit(0, 4, "main")
    b.enter(1, 0, "main").recv(1, 0.5, 2.2, src=0, tag=1).work(1, 2.2, 3.0, "g").recv(1, 3.0, 3.2, src=0, tag=2)
    b.exit(1, 4, "main")
    tr = b.build()
    vertex = {"MPI_Recv": 4, "MPI_Ssend": 3}
    for reg in tr.regions:
        reg.vertex = vertex.get(reg.name, -1)
    got = evidence.waits_by_vertex(forward.forward_replay(forward.build_context(tr)))
    assert got == pytest.approx({(1, 4, DEP_RECV, 0): 1.5, (0, 3, DEP_SEND, 1): 0.9})
