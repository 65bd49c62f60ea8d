"""Every export of a real run: the cg sample built with the compile wrapper and recorded with
`scalgraph run --trace -n 2,3` (real MPI), exported in one `scalgraph export` call per input, each output
loaded with its real reader, and the Cube file's wait states and delay costs equal to what
`scalgraph trace --json` reports for the same trace."""
from __future__ import annotations

import json
import subprocess
import sys

import hatchet
import pycubexr
import pytest
import thicket

from scalgraph import cli
from scalgraph.io.trace_read import read_trace
from test_export_cube import _read, _total
from test_export_perfetto import validate


def scalgraph(*args, cwd):
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def cg_run(tmp_path_factory, wrapped_sample):
    exe = wrapped_sample("cg")
    out = tmp_path_factory.mktemp("export-cg")
    res = scalgraph("run", "--trace", "-n", "2,3", "-o", out / "exp", "--", exe, cwd=out)
    assert res.returncode == 0, res.stderr
    return out


def test_every_export_of_a_traced_cg_run_loads(cg_run, capsys):
    out, exp = cg_run, cg_run / "exp"
    assert cli.main(["export", str(exp), "--hatchet", str(out / "h.json"), "--thicket", str(out / "t.json"),
                     "--cube", str(out / "p.cubex"), "--perfetto", str(out / "p.json"),
                     "--otf2", str(out / "otf2")]) == 0, capsys.readouterr().err
    doc = json.loads((out / "h.json").read_text())
    gf = hatchet.GraphFrame.from_literal(doc["scales"][-1]["literal"])
    assert "MPI_Sendrecv" in set(gf.dataframe["name"])
    tk = thicket.Thicket.from_json((out / "t.json").read_text())
    assert sorted(tk.metadata["p"]) == [2, 3]
    with pycubexr.CubexParser(out / "p.cubex") as c:
        assert len(c.get_locations()) == 3
    by = validate(json.loads((out / "p.json").read_text()))
    assert len({e["tid"] for e in by["X"]}) == 3 and by["s"]
    assert read_trace(out / "otf2").nranks == 3


def test_trace_cube_agrees_with_the_trace_report(cg_run, capsys):
    out, run3 = cg_run, cg_run / "exp" / "scale-3" / "rep-0"
    assert cli.main(["export", str(run3), "--cube", str(out / "t.cubex")]) == 0
    capsys.readouterr()
    assert cli.main(["trace", "--json", str(run3)]) == 0
    report = json.loads(capsys.readouterr().out)
    seconds = {p["key"]: p["seconds"] for p in report["patterns"]}
    metrics, _, parent_of, _ = _read(out / "t.cubex")
    for key, uniq in [("time", "time"), ("mpi", "mpi"), ("late_sender", "mpi_latesender"),
                      ("wait_nxn", "mpi_wait_nxn"), ("collective", "mpi_collective"), ("p2p", "mpi_point2point")]:
        assert _total(metrics, parent_of, uniq) == pytest.approx(seconds[key], rel=1e-9, abs=1e-12), key
    assert seconds["late_sender"] > 0
    cls = report["delay"]["classification"]
    assert _total(metrics, parent_of, "delay_mpi") == pytest.approx(cls["short_term"] + cls["long_term"], rel=1e-9)
