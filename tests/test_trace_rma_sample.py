"""samples/rma builds with the real mpicc and runs under the real mpiexec at 4 ranks with its
deterministic checksum, and its expected.json names the lines that really hold the planted work,
the call site, the post and the calls that wait (the end-to-end trace test relies on them)."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

from conftest import require_tool

BIN = pathlib.Path(sys.executable).parent
SAMPLE = pathlib.Path(__file__).resolve().parent.parent / "samples" / "rma"


def test_expected_json_points_at_the_planted_lines():
    exp = json.loads((SAMPLE / "expected.json").read_text())
    lines = (SAMPLE / exp["sources"][0]).read_text().splitlines()
    rc, tr = exp["root_cause"], exp["trace"]
    assert lines[rc["line"] - 1].strip().startswith("for (long i = 0; i < work; i++)")
    func_start = max(i for i in range(rc["line"]) if lines[i].startswith("static double"))
    assert f" {rc['function']}(" in lines[func_start]
    assert "delay_post(LATE_WORK" in lines[tr["call_site_line"] - 1]
    assert "MPI_Win_post(" in lines[tr["post_line"] - 1]
    assert [("MPI_Win_start(" in lines[tr["waits_in_lines"][0] - 1]),
            ("MPI_Win_complete(" in lines[tr["waits_in_lines"][1] - 1])] == [True, True]
    assert "late = size / 2" in "\n".join(lines) and tr["late_rank_at_4"] == 2
    assert tr["waiting_rank_at_4"] == (tr["late_rank_at_4"] - 1) % 4
    assert tr["early_wait_rank_at_4"] == (tr["late_rank_at_4"] + 1) % 4


def test_sample_builds_and_runs_deterministically(tmp_path):
    mpicc, mpiexec = BIN / "mpicc", BIN / "mpiexec"
    require_tool(mpicc.is_file() and mpiexec.is_file(), "no mpicc/mpiexec in the venv (pip install mpich)")
    exe = tmp_path / "rma"
    build = subprocess.run([str(mpicc), "-O2", "-g", "-Wall", "-Werror", "-o", str(exe), str(SAMPLE / "rma.c")],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    outs = []
    for _ in range(2):
        run = subprocess.run([str(mpiexec), "-n", "4", str(exe), "3"], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        outs.append(run.stdout)
    assert re.fullmatch(r"rma: 4 ranks, 3 iterations, checksum \d+\.\d{6}\n", outs[0]), outs[0]
    assert outs[0] == outs[1]
