"""The hybrid samples built once per test session with `sgcc -fopenmp -O2 -g` (tests/test_openmp_e2e.py
and tests/test_openmp_trace.py run the same binary: a build costs several seconds on the test machine)."""
from __future__ import annotations

import json
import pathlib
import subprocess

from conftest import ROOT, require_tool
from test_openmp_build import openmp_available, venv_tool

SAMPLES = ROOT / "samples"
_built: dict[str, pathlib.Path] = {}


def expected(name: str) -> dict:
    return json.loads((SAMPLES / name / "expected.json").read_text())


def require_openmp_tools() -> None:
    require_tool(venv_tool("sgcc") is not None and venv_tool("mpiexec") is not None, "no sgcc/mpiexec")
    require_tool(openmp_available(), "no libomp for the clang sgcc uses (bash scripts/setup.sh installs it)")


def sample_binary(name: str, tmp_path_factory) -> pathlib.Path:
    """samples/<name> built with sgcc -fopenmp -O2 -g, once per session (its PSG is in the binary)."""
    if name not in _built:
        require_openmp_tools()
        d = tmp_path_factory.mktemp(f"omp-build-{name}")
        src = str(SAMPLES / name / expected(name)["sources"][0])
        res = subprocess.run([venv_tool("sgcc"), "-fopenmp", "-O2", "-g", src, "-o", "sg"], cwd=d,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, f"sgcc -fopenmp failed:\n{res.stderr}"
        _built[name] = d / "sg"
    return _built[name]
