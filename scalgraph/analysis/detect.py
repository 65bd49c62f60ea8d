"""The whole ScalAna analysis of one experiment: merge, fit, abnormal vertices, backtracking, ranking.

Input: the PSG and one RunProfile per scale.  Output: a plain dict (JSON-ready) that the report
writers in scalgraph/io/report.py print.  Definitions the report relies on:

* run time T(p): the largest per-rank sum of exclusive vertex times at scale p.
* merged time of a vertex at p: the mean over ranks (or, with k-means clustering of the ranks, the
  mean of the group that is slowest at that vertex).  "own" time excludes waiting inside MPI (an
  effect of another rank's lateness); a collective's own time is at least the time its
  least-waiting participant spent in it.
* scaling loss of a vertex: merged time at the largest scale P minus its ideal strong-scaling share
  T_v(p0) * p0 / P (see scaling.py), in seconds per rank; a loss within 3 sampling errors of the two
  merged times it compares (mean_sampling_error) counts as none.
* non-scalable: scaling loss >= min_share * T'(P), T' = run time without MPI_Init/Finalize.  abnormal: rank value > AbnormThd x median and
  >= min_share * T(P) above it.
* cost of a PPG vertex (v, r): its own-time excess over the median rank (counted only beyond the
  sampling error 3 sqrt(samples)/hz, see abnormal.sampling_noise) plus its own-time scaling
  loss (for a collective only when that loss is at least COLLECTIVE_GUARD x the threshold).  On each
  backtracking path the most costly vertex is the root cause of that path; causes are ranked by
  cost.  Nothing at or above min_share * T(P) -> "no scaling problem found".
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scalgraph.analysis.abnormal import (DEFAULT_ABNORM_THD, SAMPLING_SIGMAS, Abnormal, find_abnormal, own_time,
                                         sampling_noise)
from scalgraph.analysis.backtrack import Path, backtrack_all
from scalgraph.analysis.merge import cluster_means, cluster_ranks, merge_ranks
from scalgraph.analysis.ppg import build_ppg
from scalgraph.analysis.scaling import fit_models, scaling_loss
from scalgraph.model.profile import DEP_COLL, RunProfile
from scalgraph.model.psg import MPI, PSG

DEFAULT_MIN_SHARE = 0.05
STARTUP = frozenset({"MPI_Init", "MPI_Init_thread", "MPI_Finalize"})
COLLECTIVE_GUARD = 2.0
MAX_STARTS = 32           # backtracking starts per kind: enough for any report, bounded cost


def least_time_in_call(profile: RunProfile) -> np.ndarray:
    """[V] the smallest time any rank that made the call spent in it (0 where nobody called)."""
    t = np.where(profile.calls > 0, profile.time, np.inf).min(axis=0) if profile.nranks else np.zeros(profile.nvertices)
    return np.where(np.isfinite(t), t, 0.0)


def run_time(profile: RunProfile) -> float:
    return float(profile.time.sum(axis=1).max()) if profile.nranks else 0.0


def startup_vertices(psg: PSG) -> np.ndarray:
    """[V] MPI_Init/MPI_Finalize vertices: they grow with p under any launcher and are not the program's to fix."""
    return np.array([psg.kind_name(v) == "MPI" and psg.name[v] in STARTUP for v in range(len(psg))], dtype=bool)


def program_time(profile: RunProfile, startup: np.ndarray) -> float:
    """Run time without MPI start-up/shut-down: reporting floors are shares of it, so a slow MPI_Init
    (seconds under some launchers) cannot hide a cause that is large against the program's work."""
    return float(profile.time[:, ~startup].sum(axis=1).max()) if profile.nranks else 0.0


def mean_sampling_error(psg: PSG, profile: RunProfile) -> np.ndarray:
    """[V] standard error of the mean-over-ranks time of sampled vertices: sqrt(total samples)/hz/R
    (Poisson counts); 0 for MPI vertices, which the wrappers time exactly."""
    hz = float(profile.meta.get("hz") or 0.0)
    if hz <= 0 or profile.nranks == 0:
        return np.zeros(len(psg))
    se = np.sqrt(profile.samples.sum(axis=0)) / hz / profile.nranks
    return np.where(np.asarray(psg.kind) == MPI, 0.0, se)


def merged(values: np.ndarray, clusters: int) -> np.ndarray:
    """[V] merged value: mean over ranks, or, with k-means groups of ranks, per vertex the mean of
    the group that is slowest at that vertex (a group of late ranks is not averaged away)."""
    if clusters and clusters > 1:
        return cluster_means(values, cluster_ranks(values, clusters)).max(axis=0)
    return values.mean(axis=0)


@dataclass
class ScaleSummary:
    """What the analysis keeps of all scales: per-vertex vectors per scale, plus the largest
    scale's full arrays (for the PPG and backtracking)."""
    scales: list[int]
    times: dict[int, float]                 # run time per scale
    abnormal: dict[int, list[Abnormal]]
    y_total: np.ndarray                     # [V x scales] merged time
    y_own: np.ndarray                       # [V x scales] merged own time (collectives: see below)
    y_max: np.ndarray                       # [V x scales] slowest rank's time
    y_se: np.ndarray                        # [V x scales] sampling error of the merged (mean) time
    is_coll: np.ndarray                     # [V] vertices with collective dependence rows
    big: RunProfile                         # the largest scale
    own_big: np.ndarray                     # [R x V] its own time


def summarise_scales(psg: PSG, profiles: Mapping[int, RunProfile], abnorm_thd: float, min_share: float,
                     clusters: int) -> ScaleSummary:
    """Read each scale once (profiles may load lazily), reduce it to per-vertex vectors and drop it;
    only the largest scale's arrays stay."""
    scales = sorted(profiles)
    nv = len(psg)
    times: dict[int, float] = {}
    abnormal: dict[int, list[Abnormal]] = {}
    y_total, y_own, y_max, y_se = (np.zeros((nv, len(scales))) for _ in range(4))
    startup = startup_vertices(psg)
    for i, p in enumerate(scales):
        prof = profiles[p]
        own = own_time(psg, prof)
        times[p] = run_time(prof)
        y_total[:, i] = merged(prof.time, clusters)
        # a collective's own cost is at least what its last-arriving participant spent in it (the
        # shim may count all time inside MPI as waiting); that is how a collective that is slow by
        # itself shows its scaling loss.  (Not for p2p: all workers may wait on one master.)
        is_coll = np.zeros(nv, dtype=bool)
        is_coll[prof.deps["vertex"][prof.deps["kind"] == DEP_COLL]] = True
        y_own[:, i] = np.where(is_coll, np.maximum(merged(own, clusters), least_time_in_call(prof)),
                               merged(own, clusters))
        y_max[:, i] = prof.time.max(axis=0) if prof.nranks else 0.0
        y_se[:, i] = mean_sampling_error(psg, prof)
        abnormal[p] = find_abnormal(psg, prof, abnorm_thd, min_share * program_time(prof, startup), own)
    return ScaleSummary(scales, times, abnormal, y_total, y_own, y_max, y_se, is_coll, prof, own)


def analyse(psg: PSG, profiles: Mapping[int, RunProfile], abnorm_thd: float = DEFAULT_ABNORM_THD,
            min_share: float = DEFAULT_MIN_SHARE, clusters: int = 0, top: int = 5, weak: bool = False) -> dict:
    """`profiles` maps scale -> RunProfile and may load lazily (one scale in memory at a time)."""
    sm = summarise_scales(psg, profiles, abnorm_thd, min_share, clusters)
    scales, times, abnormal, is_coll, big, own_big = sm.scales, sm.times, sm.abnormal, sm.is_coll, sm.big, sm.own_big
    y_total, y_own, y_max = sm.y_total, sm.y_own, sm.y_max
    nv = len(psg)
    total_time = times[scales[-1]]

    # MPI start-up and shut-down grow with p under any launcher; they are not the program's to fix
    startup = startup_vertices(psg)
    startup_share = float(y_total[startup, -1].sum() / total_time) if total_time > 0 else 0.0
    floor = min_share * program_time(big, startup)
    y_total[startup] = 0.0
    y_own[startup] = 0.0
    for p in scales:
        abnormal[p] = [a for a in abnormal[p] if not startup[a.vertex]]

    fits = fit_models(scales, y_total)
    fits_max = fit_models(scales, y_max)
    multi = len(scales) >= 2
    loss_total = scaling_loss(scales, y_total, weak)[:, -1] if multi else np.zeros(nv)
    loss_own = scaling_loss(scales, y_own, weak)[:, -1] if multi else np.zeros(nv)
    # a loss within the sampling error of the two measurements it compares is no loss
    if multi:
        ratio = 1.0 if weak else scales[0] / scales[-1]
        loss_noise = SAMPLING_SIGMAS * np.hypot(sm.y_se[:, -1], ratio * sm.y_se[:, 0])
        loss_total = np.where(loss_total > loss_noise, loss_total, 0.0)
        loss_own = np.where(loss_own > loss_noise, loss_own, 0.0)
    # A collective's own cost is estimated from its least-waiting participant, and with more ranks
    # than cores every blocking call also collects scheduler delays there; such a collective is
    # named for its own scaling only when it loses at least twice the reporting threshold.
    loss_own = np.where(is_coll & (loss_own < COLLECTIVE_GUARD * floor), 0.0, loss_own)
    stats = merge_ranks(big.time)

    non_scalable = [int(v) for v in np.argsort(-loss_total, kind="stable")[:MAX_STARTS] if loss_total[v] >= floor and floor > 0]
    starts_ns = [(v, int(stats.argmax[v])) for v in non_scalable]
    starts_ab = [(a.vertex, int(r)) for a in abnormal[scales[-1]][:MAX_STARTS] for r in a.ranks[:2]]
    ppg = build_ppg(psg, big)
    paths = backtrack_all(ppg, starts_ns, starts_ab, big.wait.sum(axis=1))

    own_median = np.median(own_big, axis=0) if big.nranks else np.zeros(nv)
    # excess within the sampling error of a vertex is no evidence of extra work
    noise = sampling_noise(psg, big)

    def cost(v: int, r: int) -> float:
        if startup[v]:
            return 0.0
        excess = float(own_big[r, v] - own_median[v])
        return (excess if excess > noise[v] else 0.0) + float(loss_own[v])

    causes: dict[int, dict] = {}
    for path in paths:
        v, r, c = _root_of(path, cost, loss_own, floor)
        if c < floor or c <= 0:
            continue
        if v not in causes or causes[v]["cost"] < c:
            causes[v] = {"vertex": v, "rank": r, "cost": c, "path": path}
    ranked = sorted(causes.values(), key=lambda x: -x["cost"])[:top]

    return {
        "scales": scales,
        "run_time": {str(p): times[p] for p in scales},
        "thresholds": {"abnorm_thd": abnorm_thd, "min_share": min_share, "min_seconds": floor,
                       "clusters": clusters, "ideal": "weak" if weak else "strong"},
        "notes": _notes(multi, startup_share, min_share, scales[-1]),
        "problem_found": bool(ranked),
        "root_causes": [_cause_entry(psg, fits, x, scales, y_total, y_max, loss_total, abnormal, total_time, stats,
                                     fits_max, weak) for x in ranked],
        "non_scalable": [_vertex_brief(psg, v, fits, loss_total, total_time, stats) for v in non_scalable[:top * 2]],
        "abnormal": [_abnormal_entry(psg, a) for a in abnormal[scales[-1]][:top * 2]],
    }


def _notes(multi: bool, startup_share: float, min_share: float, big: int) -> list[str]:
    notes = []
    if not multi:
        notes.append("only one scale measured: abnormal ranks are shown, but the scaling fit needs at least "
                     "2 scales (run e.g. `scalgraph run -n 2,4,8`)")
    if startup_share >= min_share:
        notes.append(f"MPI start-up/shut-down (MPI_Init, MPI_Finalize) takes {startup_share * 100:.0f}% of the "
                     f"run time at p={big}; it is the MPI library's cost and is not ranked")
    return notes


def _root_of(path: Path, cost, loss_own: np.ndarray, floor: float) -> tuple[int, int, float]:
    costs = [cost(s.vertex, s.rank) for s in path.steps]
    best = int(np.argmax(costs)) if costs else 0
    if costs and costs[best] >= floor and costs[best] > 0:
        s = path.steps[best]
        return s.vertex, s.rank, costs[best]
    # nothing on the path did significant extra work: a non-scalable start is named with its own
    # loss (e.g. a collective that is slow by itself); waiting with no visible cause is no cause
    v, r = path.start
    return v, r, float(loss_own[v]) if path.reason == "non-scalable" else 0.0


def _where(psg: PSG, v: int) -> dict:
    return {"vertex": v, "location": psg.location(v), "file": psg.file[v], "line": psg.line_first[v],
            "line_last": psg.line_last[v], "function": psg.function[v], "kind": psg.kind_name(v),
            "name": psg.name[v]}


def _model(fits, v: int, scales: list[int]) -> dict:
    if fits.choice[v] < 0:
        return {"model": None, "note": "needs >= 2 scales"}
    pred = fits.predict(np.array([2 * scales[-1], 4 * scales[-1]], dtype=float))[v]
    return {"model": fits.model_text(v), "log_log_slope": float(fits.slope[v]),
            "cv_error": None if np.isnan(fits.cv_error[v]) else float(fits.cv_error[v]),
            "predicted": {str(2 * scales[-1]): float(pred[0]), str(4 * scales[-1]): float(pred[1])}}


def _vertex_brief(psg, v, fits, loss_total, total_time, stats) -> dict:
    return {**_where(psg, v), "mean_time": float(stats.mean[v]), "max_time": float(stats.max[v]),
            "imbalance": float(stats.imbalance[v]), "scaling_loss": float(loss_total[v]),
            "loss_share": float(loss_total[v] / total_time) if total_time > 0 else 0.0,
            "model": fits.model_text(v)}


def _abnormal_entry(psg: PSG, a: Abnormal, max_ranks: int = 16) -> dict:
    return {**_where(psg, a.vertex), "metric": a.metric, "median": a.median,
            "nranks": int(len(a.ranks)),
            "ranks": [{"rank": int(r), "ratio": float(q) if np.isfinite(q) else None, "excess": float(e)}
                      for r, q, e in list(zip(a.ranks, a.ratio, a.excess))[:max_ranks]]}


def _cause_entry(psg, fits, x, scales, y_total, y_max, loss_total, abnormal, total_time, stats, fits_max,
                 weak) -> dict:
    v = x["vertex"]
    path: Path = x["path"]
    # the walk goes on to the program's start; the part worth showing ends at the cause
    steps = path.steps
    for i, s in enumerate(steps):
        if (s.vertex, s.rank) == (v, x["rank"]):
            steps = steps[:i + 1]
            break
    own_abn = [_abnormal_entry(psg, a) for a in abnormal[scales[-1]] if a.vertex == v]
    abnormal_at = [p for p in scales if any(a.vertex == v for a in abnormal[p])]
    return {
        **_where(psg, v), "rank": x["rank"], "cost": x["cost"],
        "cost_share": x["cost"] / total_time if total_time > 0 else 0.0,
        "time_share": float(stats.mean[v] / total_time) if total_time > 0 else 0.0,
        "mean_time": {str(p): float(y_total[v, i]) for i, p in enumerate(scales)},
        "max_time": {str(p): float(y_max[v, i]) for i, p in enumerate(scales)},
        "scaling_loss": float(loss_total[v]), **_model(fits, v, scales),
        "slowest_rank": {**_model(fits_max, v, scales), "scaling_loss": float(
            scaling_loss(scales, y_max[v:v + 1], weak)[0, -1]) if len(scales) > 1 else 0.0},
        "abnormal": own_abn, "abnormal_at_scales": abnormal_at,
        "found_from": {"reason": path.reason, **_where(psg, path.start[0]), "rank": path.start[1]},
        "path": [{"vertex": s.vertex, "rank": s.rank, "via": s.via, "location": psg.location(s.vertex),
                  "kind": psg.kind_name(s.vertex), "name": psg.name[s.vertex]} for s in steps],
    }
