"""Building the shim for the active MPI: cached by mpicc configuration and sources, clear errors."""
from __future__ import annotations

import os
import stat
import subprocess

import pytest

from conftest import MPICC, require_tool
from scalgraph.errors import UserError
from scalgraph.runtime import shim



@pytest.fixture(scope="module")
def fresh_build(tmp_path_factory):
    """The shim built by shim_library into an empty cache (a real build: a minute under load, so once)."""
    require_tool(MPICC is not None, "no mpicc")
    cache = tmp_path_factory.mktemp("shim") / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCALGRAPH_CACHE", str(cache))
        return cache, shim.shim_library(MPICC)


def test_built_once_then_taken_from_the_cache(fresh_build, monkeypatch):
    cache, lib = fresh_build
    monkeypatch.setenv("SCALGRAPH_CACHE", str(cache))
    assert lib.is_file() and lib.parent.parent == cache
    before = lib.stat().st_mtime_ns
    assert shim.shim_library(MPICC) == lib and lib.stat().st_mtime_ns == before
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    for name in ("MPI_Send", "MPI_Waitall", "MPI_Ialltoallw", "MPI_Win_flush", "mpi_send_", "sg_fn_enter",
                 "sg_cur", "sg_register_psg"):
        assert f" {name}\n" in symbols, name
    assert " sg_run\n" not in symbols                   # internals stay hidden
    assert not list(lib.parent.glob(".build-*"))


def test_another_mpicc_configuration_gets_its_own_build(fresh_build, tmp_path, monkeypatch):
    cache, lib = fresh_build
    monkeypatch.setenv("SCALGRAPH_CACHE", str(cache))
    wrapper = tmp_path / "mympicc"                      # same compiler, different `-show`
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = -show ]; then echo other-config; exit 0; fi\nexec {MPICC} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    other = shim.shim_library(str(wrapper))
    assert other != lib and other.is_file() and other.parent.parent == cache and lib.is_file()


def test_missing_or_broken_compilers_are_user_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALGRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(shim.sys, "executable", str(tmp_path / "nowhere" / "python"))
    with pytest.raises(UserError, match="no MPI C compiler wrapper"):
        shim.shim_library()
    broken = tmp_path / "badcc"
    broken.write_text("#!/bin/sh\necho 'cc: fatal error: no mpi.h' >&2\nexit 1\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(UserError, match="building the scalgraph shim with .*badcc failed: cc: fatal error"):
        shim.shim_library(str(broken))
    assert not list((tmp_path / "cache").rglob("*.so"))


def test_unwritable_cache_is_a_user_error(tmp_path, monkeypatch):
    require_tool(MPICC is not None, "no mpicc")
    if os.geteuid() == 0:
        target = tmp_path / "file-not-dir"              # root writes anywhere: use a file as the parent
        target.write_text("")
        monkeypatch.setenv("SCALGRAPH_CACHE", str(target / "cache"))
    else:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        monkeypatch.setenv("SCALGRAPH_CACHE", str(ro / "cache"))
    with pytest.raises(UserError, match="cannot create the shim cache"):
        shim.shim_library(MPICC)


def test_cdef_region_is_what_cffi_parses():
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef(shim.header_cdef())
    assert ffi.sizeof("struct sg_dep_record") == 48


def test_missing_c_sources_are_a_user_error(tmp_path, monkeypatch):
    require_tool(MPICC is not None, "no mpicc")
    monkeypatch.setenv("SCALGRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(shim, "INSTRUMENT_DIR", tmp_path / "no-instrument")
    with pytest.raises(UserError, match="shim's C sources are not in .*no-instrument"):
        shim.shim_library(MPICC)


def test_a_failed_build_shows_the_compilers_errors_not_its_warnings(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALGRAPH_CACHE", str(tmp_path / "cache"))
    noisy = tmp_path / "noisycc"                        # gcc's shape: warnings around the error
    noisy.write_text("#!/bin/sh\n"
                     "echo \"a.c:3:7: warning: unused variable 'local' [-Wunused-variable]\" >&2\n"
                     "echo \"a.c:9:12: error: 'MPI_F_STATUS_SIZE' undeclared\" >&2\n"
                     "echo '    9 |     F x[MPI_F_STATUS_SIZE];' >&2\n"
                     "echo \"a.c:12:1: warning: control reaches end\" >&2\nexit 1\n")
    noisy.chmod(noisy.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(UserError) as err:
        shim.shim_library(str(noisy))
    assert "error: 'MPI_F_STATUS_SIZE' undeclared" in str(err.value)
    assert "warning" not in str(err.value)


def fake_wrapper(path, body: str):
    """An executable MPI wrapper stand-in: answers -show like MPICH's, runs `body` for anything else."""
    path.write_text(f'#!/bin/sh\nif [ "$1" = -show ]; then echo "$1" >> {path}.log; echo "cc -lmpi"; exit 0; fi\n'
                    f'{body}\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_link_asks_the_wrapper_for_its_flags_once(tmp_path, monkeypatch):
    from scalgraph.static.toolchain import mpi_flags
    monkeypatch.setenv("SCALGRAPH_CACHE", str(tmp_path / "cache"))
    wrapper = fake_wrapper(tmp_path / "mpicc", "echo 'x.c:1:1: error: no compiler here' >&2; exit 1")
    assert mpi_flags(str(wrapper)).link == ("-lmpi",)      # the program's MPI flags, as sgcc reads them
    with pytest.raises(UserError, match="error: no compiler here"):
        shim.shim_library(str(wrapper))                     # the shim's cache key needs the same answer
    assert (tmp_path / "mpicc.log").read_text().split() == ["-show"]


def test_the_shims_sources_are_compiled_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALGRAPH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(shim.os, "cpu_count", lambda: 2)
    # each compile waits (up to 10 s) until another one has started, then says whether it met one
    wrapper = fake_wrapper(tmp_path / "mpicc", f"""
for a; do [ "$prev" = -o ] && out=$a; prev=$a; done
touch "$out.started"; n=0
while [ "$(ls "$(dirname "$out")"/*.started | wc -l)" -lt 2 ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n+1)); done
if [ $n -lt 100 ]; then echo met >> {tmp_path}/compiles; else echo alone >> {tmp_path}/compiles; fi
touch "$out"
""")
    lib = shim.shim_library(str(wrapper), static=True)
    met = (tmp_path / "compiles").read_text().split()
    assert lib.is_file() and len(met) == len(shim.CORE_SOURCES + shim.MPI_SOURCES) and "alone" not in met
