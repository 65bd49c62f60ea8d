"""The thread dimension of a run (profile format 3): per OpenMP thread of each rank, its role and idle
time, and per (vertex, thread) its sampled CPU, MPI time and barrier waiting, kept sparse (only the
vertices a thread touched).  A run without OpenMP threads (MPI only, libgomp, SCALGRAPH_OMPT=0, or a
format-2 profile) has none: RunProfile.threads is None.

Readers in scalgraph/io fill it from the shim's thread section; analysis builds it from literals in tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROLE_MASTER, ROLE_WORKER, ROLE_OTHER = 1, 2, 3          # SG_ROLE_* of instrument/scalgraph.h
ROLE_NAMES = {ROLE_MASTER: "master", ROLE_WORKER: "worker", ROLE_OTHER: "other"}

THREAD_DTYPE = np.dtype([
    ("rank", "<i4"),        # world rank of the process
    ("slot", "<i4"),        # the shim's thread slot in that process
    ("role", "<i4"),        # ROLE_*
    ("team_index", "<i4"),  # OpenMP thread number in the last team it worked in (master 0)
    ("tasks", "<i8"),       # implicit tasks (parallel regions) it ran
    ("idle", "<f8"),        # seconds a worker spent outside parallel regions (the master ran serial code)
    ("spin", "<f8"),        # CPU seconds its samples charged while waiting at barriers
])
ROW_DTYPE = np.dtype([
    ("thread", "<i4"),      # index into ThreadProfile.threads
    ("vertex", "<i4"),
    ("samples", "<i8"),     # samples taken on the thread at the vertex (not while waiting at a barrier)
    ("cpu", "<f8"),         # thread-CPU seconds those samples were charged
    ("mpi", "<f8"),         # seconds inside MPI calls the thread made at the vertex
    ("barrier", "<f8"),     # seconds it waited at OpenMP barriers that began at the vertex
])
VALUES = ("samples", "cpu", "mpi", "barrier")


@dataclass
class ThreadProfile:
    threads: np.ndarray     # THREAD_DTYPE, one row per (rank, thread)
    rows: np.ndarray        # ROW_DTYPE, sparse per-(thread, vertex) values

    def ranks(self) -> list[int]:
        return sorted({int(r) for r in self.threads["rank"]})

    def of_rank(self, rank: int) -> np.ndarray:
        """Indices into `threads` of one rank's threads, the master first, then by team index."""
        idx = np.flatnonzero(self.threads["rank"] == rank)
        t = self.threads[idx]
        order = np.lexsort((t["slot"], t["team_index"], t["role"] != ROLE_MASTER))
        return idx[order]

    def dense(self, name: str, rank: int, nvertices: int) -> np.ndarray:
        """[threads of `rank` (of_rank order) x nvertices] values of one field of ROW_DTYPE."""
        idx = self.of_rank(rank)
        out = np.zeros((len(idx), nvertices))
        pos = np.full(len(self.threads), -1)
        pos[idx] = np.arange(len(idx))
        rows = self.rows[(pos[self.rows["thread"]] >= 0) & (self.rows["vertex"] < nvertices)] if len(idx) else self.rows[:0]
        np.add.at(out, (pos[rows["thread"]], rows["vertex"]), rows[name])
        return out

    def team_sizes(self) -> dict[int, int]:
        """rank -> threads that ran parallel regions (the team a rank's regions had at most)."""
        sizes: dict[int, int] = {}
        for t in self.threads:
            if t["tasks"] > 0 or t["role"] == ROLE_MASTER:
                sizes[int(t["rank"])] = sizes.get(int(t["rank"]), 0) + 1
        return sizes


def empty_threads() -> ThreadProfile:
    return ThreadProfile(np.zeros(0, THREAD_DTYPE), np.zeros(0, ROW_DTYPE))


def concatenate(per_rank: list[ThreadProfile]) -> ThreadProfile | None:
    """One ThreadProfile of several (each rank's file), or None when none has a thread."""
    parts = [p for p in per_rank if p is not None and len(p.threads)]
    if not parts:
        return None
    rows, base = [], 0
    for p in parts:
        r = p.rows.copy()
        r["thread"] += base
        rows.append(r)
        base += len(p.threads)
    return ThreadProfile(np.concatenate([p.threads for p in parts]), np.concatenate(rows))
