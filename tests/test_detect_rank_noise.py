"""Identical work on ranks that share cores: one rank's thread-CPU a little above the median's is
machine noise (caches flushed at every switch), not a cause; detect asks what the trace verdict asks,
a rank above --abnorm-thd x the median rank (seed 003's AbnormThd)."""
from __future__ import annotations

import numpy as np

from scalgraph.analysis import synthetic as syn
from scalgraph.analysis.detect import analyse

HZ = 1000


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
