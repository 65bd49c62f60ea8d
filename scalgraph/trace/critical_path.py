"""Backward replay, part 2: the critical path and its indicators (seed 001; formulas in
shared/notes/trace-analysis-reference.md §5).

The path starts on the rank that entered MPI_Finalize last (without MPI_Finalize: the rank whose
trace ends last) at its last event, and walks backwards.  Whenever the active rank has a wait state
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
from scalgraph.trace import waitops
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


def _end_rank(fwd: ForwardResult) -> int:
    ctx = fwd.ctx
    names = [r.name for r in ctx.trace.regions]
    fin = [i for i, n in enumerate(names) if n == "MPI_Finalize"]
    ev = ctx.ev
    if fin:
        enters = np.flatnonzero((ev["kind"] == tm.ENTER) & np.isin(ev["region"], fin))
        if len(enters):
            return int(ctx.flat.rank[enters[np.argmax(ctx.time[enters])]])
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
    rank = _end_rank(fwd)
    t = float(ctx.time[off[rank + 1] - 1])
    seg_rank, seg_start, seg_end = [], [], []
    used = np.zeros(len(waits), bool)
    for _ in range(len(waits) + 1):
        ends, idx = per_rank[rank]
        j = int(np.searchsorted(ends, t, side="right")) - 1
        while j >= 0 and used[idx[j]]:             # a wait already passed (degenerate equal times)
            j -= 1
        if j < 0:
            seg_rank.append(rank), seg_start.append(min(first[rank], t)), seg_end.append(t)
            break
        w = idx[j]
        used[w] = True
        seg_rank.append(rank), seg_start.append(float(ends[j])), seg_end.append(t)
        rank, t = int(waits["cp_causer"][w]), float(ends[j])
    return np.array(seg_rank, np.int64), np.array(seg_start), np.array(seg_end)


@without_hugepage_advice
def critical_path(fwd: ForwardResult) -> CriticalPath:
    ctx = fwd.ctx
    ncp, p = ctx.ncallpaths, ctx.nranks
    seg_rank, seg_start, seg_end = walk(fwd)
    (ids, cps, vals), _ = processing_profiles(ctx, fwd.sync_waits, seg_rank, seg_start, seg_end)
    profile = waitops.segment_sum(cps * p + seg_rank[ids], vals, ncp * p).reshape(ncp, p)

    sync = fwd.sync_waits
    waiting = waitops.segment_sum(ctx.nest.callpath[sync["op"]] * p + sync["rank"], sync["wait"],
                                  ncp * p).reshape(ncp, p)
    t_l = np.maximum(fwd.excl_time - waiting, 0.0)
    return CriticalPath(seg_rank=seg_rank, seg_start=seg_start, seg_end=seg_end, profile=profile,
                        time=t_l, imbalance=waitops.imbalance_indicator(profile.sum(axis=1), t_l),
                        **performance_impact(profile, t_l))


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
    h_l = np.divide(total - l_l, h_sum, out=np.zeros_like(h_sum), where=h_sum > 0)
    hr = (h * h_l[None, :]).sum(axis=1)
    return dict(activity=activity, non_critical=non_critical, imbalance_impact=g[:, None] * frac,
                inter_partition=hr[:, None] * frac)
