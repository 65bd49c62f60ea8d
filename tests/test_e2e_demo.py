"""The README's main job for a new user: `bash scripts/demo.sh` builds samples/cg with sgcc, runs it at
2, 4, 8 ranks and prints the root cause, the audit loop at cg.c:21, with what fixing it would save, and
writes the HTML report beside it."""
from __future__ import annotations

import importlib.util
import os
import subprocess

from conftest import ROOT, require_tool


def test_demo_script_names_the_planted_root_cause(tmp_path):
    require_tool(importlib.util.find_spec("scalgraph.runtime.shim") is not None, "runtime shim not installed")
    require_tool(importlib.util.find_spec("ziglang") is not None, "no ziglang (pip install ziglang)")
    env = dict(os.environ, SCALGRAPH_DEMO_DIR=str(tmp_path))
    res = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh")], capture_output=True, text=True, env=env,
                         timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "cg: ranks=8" in out                                   # the program's own output
    first = next(line for line in out.splitlines() if line.startswith("#1 "))
    assert "cg.c:21" in first, out                                 # the top root cause is the audit loop
    assert "> 21 |     for (long k = 0; k < AUDIT_WORK; k++)" in out   # with its source line shown
    assert (tmp_path / "cg-exp" / "experiment.json").exists()
    assert "what-if: fixing cg.c:21-22 saves" in out, out          # the predicted gain of the fix
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "cg.c:21" in page
