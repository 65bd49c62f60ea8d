"""Shared fixtures.  Tests that need an optional tool (MPI, clang, flang, otf2) use `require_tool`,
which skips with the reason printed -- except when SCALGRAPH_NO_SKIP=1 (set by CI, where every
tool is installed), where a missing tool fails the test instead."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent


def venv_tool(name: str) -> str | None:
    """The venv's copy of a tool (sgcc, PyPI's mpicc and mpiexec), else the one on PATH, else None."""
    p = BIN / name
    return str(p) if p.is_file() else shutil.which(name)


MPICC, MPIEXEC = venv_tool("mpicc"), venv_tool("mpiexec")

# Without the shim a hand-probed test program (instrument/testprogs) still needs the probes defined:
# this stub plays the empty runtime.
PROBE_STUB = ("#include <stdint.h>\n#include \"scalgraph.h\"\n__thread uint32_t sg_cur;\n"
              "void sg_register_psg(const struct sg_psg_tables *t) { (void)t; }\n"
              "void sg_fn_enter(uint32_t f) { (void)f; }\nvoid sg_fn_exit(void) {}\n")


def build_probed(program: pathlib.Path, out: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """`program` linked with the shim (out/with_shim) and, the same code, with PROBE_STUB (out/plain)."""
    from scalgraph.runtime.shim import INSTRUMENT_DIR, link_flags, shim_library
    common = [MPICC, "-O1", "-g", "-I", str(INSTRUMENT_DIR), str(program)]
    subprocess.run([*common, *link_flags(shim_library(MPICC)), "-o", str(out / "with_shim")], check=True)
    stub = out / "stub.c"
    stub.write_text(PROBE_STUB)
    subprocess.run([*common, str(stub), "-o", str(out / "plain")], check=True)
    return out / "with_shim", out / "plain"


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
