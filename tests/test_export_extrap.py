"""`scalgraph export EXP --extrap FILE`: wired to scalgraph.io.extrap_export.write_extrap (the models work
owns that writer and loads its output with the real `extrap` package in its own tests).  Here: the
command writes exactly what the writer writes, through a temporary file, never over an existing file;
in a build without the writer the option says so in one line."""
from __future__ import annotations

import importlib.util

from scalgraph import cli
from scalgraph.analysis import synthetic as syn
from test_detect_cli import write_synthetic_experiment

HAVE_WRITER = importlib.util.find_spec("scalgraph.io.extrap_export") is not None


def _experiment(tmp_path):
    psg, runs, _ = syn.cg_like(scales=(2, 4, 8))
    return write_synthetic_experiment(tmp_path / "exp", psg, runs, reps=2)


def test_extrap_export(tmp_path, capsys):
    exp = _experiment(tmp_path)
    out = tmp_path / "cg.extrap"
    code = cli.main(["export", str(exp), "--extrap", str(out)])
    err = capsys.readouterr().err
    if not HAVE_WRITER:
        assert code == 2 and "not available in this build" in err and len(err.strip().splitlines()) == 1
        assert not out.exists()
        return
    assert code == 0, err
    from scalgraph.io.extrap_export import write_extrap
    direct = tmp_path / "direct" / "cg.extrap"
    direct.parent.mkdir()
    write_extrap(exp, direct)
    assert out.read_bytes() == direct.read_bytes() and out.stat().st_size > 0
    assert cli.main(["export", str(exp), "--extrap", str(out)]) == 2      # exists: kept
    assert "already exists" in capsys.readouterr().err
    assert out.read_bytes() == direct.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cg.extrap", "direct", "exp"]
