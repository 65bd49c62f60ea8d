"""Exact waiting evidence for the profile analysis (`scalgraph detect` on an experiment with traces).

The profile's shim knows how long each MPI call blocked and spreads it over the call's dependence
rows; the trace replay knows each wait state's waiting time ω and the rank that caused it.  Time in
MPI that no wait-state pattern classifies (a Wait completing an Isend, a rendezvous, a rank
descheduled in a busy-polling call under oversubscription) is still communication, never the
call's own work.  So `profile_with_trace_waits` only adds to the profile's waiting evidence:
  waiting at (rank r, MPI vertex v) = max(profile blocked time, Σ ω of the trace's wait states there)
and so the own time of an MPI vertex (time minus waiting) is never larger than in profile mode.
The dependence rows at (r, v) get the wait states' exact edges and keep the profile's attribution
for the rest:
  exact part      RECV/SEND/RMA row (peer q) -> Σ ω of the waits at v on r caused by q (Late
                  Receiver on the SEND row, other point-to-point waits on the RECV row);
                  COLL row -> Σ ω of the waits at v on r
  remainder       max(Σ profile row waits - Σ exact parts, 0), shared in proportion to the
                  profile's row waits
so the rows at (r, v) carry max(what the profile put on them, what the trace classified).
A call classified under a pattern and its sub-patterns (e.g. Late Sender / Wrong Order) counts once.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from scalgraph.model import trace as tm
from scalgraph.model.profile import DEP_COLL, DEP_RECV, DEP_RMA, DEP_SEND, RunProfile
from scalgraph.trace import patterns

Key = tuple[int, int, int, int]       # (rank, PSG vertex, dependence kind, causer)


def pattern_dep_kinds() -> np.ndarray:
    """Per pattern: the dependence-row kind its waiting rank records (Late Receiver waits in a send)."""
    def family(p: patterns.Pattern) -> str:
        while p.parent is not None and p.parent not in ("time", "mpi"):
            p = patterns.PATTERNS[patterns.PATTERN_INDEX[p.parent]]
        return p.key
    kinds = {"p2p": DEP_RECV, "collective": DEP_COLL, "synchronization": DEP_COLL, "rma": DEP_RMA}
    out = np.array([kinds.get(family(p), DEP_COLL) for p in patterns.PATTERNS], np.int64)
    out[patterns.PATTERN_INDEX["late_receiver"]] = DEP_SEND
    return out


def waits_by_vertex(fwd) -> dict[Key, float]:
    """(rank, PSG vertex, dependence kind, causer) -> seconds waited, from a forward replay of a
    scalgraph-recorded trace."""
    w = fwd.waits
    if len(w) == 0:
        return {}
    regions = fwd.ctx.trace.regions
    region = fwd.ctx.flat.ev["region"][w["op"]]
    vertex = np.array([regions[g].vertex if g >= 0 else -1 for g in region.tolist()], np.int64)
    kind = pattern_dep_kinds()[w["pattern"]]
    if fwd.ctx.trace.locations:     # OpenMP threads' waits: the profile's PPG has no thread dimension
        nproc = len(tm.mpi_locations(fwd.ctx.trace))
        keep = (w["rank"] < nproc) & (w["causer"] < nproc)
        w, region, vertex, kind = w[keep], region[keep], vertex[keep], kind[keep]
    per_call: dict[tuple[int, int, int, int, int], float] = {}
    for r, op, v, k, c, x in zip(w["rank"].tolist(), w["op"].tolist(), vertex.tolist(), kind.tolist(),
                                 w["causer"].tolist(), w["wait"].tolist()):
        if v >= 0:
            key = (r, op, v, k, c)
            per_call[key] = max(per_call.get(key, 0.0), x)   # sub-patterns re-classify, never add
    out: dict[Key, float] = {}
    for (r, _, v, k, c), x in per_call.items():
        out[(r, v, k, c)] = out.get((r, v, k, c), 0.0) + x
    return out


def profile_with_trace_waits(prof: RunProfile, waits: dict[Key, float]) -> RunProfile:
    """A copy of `prof` with the trace's wait states added to its waiting evidence (module doc)."""
    trace_wait = np.zeros_like(prof.wait)
    for (r, v, _, _), x in waits.items():
        if 0 <= r < trace_wait.shape[0] and 0 <= v < trace_wait.shape[1]:
            trace_wait[r, v] += x
    deps = prof.deps.copy()
    deps["wait"] = rows_with_trace_waits(prof.deps, waits)
    return dataclasses.replace(prof, wait=np.maximum(prof.wait, trace_wait), deps=deps)


def rows_with_trace_waits(deps: np.ndarray, waits: dict[Key, float]) -> np.ndarray:
    """The `wait` column of the dependence rows: exact edges plus the profile's remainder."""
    out = deps["wait"].astype(float).copy()
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (r, v) in enumerate(zip(deps["rank"].tolist(), deps["vertex"].tolist())):
        groups.setdefault((r, v), []).append(i)
    by_site: dict[tuple[int, int], dict[tuple[int, int], float]] = {}
    for (r, v, k, c), x in waits.items():
        site = by_site.setdefault((r, v), {})
        site[(k, c)] = site.get((k, c), 0.0) + x
    for site, rows in groups.items():
        if site in by_site:
            out[rows] = _site_rows(deps[rows], by_site[site])
    return out


def _site_rows(rows: np.ndarray, exact: dict[tuple[int, int], float]) -> np.ndarray:
    """Row waits at one (rank, vertex): each wait state goes to the rows it names (same kind and
    peer; collectives: every COLL row), shared by the profile's row waits (equally if all are 0);
    the profile's unexplained remainder keeps its own proportions."""
    prof = rows["wait"].astype(float)
    placed = np.zeros(len(rows))
    for (kind, causer), x in exact.items():
        hit = _rows_for(rows, kind, causer)
        if hit.any():
            placed += x * _shares(prof, hit)
    rest = max(float(prof.sum()) - float(placed.sum()), 0.0)
    return placed + (rest * prof / prof.sum() if rest > 0 else 0.0)


def _rows_for(rows: np.ndarray, kind: int, causer: int) -> np.ndarray:
    if kind == DEP_COLL:
        return rows["kind"] == DEP_COLL
    same_peer = (rows["peer"] == causer) & (rows["kind"] != DEP_COLL)
    exact = same_peer & (rows["kind"] == kind)
    return exact if exact.any() else same_peer


def _shares(weights: np.ndarray, hit: np.ndarray) -> np.ndarray:
    w = np.where(hit, weights, 0.0)
    return w / w.sum() if w.sum() > 0 else hit / hit.sum()
