"""The whole ScalAna analysis of one experiment: merge, fit, abnormal vertices, backtracking, ranking.

Input: the PSG and one RunProfile per scale.  Output: a plain dict (JSON-ready) that the report
writers in scalgraph/io/report.py print.  Definitions the report relies on:

* source construct: the PSG vertices of one source construct (same kind, file, line span, name,
  function: unrolled or inlined copies, one loop reached from several call sites) are summed per
  rank before anything is ranked (constructs.py).  Every figure below is a construct's; a report
  line names the construct once with its `contexts` (the instances, heaviest first).
* run time T(p): the largest per-rank sum of exclusive vertex times at scale p.
* merged time of a construct at p: the mean over ranks (or, with k-means clustering of the ranks,
  the mean of the group that is slowest there).  "own" time excludes waiting inside MPI (an effect
  of another rank's lateness); a collective's own time is at least the time its least-waiting
  participant spent in it.
* scaling loss: merged time at the largest scale P minus its ideal strong-scaling share
  T(p0) * p0 / P (see scaling.py), in seconds per rank; a loss within 3 sampling errors of the two
  merged times it compares (sqrt(samples)/hz/R for sampled constructs) counts as none.
* non-scalable: scaling loss >= min_share * T'(P), T' = run time without MPI_Init/Finalize.
  abnormal: rank value > AbnormThd x median and >= min_share * T'(P) above it.
* excess of a compute construct on a rank: own time over the median rank, counted only beyond the
  sampling error 3 sqrt(samples)/hz, and no more than the exact excess of the computation segments
  it runs in when the profile measured them (segments.py).
* cost of a root cause (causes.py): seconds of waiting it explains.  A path that starts where a rank
  waited W seconds is explained by the compute construct on it with the largest excess e: cost
  min(e, W).  A compute construct that is abnormal or non-scalable by itself costs
  max(min(e, its rank's lateness), its own scaling loss).  An MPI call is its own cause only when
  its volume per rank grows with p, or (ranks not oversubscribed) its own time beats a log2(p)
  latency model by the floor (mpi_cost.py); it then costs its own scaling loss.  Nothing at or
  above min_share * T'(P) -> "no scaling problem found".  With thin evidence (evidence_notes.py)
  computation causes must also exceed 3 sampling errors of a typical rank.
* OpenMP threads (profile format 3, threads.py): threads of a rank that waited at a barrier lead to
  the last thread in and the construct where it exceeds its team's median most (cost min(excess,
  wait)); workers idle in the master's serial code lead to that code (cost time x (T-1)/T).
  `thread_abnormal` lists constructs where a thread exceeds AbnormThd x its team's median.

Each root_causes[] entry keeps file, line, line_last, location, function, kind, name, vertex (the
instance on the path), rank, cost, path, found_from, ... and adds `construct`, `contexts` (every
instance: call path, seconds on the cause's rank, the dominant one marked) and `explains`
({"what": "waiting" | "run time" | "own scaling" | "thread waiting" | "idle threads", "vertex", "rank", "location", "name": where the
path started, "waiting": seconds waited there, "seconds": the cost}) and `whatif` (whatif.py: the run
time with the cause fixed and the gain per scale, the gain extrapolated to 2P and 4P).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from scalgraph.analysis.abnormal import (DEFAULT_ABNORM_THD, SAMPLING_SIGMAS, Abnormal, abnormal_columns,
                                         noise_of_samples, own_time)
from scalgraph.analysis.backtrack import backtrack_all
from scalgraph.analysis.causes import Cause, compute_start_cause, keep_costliest, path_cause
from scalgraph.analysis.constructs import Constructs, constructs, contexts
from scalgraph.analysis.defaults import DEFAULT_MIN_SHARE, SHARED_CORE_DRIFT, abnorm_thd_for
from scalgraph.analysis.evidence_notes import evidence_notes, thin_evidence, typical_samples
from scalgraph.analysis.merge import cluster_means, cluster_ranks, merge_ranks
from scalgraph.analysis.mpi_cost import compute_stretch, oversubscribed, own_cause_rules, volume_per_rank
from scalgraph.analysis.ppg import build_ppg
from scalgraph.analysis.scaling import fit_models, scaling_loss
from scalgraph.analysis.segments import segment_excess
from scalgraph.analysis.threads import thread_abnormal, thread_abnormal_entry, thread_causes
from scalgraph.analysis.whatif import RankTimes, predict_fixed, rank_times
from scalgraph.model.profile import DEP_COLL, RunProfile
from scalgraph.model.psg import MPI, PSG

STARTUP = frozenset({"MPI_Init", "MPI_Init_thread", "MPI_Finalize"})
MAX_STARTS = 32           # backtracking starts per kind: enough for any report, bounded cost


def run_time(profile: RunProfile) -> float:
    return float(profile.time.sum(axis=1).max()) if profile.nranks else 0.0


def startup_vertices(psg: PSG) -> np.ndarray:
    """[V] MPI_Init/MPI_Finalize vertices: they grow with p under any launcher and are not the program's to fix."""
    return np.array([psg.kind_name(v) == "MPI" and psg.name[v] in STARTUP for v in range(len(psg))], dtype=bool)


def program_time(profile: RunProfile, startup: np.ndarray) -> float:
    """Run time without MPI start-up/shut-down: reporting floors are shares of it, so a slow MPI_Init
    (seconds under some launchers) cannot hide a cause that is large against the program's work."""
    return float(profile.time[:, ~startup].sum(axis=1).max()) if profile.nranks else 0.0


def merged(values: np.ndarray, clusters: int) -> np.ndarray:
    """[N] merged value of [R x N]: mean over ranks, or, with k-means groups of ranks, per column the
    mean of the group that is slowest there (a group of late ranks is not averaged away)."""
    if clusters and clusters > 1:
        return cluster_means(values, cluster_ranks(values, clusters)).max(axis=0)
    return values.mean(axis=0)


@dataclass
class Big:
    """The largest scale, per rank: the profile (for the PPG) and its construct arrays."""
    profile: RunProfile
    own: np.ndarray          # [R x C] own time
    time: np.ndarray         # [R x C]
    wait: np.ndarray         # [R x C]
    samples: np.ndarray      # [R x C]


@dataclass
class ScaleSummary:
    """Per-construct vectors of every scale ([C x scales]) and the largest scale's arrays."""
    scales: list[int]
    times: dict[int, float]                 # run time per scale
    abnormal: dict[int, list[Abnormal]]     # Abnormal.vertex is a construct id
    y_total: np.ndarray                     # merged time
    y_own: np.ndarray                       # merged own time (collectives: see module doc)
    y_max: np.ndarray                       # slowest rank's time
    y_se: np.ndarray                        # sampling error of the merged (mean) time
    y_max_se: np.ndarray                    # sampling error of the slowest rank's time
    y_reps: np.ndarray | None               # [C x scales x K] each repetition's mean time (nan: fewer; None: one run each)
    vol_bytes: np.ndarray                   # per-rank bytes moved (median over calling ranks)
    vol_calls: np.ndarray                   # per-rank calls
    oversubscribed: dict[int, bool]
    big: Big
    rank_times: dict[int, RankTimes]        # per scale, what the what-if needs (no second read)


def summarise_scales(psg: PSG, cons: Constructs, profiles: Mapping[int, RunProfile], abnorm_thd: float,
                     min_share: float, clusters: int, host_cores: int | None) -> ScaleSummary:
    """Read each scale once (profiles may load lazily), reduce it to per-construct vectors and drop
    it; only the largest scale's arrays stay."""
    scales = sorted(profiles)
    nc = len(cons)
    is_mpi = construct_is_mpi(psg, cons)
    startup = startup_vertices(psg)
    times: dict[int, float] = {}
    abnormal: dict[int, list[Abnormal]] = {}
    over: dict[int, bool] = {}
    y_total, y_own, y_max, y_se, y_max_se, vb, vc = (np.zeros((nc, len(scales))) for _ in range(7))
    rep_cols: list[np.ndarray | None] = []
    per_rank: dict[int, RankTimes] = {}
    for i, p in enumerate(scales):
        prof = profiles[p]
        own_v = own_time(psg, prof)
        per_rank[p] = rank_times(psg, cons, prof, own_v, startup)
        own = cons.sum_columns(own_v)
        time, wait = cons.sum_columns(prof.time), cons.sum_columns(prof.wait)
        samples = cons.sum_columns(prof.samples)
        calls = cons.sum_columns(prof.calls)
        hz = float(prof.meta.get("hz") or 0.0)
        times[p] = run_time(prof)
        y_total[:, i] = merged(time, clusters)
        # a collective's own cost is at least what its last-arriving participant spent in it (the
        # shim may count all time inside MPI as waiting).  (Not for p2p: all workers may wait on one master.)
        is_coll = np.zeros(nc, dtype=bool)
        is_coll[cons.cid[prof.deps["vertex"][prof.deps["kind"] == DEP_COLL]]] = True
        least = np.where(calls > 0, time, np.inf).min(axis=0) if prof.nranks else np.zeros(nc)
        least = np.where(np.isfinite(least), least, 0.0)
        y_own[:, i] = np.where(is_coll, np.maximum(merged(own, clusters), least), merged(own, clusters))
        y_max[:, i] = time.max(axis=0) if prof.nranks else 0.0
        if hz > 0 and prof.nranks:
            slowest = samples[time.argmax(axis=0), np.arange(nc)]
            y_max_se[:, i] = np.where(is_mpi, 0.0, np.sqrt(slowest) / hz)
        rep_cols.append(None if prof.rep_mean_time is None else cons.sum_columns(prof.rep_mean_time).T)
        y_se[:, i] = (np.where(is_mpi, 0.0, np.sqrt(samples.sum(axis=0)) / hz / prof.nranks)
                      if hz > 0 and prof.nranks else 0.0)
        noise = noise_of_samples(samples, is_mpi, hz)
        floor_p = min_share * program_time(prof, startup)
        # computation is sampled thread-CPU; its floor is the wall floor in thread-CPU: divided by the
        # rank's own stretch, at least the median rank's (compute_stretch; wall_stretch in analyse)
        stretch_r = np.maximum(per_rank[p].stretch, compute_stretch(per_rank[p].stretch))
        floor_cols = np.where(is_mpi[None, :], floor_p, floor_p / stretch_r[:, None])
        abnormal[p] = abnormal_columns(own, wait, is_mpi, noise, abnorm_thd, floor_cols)
        vb[:, i], vc[:, i] = volume_per_rank(prof, cons, is_mpi)
        over[p] = oversubscribed(prof, host_cores)
    return ScaleSummary(scales, times, abnormal, y_total, y_own, y_max, y_se, y_max_se, _stack_reps(rep_cols, nc),
                        vb, vc, over, Big(prof, own, time, wait, samples), per_rank)


def _stack_reps(cols: list[np.ndarray | None], nc: int) -> np.ndarray | None:
    """[C x scales x K] repetitions per scale (nan where a scale has fewer), or None when no scale has two."""
    k = max((c.shape[1] for c in cols if c is not None), default=1)
    if k < 2:
        return None
    out = np.full((nc, len(cols), k), np.nan)
    for i, c in enumerate(cols):
        if c is not None:
            out[:, i, :c.shape[1]] = c
    return out


def construct_is_mpi(psg: PSG, cons: Constructs) -> np.ndarray:
    return np.array([psg.kind[inst[0]] == MPI for inst in cons.instances], dtype=bool)


def analyse(psg: PSG, profiles: Mapping[int, RunProfile], abnorm_thd: float = DEFAULT_ABNORM_THD,
            min_share: float = DEFAULT_MIN_SHARE, clusters: int = 0, top: int = 5, weak: bool | None = False,
            host_cores: int | None = None) -> dict:
    """`profiles` maps scale -> RunProfile and may load lazily (one scale in memory at a time).
    `host_cores`: cores of the machine the runs used, for profiles that do not record them."""
    cons = constructs(psg)
    sm = summarise_scales(psg, cons, profiles, abnorm_thd, min_share, clusters, host_cores)
    scales, times, abnormal, big = sm.scales, sm.times, sm.abnormal, sm.big
    y_total, y_own, y_max = sm.y_total, sm.y_own, sm.y_max
    nc = len(cons)
    is_mpi = construct_is_mpi(psg, cons)
    total_time = times[scales[-1]]

    # MPI start-up and shut-down grow with p under any launcher; they are not the program's to fix
    startup_v = startup_vertices(psg)
    startup = np.array([startup_v[inst[0]] for inst in cons.instances], dtype=bool)
    startup_share = float(y_total[startup, -1].sum() / total_time) if total_time > 0 else 0.0
    floor = min_share * program_time(big.profile, startup_v)
    y_total[startup] = 0.0
    y_own[startup] = 0.0
    if sm.y_reps is not None:
        sm.y_reps[startup] = 0.0
    for p in scales:
        abnormal[p] = [a for a in abnormal[p] if not startup[a.vertex]]

    ideal_note = []
    if weak is None:        # not said: the measured computation tells (infer_weak)
        weak, ideal_note = infer_weak(scales, y_total, is_mpi | startup)
    # the spread between repetitions and the Poisson error of sampled times are noise, not growth
    fits = fit_models(scales, y_total, reps=sm.y_reps, se=sm.y_se)
    fits_max = fit_models(scales, y_max, se=sm.y_max_se)
    multi = len(scales) >= 2
    shared = sm.oversubscribed[scales[-1]]
    loss_total = counted_loss(sm, y_total, is_mpi, weak)[:, -1]
    own_losses = counted_loss(sm, y_own, is_mpi, weak)      # every scale's: the what-if removes them
    loss_own = own_losses[:, -1]
    # an MPI call is its own cause only by what the scheduler cannot fake (mpi_cost.py)
    rules = own_cause_rules(scales, sm.vol_bytes, sm.vol_calls, y_own, floor, sm.oversubscribed[scales[-1]])
    grows = np.array([bool(x) for x in rules], dtype=bool)
    own_mpi_cost = np.where(is_mpi & grows & (loss_own >= floor) & (floor > 0), loss_own, 0.0)
    own_comp_loss = np.where(is_mpi, 0.0, loss_own)
    stats = merge_ranks(big.time)

    ns_mask = ((loss_total >= floor) | (own_mpi_cost > 0)) & (floor > 0)
    non_scalable = [int(c) for c in np.argsort(-loss_total, kind="stable") if ns_mask[c]][:MAX_STARTS]
    prof = big.profile

    def instance(c: int, r: int, values: np.ndarray) -> int:
        return cons.dominant(c, values[r])

    starts_ns = [(instance(c, int(stats.argmax[c]), prof.time), int(stats.argmax[c])) for c in non_scalable]
    starts_ab = [(instance(a.vertex, int(r), prof.wait if a.metric == "wait" else prof.time), int(r))
                 for a in abnormal[scales[-1]][:MAX_STARTS] for r in a.ranks[:2]]
    ppg = build_ppg(psg, prof)
    paths = backtrack_all(ppg, starts_ns, starts_ab, prof.wait.sum(axis=1))

    own_median = np.median(big.own, axis=0) if prof.nranks else np.zeros(nc)
    noise = noise_of_samples(big.samples, is_mpi, float(prof.meta.get("hz") or 0.0))

    # ranks sharing cores differ by more than AbnormThd doing identical work (defaults.py)
    excess_thd = abnorm_thd_for(abnorm_thd, shared)

    @lru_cache(maxsize=None)
    def exact_excess(c: int, r: int) -> float | None:
        """Rank r's exact excess in the segments construct c runs in (None: not measured), once per
        construct and rank: excess() and a computation path's lateness cap both ask."""
        return segment_excess(psg, prof, cons.instances[c], r, cons.cid)

    @lru_cache(maxsize=None)
    def excess(c: int, r: int) -> float:
        """Sampled excess of an abnormal rank beyond the sampling error, no more than the exact segment excess.
        Abnormal (above abnorm_thd x the median rank, as the trace verdict asks): identical work's
        thread-CPU differs between ranks sharing cores by more than the sampling error (caches
        flushed at each switch; 1.2x on one rank of the balanced sample), which is not a cause."""
        if startup[c] or is_mpi[c]:
            return 0.0
        if big.own[r, c] <= excess_thd * own_median[c]:
            return 0.0
        e = float(big.own[r, c] - own_median[c])
        if e <= noise[c]:
            return 0.0
        exact = exact_excess(c, r)
        return e if exact is None else min(e, exact)

    # A computation's cost is sampled thread-CPU, the floor a share of the wall-clock run time, which
    # ranks sharing cores (with each other or other jobs) stretch while thread-CPU stays: the
    # computation floor is the wall floor divided by that stretch (compute_stretch).
    stretch = compute_stretch(sm.rank_times[scales[-1]].stretch)
    cpu_floor = floor / stretch
    # with thin evidence a computation cost within a rank's sampling error is not told from noise
    evidence = thin_evidence(prof, cpu_floor)
    thin, _, rank_error = evidence
    comp_floor = max(cpu_floor, rank_error) if thin else cpu_floor
    # how late a rank is by its own computation: time inside MPI is left out, since with more ranks
    # than cores a rank's time in MPI calls holds descheduling the shim cannot tell from work
    rank_comp = big.own[:, ~startup & ~is_mpi].sum(axis=1)
    lateness = rank_comp - (np.median(rank_comp) if prof.nranks else 0.0)
    no_cap = np.full(prof.nranks, np.inf)
    big_times = sm.rank_times[scales[-1]]
    # [R] per construct, asked for by the floor check and again by the report's cost_wall
    construct_stretch = lru_cache(maxsize=None)(
        lambda c: big_times.segment_stretch(psg, list(cons.instances[c])))

    def wall_stretch(x: Cause) -> float:
        """Wall seconds per thread-CPU second of x's computation on its rank: its own segments', at
        least the median rank's (CloverLeaf's 0.28 s planted loop took 6.5x its thread-CPU at 8 ranks
        on 2 cores, the median rank's short segments 1.0x: at the median's stretch it was no cause)."""
        if is_mpi[x.construct]:
            return 1.0
        seg = construct_stretch(x.construct)
        return max(stretch, float(seg[x.rank])) if 0 <= x.rank < len(seg) else stretch

    def big_enough(x: Cause) -> bool:
        """At least the floor in wall-clock seconds, and beyond a rank's sampling error when thin."""
        if is_mpi[x.construct]:
            return x.cost >= floor
        if thin and x.cost < rank_error:
            return False
        return x.cost * wall_stretch(x) >= floor
    vertex_is_mpi = np.asarray(psg.kind) == MPI
    found: list[Cause] = []
    for path in paths:
        v0, r0 = path.start
        if startup_v[v0]:
            continue
        if psg.kind[v0] == MPI:
            cause = path_cause(path, cons.cid, vertex_is_mpi, excess,
                               float(big.wait[r0, cons.cid[v0]]), own_mpi_cost)
        else:
            # the rank's lateness overall caps the cost only where the computation between MPI calls
            # was not measured: with it, excess() is already capped by the rank's excess in the segments
            # the construct runs in, the lateness the waiting at their MPI calls sees (overall, other
            # code lighter on that rank hid a 0.4 s loop in miniAMR: lateness 0.23 s)
            measured_segments = exact_excess(int(cons.cid[v0]), r0)
            cause = compute_start_cause(path, cons.cid, excess, lateness if measured_segments is None else no_cap,
                                        own_comp_loss)
        if cause is not None and floor > 0 and big_enough(cause):
            found.append(cause)
    # OpenMP: threads that waited at a barrier for the last one in, workers idle in serial code (threads.py)
    found += [x for x in thread_causes(psg, cons, prof, comp_floor, startup_v) if x.cost >= comp_floor]
    ranked = keep_costliest(found)[:top]

    for x in ranked:
        if x.explains.get("what") == "own scaling":
            c = x.construct
            x.explains["rule"] = rules[c]
            x.explains["per_rank"] = {"bytes": {str(p): float(sm.vol_bytes[c, i]) for i, p in enumerate(scales)},
                                      "calls": {str(p): float(sm.vol_calls[c, i]) for i, p in enumerate(scales)}}
    shown_ns = non_scalable[:top * 2]

    column = {p: j for j, p in enumerate(scales)}
    whatif = predict_fixed(psg, cons, sm.rank_times, [x.construct for x in ranked],
                           scaling_loss_of=lambda c: bool(loss_total[c] >= floor > 0),
                           loss_of=lambda c, p: float(own_losses[c, column[p]]), run_times=times) if ranked else []
    return {
        "scales": scales,
        "run_time": {str(p): times[p] for p in scales},
        "thresholds": {"abnorm_thd": abnorm_thd, "min_share": min_share, "min_seconds": floor,
                       "stretch": stretch, "min_cpu_seconds": cpu_floor,
                       "clusters": clusters, "ideal": "weak" if weak else "strong"},
        "notes": (_notes(multi, startup_share, min_share, scales[-1]) + ideal_note
                  + evidence_notes(prof, cpu_floor, scales[-1], evidence)),
        "oversubscribed": {str(p): sm.oversubscribed[p] for p in scales},
        "sampling": {"thin": thin, "median_samples": typical_samples(prof), "error_seconds": rank_error},
        "problem_found": bool(ranked),
        "root_causes": [{**_cause_entry(psg, cons, prof, fits, x, scales, y_total, y_max, loss_total, abnormal,
                                        total_time, stats, fits_max, weak, wall_stretch(x)), "whatif": w}
                        for x, w in zip(ranked, whatif)],
        "non_scalable": [_construct_brief(psg, cons, c, fits, loss_total, total_time, stats, prof.time)
                         for c in shown_ns],
        "abnormal": [_abnormal_entry(psg, cons, a, prof) for a in abnormal[scales[-1]][:top * 2]],
        "thread_abnormal": [thread_abnormal_entry(psg, a) for a in
                            thread_abnormal(psg, cons, prof, abnorm_thd, comp_floor, startup_v)[:top * 2]],
    }


def counted_loss(sm: ScaleSummary, y: np.ndarray, is_mpi: np.ndarray, weak: bool) -> np.ndarray:
    """[C x n] scaling loss per rank at each scale (scaling.py: the merged time beyond the ideal from
    the smallest scale, so none there), as detect counts it: a loss within the sampling error of the
    two measurements it compares is no loss; with ranks sharing cores at that scale, a computation's
    loss counts beyond what time-sharing can fake (defaults.py)."""
    scales = sm.scales
    if len(scales) < 2:
        return np.zeros_like(y)
    loss = scaling_loss(scales, y, weak)
    for j, p in enumerate(scales):
        ratio = 1.0 if weak else scales[0] / p
        noise = SAMPLING_SIGMAS * np.hypot(sm.y_se[:, j], ratio * sm.y_se[:, 0])
        drift = np.where(is_mpi, 0.0, (SHARED_CORE_DRIFT - 1.0) * ratio if sm.oversubscribed[p] else 0.0)
        loss[:, j] = np.maximum(np.where(loss[:, j] > noise, loss[:, j], 0.0) - drift * y[:, 0], 0.0)
    return loss


def infer_weak(scales: list[int], y_total: np.ndarray, not_computation: np.ndarray) -> tuple[bool, list[str]]:
    """Strong or weak scaling, from the program's own computation: the computation summed over all
    ranks (mean per rank x p) stays about constant under strong scaling and grows like p under weak
    scaling (a per-rank problem size, as HPCCG and AMG take).  Judging a weak-scaling program by the
    strong-scaling ideal makes every kernel look non-scalable; so weak is chosen when the total grew
    by more than the geometric middle of the two, sqrt(P / p0).  (A planted or real hot spot on a few
    ranks moves the total far less than that.)"""
    if len(scales) < 2:
        return False, []
    comp = y_total[~not_computation].sum(axis=0) * np.asarray(scales, dtype=float)
    if comp[0] <= 0:
        return False, []
    growth, expected = float(comp[-1] / comp[0]), scales[-1] / scales[0]
    weak = growth > np.sqrt(expected)
    how = "weak (per-rank time should stay constant)" if weak else "strong (per-rank time should fall like 1/p)"
    return weak, [f"scaling judged {how}: the computation summed over the ranks grew {growth:.2f}x from p={scales[0]} "
                  f"to p={scales[-1]} (weak scaling: {expected:g}x, strong: 1x); say --weak or --strong to choose"]


def _notes(multi: bool, startup_share: float, min_share: float, big: int) -> list[str]:
    notes = []
    if not multi:
        notes.append("only one scale measured: abnormal ranks are shown, but the scaling fit needs at least "
                     "2 scales (run e.g. `scalgraph run -n 2,4,8`)")
    if startup_share >= min_share:
        notes.append(f"MPI start-up/shut-down (MPI_Init, MPI_Finalize) takes {startup_share * 100:.0f}% of the "
                     f"run time at p={big}; it is the MPI library's cost and is not ranked")
    return notes


def _where(psg: PSG, v: int) -> dict:
    return {"vertex": v, "location": psg.location(v), "file": psg.file[v], "line": psg.line_first[v],
            "line_last": psg.line_last[v], "function": psg.function[v], "kind": psg.kind_name(v),
            "name": psg.name[v]}


def _model(fits, c: int, scales: list[int]) -> dict:
    if len(scales) < 2 or fits.choice[c] < 0:
        return {"model": None, "note": "needs >= 2 scales"}
    pred = fits.predict(np.array([2 * scales[-1], 4 * scales[-1]], dtype=float))[c]
    at, low, high = fits.interval(c)
    return {"model": fits.model_text(c), "log_log_slope": float(fits.slope[c]),
            "cv_error": None if np.isnan(fits.cv_error[c]) else float(fits.cv_error[c]),
            "predicted": {str(2 * scales[-1]): float(pred[0]), str(4 * scales[-1]): float(pred[1])},
            "interval": {"at": at, "low": low, "high": high} if np.isfinite(low) and np.isfinite(high) else None,
            "model_notes": fits.notes(c)}


def _construct_brief(psg, cons: Constructs, c, fits, loss_total, total_time, stats, time) -> dict:
    v = cons.dominant(c, time.sum(axis=0))
    return {**_where(psg, v), "construct": int(c), "instances": len(cons.instances[c]),
            "contexts": contexts(psg, cons.instances[c], time.sum(axis=0) / max(time.shape[0], 1)),
            "mean_time": float(stats.mean[c]), "max_time": float(stats.max[c]),
            "imbalance": float(stats.imbalance[c]), "scaling_loss": float(loss_total[c]),
            "loss_share": float(loss_total[c] / total_time) if total_time > 0 else 0.0,
            "model": fits.model_text(c)}


def _abnormal_entry(psg: PSG, cons: Constructs, a: Abnormal, prof: RunProfile, max_ranks: int = 16) -> dict:
    values = prof.wait if a.metric == "wait" else prof.time
    r = int(a.ranks[0]) if len(a.ranks) else 0
    v = cons.dominant(a.vertex, values[r]) if prof.nranks else cons.instances[a.vertex][0]
    return {**_where(psg, v), "construct": int(a.vertex), "instances": len(cons.instances[a.vertex]),
            "metric": a.metric, "median": a.median, "nranks": int(len(a.ranks)),
            "ranks": [{"rank": int(r), "ratio": float(q) if np.isfinite(q) else None, "excess": float(e)}
                      for r, q, e in list(zip(a.ranks, a.ratio, a.excess))[:max_ranks]]}


def _cause_entry(psg, cons: Constructs, prof: RunProfile, fits, x: Cause, scales, y_total, y_max, loss_total,
                 abnormal, total_time, stats, fits_max, weak, stretch) -> dict:
    c, v, prof_rank = x.construct, x.vertex, x.rank
    path = x.path
    # the walk goes on to the program's start; the part worth showing ends at the cause
    steps = path.steps
    for i, s in enumerate(steps):
        if cons.cid[s.vertex] == c and s.rank == prof_rank:
            steps = steps[:i + 1]
            break
    big = abnormal[scales[-1]]
    own_abn = [a for a in big if a.vertex == c]
    abnormal_at = [p for p in scales if any(a.vertex == c for a in abnormal[p])]
    start_v, start_r = path.start
    # a computation's thread-CPU costs the run `stretch` wall seconds per second (detect's wall_stretch)
    cost_wall = x.cost * (1.0 if psg.kind[v] == MPI else stretch)
    return {
        **_where(psg, v), "construct": int(c), "rank": prof_rank, "cost": x.cost,
        "cost_wall": cost_wall, "cost_share": cost_wall / total_time if total_time > 0 else 0.0,
        "explains": {**x.explains, "location": psg.location(x.explains["vertex"]),
                     "name": psg.name[x.explains["vertex"]], "kind": psg.kind_name(x.explains["vertex"])},
        "contexts": contexts(psg, cons.instances[c], prof.time[prof_rank]),
        "time_share": float(stats.mean[c] / total_time) if total_time > 0 else 0.0,
        "mean_time": {str(p): float(y_total[c, i]) for i, p in enumerate(scales)},
        "max_time": {str(p): float(y_max[c, i]) for i, p in enumerate(scales)},
        "scaling_loss": float(loss_total[c]), **_model(fits, c, scales),
        "slowest_rank": {**_model(fits_max, c, scales), "scaling_loss": float(
            scaling_loss(scales, y_max[c:c + 1], weak)[0, -1]) if len(scales) > 1 else 0.0},
        "abnormal": [_abnormal_entry(psg, cons, a, prof) for a in own_abn],
        "abnormal_at_scales": abnormal_at,
        "found_from": {"reason": path.reason, **_where(psg, start_v), "rank": start_r},
        "path": [{"vertex": s.vertex, "rank": s.rank, "via": s.via, "location": psg.location(s.vertex),
                  "kind": psg.kind_name(s.vertex), "name": psg.name[s.vertex]} for s in steps],
    }
