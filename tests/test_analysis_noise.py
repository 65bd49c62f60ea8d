"""Sampling error: a rank whose sampled time exceeds the median by less than the Poisson error of
the samples is not abnormal and costs nothing; the same rank well beyond that error is found."""
import numpy as np

import scalgraph.analysis.synthetic as syn
from scalgraph.analysis.abnormal import find_abnormal, sampling_noise
from scalgraph.model.psg import KINDS


def _small_vertex_run(extra: float):
    psg, runs, _ = syn.balanced(scales=(8,))
    prof = runs[8]
    comp = syn.vertex_at(psg, 12)
    prof.time[:, comp] = 0.1                       # 20 samples at 200 Hz: error sqrt(20)/200 = 0.022 s
    prof.time[3, comp] += extra
    prof.samples[:] = np.rint(prof.time * 200).astype(np.int64)
    return psg, prof, comp


def test_noise_is_three_poisson_errors_for_sampled_vertices_and_zero_for_mpi():
    psg, prof, comp = _small_vertex_run(0.0)
    noise = sampling_noise(psg, prof)
    assert np.isclose(noise[comp], 3 * np.sqrt(20) / 200)
    mpi = [v for v in range(len(psg)) if KINDS[psg.kind[v]] == "MPI"]
    assert mpi and np.all(noise[mpi] == 0.0)


def test_excess_within_sampling_error_is_not_abnormal():
    psg, prof, comp = _small_vertex_run(0.05)        # 1.5x the median, but below 3 errors (0.067 s)
    flagged = [a.vertex for a in find_abnormal(psg, prof, 1.3, 0.0) if a.metric == "time"]
    assert comp not in flagged


def test_excess_beyond_sampling_error_is_abnormal():
    psg, prof, comp = _small_vertex_run(0.2)
    found = [a for a in find_abnormal(psg, prof, 1.3, 0.0) if a.metric == "time" and a.vertex == comp]
    assert found and list(found[0].ranks) == [3]
