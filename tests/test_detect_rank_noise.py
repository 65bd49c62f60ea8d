"""Identical work on ranks that share cores: one rank's thread-CPU a little above the median's is
machine noise (caches flushed at every switch), not a cause; detect asks what the trace verdict asks,
a rank above --abnorm-thd x the median rank (seed 003's AbnormThd), and where ranks outnumber cores
what time-sharing cannot fake (analysis/defaults.py: 1.6x between ranks, 1.25x between scales)."""
from __future__ import annotations

import numpy as np

from scalgraph.analysis import synthetic as syn
from scalgraph.analysis.detect import analyse

HZ = 1000


def _time_shared(runs, cores: int = 2):
    for p, prof in runs.items():
        prof.meta.update(cores=[cores] * p, ranks_on_host=[p] * p)
    return runs


def _cg_with_extra(extra: float):
    """cg_like (0.5 s of kernel per rank at p=16) with `extra` thread-CPU seconds on rank 1's kernel,
    sampled at 1 kHz and supported by the exact segment before the Send (the shim's comp_cpu)."""
    psg, runs, comp = syn.cg_like(extra=extra, noise=0.0)
    send = syn.vertex_at(psg, 15)
    for prof in runs.values():
        prof.samples[:] = np.rint(prof.time * HZ).astype(np.int64)
        prof.meta["hz"] = HZ
        prof.comp_cpu[:, send] = prof.time[:, comp]
        prof.comp_wall[:, send] = prof.time[:, comp]
    return psg, runs, comp


def test_a_rank_slightly_above_the_median_is_no_cause_even_beyond_the_sampling_error():
    psg, runs, comp = _cg_with_extra(0.12)            # 1.24x the median rank at p=16, 120 samples beyond it
    result = analyse(psg, runs)
    err = result["sampling"]["error_seconds"]
    assert 0.12 > err, "the excess must lie beyond the sampling error for this test to mean anything"
    assert all(c["vertex"] != comp for c in result["root_causes"]), result["root_causes"]


def test_a_rank_above_the_abnormality_threshold_is_the_cause():
    psg, runs, comp = _cg_with_extra(0.25)            # 1.5x the median rank
    top = analyse(psg, runs)["root_causes"][0]
    assert top["vertex"] == comp and abs(top["cost"] - 0.25) < 0.03
    # the same excess under a stricter threshold is not abnormal, so not a cause
    assert all(c["vertex"] != comp for c in analyse(psg, runs, abnorm_thd=1.6)["root_causes"])


def test_ranks_sharing_cores_must_differ_by_more_than_time_sharing_makes_identical_work_differ():
    psg, runs, comp = _cg_with_extra(0.25)            # 1.5x: a cause on one rank per core (above)
    assert all(c["vertex"] != comp for c in analyse(psg, _time_shared(runs))["root_causes"])
    psg, runs, comp = _cg_with_extra(0.45)            # 1.9x the median rank
    top = analyse(psg, _time_shared(runs))["root_causes"][0]
    assert top["vertex"] == comp and top["rank"] == 1


def _balanced_slower_at_the_largest_scale(factor: float, shared: bool):
    """Every rank's computation `factor` x its ideal strong-scaling share at p=8 (a loss, or a drift)."""
    psg, runs, _ = syn.balanced(scales=(2, 4, 8), noise=0.0)
    comp = syn.vertex_at(psg, 12)
    runs[8].time[:, comp] *= factor
    for prof in runs.values():
        prof.samples[:] = np.rint(prof.time * HZ).astype(np.int64)
        prof.meta["hz"] = HZ
    return comp, analyse(psg, _time_shared(runs) if shared else runs)


def test_a_loss_time_sharing_can_make_is_no_loss_where_ranks_share_cores():
    comp, alone = _balanced_slower_at_the_largest_scale(1.2, shared=False)
    assert alone["root_causes"] and alone["root_causes"][0]["vertex"] == comp
    comp, shared = _balanced_slower_at_the_largest_scale(1.2, shared=True)
    assert all(c["vertex"] != comp for c in shared["root_causes"])
    comp, shared = _balanced_slower_at_the_largest_scale(1.6, shared=True)   # beyond the drift
    top = shared["root_causes"][0]
    assert top["vertex"] == comp and abs(top["scaling_loss"] - 0.35 * 1.0) < 0.05


def test_a_long_loop_costs_the_wall_time_its_own_rank_took_for_it():
    """CloverLeaf at 8 ranks on 2 cores: the median rank's computation was short segments that kept
    their core (wall = thread-CPU), while rank 1's planted loop took 6.5x its thread-CPU in wall time
    and everybody waited for it.  Here: cg_like with 5 s of waiting in every rank's Allreduce (floor
    5 % of ~6 s), rank 1 with 0.2 s of extra kernel (1.4x the median rank, beyond AbnormThd).  At the
    median rank's stretch (1.0) the 0.2 s are below the floor; stretched as rank 1's own segment was
    (3x) they are 0.6 s of wall time, above it."""
    psg, runs, comp = _cg_with_extra(0.2)
    send, allr = syn.vertex_at(psg, 15), syn.vertex_at(psg, 20)
    for prof in runs.values():
        prof.time[:, allr] += 5.0
        prof.wait[:, allr] += 5.0
    result = analyse(psg, runs)
    floor = result["thresholds"]["min_seconds"]
    assert 0.2 < floor < 0.6 and result["thresholds"]["stretch"] == 1.0, result["thresholds"]
    assert all(c["vertex"] != comp for c in result["root_causes"]), result["root_causes"]
    for prof in runs.values():
        prof.comp_wall[1, send] *= 3.0                # rank 1's kernel segment crowded off its core
    result = analyse(psg, runs)
    top = result["root_causes"][0]
    assert top["vertex"] == comp and top["rank"] == 1, result["root_causes"]
    assert abs(top["cost"] - 0.2) < 0.03 and abs(top["cost_wall"] - 3.0 * top["cost"]) < 1e-9
    assert result["thresholds"]["stretch"] == 1.0                     # the median rank's is unchanged


def test_a_rank_whose_computation_was_stretched_gets_the_floor_in_its_own_thread_cpu():
    """The abnormality floor of a computation is a wall-clock floor in thread-CPU: divided per rank by
    that rank's own stretch (CloverLeaf's rank 1 computed 6.5x slower than its thread-CPU at 8 ranks on
    2 cores, the median rank 1.0x).  Rank 1's 0.28 s over the median is abnormal against a floor of
    0.37 s / 6.5 and not against 0.37 s; rank 2's 0.05 s stays below its own floor."""
    from scalgraph.analysis.abnormal import abnormal_columns
    own = np.full((8, 1), 0.03)
    own[1, 0] += 0.28
    own[2, 0] += 0.05
    no_wait, comp, noise = np.zeros((8, 1)), np.array([False]), np.zeros(1)
    assert abnormal_columns(own, no_wait, comp, noise, 1.3, 0.37) == []
    stretch = np.where(np.arange(8) == 1, 6.5, 1.0)
    found = abnormal_columns(own, no_wait, comp, noise, 1.3, 0.37 / stretch[:, None])
    assert [(a.vertex, a.ranks.tolist()) for a in found] == [(0, [1])]
