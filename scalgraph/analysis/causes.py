"""From backtracking paths to root causes costed in seconds of waiting explained.

A path starts where a rank waited (an MPI vertex that is non-scalable or abnormal) and walks back
to what made its partner late.  The cause of the path is the computation on the path that explains
that waiting: the compute construct with the largest excess over the median rank (summed over its
instances, sized by the exact segment data when measured), and its cost is what it explains,
min(excess, waiting at the start).  A collective's own time on the path is not part of that cost.
The MPI call the path started from is its own cause only when `own_mpi_cost` says so (mpi_cost.py),
and then costs its own scaling loss.

A compute construct that is itself abnormal or non-scalable costs run time whether or not anyone
waits for it (the run time is the slowest rank's): min(excess, how much more its rank computes than
the median rank), or
its own scaling loss when every rank spends it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scalgraph.analysis.backtrack import Path


@dataclass
class Cause:
    construct: int
    vertex: int              # the instance the path reached (or the start)
    rank: int
    cost: float              # seconds of waiting (or run time) explained
    path: Path
    explains: dict = field(default_factory=dict)


def path_cause(path: Path, cid: np.ndarray, is_mpi: np.ndarray, excess: Callable[[int, int], float],
               waiting: float, own_mpi_cost: np.ndarray) -> Cause | None:
    """The cause of a path that started at an MPI vertex where `waiting` seconds were spent."""
    v0, r0 = path.start
    best, best_e = None, 0.0
    for s in path.steps:
        if is_mpi[s.vertex]:
            continue
        e = excess(int(cid[s.vertex]), s.rank)
        if e > best_e:
            best, best_e = s, e
    explained = min(best_e, waiting)
    own = float(own_mpi_cost[cid[v0]])
    start = {"vertex": int(v0), "rank": int(r0), "waiting": float(waiting)}
    if own > 0 and own >= explained:
        return Cause(int(cid[v0]), int(v0), int(r0), own, path, {"what": "own scaling", **start, "seconds": own})
    if best is None or explained <= 0:
        return None
    return Cause(int(cid[best.vertex]), best.vertex, best.rank, explained, path,
                 {"what": "waiting", **start, "seconds": explained})


def compute_start_cause(path: Path, cid: np.ndarray, excess: Callable[[int, int], float], lateness: np.ndarray,
                        own_loss: np.ndarray) -> Cause | None:
    """A compute construct that is abnormal or non-scalable by itself: its excess as far as its rank
    is late overall, or its own scaling loss (every rank spends it), whichever is larger."""
    v0, r0 = path.start
    c = int(cid[v0])
    cost = max(min(excess(c, r0), float(lateness[r0])), float(own_loss[c]))
    if cost <= 0:
        return None
    return Cause(c, int(v0), int(r0), cost, path,
                 {"what": "run time", "vertex": int(v0), "rank": int(r0), "waiting": 0.0, "seconds": cost})


def keep_costliest(causes: list[Cause]) -> list[Cause]:
    """One cause per construct (its costliest path), most costly first."""
    best: dict[int, Cause] = {}
    for c in causes:
        if c.construct not in best or best[c.construct].cost < c.cost:
            best[c.construct] = c
    return sorted(best.values(), key=lambda c: -c.cost)
