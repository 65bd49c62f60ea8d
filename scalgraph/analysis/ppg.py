"""Program Performance Graph (seed 003 §III-C) of one scale, as arrays.

The PPG is the PSG duplicated per rank plus inter-process edges.  Nothing is duplicated in memory:
a PPG vertex is a pair (vertex, rank), its performance vector is column `vertex`, row `rank` of
the RunProfile arrays, and the intra-process edges are the same for every rank, so they are two
[V] arrays computed once from the PSG.  Only the communication edges are per rank.

Dependence edges, pointing *backwards* (from a vertex to the vertex it waited on / came after),
which is the direction Algorithm 1 walks:

* data dependence  v -> the vertex executed just before v in its process: the previous sibling in
  execution order, or the parent when v is the first child (entering a loop body, branch or
  function comes right after its header).  The root has none (-1).
* control dependence  LOOP/BRANCH/CALL/FUNCTION v (with children) -> its last child, i.e. the end
  of its body: "when a Loop vertex is found, the traversal continues from the end vertex of this
  loop" (seed 003 §IV-B).  -1 for vertices without children.
* communication dependence (per rank), built from the shim's dependence rows:
  p2p: a RECV row at receiver b (peer a, tag, comm) is matched with the SEND row at a (peer b,
  same comm, same tag if one exists, else any tag); the edge goes receiver vertex@b -> sender
  vertex@a and carries the receiver's waiting time.  A SEND row with waiting time (a synchronous
  send blocked on a late receiver) gives the reverse edge sender@a -> receiver@b.
  collectives: a COLL row connects the vertex to all members of its communicator.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalgraph.model.profile import DEP_COLL, DEP_RECV, DEP_SEND, RunProfile
from scalgraph.model.psg import PSG


def intra_process_dependences(psg: PSG) -> tuple[np.ndarray, np.ndarray]:
    """(data, control): [V] arrays of the backward intra-process edges, the same for every rank."""
    n = len(psg)
    data = np.full(n, -1, dtype=np.int64)
    control = np.full(n, -1, dtype=np.int64)
    for v in range(n):
        kids = psg.children[v]
        if kids:
            control[v] = kids[-1]
            prev = v
            for c in kids:
                data[c] = prev
                prev = c
    return data, control


@dataclass
class PPG:
    psg: PSG
    profile: RunProfile
    data_dep: np.ndarray         # [V]
    control_dep: np.ndarray      # [V]
    # communication edges, sorted by (src_rank, src_vertex); src waited on dst
    edge_src: np.ndarray         # [E] key src_rank * V + src_vertex
    edge_dst_rank: np.ndarray    # [E]
    edge_dst_vertex: np.ndarray  # [E]
    edge_wait: np.ndarray        # [E] seconds waited on this edge
    # collectives: (rank, vertex) -> communicator ids; (rank, comm) -> vertices
    coll_comms: dict
    coll_vertices: dict

    @property
    def nranks(self) -> int:
        return self.profile.nranks

    def comm_edges(self, vertex: int, rank: int) -> list[tuple[int, int, float]]:
        """(dst_vertex, dst_rank, wait) of the communication edges leaving vertex@rank."""
        key = rank * self.profile.nvertices + vertex
        lo, hi = np.searchsorted(self.edge_src, [key, key + 1])
        return [(int(self.edge_dst_vertex[e]), int(self.edge_dst_rank[e]), float(self.edge_wait[e]))
                for e in range(lo, hi)]

    def is_collective(self, vertex: int, rank: int) -> bool:
        return (rank, vertex) in self.coll_comms

    def collective_partners(self, vertex: int, rank: int) -> list[tuple[int, int]]:
        """(vertex, rank) of every participant of the collective(s) at vertex@rank, itself included.
        A partner that recorded the same vertex on that communicator uses it (SPMD); otherwise the
        vertex where it recorded the most collectives on that communicator."""
        out = {}
        for comm in self.coll_comms.get((rank, vertex), ()):
            for member in self.profile.comm_members.get(comm, [rank]):
                verts = self.coll_vertices.get((member, comm))
                if not verts:
                    continue
                out[member] = vertex if vertex in verts else max(verts, key=verts.get)
        return [(v, r) for r, v in sorted(out.items())]


def build_ppg(psg: PSG, profile: RunProfile) -> PPG:
    data, control = intra_process_dependences(psg)
    deps = profile.deps
    nv = profile.nvertices
    src, dst_r, dst_v, wait = [], [], [], []

    sends = deps[deps["kind"] == DEP_SEND]
    # (sender, receiver, comm, tag) -> sender vertex, and (sender, receiver, comm) as a fallback;
    # the row with the most calls wins when several vertices match
    exact: dict = {}
    loose: dict = {}
    for row in sorted(sends.tolist(), key=lambda r: r[6]):
        rank, vertex, _, peer, tag, comm = row[:6]
        exact[(rank, peer, comm, tag)] = vertex
        loose[(rank, peer, comm)] = vertex
    recvs = deps[deps["kind"] == DEP_RECV]
    recv_index: dict = {}
    for row in sorted(recvs.tolist(), key=lambda r: r[6]):
        rank, vertex, _, peer, tag, comm, _, _, w = row
        recv_index[(rank, peer, comm, tag)] = vertex
        recv_index.setdefault((rank, peer, comm), vertex)
        if peer < 0:
            continue
        sv = exact.get((peer, rank, comm, tag), loose.get((peer, rank, comm)))
        if sv is not None:
            src.append(rank * nv + vertex), dst_r.append(peer), dst_v.append(sv), wait.append(w)
    for row in sends.tolist():
        rank, vertex, _, peer, tag, comm, _, _, w = row
        if w <= 0 or peer < 0:
            continue
        rv = recv_index.get((peer, rank, comm, tag), recv_index.get((peer, rank, comm)))
        if rv is not None:
            src.append(rank * nv + vertex), dst_r.append(peer), dst_v.append(rv), wait.append(w)

    order = np.argsort(np.asarray(src, dtype=np.int64), kind="stable")
    coll_comms: dict = {}
    coll_vertices: dict = {}
    for rank, vertex, _, _, _, comm, count, *_ in deps[deps["kind"] == DEP_COLL].tolist():
        coll_comms.setdefault((rank, vertex), set()).add(comm)
        per = coll_vertices.setdefault((rank, comm), {})
        per[vertex] = per.get(vertex, 0) + count
    return PPG(psg, profile, data, control,
               np.asarray(src, dtype=np.int64)[order], np.asarray(dst_r, dtype=np.int64)[order],
               np.asarray(dst_v, dtype=np.int64)[order], np.asarray(wait, dtype=float)[order],
               coll_comms, coll_vertices)
