"""Exact waiting evidence for the profile analysis (`scalgraph detect` on an experiment with traces).

The profile's shim can only say how long each MPI call blocked; the trace replay knows each wait
state's waiting time ω and the rank that caused it.  `profile_with_trace_waits` returns a copy of a
RunProfile whose per-vertex waiting time and whose dependence rows' `wait` are the replay's, so the
PPG's communication edges (scalgraph/analysis/ppg.py) carry exact wait-state costs:
  RECV/SEND row (rank r, vertex v, peer q)  ->  Σ ω of the waits at v on r caused by q
  COLL row (rank r, vertex v)               ->  Σ ω of the waits at v on r
A call classified under a pattern and its sub-patterns (e.g. Late Sender / Wrong Order) counts once.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from scalgraph.model.profile import DEP_COLL, RunProfile


def waits_by_vertex(fwd) -> dict[tuple[int, int, int], float]:
    """(rank, PSG vertex, causer) -> seconds waited, from a forward replay of a scalgraph-recorded trace."""
    w = fwd.waits
    if len(w) == 0:
        return {}
    regions = fwd.ctx.trace.regions
    region = fwd.ctx.flat.ev["region"][w["op"]]
    vertex = np.array([regions[g].vertex if g >= 0 else -1 for g in region.tolist()], np.int64)
    per_call: dict[tuple[int, int, int, int], float] = {}
    for r, op, v, c, x in zip(w["rank"].tolist(), w["op"].tolist(), vertex.tolist(), w["causer"].tolist(),
                              w["wait"].tolist()):
        if v >= 0:
            key = (r, op, v, c)
            per_call[key] = max(per_call.get(key, 0.0), x)   # sub-patterns re-classify, never add
    out: dict[tuple[int, int, int], float] = {}
    for (r, _, v, c), x in per_call.items():
        out[(r, v, c)] = out.get((r, v, c), 0.0) + x
    return out


def profile_with_trace_waits(prof: RunProfile, waits: dict[tuple[int, int, int], float]) -> RunProfile:
    wait = np.zeros_like(prof.wait)
    by_vertex: dict[tuple[int, int], float] = {}
    for (r, v, _), x in waits.items():
        if 0 <= r < wait.shape[0] and 0 <= v < wait.shape[1]:
            wait[r, v] += x
            by_vertex[(r, v)] = by_vertex.get((r, v), 0.0) + x
    deps = prof.deps.copy()
    for i, (r, v, kind, peer) in enumerate(zip(deps["rank"].tolist(), deps["vertex"].tolist(),
                                               deps["kind"].tolist(), deps["peer"].tolist())):
        deps["wait"][i] = by_vertex.get((r, v), 0.0) if kind == DEP_COLL else waits.get((r, v, peer), 0.0)
    return dataclasses.replace(prof, wait=wait, deps=deps)
