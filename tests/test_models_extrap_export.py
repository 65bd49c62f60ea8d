"""Extra-P interop: write_extrap's JSON Lines loads in the real PyPI `extrap` package, which models it."""
from __future__ import annotations

import importlib.util
import json
import warnings

import numpy as np
import pytest

from conftest import require_tool
from scalgraph.analysis import synthetic as syn
from scalgraph.errors import UserError
from scalgraph.io.extrap_export import callpaths, write_extrap
from test_detect_cli import write_synthetic_experiment

SCALES = (2, 4, 8, 16, 32)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("extrap")
    psg, runs, comp = syn.cg_like(scales=SCALES)
    exp = write_synthetic_experiment(tmp / "exp", psg, runs, reps=2)
    out = tmp / "cg.jsonl"
    write_extrap(exp, out)
    return psg, runs, comp, exp, out


def test_every_repetition_of_every_scale_is_a_line_with_per_rank_aggregates(exported):
    psg, runs, comp, _, out = exported
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    comp_time = [r for r in rows if r["callpath"] == callpaths(psg)[comp] and r["metric"] == "time"]
    assert sorted(r["params"]["p"] for r in comp_time) == sorted(SCALES * 2)
    for r in comp_time:
        assert np.isclose(r["value"], runs[r["params"]["p"]].time[:, comp].mean())
    slowest = [r for r in rows if r["callpath"] == callpaths(psg)[comp] and r["metric"] == "time_max"]
    assert all(np.isclose(r["value"], runs[r["params"]["p"]].time[:, comp].max()) for r in slowest)
    assert {r["metric"] for r in rows} == {"time", "time_max", "wait", "visits"}


def test_extrap_reads_the_file_and_models_the_strong_scaling_kernel(exported):
    require_tool(importlib.util.find_spec("extrap") is not None, "extrap (pip install --no-deps extrap, see docs/scaling-models.md)")
    from extrap.fileio.file_reader.json_file_reader import JsonFileReader
    from extrap.modelers.model_generator import ModelGenerator
    psg, runs, comp, _, out = exported
    experiment = JsonFileReader().read_experiment(out)
    assert [p.name for p in experiment.parameters] == ["p"]
    assert len(experiment.coordinates) == len(SCALES)
    gen = ModelGenerator(experiment)
    gen.modeler.allow_negative_exponents = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen.model_all()
    models = {(cp.name, m.name): model for (cp, m), model in gen.models.items()}
    assert len(models) == len(experiment.callpaths) * 4
    model = models[(callpaths(psg)[comp], "time")]
    measured = experiment.measurements[(next(c for c in experiment.callpaths if c.name == callpaths(psg)[comp]),
                                        next(m for m in experiment.metrics if m.name == "time"))]
    assert all(m.repetitions == 2 for m in measured)
    # the kernel's mean per-rank time is (work + extra) / p: Extra-P must find the 1/p and extrapolate it
    predicted = model.hypothesis.function.evaluate(64.0)
    assert np.isclose(predicted, (8.0 + 0.4) / 64, rtol=0.2)


def test_bad_input_is_one_clear_error_and_nothing_is_overwritten(tmp_path, exported):
    with pytest.raises(UserError, match="no such experiment"):
        write_extrap(tmp_path / "missing", tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()
    _, _, _, exp, _ = exported
    keep = tmp_path / "keep.jsonl"
    keep.write_text("mine\n")
    with pytest.raises(UserError, match="already exists"):
        write_extrap(exp, keep)
    assert keep.read_text() == "mine\n"
    psg, runs, _ = syn.cg_like(scales=(4,))
    one = write_synthetic_experiment(tmp_path / "one", psg, runs)
    with pytest.raises(UserError, match="one scale"):
        write_extrap(one, tmp_path / "one.jsonl")
