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


def sgcc_build(src: pathlib.Path, exe: pathlib.Path) -> pathlib.Path:
    """`src` built with scalgraph's sgcc at -O2 -g into `exe`; a failed build fails with its errors."""
    res = subprocess.run([venv_tool("sgcc"), "-O2", "-g", "-o", str(exe), str(src)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return exe


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


@pytest.fixture(scope="session")
def wrapped_sample(tmp_path_factory):
    """name -> samples/<name> built with scalgraph's compile wrapper (-O2 -g), once per session (per
    worker under xdist): the tests only run the executable, each with its own output directory."""
    from test_e2e_samples import build_with_wrapper, require_parts
    built = {}

    def get(name: str) -> pathlib.Path:
        require_parts(name)
        if name not in built:
            built[name] = build_with_wrapper(name, tmp_path_factory.mktemp(f"sample-{name}"))
        return built[name]
    return get


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


# ---- order of the parallel run (scripts/test.sh: pytest-xdist, --dist loadfile) ----------------------
# A worker takes the next whole file when it is nearly done with its own.  The files that take longest
# start first, so that none begins while the other worker is finishing the rest (the order of the
# files' summed test times in a 2-worker run, 2026-11-26; a file not named here only starts later).
LONGEST_FIRST = (
    "test_driver_build.py", "test_e2e_trace.py", "test_shim_build.py", "test_e2e_samples.py",
    "test_driver_fortran.py", "test_accuracy_runner.py", "test_docs_commands.py", "test_trace_record.py",
    "test_openmp_trace.py", "test_shim_mpi.py", "test_openmpi_e2e.py", "test_trace_parallel_cli.py",
    "test_shim_fortran.py", "test_trace_parallel.py", "test_report_html_browser.py",
    "test_analysis_backtrack_props.py", "test_trace_formats.py", "test_static_samples.py",
    "test_openmp_e2e.py", "test_compile_paths.py", "test_run_command.py", "test_hardening_corpus.py",
    "test_architecture.py", "test_driver_errors.py", "test_shim_sampler.py", "test_e2e_demo.py",
)


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):      # only on xdist's workers: a plain run keeps file order
        return
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: the rest as collected
