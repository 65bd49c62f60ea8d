"""`scalgraph export TRACE --otf2 DIR`: the archive is read back by the PyPI otf2 reader (through
scalgraph's OTF2 reader) and, where Debian's otf2-tools are installed, by otf2-print."""
from __future__ import annotations

import shutil
import subprocess

from conftest import require_tool
from scalgraph import cli
from scalgraph.io.trace_read import read_trace, write_trace
from test_export_perfetto import late_sender_trace


def test_otf2_archive_reads_back(tmp_path, capsys):
    trace = late_sender_trace()
    src = tmp_path / "t.sgtrace"
    write_trace(trace, src)
    out = tmp_path / "otf2"
    assert cli.main(["export", str(src), "--otf2", str(out)]) == 0
    assert (out / "traces.otf2").is_file() and (out / "traces").is_dir()
    back = read_trace(out)
    assert back.nranks == 3
    added = {"MPI_Init", "MPI_Finalize"}        # the writer wraps each rank in them, as Scalasca expects
    for r in range(3):
        def visits(t, ev):
            return [(t.regions[i].name, k, round(float(s), 9)) for i, k, s in zip(ev["region"], ev["kind"], ev["time"])
                    if i >= 0 and t.regions[i].name not in added]
        assert visits(back, back.events[r]) == visits(trace, trace.events[r])
        assert visits(trace, trace.events[r])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]       # no temporary left behind
    # an existing archive stays as it is without --force, and is replaced with it
    stamp = (out / "traces.otf2").stat().st_mtime_ns
    assert cli.main(["export", str(src), "--otf2", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (out / "traces.otf2").stat().st_mtime_ns == stamp
    assert cli.main(["export", str(src), "--otf2", str(out), "--force"]) == 0
    assert read_trace(out).nranks == 3
    require_tool(shutil.which("otf2-print") is not None, "otf2-print (Debian otf2-tools) not installed")
    text = subprocess.run(["otf2-print", str(out / "traces.otf2")], capture_output=True, text=True, check=True).stdout
    assert text.count("MPI_SEND") + text.count("MPI_Send") >= 1 and "MPI_Allreduce" in text


def test_experiment_trace_formats_use_the_scales_trace(tmp_path, capsys):
    from scalgraph.analysis import synthetic as syn
    from test_detect_cli import write_synthetic_experiment
    psg, runs, _ = syn.cg_like(scales=(2, 3))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    out = tmp_path / "t.json"
    assert cli.main(["export", str(exp), "--perfetto", str(out)]) == 2
    err = capsys.readouterr().err
    assert "needs a trace" in err and "p=3" in err and not out.exists()
    write_trace(late_sender_trace(), exp / "scale-3" / "rep-0" / "trace.sgtrace")
    assert cli.main(["export", str(exp), "--perfetto", str(out)]) == 0
    assert '"rank 2"' in out.read_text()


def test_force_never_replaces_what_is_not_an_export(tmp_path, capsys):
    src = tmp_path / "t.sgtrace"
    write_trace(late_sender_trace(), src)
    precious = tmp_path / "results"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep")
    assert cli.main(["export", str(src), "--otf2", str(precious), "--force"]) == 2
    err = capsys.readouterr().err
    assert "refusing to replace it" in err and len(err.strip().splitlines()) == 1
    assert (precious / "notes.txt").read_text() == "keep"
    # the input itself, or the directory holding it, is never an output
    assert cli.main(["export", str(src), "--perfetto", str(src), "--force"]) == 2
    assert cli.main(["export", str(src), "--otf2", str(tmp_path), "--force"]) == 2
    assert capsys.readouterr().err.count("is the input or part of it") == 2
    assert read_trace(src).nranks == 3
