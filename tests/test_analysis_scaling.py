"""Model selection in Extra-P's normal form, scaling loss, rank merging."""
from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalgraph.analysis.merge import cluster_ranks, merge_ranks
from scalgraph.analysis.scaling import EXPONENTS_I, EXPONENTS_J, Hypothesis, fit_models, hypotheses, scaling_loss

SCALES = np.array([2, 4, 8, 16, 32, 64], dtype=float)
HYPS = [h for h in hypotheses() if not h.is_constant and h.monotone(SCALES[0], 4 * SCALES[-1])]


@settings(max_examples=60, deadline=None)
@given(h=st.sampled_from(HYPS), c0=st.floats(0, 10), c1=st.floats(0.05, 20), sign=st.sampled_from([1, -1]))
def test_recovers_known_exponents_from_noiseless_data(h, c0, c1, sign):
    y = c0 + sign * c1 * h.term(SCALES)
    fits = fit_models(SCALES, y[None, :])
    chosen = fits.hypothesis[fits.choice[0]]
    assert (chosen.i, chosen.j) == (h.i, h.j)
    assert np.isclose(fits.c1[0], sign * c1, rtol=1e-5)
    assert np.isclose(fits.c0[0], c0, rtol=1e-5, atol=1e-6 * (1 + c1 * h.term(SCALES).max()))


def test_hypothesis_set_contains_the_normal_form_exponents():
    for s in ("0", "1/4", "1/3", "1/2", "2/3", "3/4", "1", "5/4", "4/3", "3/2", "5/3", "7/4", "2"):
        assert Fraction(s) in EXPONENTS_I
    for s in ("1/4", "1/2", "1"):
        assert -Fraction(s) in EXPONENTS_I
    assert EXPONENTS_J == (0, 1, 2)
    hs = {(h.i, h.j) for h in hypotheses()}
    assert (Fraction(3, 2), 2) in hs and (Fraction(0), 2) in hs and (Fraction(-1), 1) in hs


def test_fits_many_vertices_at_once_and_predicts():
    y = np.stack([3.0 + 0 * SCALES, 8 / SCALES, 0.5 * SCALES * np.log2(SCALES), 1 + 0.1 * SCALES ** 2])
    fits = fit_models(SCALES, y)
    texts = [fits.hypothesis[k] for k in fits.choice]
    assert texts[0].is_constant
    assert (texts[1].i, texts[1].j) == (-1, 0)
    assert (texts[2].i, texts[2].j) == (1, 1)
    assert (texts[3].i, texts[3].j) == (2, 0)
    pred = fits.predict(np.array([128.0, 256.0]))
    assert np.allclose(pred[:, 0], [3.0, 8 / 128, 0.5 * 128 * 7, 1 + 0.1 * 128 ** 2])
    assert np.allclose(pred[:, 1], [3.0, 8 / 256, 0.5 * 256 * 8, 1 + 0.1 * 256 ** 2])
    assert np.allclose(fits.slope[1], -1.0)


def test_noisy_linear_growth_is_not_mistaken_for_decay():
    rng = np.random.default_rng(0)
    y = 0.02 * SCALES * (1 + 0.03 * rng.standard_normal(len(SCALES)))
    fits = fit_models(SCALES, y[None, :])
    assert fits.predict(128.0)[0] > y[-1]          # keeps growing
    assert 0.8 < fits.slope[0] < 1.2


def test_two_scales_use_the_power_law_through_both_points_and_one_scale_is_not_fitted():
    fits = fit_models([4, 8], np.array([[2.0, 1.0], [1.0, 2.0]]))
    assert np.allclose(fits.slope, [-1, 1])
    assert np.allclose(fits.predict(16.0), [0.5, 4.0])
    assert np.isnan(fits.cv_error).all()
    assert all("two scales only" in " ".join(fits.notes(v)) for v in range(2))
    lo, hi = fits.low, fits.high                     # every model through both points bounds the value at 16
    assert np.all(lo <= fits.predicted) and np.all(fits.predicted <= hi) and np.all(hi > lo)
    one = fit_models([8], np.array([[2.0]]))
    assert fits.hypothesis[one.choice[0]].is_constant and one.model_text(0) == "2"
    assert np.allclose(one.predict(64.0), 2.0) and "needs >= 2 scales" in " ".join(one.notes(0))


def test_scaling_loss_is_seconds_beyond_the_ideal_share():
    scales = [2, 4, 8]
    y = np.array([[4.0, 2.0, 1.0],      # perfect strong scaling
                  [4.0, 3.0, 2.5],      # ideal at 8 is 1.0 -> loss 1.5
                  [1.0, 1.0, 1.0]])     # constant: loss 0.75 at 8
    loss = scaling_loss(scales, y)
    assert np.allclose(loss[:, -1], [0.0, 1.5, 0.75])
    assert np.allclose(scaling_loss(scales, y, weak=True)[:, -1], [0.0, 0.0, 0.0])


def test_merge_ranks_statistics():
    v = np.array([[1.0, 0.0], [1.0, 0.0], [4.0, 0.0]])
    s = merge_ranks(v)
    assert np.allclose(s.mean, [2, 0]) and np.allclose(s.median, [1, 0]) and np.allclose(s.max, [4, 0])
    assert s.argmax[0] == 2 and np.isclose(s.imbalance[0], 0.5) and s.imbalance[1] == 0


def test_clustering_separates_the_slow_group_first():
    rng = np.random.default_rng(1)
    fast = 1 + 0.01 * rng.standard_normal((12, 5))
    slow = 2 + 0.01 * rng.standard_normal((4, 5))
    values = np.vstack([fast[:6], slow, fast[6:]])
    labels = cluster_ranks(values, 2)
    assert set(np.flatnonzero(labels == 0)) == set(range(6, 10))
    assert cluster_ranks(np.ones((5, 3)), 3).tolist() == [0] * 5     # identical ranks: one group


def test_hypothesis_text():
    assert Hypothesis(Fraction(1), 1).text() == "p * log2(p)"
    assert Hypothesis(Fraction(-1, 2), 0).text() == "p^(-1/2)"
    assert Hypothesis(Fraction(0), 2).text() == "log2(p)^2"


def test_no_hypothesis_rises_then_falls_over_the_measured_and_predicted_range():
    for scales in ([2, 4, 8], [2, 4, 8, 16, 32]):
        fits = fit_models(scales, np.ones((1, len(scales))))
        grid = np.geomspace(scales[0], 4 * scales[-1], 200)
        for h in fits.hypothesis:
            d = np.diff(h.term(grid))
            assert np.all(d >= -1e-12) or np.all(d <= 1e-12), h.text()
    assert not Hypothesis(Fraction(-1), 1).monotone(2, 128)        # peaks at p = e


def test_choice_does_not_depend_on_units():
    rng = np.random.default_rng(3)
    y = np.stack([0.02 * SCALES, 3 + 0 * SCALES, 1 + 0.5 * np.log2(SCALES), 4 / SCALES])
    y = y * (1 + 0.02 * rng.standard_normal(y.shape))
    seconds = fit_models(SCALES, y)
    for unit in (1e-12, 1e-6, 1e3):
        other = fit_models(SCALES, y * unit)
        assert np.array_equal(other.choice, seconds.choice)
        assert np.allclose(other.predicted, seconds.predicted * unit)
    tiny = fit_models(SCALES, 1e-13 * SCALES[None, :])           # noiseless growth far below 1e-9 s
    assert (tiny.hypothesis[tiny.choice[0]].i, tiny.hypothesis[tiny.choice[0]].j) == (1, 0)


def test_log_terms_are_found_with_three_and_four_scales_when_the_data_show_them():
    for scales in ([2, 4, 8, 16], [2, 4, 8]):
        p = np.array(scales, dtype=float)
        y = np.stack([np.log2(p), 1 + 0.3 * p * np.log2(p), 2 + 0.1 * p])
        fits = fit_models(p, y)
        got = [(fits.hypothesis[k].i, fits.hypothesis[k].j) for k in fits.choice]
        assert got == [(0, 1), (1, 1), (1, 0)], (scales, got)


def test_differences_within_the_repetitions_spread_do_not_become_growth():
    rng = np.random.default_rng(11)
    scales = np.array([2, 4, 8, 16], dtype=float)
    reps = 2.0 * (1 + 0.05 * rng.standard_normal((200, 4, 5)))         # constant, 5 % noise, 5 repetitions
    fits = fit_models(scales, reps.mean(axis=2), reps=reps)
    constant = np.mean([fits.hypothesis[k].is_constant for k in fits.choice])
    assert constant >= 0.85
    assert np.all(fits.known_noise) and np.allclose(np.median(fits.noise), 0.05 / np.sqrt(5), rtol=0.3)
    # growth of 20 % per doubling with the same noise is seen through it
    grow = (1 + 0.25 * scales)[None, :, None] * (1 + 0.05 * rng.standard_normal((200, 4, 5)))
    gfits = fit_models(scales, grow.mean(axis=2), reps=grow)
    assert np.mean([fits.hypothesis[k].is_constant for k in gfits.choice]) < 0.05


def test_poisson_error_of_sampled_times_is_noise_not_growth():
    scales = np.array([2, 4, 8, 16, 32], dtype=float)
    hz = 100.0
    rng = np.random.default_rng(5)
    samples = rng.poisson(20.0, (100, 5))                  # 0.2 s of computation sampled at 100 Hz
    y = samples / hz
    fits = fit_models(scales, y, se=np.sqrt(np.maximum(samples, 1)) / hz)
    assert np.mean([fits.hypothesis[k].is_constant for k in fits.choice]) >= 0.85


def test_interval_at_twice_the_largest_scale_holds_the_truth_and_ambiguity_is_said():
    rng = np.random.default_rng(8)
    truth = 1 + 0.2 * SCALES ** 0.5
    reps = truth[None, :, None] * (1 + 0.03 * rng.standard_normal((300, len(SCALES), 5)))
    fits = fit_models(SCALES, reps.mean(axis=2), reps=reps)
    at, _, _ = fits.interval(0)
    inside = (fits.low <= 1 + 0.2 * at ** 0.5) & (1 + 0.2 * at ** 0.5 <= fits.high)
    assert at == 128 and inside.mean() >= 0.9
    assert np.median((fits.high - fits.low) / fits.predicted) < 0.5
    # three scales of a weak growth with 3 % noise: several models fit, and the note says so
    few_reps = np.array([1.0, 1.12, 1.2])[None, :, None] * (1 + 0.03 * rng.standard_normal((1, 3, 5)))
    few = fit_models([2, 4, 8], few_reps.mean(axis=2), reps=few_reps)
    assert "cannot tell" in " ".join(few.notes(0))


def test_edge_cases_give_a_defined_model_and_a_note():
    y = np.array([[1.0, np.nan, 3.0, 4.0, 5.0, 6.0],     # log2(p) with a missing value: left out
                  [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0],   # -log2(p), all negative: fitted as given, not clipped
                  [1.0, 1.0, 0.0, 1.0, 1.0, 1.0],         # one zero
                  [0.0] * 6,                              # all zero
                  [np.nan] * 6,                           # nothing
                  [np.inf, np.nan, np.nan, np.nan, 2.0, np.nan]])   # one finite value
    fits = fit_models(SCALES, y)
    assert np.all(np.isfinite(fits.c0)) and np.all(np.isfinite(fits.c1)) and np.all(fits.choice >= 0)
    text = [" ".join(fits.notes(v)) for v in range(len(y))]
    assert "non-finite" in text[0] and np.isclose(fits.predict(128.0)[0], 7.0, rtol=1e-6)
    assert "negative" in text[1] and np.isclose(fits.predict(128.0)[1], -7.0, rtol=1e-6)
    assert "zero at some scale" in text[2] and fits.hypothesis[fits.choice[2]].is_constant
    assert "zero at every scale" in text[3] and fits.predict(128.0)[3] == 0
    assert "no finite value" in text[4] and fits.predict(128.0)[4] == 0
    assert "one scale only" in text[5] and fits.predict(128.0)[5] == 2.0
    assert fits.notes(0) and not fit_models(SCALES, 2 * SCALES[None, :]).notes(0)


def test_fitting_all_vertices_together_costs_under_a_millisecond_each():
    rng = np.random.default_rng(2)
    y = rng.uniform(0.5, 2.0, (5000, 1)) * SCALES[None, :] ** rng.choice([-1, 0, 0.5, 1], (5000, 1))
    y = y * (1 + 0.05 * rng.standard_normal(y.shape))
    start = time.process_time()
    fits = fit_models(SCALES, y)
    cpu = time.process_time() - start
    assert len(fits.choice) == 5000 and cpu / 5000 < 1e-3
