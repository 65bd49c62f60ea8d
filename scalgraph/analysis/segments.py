"""Exact computation between MPI calls (profile format 2) as a check on sampled excesses.

The shim charges each rank's CPU time since its previous MPI call returned to the MPI vertex that
ends the computation (RunProfile.comp_cpu).  So the imbalance of the computation before an MPI call
is exact, and a compute construct cannot be more than the exact excess of the segments it runs in:
samples only apportion that excess among the vertices in between.  A sampled excess the segments
do not support is sampling noise.

Which MPI vertices end the computation at v is read from the PSG: the first MPI call in execution
order after v (a loop or branch in between may not run, so the walk looks past it too; at the end
of a loop body the next iteration's first call also can).  When in doubt a segment is included:
more segments can only weaken the check, never suppress a cause the samples show.  An indirect call
whose targets the PSG does not know (a function pointer: hypre's Krylov solvers reach every
mat-vec and inner product, and so their MPI calls, through one) can make any MPI call: a walk that
passes one cannot name the segment, and the check is then against all of the rank's computation.
"""
from __future__ import annotations

import numpy as np

from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import BRANCH, INDIRECT, LOOP, MPI, PSG

ANY = -1    # in a set of ending MPI vertices: an unresolved indirect call, which may make any MPI call


def measured(profile: RunProfile) -> bool:
    return profile.comp_cpu is not None and bool(np.any(profile.comp_cpu > 0))


class _Entry:
    """For a subtree: the MPI vertices that can be the first call made in it, and whether it can be
    passed without any call (a loop or branch may not run; so may a call inside one), memoised."""

    def __init__(self, psg: PSG, ends: np.ndarray | None = None):
        self.psg = psg
        self.ends = ends          # [V] MPI vertices that end segments (None: every MPI vertex)
        self.memo: dict[int, tuple[frozenset, bool]] = {}

    def __call__(self, v: int) -> tuple[frozenset, bool]:
        if v not in self.memo:
            if self.psg.kind[v] == MPI and (self.ends is None or self.ends[v]):
                self.memo[v] = (frozenset([v]), False)
            elif self.psg.kind[v] == INDIRECT and not self.psg.children[v]:
                self.memo[v] = (frozenset([ANY]), True)      # any MPI call, or none
            else:
                first, skip = self.sequence(self.psg.children[v])
                self.memo[v] = (first, skip or self.psg.kind[v] in (LOOP, BRANCH))
        return self.memo[v]

    def sequence(self, vertices) -> tuple[frozenset, bool]:
        out: set[int] = set()
        for u in vertices:
            first, skip = self(u)
            out |= first
            if not skip:
                return frozenset(out), False
        return frozenset(out), True


def ending_mpi(psg: PSG, v: int, entry: _Entry | None = None) -> set[int]:
    """MPI vertices whose call can end the computation running at v (over-approximated: when in
    doubt a segment is included, which can only weaken the check); ANY among them when an
    unresolved indirect call can come first."""
    entry = entry or _Entry(psg)
    out: set[int] = set()
    if psg.kind[v] != MPI:
        # a vertex's own time can run before its body's calls (a loop header) or after them (a
        # function's epilogue): both its body's first calls and what follows it can end it
        out |= entry.sequence(psg.children[v])[0]
    u = v
    while psg.parent[u] >= 0:
        p = psg.parent[u]
        sibs = psg.children[p]
        first, skip = entry.sequence(sibs[sibs.index(u) + 1:])
        out |= first
        if not skip:
            return out
        if psg.kind[p] == LOOP:
            out |= entry.sequence(sibs)[0]              # the next iteration
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
    # calls the shim does not end a segment at (MPI_Wtime, say) were never charged: walk past them
    entry = _Entry(psg, (profile.comp_wall > 0).any(axis=0) | (profile.comp_cpu > 0).any(axis=0))
    ends = set().union(*(ending_mpi(psg, v, entry) for v in instances)) if instances else set()
    if not ends:
        return None
    if ANY in ends:
        cpu = profile.comp_cpu.sum(axis=1)[:, None]      # which segment is not known: all of them
    else:
        if cid is not None:
            ending = np.isin(cid, cid[sorted(ends)])
            ends = set(np.flatnonzero(ending).tolist())
        cols = np.array(sorted(ends))
        # per ending call, unrolled copies of it one: the others wait at each call for the rank's
        # lateness there, which being lighter before another call does not undo (miniAMR: rank 1's
        # planted loop ended at an Irecv, its lighter halo unpacking at the Waitany; summed over both
        # its 0.42 s loop was capped at 0.2 s)
        uniq, inv = np.unique(cid[cols] if cid is not None else cols, return_inverse=True)
        cpu = np.zeros((profile.nranks, len(uniq)))
        np.add.at(cpu.T, inv, profile.comp_cpu[:, cols].T)
    if not np.any(cpu > 0):
        return None                                      # nothing measured there: no evidence either way
    return float(np.maximum(cpu[rank] - np.median(cpu, axis=0), 0.0).sum())
