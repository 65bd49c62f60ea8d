"""What-if, profile mode: the run time each reported root cause would leave if it were fixed.

A cause is fixed by removing its excess: on every rank its own time is brought down to the median
rank's (the imbalance that made others wait), and, for a construct whose time does not shrink as it
should with p, a further scaling loss below it: the loss detect measures at that scale against the
ideal from the smallest scale (strong: T(p0) p0 / p; weak: T(p0)), so none at the smallest scale.
The fix is the one the diagnosis asks for at the largest scale P: the share of the cause's time the
late ranks had there beyond the typical rank is removed at every scale, also where every rank runs
the cause (model/fix.py, predict_fixed).
The change then travels along the dependences the way the profile sees them: a rank's busy time B_r is
its own time (computation and the MPI work that is not waiting), W_r its waiting; the run is as long
as its longest rank, B_r + W_r.  Removing x_r from each rank, a rank still waits for the busiest rank
left and keeps the waiting the removed work cannot explain (gain_with_waiting):

    fixed = max_r (B_r - x_r + max(W_r - (max_q x_q - x_r), max_q (B_q - x_q) - (B_r - x_r)))

which is the bulk-synchronous max_r B_r - max_r (B_r - x_r) shortening where every rank waits for the
busiest one.  The waiting the cause explains disappears with it, waiting it does not explain stays.

Gains are wall-clock seconds, as the user will measure them.  Sampled times are thread-CPU; where the
profile measured the computation between MPI calls exactly (wall and thread-CPU, format 2), a rank's
busy time is that wall time plus its MPI work, and the cause's sampled seconds are stretched by the
wall/CPU ratio of the computation segments it runs in (a rank that got a quarter of a core on a
loaded or oversubscribed machine takes four wall seconds per CPU second, and gives them back when
fixed; a long loop that waiting ranks and other jobs crowd gets less than the rank's short bursts:
cg at p=2 under load 12-17, 3.9-4.8 wall seconds per CPU second in the audit loop's segment against
3.6-4.2 over the rank's computation, the gain 0.3-0.6 s too small).  Where the
late rank changes from one iteration to the next, the summed profile hides it and the gain is an
upper bound of what the profile can know (a trace's re-timing, scalgraph/trace/retime.py, sees the
iterations).  The gain is fitted over the scales like any time and extrapolated to 2P and 4P.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scalgraph.analysis.constructs import Constructs
from scalgraph.analysis.scaling import fit_models
from scalgraph.analysis.segments import measured
from scalgraph.model.fix import extra_share, fix_level, typical
from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import MPI, PSG


def bulk_synchronous_gain(busy: np.ndarray, removal: np.ndarray) -> float:
    """Seconds the run shortens when rank r's busy time loses removal[r] (both [R])."""
    if busy.size == 0:
        return 0.0
    removal = np.clip(removal, 0.0, busy)
    return float(max(busy.max() - (busy - removal).max(), 0.0))


def gain_with_waiting(busy: np.ndarray, wait: np.ndarray, removal: np.ndarray) -> float:
    """Seconds the run shortens when rank r's busy time loses removal[r], where rank r also waited
    wait[r] (all [R]).  The run is as long as its longest rank, busy plus waiting.  Fixed, a rank still
    waits for the busiest rank left (the bulk-synchronous part), and keeps the waiting the removed
    work cannot explain: what exceeds the largest removal beyond its own (a serialised master and
    worker wait for each other in turn, not for the busiest rank: with one worker, the worker's
    waiting for the master's merge goes with the merge; a rank's own removal explains none of its
    waiting: zeusmp at p=2, both ranks run the loop and wait for each other's noise, which stays).
    Where every rank's waiting is the busiest rank's lead this is bulk_synchronous_gain."""
    if busy.size == 0:
        return 0.0
    removal = np.clip(removal, 0.0, busy)
    left = busy - removal
    still = np.maximum(wait - (removal.max() - removal), left.max() - left)
    return float(max((busy + wait).max() - (left + still).max(), 0.0))


def removal_per_rank(own_c: np.ndarray, level: np.ndarray | float | None = None) -> np.ndarray:
    """[R] seconds a fix removes from each rank: the excess over the (lower) median rank, or everything
    above `level` ([R] or one value: the level the fix brings every rank down to, model/fix.py, less
    a scaling loss), whichever is larger."""
    if own_c.size == 0:
        return own_c
    out = np.maximum(own_c - typical(own_c), 0.0)
    if level is not None:
        out = np.maximum(out, own_c - level)
    return np.maximum(out, 0.0)


def rank_stretch(prof: RunProfile) -> np.ndarray:
    """[R] wall seconds per thread-CPU second of each rank's computation (1 where not measured)."""
    if not measured(prof):
        return np.ones(prof.nranks)
    wall, cpu = prof.comp_wall.sum(axis=1), prof.comp_cpu.sum(axis=1)
    return np.where(cpu > 0, np.maximum(wall / np.where(cpu > 0, cpu, 1.0), 1.0), 1.0)


def rank_busy(psg: PSG, prof: RunProfile, own: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """[R] wall seconds each rank was busy: its computation (exact where measured) and the MPI work
    that was not waiting, MPI start-up and shut-down left out."""
    if not measured(prof):
        return own[:, ~excluded].sum(axis=1)
    is_mpi = np.asarray(psg.kind) == MPI
    return prof.comp_wall.sum(axis=1) + own[:, is_mpi & ~excluded].sum(axis=1)


@dataclass
class RankTimes:
    """What the what-if needs of one scale, kept from detect's single read of its profile."""
    own: np.ndarray        # [R x C] own time per construct (thread-CPU where sampled)
    busy: np.ndarray       # [R] wall seconds busy (rank_busy)
    stretch: np.ndarray    # [R] wall seconds per CPU second of computation (rank_stretch)
    wait: np.ndarray       # [R] wall seconds waiting in MPI calls, start-up and shut-down left out
    comp_wall: np.ndarray | None = None   # [R x V] measured computation before each MPI call (wall, CPU)
    comp_cpu: np.ndarray | None = None

    def segment_stretch(self, psg: PSG, instances: list[int]) -> np.ndarray:
        """[R] wall seconds per CPU second of the computation segments the given vertices run in
        (segment_stretch)."""
        return segment_stretch(psg, self.comp_wall, self.comp_cpu, self.stretch, instances)


def segment_stretch(psg: PSG, comp_wall: np.ndarray | None, comp_cpu: np.ndarray | None, whole: np.ndarray,
                    instances: list[int]) -> np.ndarray:
    """[R] wall seconds per CPU second of the computation segments the given vertices run in, from the
    shim's [R x V] computation before each MPI call (a long loop that other jobs or waiting ranks
    crowd is stretched more than the rank's other computation); `whole` [R], the rank's whole
    computation's (rank_stretch), where those segments are not known."""
    if comp_wall is None or comp_cpu is None or not instances:
        return whole
    from scalgraph.analysis.segments import ANY, _Entry, ending_mpi
    entry = _Entry(psg, (comp_wall > 0).any(axis=0) | (comp_cpu > 0).any(axis=0))
    ends = set().union(*(ending_mpi(psg, v, entry) for v in instances))
    if not ends or ANY in ends:
        return whole
    cols = np.array(sorted(ends))
    wall, cpu = comp_wall[:, cols].sum(axis=1), comp_cpu[:, cols].sum(axis=1)
    return np.where(cpu > 0, np.maximum(wall / np.where(cpu > 0, cpu, 1.0), 1.0), whole)


def rank_times(psg: PSG, cons: Constructs, prof: RunProfile, own: np.ndarray, excluded: np.ndarray) -> RankTimes:
    """One scale's RankTimes from its profile and its [R x V] own time (abnormal.own_time)."""
    is_mpi = np.asarray(psg.kind) == MPI
    wait = prof.wait[:, is_mpi & ~excluded].sum(axis=1)
    segs = measured(prof)
    return RankTimes(cons.sum_columns(own), rank_busy(psg, prof, own, excluded), rank_stretch(prof), wait,
                     prof.comp_wall if segs else None, prof.comp_cpu if segs else None)


def nested_constructs(psg: PSG, cons: Constructs, c: int) -> list[int]:
    """The computation constructs a fix of construct c also fixes: c, and every non-MPI construct of
    the same file whose lines lie inside c's (a loop nest's body, or an inlined copy of it that the
    compiler left with another shape: zeusmp's boundary loop is a LOOP at 29-31 in one copy, a COMP
    at 30 in the other)."""
    v = cons.instances[c][0]
    if psg.kind[v] == MPI:
        return [c]
    file, lo, hi = psg.file[v], psg.line_first[v], psg.line_last[v]
    out = [c]
    for d, inst in enumerate(cons.instances):
        u = inst[0]
        if (d != c and psg.kind[u] != MPI and psg.file[u] == file and lo <= psg.line_first[u]
                and psg.line_last[u] <= hi and psg.line_first[u] > 0):
            out.append(d)
    return out


def predict_fixed(psg: PSG, cons: Constructs, per_scale: Mapping[int, RankTimes], constructs_: Sequence[int],
                  scaling_loss_of: Callable[[int], bool], loss_of: Callable[[int, int], float],
                  run_times: Mapping[int, float]) -> list[dict]:
    """Per construct in `constructs_`: run time with it (and the constructs nested in its lines)
    fixed per scale, the gain, and the gain extrapolated to 2P and 4P.  `per_scale`: each scale's
    RankTimes.  `scaling_loss_of(c)`: the construct's scaling loss is removed too; `loss_of(c, p)`:
    that loss per rank at scale p, as detect measures it (0 at the smallest scale).

    The fix is the one the diagnosis asks for at the largest scale P: the late ranks' extra there, a
    share of the cause's time, removed at every scale (model/fix.py: at a smaller scale every rank may
    run the cause, zeusmp's boundary loop on both ranks at p=2, on 2 of 8 at p=8, and its own median
    then hides it), and for a scaling loss every rank brought a further loss(p) below that level."""
    groups = [nested_constructs(psg, cons, c) for c in constructs_]
    scales = sorted(per_scale)
    big = scales[-1]

    def own_of(rt: RankTimes, i: int, c: int, loss: bool) -> np.ndarray:
        return rt.own[:, c] if loss else rt.own[:, groups[i]].sum(axis=1)

    losses = [scaling_loss_of(c) for c in constructs_]
    share_big = [extra_share(own_of(per_scale[big], i, c, losses[i])) for i, c in enumerate(constructs_)]
    gains = np.zeros((len(constructs_), len(scales)))
    for j, p in enumerate(scales):
        rt = per_scale[p]
        for i, c in enumerate(constructs_):
            own_g = own_of(rt, i, c, losses[i])
            level = fix_level(own_g, share_big[i]) - (loss_of(c, p) if losses[i] else 0.0)
            stretch = rt.segment_stretch(psg, [v for d in groups[i] for v in cons.instances[d]])
            removal = removal_per_rank(own_g * stretch, max(level, 0.0) * stretch)
            gains[i, j] = gain_with_waiting(rt.busy, rt.wait, removal)
    out = []
    fits = fit_models(scales, gains) if len(scales) >= 2 else None
    for i, c in enumerate(constructs_):
        entry = {
            "method": "profile",
            "gain": {str(p): float(gains[i, j]) for j, p in enumerate(scales)},
            "fixed_run_time": {str(p): float(max(run_times[p] - gains[i, j], 0.0)) for j, p in enumerate(scales)},
            "gain_share": {str(p): float(gains[i, j] / run_times[p]) if run_times[p] > 0 else 0.0
                           for j, p in enumerate(scales)},
        }
        if fits is not None:
            at = np.array([2 * big, 4 * big], dtype=float)
            pred = np.maximum(fits.predict(at)[i], 0.0)
            entry["predicted"] = {str(int(q)): float(g) for q, g in zip(at, pred)}
            entry["model"] = fits.model_text(i)
        out.append(entry)
    return out
