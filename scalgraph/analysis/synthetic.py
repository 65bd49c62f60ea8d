"""Synthetic PSGs and runs with a known root cause, for tests and benchmarks.

A PSG is written as nested tuples (kind, name, line, [children]); `psg_from_tree` numbers it in
pre-order.  Each scenario returns (psg, {scale: RunProfile}, answer) where `answer` names the vertex
that causes the problem (None for the balanced control), so tests check that detection finds it.
The timings follow what the scenario's program would do: waiting appears where a rank blocks on a
late partner, and dependence rows are what the shim records.
"""
from __future__ import annotations

import numpy as np

from scalgraph.model.profile import DEP_COLL, DEP_DTYPE, DEP_RECV, DEP_SEND, RunProfile, empty_profile
from scalgraph.model.psg import KINDS, PSG

WORLD = 0   # communicator id of MPI_COMM_WORLD in the synthetic runs


def psg_from_tree(tree, file: str = "app.c", function: str = "main") -> PSG:
    g = PSG()

    def add(node, parent: int, depth: int, func: str) -> int:
        kind, name, line, kids = (*node, [])[:4] if len(node) == 3 else node
        v = len(g.kind)
        k = KINDS.index(kind)
        g.kind.append(k), g.name.append(name), g.function.append(func), g.file.append(file)
        g.line_first.append(line), g.line_last.append(line), g.parent.append(parent)
        g.children.append([]), g.instance.append(0), g.local.append(v), g.recursion_target.append(-1)
        g.loop_depth.append(depth)
        if parent >= 0:
            g.children[parent].append(v)
        inner = name if kind == "FUNCTION" else func
        for c in kids:
            add(c, v, depth + (kind == "LOOP"), inner)
        return v

    add(tree, -1, 0, function)
    g.functions = [function]
    g.func_default_inst = [0]
    g.inst_func = [0]
    g.inst_vid = [list(range(len(g.kind)))]
    return g


def vertex_at(psg: PSG, line: int) -> int:
    return psg.line_first.index(line)


def _deps(rows: list[tuple]) -> np.ndarray:
    out = np.zeros(len(rows), dtype=DEP_DTYPE)
    for i, row in enumerate(rows):
        out[i] = row
    return out


def _profile(psg: PSG, p: int, time: np.ndarray, wait: np.ndarray, rows: list[tuple]) -> RunProfile:
    prof = empty_profile(p, len(psg), psg.hash())
    prof.time[:] = time
    prof.wait[:] = wait
    prof.samples[:] = np.rint(time * 200).astype(np.int64)
    mpi = np.array([KINDS[k] == "MPI" for k in psg.kind])
    prof.calls[:, mpi] = 100
    prof.deps = _deps(rows)
    prof.comm_members = {WORLD: list(range(p))}
    # one rank per core, as on a cluster node (not this machine's core count); tests of time-sharing say so
    prof.meta = {"hz": 200, "wall_time": float(time.sum(axis=1).max()), "cores": [p] * p, "ranks_on_host": [p] * p}
    return prof


CG_TREE = ("FUNCTION", "main", 1, [
    ("COMP", "comp", 5),                       # set-up
    ("LOOP", "loop", 10, [
        ("COMP", "comp", 12),                  # sparse mat-vec: rank `slow` does extra work here
        ("MPI", "MPI_Send", 15),               # to the right neighbour
        ("MPI", "MPI_Recv", 16),               # from the left neighbour
        ("MPI", "MPI_Allreduce", 20),          # dot product
    ]),
    ("COMP", "comp", 40),                      # output
])


def cg_like(scales=(2, 4, 8, 16), work: float = 8.0, extra: float = 0.4, slow: int = 1, noise: float = 0.01,
            seed: int = 1):
    """The paper's motivating case: one rank's extra computation reaches its neighbour through a
    p2p exchange, and everybody through the Allreduce."""
    psg = psg_from_tree(CG_TREE, "cg.c")
    rng = np.random.default_rng(seed)
    comp, send, recv, allr = (vertex_at(psg, n) for n in (12, 15, 16, 20))
    runs = {}
    for p in scales:
        t = np.zeros((p, len(psg)))
        w = np.zeros_like(t)
        t[:, vertex_at(psg, 5)] = 0.05
        t[:, vertex_at(psg, 40)] = 0.02
        t[:, comp] = work / p * (1 + noise * rng.standard_normal(p))
        t[slow, comp] += extra
        t[:, send] = 1e-3
        t[:, recv] = 1e-3
        right = (slow + 1) % p
        w[right, recv] = extra                  # waits for the slow rank's message
        w[:, allr] = extra                      # everybody else waits in the dot product
        w[slow, allr] = 0.0
        w[right, allr] = 0.002
        t[:, allr] = 2e-3 + w[:, allr]
        t[:, recv] += w[:, recv]
        rows = []
        for r in range(p):
            rows.append((r, send, DEP_SEND, (r + 1) % p, 7, WORLD, 100, 8000, 0.0))
            rows.append((r, recv, DEP_RECV, (r - 1) % p, 7, WORLD, 100, 8000, w[r, recv]))
            rows.append((r, allr, DEP_COLL, -1, -1, WORLD, 100, 800, w[r, allr]))
        runs[p] = _profile(psg, p, t, w, rows)
    return psg, runs, comp


STENCIL_TREE = ("FUNCTION", "main", 1, [
    ("COMP", "comp", 4),
    ("LOOP", "loop", 8, [
        ("MPI", "MPI_Irecv", 10),
        ("MPI", "MPI_Isend", 11),
        ("COMP", "comp", 13),                  # interior update: heavier on a region of ranks
        ("MPI", "MPI_Waitall", 15),
        ("MPI", "MPI_Allreduce", 18),          # residual
    ]),
])


def imbalanced_stencil(scales=(4, 8, 16), work: float = 8.0, heavy_factor: float = 1.6, noise: float = 0.01,
                       seed: int = 2):
    """1-D halo exchange where the first quarter of the ranks carries heavy_factor x the work."""
    psg = psg_from_tree(STENCIL_TREE, "stencil.c")
    rng = np.random.default_rng(seed)
    irecv, isend, upd, waitall, allr = (vertex_at(psg, n) for n in (10, 11, 13, 15, 18))
    runs = {}
    for p in scales:
        heavy = np.arange(p) < max(1, p // 4)
        base = work / p
        t = np.zeros((p, len(psg)))
        w = np.zeros_like(t)
        t[:, vertex_at(psg, 4)] = 0.05
        t[:, irecv] = t[:, isend] = 1e-4
        t[:, upd] = base * np.where(heavy, heavy_factor, 1.0) * (1 + noise * rng.standard_normal(p))
        late = base * (heavy_factor - 1)
        rows = []
        for r in range(p):
            nbrs = [q for q in (r - 1, r + 1) if 0 <= q < p]
            w[r, waitall] = late if (not heavy[r] and any(heavy[q] for q in nbrs)) else 0.0
            w[r, allr] = 0.0 if heavy[r] else late - w[r, waitall]
            for q in nbrs:
                rows.append((r, isend, DEP_SEND, q, 3, WORLD, 50, 4096, 0.0))
                rows.append((r, waitall, DEP_RECV, q, 3, WORLD, 50, 4096, late if heavy[q] and not heavy[r] else 0.0))
            rows.append((r, allr, DEP_COLL, -1, -1, WORLD, 50, 8, w[r, allr]))
        t[:, waitall] = 2e-4 + w[:, waitall]
        t[:, allr] = 5e-4 + w[:, allr]
        runs[p] = _profile(psg, p, t, w, rows)
    return psg, runs, upd


COLLECTIVE_TREE = ("FUNCTION", "main", 1, [
    ("COMP", "comp", 3),
    ("LOOP", "loop", 6, [
        ("COMP", "comp", 8),                   # local FFT part: scales perfectly
        ("MPI", "MPI_Alltoall", 10),           # transpose: cost grows with p
    ]),
])


def bad_collective(scales=(2, 4, 8, 16), work: float = 8.0, per_peer: float = 0.01, noise: float = 0.0,
                   seed: int = 3):
    psg = psg_from_tree(COLLECTIVE_TREE, "fft.c")
    rng = np.random.default_rng(seed)
    comp, a2a = vertex_at(psg, 8), vertex_at(psg, 10)
    runs = {}
    for p in scales:
        t = np.zeros((p, len(psg)))
        w = np.zeros_like(t)
        t[:, vertex_at(psg, 3)] = 0.01
        t[:, comp] = work / p * (1 + noise * rng.standard_normal(p))
        t[:, a2a] = per_peer * p
        rows = [(r, a2a, DEP_COLL, -1, -1, WORLD, 10, 1024 * p, 0.0) for r in range(p)]
        runs[p] = _profile(psg, p, t, w, rows)
    return psg, runs, a2a


def balanced(scales=(2, 4, 8, 16), work: float = 8.0, noise: float = 0.01, seed: int = 4):
    """A well-balanced, well-scaling program: detection must report no problem."""
    psg = psg_from_tree(CG_TREE, "balanced.c")
    rng = np.random.default_rng(seed)
    comp, send, recv, allr = (vertex_at(psg, n) for n in (12, 15, 16, 20))
    runs = {}
    for p in scales:
        t = np.zeros((p, len(psg)))
        w = np.zeros_like(t)
        t[:, vertex_at(psg, 5)] = 0.05 / p * (1 + noise * rng.standard_normal(p))
        t[:, vertex_at(psg, 40)] = 0.02 / p
        t[:, comp] = work / p * (1 + noise * rng.standard_normal(p))
        t[:, send] = t[:, recv] = 1e-3 / p
        w[:, allr] = np.abs(noise * work / p * rng.standard_normal(p))
        t[:, allr] = 1e-4 + w[:, allr]
        rows = []
        for r in range(p):
            rows.append((r, send, DEP_SEND, (r + 1) % p, 7, WORLD, 100, 8000, 0.0))
            rows.append((r, recv, DEP_RECV, (r - 1) % p, 7, WORLD, 100, 8000, 0.0))
            rows.append((r, allr, DEP_COLL, -1, -1, WORLD, 100, 800, w[r, allr]))
        runs[p] = _profile(psg, p, t, w, rows)
    return psg, runs, None


_BLOCK = (("COMP", "comp"), ("MPI", "MPI_Send"), ("MPI", "MPI_Recv"), ("COMP", "comp"),
          ("BRANCH", "branch"), ("COMP", "comp"), ("MPI", "MPI_Allreduce"), ("COMP", "comp"))


def large_psg(nvertices: int) -> PSG:
    """main -> time-step loop -> inner loops of 9 vertices each (comp, p2p ring, branch, allreduce)."""
    blocks = max(1, (nvertices - 2) // 9)
    line = iter(range(10, 10 ** 9))
    body = [("LOOP", "loop", next(line), [(k, n, next(line)) for k, n in _BLOCK[:4]]
             + [("BRANCH", "branch", next(line), [("COMP", "comp", next(line))])]
             + [(k, n, next(line)) for k, n in _BLOCK[6:]]) for _ in range(blocks)]
    return psg_from_tree(("FUNCTION", "main", 1, [("LOOP", "loop", 5, body)]), "large.c")


def large_run(psg: PSG, p: int, slow_vertex: int, work: float = 100.0, extra: float = 0.5,
              seed: int = 0) -> RunProfile:
    """One scale of a large program: `work` CPU-seconds spread over the COMP vertices, each scaling
    as 1/p with 2% noise; rank p//3 does `extra` more seconds in `slow_vertex` (a COMP), which its
    right neighbour waits for in the next MPI_Recv and everybody else in the next MPI_Allreduce."""
    rng = np.random.default_rng(seed + p)
    kinds = np.array(psg.kind)
    names = np.array(psg.name)
    nv = len(psg)
    comp = kinds == KINDS.index("COMP")
    base = np.where(comp, np.random.default_rng(seed).uniform(0.5, 2.0, nv), 0.0)
    base *= work / base.sum()
    t = base[None, :] / p * (1 + 0.02 * rng.standard_normal((p, nv)))
    w = np.zeros((p, nv))
    send = np.flatnonzero(names == "MPI_Send")
    recv = np.flatnonzero(names == "MPI_Recv")
    allr = np.flatnonzero(names == "MPI_Allreduce")
    t[:, send] = t[:, recv] = 1e-5
    slow = p // 3
    t[slow, slow_vertex] += extra
    right = (slow + 1) % p
    next_recv = recv[recv > slow_vertex][0]
    next_allr = allr[allr > slow_vertex][0]
    w[right, next_recv] = extra
    w[:, next_allr] = extra
    w[[slow, right], next_allr] = 0.0
    t[:, recv] += w[:, recv]
    t[:, allr] = 1e-4 + w[:, allr]
    ranks = np.arange(p)
    rows = np.zeros(p * (len(send) + len(recv) + len(allr)), dtype=DEP_DTYPE)
    pos = 0
    for verts, kind, peer in ((send, DEP_SEND, (ranks + 1) % p), (recv, DEP_RECV, (ranks - 1) % p),
                              (allr, DEP_COLL, np.full(p, -1))):
        n = p * len(verts)
        blk = rows[pos:pos + n]
        blk["rank"] = np.repeat(ranks, len(verts))
        blk["vertex"] = np.tile(verts, p)
        blk["kind"] = kind
        blk["peer"] = np.repeat(peer, len(verts))
        blk["tag"] = -1 if kind == DEP_COLL else 7
        blk["comm"] = WORLD
        blk["count"] = 100
        blk["wait"] = w[blk["rank"], blk["vertex"]]
        pos += n
    prof = empty_profile(p, nv, psg.hash())
    prof.time, prof.wait, prof.deps = t, w, rows
    prof.samples = np.rint(t * 200).astype(np.int64)
    prof.calls[:, kinds == KINDS.index("MPI")] = 100
    prof.comm_members = {WORLD: list(range(p))}
    return prof
