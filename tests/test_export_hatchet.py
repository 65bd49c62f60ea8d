"""`scalgraph export EXP --hatchet/--thicket`: the outputs loaded with the real PyPI llnl-hatchet and
llnl-thicket, checked against the experiment's profiles (per node, per rank, per scale)."""
from __future__ import annotations

import json

import hatchet
import numpy as np
import pytest
import thicket

from scalgraph import cli
from scalgraph.analysis import synthetic as syn
from scalgraph.io.experiment import read_experiment
from test_detect_cli import write_synthetic_experiment

SCALES = (2, 4, 8)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hatchet")
    psg, runs, cause = syn.cg_like(scales=SCALES)
    exp = write_synthetic_experiment(tmp / "exp", psg, runs)
    h, t = tmp / "cg.hatchet.json", tmp / "cg.thicket.json"
    assert cli.main(["export", str(exp), "--hatchet", str(h), "--thicket", str(t)]) == 0
    return read_experiment(exp), cause, json.loads(h.read_text()), t.read_text()


def _by_vertex(gf, column, rank=None):
    df = gf.dataframe.reset_index()
    if rank is not None:
        df = df[df["rank"] == rank]
    return {int(n.frame["vertex"]): float(v) for n, v in zip(df["node"], df[column])}


def test_literal_loads_in_hatchet_per_scale(exported):
    exp, cause, doc, _ = exported
    assert [s["p"] for s in doc["scales"]] == list(SCALES)
    for s in doc["scales"]:
        prof = exp.profile(s["p"])
        gf = hatchet.GraphFrame.from_literal(s["literal"])
        assert len(gf.graph) == len(exp.psg)
        time = _by_vertex(gf, "time")
        inc = _by_vertex(gf, "time (inc)")
        assert time[cause] == pytest.approx(prof.time[:, cause].mean())
        assert inc[0] == pytest.approx(prof.time.sum(axis=1).mean())       # the root holds everything
        assert _by_vertex(gf, "rank of max")[cause] == int(prof.time[:, cause].argmax())
        assert "time (inc)" in gf.inc_metrics and "time" in gf.exc_metrics
        root = gf.graph.roots[0]
        assert root.frame["name"] == "main"
        # hatchet's own tree walk agrees with the PSG's shape
        loop = next(c for c in root.children if c.frame["type"] == "loop")
        assert [c.frame["name"] for c in loop.children] == ["comp cg.c:12", "MPI_Send", "MPI_Recv", "MPI_Allreduce"]


def test_graphframe_spec_has_every_rank(exported):
    exp, cause, doc, _ = exported
    s = doc["scales"][-1]
    prof = exp.profile(s["p"])
    gf = hatchet.GraphFrame.from_json(json.dumps(s["graphframe"]))
    assert list(gf.dataframe.index.names) == ["node", "rank"]
    assert len(gf.dataframe) == len(exp.psg) * prof.nranks
    for r in range(prof.nranks):
        assert _by_vertex(gf, "time", rank=r)[cause] == pytest.approx(prof.time[r, cause])
        assert _by_vertex(gf, "wait (inc)", rank=r)[0] == pytest.approx(prof.wait[r].sum())
    # hatchet's own operations work on it: the per-rank mean equals the literal's node value
    gf.drop_index_levels()
    assert _by_vertex(gf, "time")[cause] == pytest.approx(prof.time[:, cause].mean())


def test_thicket_ensemble_of_all_scales(exported):
    exp, cause, _, text = exported
    tk = thicket.Thicket.from_json(text)
    assert sorted(tk.profile) == list(SCALES)
    assert tk.metadata.loc[8, "p"] == 8 and sorted(tk.metadata["p"]) == list(SCALES)
    df = tk.dataframe.reset_index()
    for p in SCALES:
        prof = exp.profile(p)
        row = df[(df["profile"] == p) & (df["node"].map(lambda n: n.frame["vertex"]) == cause)]
        assert float(row["time"].iloc[0]) == pytest.approx(prof.time[:, cause].mean())
        assert float(row["time max (inc)"].iloc[0]) == pytest.approx(prof.time[:, cause].max())
    # the mean time at the cause falls with p while its imbalance stays: visible across the ensemble
    means = [float(df[(df["profile"] == p) & (df["node"].map(lambda n: n.frame["vertex"]) == cause)]["time"].iloc[0])
             for p in SCALES]
    assert np.all(np.diff(means) < 0)
    assert len(tk.graph) == len(exp.psg)


def test_experiment_formats_refuse_a_trace(tmp_path, capsys):
    from scalgraph.io.trace_read import write_trace
    from test_export_perfetto import late_sender_trace
    src = tmp_path / "t.sgtrace"
    write_trace(late_sender_trace(), src)
    assert cli.main(["export", str(src), "--hatchet", str(tmp_path / "h.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--hatchet needs an experiment directory" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "h.json").exists()


def test_a_directory_that_is_neither_is_one_line(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("x")
    assert cli.main(["export", str(tmp_path / "d"), "--cube", str(tmp_path / "c.cubex")]) == 2
    err = capsys.readouterr().err.strip()
    assert "neither an experiment" in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_vertices_that_did_not_run_leave_no_per_rank_rows():
    from scalgraph.io.export_hatchet import hatchet_document
    psg, runs, cause = syn.cg_like(scales=(2,))
    prof = runs[2]
    last = len(psg) - 1                      # comp cg.c:40, a leaf: zero on rank 1 only
    prof.time[1, last] = prof.wait[1, last] = 0
    prof.calls[1, last] = 0
    spec = hatchet_document(psg, {2: prof})["scales"][0]["graphframe"]
    gf = hatchet.GraphFrame.from_json(json.dumps(spec))
    assert len(gf.dataframe) == len(psg) * 2 - 1
    assert _by_vertex(gf, "time", rank=0)[last] == pytest.approx(prof.time[0, last])
    assert last not in _by_vertex(gf, "time", rank=1)
