"""Shared fixtures.  Tests that need an optional tool (MPI, clang, flang, otf2) use `require_tool`,
which skips with the reason printed -- except when SCALGRAPH_NO_SKIP=1 (set by CI, where every
tool is installed), where a missing tool fails the test instead."""
from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def samples_dir() -> pathlib.Path:
    return ROOT / "samples"


def require_tool(available: bool, reason: str) -> None:
    """Skip (or fail in CI) when an optional tool is missing."""
    if available:
        return
    if os.environ.get("SCALGRAPH_NO_SKIP") == "1":
        pytest.fail(f"required tool missing in CI: {reason}")
    pytest.skip(reason)


# ---- which MPI the wrapper tests build with ---------------------------------------------------------
# The default is whatever sgcc finds (PyPI's MPICH in the venv, Debian's MPICH for Fortran).
# `pytest --mpi openmpi` (or SCALGRAPH_TEST_MPI=openmpi) selects Debian's Open MPI for the whole run
# through the variables a user sets (docs/mpi-and-builds.md); tests/test_openmpi_e2e.py always does.
OPENMPI_ENV = {"MPICC": "mpicc.openmpi", "MPICXX": "mpicxx.openmpi", "MPIFC": "mpifort.openmpi"}


def pytest_addoption(parser):
    parser.addoption("--mpi", choices=("default", "openmpi"), default=os.environ.get("SCALGRAPH_TEST_MPI", "default"),
                     help="MPI for sgcc/sgcxx/sgfort in the tests (default: what sgcc finds)")


@pytest.fixture(scope="session", autouse=True)
def selected_mpi(request):
    choice = request.config.getoption("--mpi")
    if choice == "openmpi":
        import shutil
        require_tool(shutil.which("mpicc.openmpi") is not None, "no Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
        os.environ.update(OPENMPI_ENV)
    return choice
