"""Sampling error: a rank whose sampled time exceeds the median by less than the Poisson error of
the samples is not abnormal and costs nothing; the same rank well beyond that error is found."""
import numpy as np
import pytest

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


def test_a_slow_mpi_init_does_not_raise_the_reporting_floor_over_a_real_cause():
    """Under some launchers MPI_Init takes seconds; the floor is a share of the program's own time,
    so a cause far below 5% of (start-up + work) but well above 5% of the work is still named."""
    from scalgraph.analysis.detect import analyse
    psg, runs, comp = syn.cg_like(work=2.0, extra=0.3)
    tree = ("FUNCTION", "main", 1, [("MPI", "MPI_Init", 2)] + list(syn.CG_TREE[3]))
    psg2 = syn.psg_from_tree(tree, "cg.c")
    init = syn.vertex_at(psg2, 2)
    for p, prof in runs.items():
        prof.time = np.insert(prof.time, init, 20.0, axis=1)     # start-up dwarfs the run
        prof.wait = np.insert(prof.wait, init, 0.0, axis=1)
        prof.samples = np.insert(prof.samples, init, 0, axis=1)
        prof.calls = np.insert(prof.calls, init, 1, axis=1)
        prof.nvertices = len(psg2)
        prof.deps["vertex"] += prof.deps["vertex"] >= init
    result = analyse(psg2, runs)
    assert result["problem_found"]
    assert result["root_causes"][0]["line"] == 12


def _balanced_with_inflation(extra: float):
    from scalgraph.analysis.detect import analyse
    psg, runs, _ = syn.balanced(scales=(2, 4, 8), noise=0.0)
    comp = syn.vertex_at(psg, 12)
    runs[8].time[:, comp] += extra                 # every rank slower at the largest scale
    runs[8].samples[:] = np.rint(runs[8].time * 200).astype(np.int64)
    return comp, analyse(psg, runs)


def test_scaling_loss_within_the_sampling_error_is_no_loss():
    # at p=8 each rank has ~1 s (200 samples) here: 3 errors of the two means compared ~ 0.1 s
    comp, result = _balanced_with_inflation(0.07)
    assert not result["problem_found"]
    assert all(n["vertex"] != comp for n in result["non_scalable"])


def test_scaling_loss_beyond_the_sampling_error_is_reported():
    comp, result = _balanced_with_inflation(0.4)
    assert result["problem_found"]
    assert result["root_causes"][0]["vertex"] == comp
    assert abs(result["root_causes"][0]["scaling_loss"] - 0.4) < 0.05


def test_the_computation_floor_is_the_wall_floor_in_thread_cpu():
    """A computation's cost is thread-CPU, the floor a share of the wall-clock run: where a rank's
    computation took 4x its thread-CPU in wall time (8 ranks on 2 cores, MPI polling), an extra CPU
    second costs the run 4 s, so the floor is divided by the median rank's stretch, whatever shares
    the cores.  Not measured (all ones): no stretch."""
    from scalgraph.analysis.mpi_cost import compute_stretch
    assert compute_stretch(np.full(8, 4.0)) == 4.0
    assert compute_stretch(np.array([2.0, 3.0, 3.0, 3.5, 3.5, 4.0, 9.0, 9.0])) == 3.5   # the median
    assert compute_stretch(np.ones(8)) == 1.0
    assert compute_stretch(np.array([1.02, 1.04])) == pytest.approx(1.03)
    assert compute_stretch(np.array([0.9, 0.95])) == 1.0  # never below 1
    assert compute_stretch(np.array([])) == 1.0
