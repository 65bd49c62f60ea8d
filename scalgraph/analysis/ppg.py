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
    # communication edges, sorted by key src_rank * V + src_vertex; src waited on dst
    edge_src: np.ndarray         # [E]
    edge_dst_rank: np.ndarray    # [E]
    edge_dst_vertex: np.ndarray  # [E]
    edge_wait: np.ndarray        # [E] seconds waited on this edge
    # collective rows, sorted two ways for lookups by (rank, vertex) and by (rank, comm)
    coll_by_vertex: np.ndarray   # DEP_DTYPE rows sorted by (rank, vertex)
    coll_by_comm: np.ndarray     # DEP_DTYPE rows sorted by (rank, comm)
    coll_vertex_keys: np.ndarray  # sort keys of coll_by_vertex (rank * V + vertex)
    coll_comm_keys: np.ndarray   # sort keys of coll_by_comm (_pair_key(rank, comm))

    @property
    def nranks(self) -> int:
        return self.profile.nranks

    def comm_edges(self, vertex: int, rank: int) -> list[tuple[int, int, float]]:
        """(dst_vertex, dst_rank, wait) of the communication edges leaving vertex@rank."""
        key = rank * self.profile.nvertices + vertex
        lo, hi = np.searchsorted(self.edge_src, [key, key + 1])
        return [(int(self.edge_dst_vertex[e]), int(self.edge_dst_rank[e]), float(self.edge_wait[e]))
                for e in range(lo, hi)]

    def _coll_rows(self, rank: int, vertex: int) -> np.ndarray:
        key = rank * self.profile.nvertices + vertex
        lo, hi = np.searchsorted(self.coll_vertex_keys, [key, key + 1])
        return self.coll_by_vertex[lo:hi]

    def is_collective(self, vertex: int, rank: int) -> bool:
        return len(self._coll_rows(rank, vertex)) > 0

    def collective_partners(self, vertex: int, rank: int) -> list[tuple[int, int]]:
        """(vertex, rank) of every participant of the collective(s) at vertex@rank, itself included.
        A partner that recorded the same vertex on that communicator uses it (SPMD); otherwise the
        vertex where it recorded the most collective calls on that communicator."""
        out: dict[int, int] = {}
        by_comm, comm_keys = self.coll_by_comm, self.coll_comm_keys
        for comm in sorted(set(self._coll_rows(rank, vertex)["comm"].tolist())):
            for member in self.profile.comm_members.get(comm, [rank]):
                key = _pair_key(np.array([member]), np.array([comm]))[0]
                lo, hi = np.searchsorted(comm_keys, [key, key + 1])
                if hi == lo:
                    continue
                rows = by_comm[lo:hi]
                same = rows["vertex"] == vertex
                out[member] = vertex if same.any() else int(rows["vertex"][np.argmax(rows["count"])])
        return [(v, r) for r, v in sorted(out.items())]


def _pair_key(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.int64) << 32) + (b.astype(np.int64) & 0xFFFFFFFF)


def _row_keys(rows: np.ndarray) -> np.ndarray:
    """One int64 per row of a small-integer matrix [n x k], equal rows <-> equal keys: each column
    is made dense (offset by its minimum, or renumbered when its range is wide) and the columns are
    combined in mixed radix (a row-wise unique when the product would not fit in 62 bits)."""
    key = np.zeros(len(rows), dtype=np.int64)
    radix = 1
    for col in rows.T.astype(np.int64):
        lo = int(col.min()) if len(col) else 0
        span = (int(col.max()) - lo + 1) if len(col) else 1
        if span <= 4 * len(col) + 16:               # ranks, peers: small ranges, no sort needed
            dense, size = col - lo, span
        else:                                       # tags, communicator ids: renumber
            uniq, dense = np.unique(col, return_inverse=True)
            dense, size = dense.reshape(-1), len(uniq)
        radix *= max(size, 1)
        if radix >= 2 ** 62:
            return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
        key = key * size + dense
    return key


def _match(from_keys: np.ndarray, from_vertex: np.ndarray, from_count: np.ndarray,
           to_keys: np.ndarray) -> np.ndarray:
    """For each row of to_keys ([m x k]), the vertex of the from-row with the same key (the one
    with the most calls when several match), or -1."""
    if len(to_keys) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(from_keys) == 0:
        return np.full(len(to_keys), -1, dtype=np.int64)
    keys = _row_keys(np.vstack([from_keys, to_keys]))
    fk, tk = keys[:len(from_keys)], keys[len(from_keys):]
    order = np.lexsort((from_count, fk))               # by key, then count: the last of a key wins
    fk, fv = fk[order], np.asarray(from_vertex, dtype=np.int64)[order]
    pos = np.searchsorted(fk, tk, side="right") - 1
    hit = (pos >= 0) & (fk[np.maximum(pos, 0)] == tk)
    return np.where(hit, fv[np.maximum(pos, 0)], -1)


def _p2p_edges(deps: np.ndarray, waiting_kind: int, partner_kind: int, only_waiting: bool):
    """Edges from rows of waiting_kind (at rank b, peer a) to the matching partner_kind rows
    (at rank a, peer b): exact tag first, then any tag of the same pair and communicator."""
    mine = deps[(deps["kind"] == waiting_kind) & (deps["peer"] >= 0)]
    if only_waiting:
        mine = mine[mine["wait"] > 0]
    theirs = deps[deps["kind"] == partner_kind]
    cols = lambda rows, a, b: [rows[a], rows[b], rows["comm"]]  # noqa: E731
    t_full = np.stack(cols(theirs, "rank", "peer") + [theirs["tag"]], axis=1)
    m_full = np.stack(cols(mine, "peer", "rank") + [mine["tag"]], axis=1)
    dst = _match(t_full, theirs["vertex"], theirs["count"], m_full)
    loose = _match(t_full[:, :3], theirs["vertex"], theirs["count"], m_full[:, :3])
    dst = np.where(dst >= 0, dst, loose)
    ok = dst >= 0
    return mine["rank"][ok], mine["vertex"][ok], mine["peer"][ok], dst[ok], mine["wait"][ok]


def build_ppg(psg: PSG, profile: RunProfile) -> PPG:
    data, control = intra_process_dependences(psg)
    deps = profile.deps
    nv = profile.nvertices
    # receiver waited on sender; a blocked (synchronous) sender waited on the receiver
    parts = [_p2p_edges(deps, DEP_RECV, DEP_SEND, only_waiting=False),
             _p2p_edges(deps, DEP_SEND, DEP_RECV, only_waiting=True)]
    src_rank, src_vertex, dst_rank, dst_vertex, wait = (np.concatenate([p[i] for p in parts]) for i in range(5))
    src = src_rank.astype(np.int64) * nv + src_vertex
    order = np.argsort(src, kind="stable")
    coll = deps[deps["kind"] == DEP_COLL]
    vkeys = coll["rank"].astype(np.int64) * nv + coll["vertex"]
    vorder = np.argsort(vkeys, kind="stable")
    ckeys = _pair_key(coll["rank"], coll["comm"])
    corder = np.argsort(ckeys, kind="stable")
    return PPG(psg, profile, data, control, src[order], dst_rank[order].astype(np.int64),
               dst_vertex[order].astype(np.int64), wait[order].astype(float),
               coll[vorder], coll[corder], vkeys[vorder], ckeys[corder])
