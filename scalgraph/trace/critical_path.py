"""Backward replay, part 2: the critical path and its indicators (seed 001; formulas in
shared/notes/trace-analysis-reference.md §5).

The path starts where the last rank enters MPI_Finalize (as Scalasca's scout: the path runs from the
start to MPI_Finalize, which is not part of it; without MPI_Finalize: at the last event of the rank
whose trace ends last), and walks backwards.  Whenever the active rank has a wait state
(one with a causer, see patterns.SYNC_PATTERNS) it continues on the rank whose arrival ended that
wait, at the time the wait ended.  Jumping at the end of the wait (not at the causer's send event,
as Scalasca does) keeps the path on exactly one rank at a time, so its length is exactly
T_end - T_start of the run.  The walk has one step per wait state *on the path*; the per-call-path
accounting is vectorised.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalgraph.model import trace as tm
from scalgraph.trace import mpi_names, waitops
from scalgraph.trace.delay import processing_profiles
from scalgraph.trace.forward import ForwardResult
from scalgraph.trace.hugepages import without_hugepage_advice


@dataclass
class CriticalPath:
    seg_rank: np.ndarray        # the path as segments, latest first: rank, start, end
    seg_start: np.ndarray
    seg_end: np.ndarray
    profile: np.ndarray         # [call path, rank] time of the call path on the path, on that rank
    time: np.ndarray            # [call path, rank] non-waiting time t_l[c] over the whole run
    imbalance: np.ndarray       # [call path] ι = max(0, cp - mean_l t_l)
    activity: np.ndarray        # [call path, rank] A_l = min(cp, t_l) where cp > 0
    non_critical: np.ndarray    # [call path, rank] N_l = max(t_l - cp, 0)
    imbalance_impact: np.ndarray  # [call path, rank] G[c]·cp_l[c]/cp[c]
    inter_partition: np.ndarray   # [call path, rank] HR[c]·cp_l[c]/cp[c]

    @property
    def per_callpath(self) -> np.ndarray:
        return self.profile.sum(axis=1)

    @property
    def length(self) -> float:
        return float(self.seg_end.sum() - self.seg_start.sum())

    @property
    def intra_partition(self) -> np.ndarray:
        return self.imbalance_impact - self.inter_partition


def finalize_regions(regions) -> list[int]:
    return [i for i, r in enumerate(regions) if mpi_names.canonical_name(r.name) == "MPI_Finalize"]


def finalize_callpaths(nest, regions) -> np.ndarray:
    """[call path] True for MPI_Finalize and everything called inside it: time there is no
    activity of the program (Scalasca excludes it from the critical-path indicators)."""
    fin = np.zeros(len(regions) + 1, bool)
    fin[finalize_regions(regions)] = True
    mark = fin[np.where(nest.cp_region >= 0, nest.cp_region, len(regions))].copy()
    parent = nest.cp_parent
    for _ in range(len(mark)):                      # propagate down the call tree (depth steps)
        new = mark | np.where(parent >= 0, mark[np.maximum(parent, 0)], False)
        if np.array_equal(new, mark):
            break
        mark = new
    return mark


def _end_point(fwd: ForwardResult) -> tuple[int, float]:
    """(rank, time) where the path ends: the latest MPI_Finalize ENTER, or the end of the trace."""
    ctx = fwd.ctx
    fin = finalize_regions(ctx.trace.regions)
    ev = ctx.ev
    if fin:
        enters = np.flatnonzero((ev["kind"] == tm.ENTER) & np.isin(ev["region"], fin))
        if len(enters):
            e = enters[np.argmax(ctx.time[enters])]
            return int(ctx.flat.rank[e]), float(ctx.time[e])
    r = _last_rank(fwd)
    return r, float(ctx.time[ctx.flat.offsets[r + 1] - 1])


def _last_rank(fwd: ForwardResult) -> int:
    ctx = fwd.ctx
    # the rank whose trace ends last; on a tie (all leave main together) the one that was busy
    # longest, i.e. whose last event other than an EXIT is the latest
    off, kind = ctx.flat.offsets, ctx.ev["kind"]
    last = np.full(ctx.nranks, -np.inf)
    busy = np.full(ctx.nranks, -np.inf)
    for r in range(ctx.nranks):
        if off[r + 1] > off[r]:
            last[r] = ctx.time[off[r + 1] - 1]
            not_exit = np.flatnonzero(kind[off[r]:off[r + 1]] != tm.EXIT)
            busy[r] = ctx.time[off[r] + not_exit[-1]] if len(not_exit) else last[r]
    return int(np.lexsort((busy, last))[-1])


def walk(fwd: ForwardResult):
    """The path as segments (rank, start, end), latest first."""
    ctx = fwd.ctx
    waits = fwd.sync_waits
    waits = waits[waits["cp_causer"] >= 0]
    end = ctx.time[waits["op"]] + waits["wait"]
    per_rank = []
    for r in range(ctx.nranks):
        sel = np.flatnonzero(waits["rank"] == r)
        sel = sel[np.argsort(end[sel], kind="stable")]
        per_rank.append((end[sel], sel))
    off = ctx.flat.offsets
    first = np.array([ctx.time[off[r]] if off[r + 1] > off[r] else 0.0 for r in range(ctx.nranks)])
    rank, t = _end_point(fwd)
    seg_rank, seg_start, seg_end = [], [], []
    used = bytearray(len(waits))
    causer = waits["cp_causer"].tolist()               # plain lists in the loop: one step per segment
    per_rank = [(ends, ends.tolist(), idx.tolist()) for ends, idx in per_rank]
    first = first.tolist()
    for _ in range(len(waits) + 1):
        ends, ends_list, idx = per_rank[rank]
        j = int(ends.searchsorted(t, side="right")) - 1
        while j >= 0 and used[idx[j]]:             # a wait already passed (degenerate equal times)
            j -= 1
        if j < 0:
            seg_rank.append(rank), seg_start.append(min(first[rank], t)), seg_end.append(t)
            break
        w = idx[j]
        used[w] = 1
        seg_rank.append(rank), seg_start.append(ends_list[j]), seg_end.append(t)
        rank, t = causer[w], ends_list[j]
    return np.array(seg_rank, np.int64), np.array(seg_start), np.array(seg_end)


@without_hugepage_advice
def critical_path(fwd: ForwardResult) -> CriticalPath:
    ctx = fwd.ctx
    ncp, p = ctx.ncallpaths, ctx.nranks
    seg_rank, seg_start, seg_end = walk(fwd)
    (ids, cps, vals), _ = processing_profiles(ctx, fwd.sync_waits, seg_rank, seg_start, seg_end)
    profile = waitops.segment_sum(cps * p + seg_rank[ids], vals, ncp * p).reshape(ncp, p)

    t_l = activity_time(ctx, fwd.excl_time, fwd.sync_waits)
    return CriticalPath(seg_rank=seg_rank, seg_start=seg_start, seg_end=seg_end, profile=profile,
                        time=t_l, imbalance=waitops.imbalance_indicator(profile.sum(axis=1), t_l),
                        **performance_impact(profile, t_l))


def activity_time(ctx, excl_time: np.ndarray, sync: np.ndarray) -> np.ndarray:
    """[call path, rank] t_l: exclusive time minus waiting, MPI_Finalize excluded (Scalasca)."""
    ncp, p = excl_time.shape
    waiting = waitops.segment_sum(ctx.nest.callpath[sync["op"]].astype(np.int64) * p + sync["rank"], sync["wait"],
                                  ncp * p).reshape(ncp, p)
    t_l = np.maximum(excl_time - waiting, 0.0)
    t_l[finalize_callpaths(ctx.nest, ctx.trace.regions)] = 0.0
    return t_l


def performance_impact(cp_l: np.ndarray, t_l: np.ndarray) -> dict:
    """Seed 001 performance-impact indicators (reference §5), every division guarded."""
    cp = cp_l.sum(axis=1)                              # [C]
    total = cp.sum()
    on = cp[:, None] > 0
    activity = np.where(on, np.minimum(cp[:, None], t_l), 0.0)
    non_critical = np.maximum(t_l - cp[:, None], 0.0)
    w_l = total - t_l.sum(axis=0)                      # [P] time a rank is not busy on the path's length
    e_l = np.maximum(cp[:, None] - t_l, 0.0)           # [C, P]
    e_sum = e_l.sum(axis=0)
    share = np.divide(w_l, e_sum, out=np.zeros_like(w_l), where=e_sum > 0)
    g = (e_l * share[None, :]).sum(axis=1)             # [C]
    frac = np.divide(cp_l, cp[:, None], out=np.zeros_like(cp_l), where=on)
    x_l = t_l > 0
    l_l = np.where(x_l, np.maximum(t_l, cp[:, None]), 0.0).sum(axis=0)
    h = np.where(~x_l, cp[:, None], 0.0)
    h_sum = h.sum(axis=0)
    # a location busier than the path is long (L_l > T) lost nothing to missing call paths: never
    # negative, and never more than the call path's whole imbalance impact
    h_l = np.divide(np.maximum(total - l_l, 0.0), h_sum, out=np.zeros_like(h_sum), where=h_sum > 0)
    hr = np.minimum((h * h_l[None, :]).sum(axis=1), g)
    return dict(activity=activity, non_critical=non_critical, imbalance_impact=g[:, None] * frac,
                inter_partition=hr[:, None] * frac)
