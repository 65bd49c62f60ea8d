"""Model selection in Extra-P's normal form, scaling loss, rank merging."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalgraph.analysis.merge import cluster_ranks, merge_ranks
from scalgraph.analysis.scaling import EXPONENTS_I, EXPONENTS_J, Hypothesis, fit_models, hypotheses, scaling_loss

SCALES = np.array([2, 4, 8, 16, 32, 64], dtype=float)
HYPS = [h for h in hypotheses() if not h.is_constant]


@settings(max_examples=150, deadline=None)
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
        assert Fraction(s) in EXPONENTS_I and -Fraction(s) in EXPONENTS_I
    assert EXPONENTS_J == (0, 1, 2)


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
    one = fit_models([8], np.array([[2.0]]))
    assert one.choice[0] == -1 and one.model_text(0) == "needs >= 2 scales"


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


def test_leave_one_out_shortcut_equals_refitting_without_each_point():
    from scalgraph.analysis.scaling import _lsq_two_params, loo_residual_matrix
    rng = np.random.default_rng(5)
    y = rng.uniform(0, 3, (7, len(SCALES)))
    for h in (Hypothesis(Fraction(1, 2), 1), Hypothesis(Fraction(-1), 0), Hypothesis(Fraction(0), 0),
              Hypothesis(Fraction(0), 1)):
        x = h.term(SCALES)
        sq = np.zeros(len(y))
        for out in range(len(SCALES)):
            keep = np.arange(len(SCALES)) != out
            c0, c1 = _lsq_two_params(x[keep], y[:, keep])
            sq += (c0 + c1 * x[out] - y[:, out]) ** 2
        loo = np.sqrt(((loo_residual_matrix(x) @ y.T) ** 2).mean(axis=0))
        assert np.allclose(loo, np.sqrt(sq / len(SCALES)))


def test_few_scales_only_compete_plain_powers():
    scales = np.array([2.0, 4.0, 8.0])
    y = np.array([[0.13, 0.0825, 0.0475], [1.0, 2.0, 3.0]])     # measured-like decay; log2(p) exactly
    fits = fit_models(scales, y)
    chosen = [fits.hypothesis[k] for k in fits.choice]
    assert all(h.j == 0 and abs(h.i) <= 2 for h in chosen)
    assert {h.j for h in fits.hypothesis} == {0}
    many = fit_models(SCALES, np.log2(SCALES)[None, :])             # six scales: the full set, log found
    assert (many.hypothesis[many.choice[0]].i, many.hypothesis[many.choice[0]].j) == (0, 1)
