"""The verdict of `scalgraph trace`: which delay costs are root causes that name lines of code.

The delay table (scalgraph/trace/delay.py) keeps Scalasca's numbers: every call path that made
somebody wait, MPI calls included.  That table is an account, not a diagnosis: any program that
waits has delay costs, and on a node where ranks time-share cores, a rank descheduled inside a
computation looks exactly like a rank with more work.  The verdict keeps from the table the call
paths that satisfy both:

(a) kind: computation.  A delay of an MPI call path is communication time (reported in the table
    as `"kind": "communication"`), never a line cause.
(b) size.  With the run's thread-CPU profile (rule (c)), the extra work itself must be worth
    fixing: on some rank whose thread-CPU at the vertex is at least ABNORMAL_RATIO (ScalAna's
    AbnormThd, detect's default) times the median rank's, its thread-CPU excess over the median rank
    is at least `min_share` of the run time (the total time over the ranks), the floor `scalgraph
    detect` applies to a computation; and the waiting it explains (its capped cost) is at least
    `min_share` of one rank's run time: extra work nobody waited for is no cause of waiting.
    Thread-CPU, not the delay it caused: on cores shared by several ranks the others compute while
    the late rank works, so the waiting underestimates a real cause, while a balanced kernel's ranks
    differ by 10-15 % of thread-CPU from cache and core sharing alone, which the waiting can inflate
    (P - 1) times.  As in detect, the thread-CPU is multiplied by the causing rank's own wall seconds
    per thread-CPU second there (the profile's computation segments the construct runs in, as detect's
    segment stretch; CpuEvidence.stretch_of), at least the median rank's for its
    computation (CpuEvidence.stretch, analysis.mpi_cost.compute_stretch): where ranks share cores an
    extra CPU second costs the run that many wall seconds (history:
    docs/trace-analysis.md, "The verdict's size rule").  Without a profile: its cost is at least `min_share` of the
    total time, the run time summed over the ranks (Scalasca's 100 %; delay costs are waiting time
    summed over the ranks, so both are rank-seconds).  A 0.4 s loop on one rank of a 3 s 8-rank run
    that makes the 7 others wait costs about 2.8 of 24 rank-seconds, 12 %.
(c) real work, when the run's thread-CPU profile is at hand (`CpuEvidence`): a rank that did E
    seconds of extra work can make each of the other P - 1 ranks wait at most E, so on each causing
    rank r the costs of the call paths at PSG vertex v are capped, together, at (P - 1) * E[v, r]:
        E[v, r] = max(cpu[v, r] - median_q cpu[v, q], 0) * max(wall[v, r] / cpu[v, r], 1)
    i.e. the rank's thread-CPU excess at v over the median rank (the seconds the profile's
    task-clock sampler charged to v), stretched as the rank's own time at v was stretched by sharing
    its core (`wall` is the trace's exclusive time at v, all call paths of v summed): a rank holding
    a quarter of a core takes four times as long for its extra work too.  A loop only one rank runs
    keeps its cost however much the node is shared; a rank that was merely descheduled in a balanced
    kernel did no extra work, and the waiting it caused is dropped, as are the per-iteration
    ups and downs of a balanced kernel that cancel over the run.  The same rule drops a delay
    spent off the CPU on purpose (blocking file I/O or sleep inside a computation): it stays in the
    delay table, but is no verdict cause when thread-CPU is measured.
    Not told apart: a rank that needs more thread-CPU for the same work on a slower core (a physical
    core shared with another busy process, steal time); only an instruction count would.

Causes are grouped by where they are in the source (file, line, PSG vertex; call paths without a
place stay separate) and ranked by their capped cost.  Pure numpy: the caller reads the profiles.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

MIN_SHARE = 0.05
ABNORMAL_RATIO = 1.3      # ScalAna's AbnormThd (detect's default): rule (b)


@dataclass
class CpuEvidence:
    """Thread-CPU seconds per [rank, PSG vertex] of the traced run (RunProfile.time of the
    computation vertices), and what to say about where it came from."""
    cpu: np.ndarray
    note: str = ""
    details: dict = field(default_factory=dict)
    # wall seconds per thread-CPU second of the median rank's computation (analysis.mpi_cost.
    # compute_stretch): rule (b) compares thread-CPU times this with the wall-clock run time
    stretch: float = 1.0
    # [R] wall seconds per thread-CPU second of the computation segments given PSG vertices run in
    # (analysis.whatif.segment_stretch on the run's profile); None: the median rank's `stretch` only
    stretch_of: Callable[[list], np.ndarray] | None = None
    # rule (b)'s AbnormThd: higher where ranks outnumber cores (analysis.defaults.SHARED_CORE_ABNORM_THD:
    # identical work's thread-CPU was measured up to 1.52x apart between ranks there)
    ratio: float = ABNORMAL_RATIO


def _excess(values: np.ndarray) -> np.ndarray:
    """[rows, ranks] -> per entry, how far above the median rank of its row (0 when below)."""
    if values.shape[1] == 0:
        return values
    return np.maximum(values - np.median(values, axis=1, keepdims=True), 0.0)


def extra_work(wall: np.ndarray, cpu: np.ndarray) -> np.ndarray:
    """[vertices, ranks] wall-clock and thread-CPU seconds -> E, each rank's extra work at the vertex
    over the median rank in wall-clock seconds (rule (c) above)."""
    wall, cpu = np.asarray(wall, float), np.asarray(cpu, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        stretch = np.where(cpu > 0, np.maximum(wall / np.where(cpu > 0, cpu, 1.0), 1.0), 0.0)
    return _excess(cpu) * stretch


def capped_costs(cost: np.ndarray, wall: np.ndarray, vertex: np.ndarray, cpu: np.ndarray | None,
                 others: int | None = None) -> np.ndarray:
    """[call path, rank] delay costs -> the part that is real work (rule (c) above).  `wall` is the
    trace's exclusive time [call path, rank], `vertex` the PSG vertex per call path (-1: none; such
    call paths are left as they are), `cpu` thread-CPU seconds [rank, vertex] or None (no cap).
    `others`: how many locations one rank's extra work can make wait (default ranks - 1; with OpenMP
    threads, locations - 1)."""
    cost = np.asarray(cost, float)
    if cpu is None:
        return cost.copy()
    vertex = np.asarray(vertex, np.int64)
    known = (vertex >= 0) & (vertex < cpu.shape[1])
    out = cost.copy()
    if not known.any():
        return out
    nranks = cost.shape[1]
    verts, inv = np.unique(vertex[known], return_inverse=True)
    wall_v = np.zeros((len(verts), nranks))
    cost_v = np.zeros((len(verts), nranks))
    np.add.at(wall_v, inv, np.asarray(wall, float)[known])
    np.add.at(cost_v, inv, cost[known])
    cap = (nranks - 1 if others is None else others) * extra_work(wall_v, cpu[:, verts].T)
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = np.where(cost_v > cap, cap / np.where(cost_v > 0, cost_v, 1.0), 1.0)
    out[known] = cost[known] * keep[inv]
    return out


def abnormal_cpu_excess(vertices, cpu: np.ndarray, ratio: float = ABNORMAL_RATIO,
                        rank_stretch: np.ndarray | None = None, least_stretch: float = 1.0) -> float:
    """Rule (b)'s size: the largest thread-CPU excess over the median rank at PSG vertices (one
    source construct's instances, summed per rank) among the ranks whose thread-CPU there is at least
    `ratio` times the median rank's; 0 without one.  Each rank's excess is stretched by its own wall
    seconds per thread-CPU second there (`rank_stretch` [R], the profile's computation segments the
    vertices run in, CpuEvidence.stretch_of), at least by `least_stretch` (the median rank's):
    CloverLeaf's 0.28 s planted loop took 6.5x its thread-CPU at 8 ranks on 2 cores while the median
    rank's short computations were not stretched at all.  (Not the trace's exclusive time: in a
    polling program it holds the unrecorded MPI_Test calls, which are no computation.)"""
    cols = [v for v in np.atleast_1d(vertices).tolist() if 0 <= v < cpu.shape[1]]
    if not cols or cpu.shape[0] == 0:
        return 0.0
    col = cpu[:, cols].sum(axis=1)
    med = np.median(col)
    abnormal = col >= ratio * med
    if not abnormal.any():
        return 0.0
    stretch = np.full(len(col), float(least_stretch))
    if rank_stretch is not None and len(rank_stretch) == len(col):
        stretch = np.maximum(np.asarray(rank_stretch, float), stretch)
    return float(((col - med) * stretch)[abnormal].max())


def verdict(cost: np.ndarray, wall: np.ndarray, is_mpi: np.ndarray, where: list[dict], names: list[str],
            total_time: float, min_share: float = MIN_SHARE, cpu: CpuEvidence | None = None,
            rank_of: np.ndarray | None = None) -> list[dict]:
    """The root causes that name lines, largest first: computation call paths grouped by place,
    whose capped cost is at least min_share * total_time.  `where[c]` has file, line, vertex.
    `rank_of`: the MPI rank of each location when the trace has OpenMP threads; costs and times are
    then summed per rank (the profile's thread-CPU is per rank) and "rank" names the MPI rank."""
    cost, wall = np.asarray(cost, float), np.asarray(wall, float)
    ncp = cost.shape[0]
    nlocations = max(cost.shape[1], 1) if cost.ndim == 2 else 1
    if rank_of is not None:
        cost, wall = _per_rank(cost, rank_of), _per_rank(np.asarray(wall, float), rank_of)
    vertex = np.array([where[c]["vertex"] for c in range(ncp)], np.int64)
    capped = capped_costs(cost, wall, vertex, cpu.cpu if cpu is not None else None, nlocations - 1)
    groups: dict = {}
    for c in range(ncp):
        if is_mpi[c] or cost[c].sum() <= 0:
            continue
        w = where[c]
        # one source construct: its instances (unrolled or inlined copies, call sites) are summed,
        # as detect does (HPCG's planted loop sits in CG, called from three places: each third was
        # below the floor)
        key = (w["file"], w["line"]) if w["file"] else ("", 0, names[c])
        groups.setdefault(key, []).append(c)
    out = []
    nranks = nlocations          # the total time is summed over the locations
    floor = min_share * total_time
    for key, cps in groups.items():
        per_rank = capped[cps].sum(axis=0)
        seconds = float(per_rank.sum())
        w = where[max(cps, key=lambda c: float(capped[c].sum()))]      # the dominant instance
        vertices = sorted({int(where[c]["vertex"]) for c in cps if where[c]["vertex"] >= 0})
        if total_time <= 0 or seconds <= 0:
            continue
        if cpu is not None and vertices:
            own = cpu.stretch_of(vertices) if cpu.stretch_of is not None else None
            if (abnormal_cpu_excess(vertices, cpu.cpu, cpu.ratio, own, cpu.stretch) < floor / nranks
                    or seconds < floor / nranks):
                continue
        elif seconds < floor:
            continue
        delay_seconds = float(cost[cps].sum())
        out.append({"file": w["file"], "line": int(w["line"]), "vertex": int(w["vertex"]), "vertices": vertices,
                    "where": _loc(w), "callpaths": [names[c] for c in cps],
                    "seconds": seconds, "share": seconds / total_time, "percent": 100.0 * seconds / total_time,
                    "delay_seconds": delay_seconds, "real_work": seconds / delay_seconds if delay_seconds > 0 else 0.0,
                    "rank": int(per_rank.argmax()),
                    "ranks": {str(r): float(per_rank[r]) for r in np.flatnonzero(per_rank > 0.01 * seconds).tolist()}})
    out.sort(key=lambda e: -e["seconds"])
    return out


def _per_rank(a: np.ndarray, rank_of: np.ndarray) -> np.ndarray:
    """[call path, location] -> [call path, rank]: a rank's threads summed."""
    out = np.zeros((a.shape[0], int(rank_of.max()) + 1))
    np.add.at(out.T, rank_of, a.T)
    return out


def _loc(w: dict) -> str:
    if not w["file"]:
        return ""
    v = f" [vertex {w['vertex']}]" if w["vertex"] >= 0 else ""
    return f"{w['file']}:{w['line']}{v}"
