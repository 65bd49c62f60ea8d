"""benchmarks/bench_whatif.py's comparison: each broken run's prediction against its own pair's measured
gain (paired), on hand-made repetitions."""
from __future__ import annotations

import importlib.util

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("bench_whatif", ROOT / "benchmarks" / "bench_whatif.py")
bw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bw)


def test_each_prediction_is_checked_against_its_own_pair():
    """Three pairs under different loads: gains 1.0, 3.0, 1.5 s; the predictions follow their pairs
    (1.1, 2.8) and the third run names no cause (no gain).  Paired errors +0.1, -0.2, -1.5: median
    -0.2 s against a tolerance of max(15 % of 1.5, 3 % of 4.0) = 0.225 s: within.  The medians of the
    repetitions (1.1 predicted, 1.5 measured) come from different pairs and are 0.4 s apart."""
    row = bw.paired_row({0: 3.0, 1: 5.0, 2: 4.0}, {0: 2.0, 1: 2.0, 2: 2.5}, {0: 1.1, 1: 2.8, 2: None})
    assert row["measured_per_repetition"] == pytest.approx([1.0, 3.0, 1.5])
    assert row["measured_gain"] == pytest.approx(1.5)
    assert row["run_time"] == pytest.approx(4.0)
    assert row["predictions"] == pytest.approx([1.1, 2.8, 0.0])
    assert row["paired_error"] == pytest.approx(-0.2)
    assert row["verdict"] == "ok"
    assert row["predicted_gain"] == pytest.approx(1.1)
    assert row["verdict_of_medians"] == "off"
    # on their own: +0.1 within 0.15, -0.2 within 0.45, -1.5 not within 0.225
    assert (row["pairs_within"], row["pairs"], row["missing_predictions"]) == (2, 3, 1)


def test_a_run_without_its_partner_forms_no_pair_and_a_biased_prediction_is_off():
    # repetition 2's fixed run failed: two pairs, gains 1.0 and 1.2; each predicted 0.4 s too much
    row = bw.paired_row({0: 3.0, 1: 3.2, 2: 9.0}, {0: 2.0, 1: 2.0}, {0: 1.4, 1: 1.6, 2: 1.0},
                        broken_inner={0: 2.5, 1: 2.8}, fixed_inner={0: 1.2, 1: 1.4})
    assert row["pairs"] == 2
    assert row["measured_gain"] == pytest.approx(1.1)
    assert row["paired_error"] == pytest.approx(0.4)
    assert row["run_time"] == pytest.approx(3.2)          # the broken runs' median, all three
    assert row["verdict"] == "off"                        # 0.4 > max(0.165, 0.096)
    # after the launch the pairs gained 1.3 and 1.4: errors +0.1, +0.2, median 0.15 within 0.2025
    assert row["measured_after_launch"] == pytest.approx(1.35)
    assert row["paired_error_after_launch"] == pytest.approx(0.15)
    assert row["verdict_after_launch"] == "ok"


def test_a_failed_analysis_is_no_prediction_and_forms_no_pair():
    # repetition 1's analysis failed (no JSON): not a prediction of no gain; the other two pairs count
    row = bw.paired_row({0: 3.0, 1: 5.0, 2: 4.0}, {0: 2.0, 1: 2.0, 2: 2.5}, {0: 1.1, 1: None, 2: 1.4},
                        failed_reps=frozenset({1}))
    assert (row["pairs"], row["failed_analyses"], row["missing_predictions"]) == (2, 1, 0)
    assert row["measured_per_repetition"] == pytest.approx([1.0, 1.5])
    assert row["paired_error"] == pytest.approx(0.0)     # +0.1 and -0.1
    assert row["run_time"] == pytest.approx(4.0)          # every broken run's wall time still counts
