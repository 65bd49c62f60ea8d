"""`scalgraph export EXP --extrap FILE`: wired to scalgraph.io.extrap_export.write_extrap (the models work
owns that writer and loads its output with the real `extrap` package in its own tests).  Here: the
command writes exactly what the writer writes, never over an existing file without --force; in a build
without the writer the option says so in one line."""
from __future__ import annotations

import sys

from scalgraph import cli
from scalgraph.analysis import synthetic as syn
from test_detect_cli import write_synthetic_experiment


def _experiment(tmp_path):
    psg, runs, _ = syn.cg_like(scales=(2, 4, 8))
    return write_synthetic_experiment(tmp_path / "exp", psg, runs, reps=2)


def test_extrap_export(tmp_path, capsys):
    from scalgraph.io.extrap_export import write_extrap
    exp = _experiment(tmp_path)
    out = tmp_path / "cg.jsonl"
    assert cli.main(["export", str(exp), "--extrap", str(out)]) == 0, capsys.readouterr().err
    direct = tmp_path / "direct" / "cg.jsonl"
    direct.parent.mkdir()
    write_extrap(exp, direct)
    assert out.read_bytes() == direct.read_bytes() and out.stat().st_size > 0
    assert b'"p": 8' in out.read_bytes() or b'"p":8' in out.read_bytes()
    out.write_text("keep")
    assert cli.main(["export", str(exp), "--extrap", str(out)]) == 2      # exists: kept
    assert "already exists" in capsys.readouterr().err
    assert out.read_text() == "keep"
    assert cli.main(["export", str(exp), "--extrap", str(out), "--force"]) == 0
    assert out.read_bytes() == direct.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cg.jsonl", "direct", "exp"]


def test_build_without_the_writer_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "scalgraph.io.extrap_export", None)     # import now fails as if absent
    exp = _experiment(tmp_path)
    out = tmp_path / "cg.jsonl"
    assert cli.main(["export", str(exp), "--extrap", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not available in this build" in err and len(err.splitlines()) == 1
    assert not out.exists()
