"""`scalgraph run` on a real instrumented program: the shim's rank files land where detect reads them,
a scale where the program aborts is reported and skipped, and detect works on the scales that ran."""
from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

from conftest import ROOT, require_tool

BIN = pathlib.Path(sys.executable).parent


def scalgraph(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_an_aborting_scale_is_skipped_and_the_rest_is_analysed(tmp_path):
    require_tool(importlib.util.find_spec("scalgraph.runtime.shim") is not None, "runtime shim not installed")
    require_tool(importlib.util.find_spec("ziglang") is not None, "no ziglang (pip install ziglang)")
    require_tool((BIN / "mpicc").exists(), "no MPI (pip install mpich)")
    exe = tmp_path / "mw"
    build = subprocess.run([str(BIN / "sgcc"), "-O2", "-g", "-o", str(exe),
                            str(ROOT / "samples" / "masterworker" / "masterworker.c")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    exp = tmp_path / "exp"
    # masterworker needs 2 ranks: at 1 it calls MPI_Abort; 12 tasks keep the runs short
    res = scalgraph("run", "-n", "1,2,3", "-o", str(exp), "--", str(exe), "12", cwd=tmp_path)
    assert res.returncode == 1
    assert "1 of 3 runs failed" in res.stderr and "p=1 rep 0" in res.stderr
    desc = json.loads((exp / "experiment.json").read_text())
    status = {r["scale"]: r["status"] for r in desc["runs"]}
    assert status == {1: "failed", 2: "ok", 3: "ok"}
    assert "needs at least 2 ranks" in (exp / "scale-1/rep-0/stderr.txt").read_text()
    for p in (2, 3):
        assert sorted(f.name for f in (exp / f"scale-{p}/rep-0").glob("rank-*.sgp")) == [f"rank-{r}.sgp" for r in range(p)]
        assert (exp / f"scale-{p}/rep-0/stdout.txt").read_text().startswith(f"masterworker: ranks={p} tasks=12 ")
    assert desc["psg_hash"] == json.loads((exp / "psg.json").read_text())["hash"]

    det = scalgraph("detect", "--json", str(exp), cwd=tmp_path)
    assert det.returncode == 0, det.stderr
    assert json.loads(det.stdout)["scales"] == [2, 3]
