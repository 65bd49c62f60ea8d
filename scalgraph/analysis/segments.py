"""Exact computation between MPI calls (profile format 2) as a check on sampled excesses.

The shim charges each rank's CPU time since its previous MPI call returned to the MPI vertex that
ends the computation (RunProfile.comp_cpu).  So the imbalance of the computation before an MPI call
is exact, and a compute construct cannot be more than the exact excess of the segments it runs in:
samples only apportion that excess among the vertices in between.  A sampled excess the segments
do not support is sampling noise.

Which MPI vertices end the computation at v is read from the PSG: the first MPI call in execution
order after v (a loop or branch in between may not run, so the walk looks past it too; at the end
of a loop body the next iteration's first call also can).
"""
from __future__ import annotations

import numpy as np

from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import BRANCH, LOOP, MPI, PSG


def measured(profile: RunProfile) -> bool:
    return profile.comp_cpu is not None and bool(np.any(profile.comp_cpu > 0))


class _FirstMpi:
    """First MPI vertex in pre-order of a subtree (-1 when there is none), memoised."""

    def __init__(self, psg: PSG):
        self.psg = psg
        self.memo: dict[int, int] = {}

    def __call__(self, v: int) -> int:
        if v in self.memo:
            return self.memo[v]
        found = v if self.psg.kind[v] == MPI else -1
        stack = list(reversed(self.psg.children[v])) if found < 0 else []
        while stack and found < 0:
            u = stack.pop()
            if self.psg.kind[u] == MPI:
                found = u
            else:
                stack.extend(reversed(self.psg.children[u]))
        self.memo[v] = found
        return found


def ending_mpi(psg: PSG, v: int, first: _FirstMpi | None = None) -> set[int]:
    """MPI vertices whose call can end the computation running at v."""
    first = first or _FirstMpi(psg)
    out: set[int] = set()
    inner = first(v)
    if inner >= 0 and inner != v:
        out.add(inner)                       # a loop/branch header's own time runs before its body's calls
    u = v
    while psg.parent[u] >= 0:
        p = psg.parent[u]
        sibs = psg.children[p]
        for s in sibs[sibs.index(u) + 1:]:
            m = first(s)
            if m >= 0:
                out.add(m)
                if psg.kind[s] not in (LOOP, BRANCH):
                    return out
        if psg.kind[p] == LOOP and first(p) >= 0 and first(p) != p:
            out.add(first(p))                # the next iteration
        u = p
    return out


def segment_excess(psg: PSG, profile: RunProfile, instances: list[int], rank: int,
                   cid: np.ndarray | None = None) -> float | None:
    """Exact CPU seconds by which `rank` exceeds the median rank in the computation segments that
    contain the given vertices (one construct's instances); None when not measured.

    With `cid` (construct id per vertex) the segments are those ended by *any* instance of the
    ending MPI constructs: which copy of an unrolled loop a sample and a segment were charged to
    need not agree, the construct does."""
    if not measured(profile):
        return None
    first = _FirstMpi(psg)
    ends = set().union(*(ending_mpi(psg, v, first) for v in instances)) if instances else set()
    if not ends:
        return None
    if cid is not None:
        ending = np.isin(cid, cid[sorted(ends)])
        ends = set(np.flatnonzero(ending).tolist())
    cpu = profile.comp_cpu[:, sorted(ends)].sum(axis=1)
    return float(max(cpu[rank] - np.median(cpu), 0.0))
