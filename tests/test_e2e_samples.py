"""End to end on the samples with known root causes (samples/*/expected.json): build with the compile
wrapper, check it prints what a plain MPI build prints, `scalgraph run -n 2,4,8`, `scalgraph detect
--json`, and check that the top root cause is the stated source line (and that the balanced control
sample reports none).  Every step is the real tool: wrapper, shim, mpiexec, detector."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, require_tool, venv_tool as tool

SAMPLES = ROOT / "samples"
NAMES = ["cg", "stencil2d", "sweep", "zeusmp", "masterworker", "alltoall", "balanced"]
WRAPPER = {".c": "sgcc", ".cpp": "sgcxx", ".f90": "sgfort"}


def expected(name: str) -> dict:
    return json.loads((SAMPLES / name / "expected.json").read_text())


def sources(name: str) -> list[pathlib.Path]:
    return [SAMPLES / name / s for s in expected(name)["sources"]]


def require_parts(name: str) -> None:
    """Skip (fail under SCALGRAPH_NO_SKIP=1) naming the part that is missing."""
    suffix = sources(name)[0].suffix
    require_tool(importlib.util.find_spec("scalgraph.static.probes") is not None, "static pass not installed")
    require_tool(importlib.util.find_spec("scalgraph.runtime.shim") is not None, "runtime shim not installed")
    require_tool(importlib.util.find_spec("scalgraph.io.profile_file") is not None, "profile reader not installed")
    require_tool(importlib.util.find_spec("ziglang") is not None, "no ziglang (pip install ziglang)")
    if suffix == ".f90":
        require_tool(shutil.which("flang-new-19") is not None or shutil.which("flang-new") is not None,
                     "no flang (apt-get install flang-19)")
        require_tool(shutil.which("mpif90") is not None, "no MPI with Fortran bindings (apt-get install mpich libmpich-dev)")
    else:
        require_tool(tool("mpicc") is not None, "no MPI (pip install mpich)")


def build_with_wrapper(name: str, out: pathlib.Path) -> pathlib.Path:
    srcs = sources(name)
    exe = out / f"{name}-sg"
    res = subprocess.run([tool(WRAPPER[srcs[0].suffix]), "-O2", "-g", "-o", str(exe), *map(str, srcs)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"wrapper build of {name} failed:\n{res.stderr}"
    return exe


def build_plain(name: str, out: pathlib.Path) -> pathlib.Path:
    """The same program built the usual way, without scalgraph."""
    srcs = sources(name)
    exe = out / f"{name}-plain"
    suffix = srcs[0].suffix
    if suffix == ".f90":
        show = subprocess.run(["mpif90", "-show"], capture_output=True, text=True, check=True).stdout.split()
        flags = [w for w in show if w.startswith(("-I", "-L", "-l", "-Wl,"))]
        fc = shutil.which("flang-new-19") or shutil.which("flang-new")
        cmd = [fc, "-O2", "-o", str(exe), *map(str, srcs), *flags]
    else:
        cmd = [tool("mpicxx" if suffix == ".cpp" else "mpicc"), "-O2", "-o", str(exe), *map(str, srcs)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"plain build of {name} failed:\n{res.stderr}"
    return exe


def scalgraph(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=900)


def run_output(exp: pathlib.Path, scale: int) -> str:
    return (exp / f"scale-{scale}/rep-0/stdout.txt").read_text()


def within(cause: dict, span: list[int]) -> bool:
    """The reported vertex lies inside the stated loop nest / call (not an enclosing region)."""
    first, last = cause["line"], cause.get("line_last") or cause["line"]
    return span[0] <= first <= last <= span[1]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.mark.parametrize("name", NAMES)
def test_sample_root_cause_is_found(name, workdir, wrapped_sample):
    want = expected(name)
    out = workdir / name
    out.mkdir()
    exe = wrapped_sample(name)
    plain = build_plain(name, out)

    exp = out / "exp"
    scales = ",".join(map(str, want["scales"]))
    # The control runs three times per scale (detect takes the median rank by rank): on this shared
    # 2-core machine identical work's thread-CPU varies by up to 1.5x from one second to the next, so a
    # single run of the one-loop control named its loop in 2 of 10 runs at load 12, 0 of 6 with three
    # (benchmarks/bench_samples_accuracy.py --samples balanced --modes profile [--run-repeat 3]).
    repeat = ["--repeat", "3"] if want["root_cause"] is None else []
    res = scalgraph("run", *repeat, "-n", scales, "-o", str(exp), "--", str(exe), cwd=out)
    assert res.returncode == 0, f"scalgraph run failed:\n{res.stderr}"

    # the instrumented build computes exactly what the plain build computes
    from scalgraph.runtime.launch import find_launcher
    launcher = find_launcher(str(plain))
    for p in want["scales"][:2]:
        ref = subprocess.run(launcher.command(p, [str(plain)]), env=launcher.environment(p), capture_output=True,
                             text=True, timeout=300)
        assert ref.returncode == 0, ref.stderr
        assert run_output(exp, p) == ref.stdout, f"{name} at {p} ranks: wrapper build output differs from plain build"

    det = scalgraph("detect", "--json", str(exp), cwd=out)
    assert det.returncode == 0, f"scalgraph detect failed:\n{det.stderr}"
    report = json.loads(det.stdout)
    causes = report["root_causes"]
    summary = "\n".join(f"  {c['location']} {c['kind']} {c['name']} in {c['function']} cost={c['cost']:.3f}"
                        for c in causes)
    if want["root_cause"] is None:
        assert not report["problem_found"] and causes == [], f"{name} is balanced, but detect reported:\n{summary}"
        return
    assert causes, f"{name}: detect found no root cause; expected {want['root_cause']}"
    top = causes[0]
    rc = want["root_cause"]
    assert pathlib.Path(top["file"]).name == rc["file"] and within(top, rc["lines"]), (
        f"{name}: expected {rc['file']}:{rc['line']} ({rc['function']}) as the top root cause, got:\n{summary}")
    # the two sides of the collective rule: a collective is its own cause only by the volume it moves
    own = top["explains"]["what"] == "own scaling"
    assert own == (want.get("kind") == "non-scalable-collective"), f"{name}: explains {top['explains']}"
    assert all(c["contexts"] and c["cost"] <= report["run_time"][str(report["scales"][-1])] for c in causes)
    if "ranks_at_8" in rc and report["scales"][-1] == 8:
        assert top["rank"] in rc["ranks_at_8"], f"{name}: the cause runs on ranks {rc['ranks_at_8']}, detect named rank {top['rank']}"
