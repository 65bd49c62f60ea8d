"""Build the runtime shim (instrument/*.c) for the MPI in use, once, and find it again.

The shim must be compiled against the very mpi.h of the program's MPI (MPI_Comm is an int in MPICH
and a pointer in Open MPI), so it is built at first use with that MPI's `mpicc -shared -fPIC` and
cached under SCALGRAPH_CACHE (default ~/.cache/scalgraph), keyed by a hash of `mpicc -show` and the
C sources (also as a static archive, for static links).  `core_library()` builds the MPI-free core alone, for unit tests through cffi.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

from scalgraph.errors import UserError
from scalgraph.runtime.wrapper_show import wrapper_show

INSTRUMENT_DIR = pathlib.Path(__file__).resolve().parent.parent.parent / "instrument"
HEADER = INSTRUMENT_DIR / "scalgraph.h"
CORE_SOURCES = ("sg_context.c", "sg_store.c", "sg_sampler.c", "sg_writer.c", "sg_trace.c", "sg_ompt.c",
                "sg_threads.c", "sg_trace_omp.c")
MPI_SOURCES = ("sg_mpi_state.c", "sg_mpi_p2p.c", "sg_mpi_coll.c", "sg_mpi_env.c", "sg_mpi_rma.c",
               "sg_mpi_fortran.c", "sg_trace_mpi.c")
CFLAGS = ("-fPIC", "-O2", "-g", "-Wall", "-fvisibility=default")
LIB_NAME, STATIC_LIB_NAME = "libscalgraph.so", "libscalgraph.a"


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SCALGRAPH_CACHE") or pathlib.Path.home() / ".cache" / "scalgraph")


def find_mpicc(mpicc: str | None = None) -> str:
    """mpicc given, else SCALGRAPH_MPICC, else `mpicc` on PATH, else the one beside this Python."""
    for cand in (mpicc, os.environ.get("SCALGRAPH_MPICC"), "mpicc",
                 str(pathlib.Path(sys.executable).parent / "mpicc")):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    raise UserError("no MPI C compiler wrapper (mpicc) found: install an MPI (e.g. `pip install mpich`) "
                    "or set SCALGRAPH_MPICC to its mpicc")


def _sources_digest(names) -> hashlib._Hash:
    h = hashlib.sha256()
    for p in sorted(INSTRUMENT_DIR.glob("*.[ch]")):   # headers are shared by all sources
        if p.suffix == ".h" or p.name in names:
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h


def _build(compiler: list[str], sources, defines, key: str, what: str, static: bool = False) -> pathlib.Path:
    missing = [s for s in sources if not (INSTRUMENT_DIR / s).is_file()]
    if missing or not HEADER.is_file():
        what_is_missing = ", ".join(missing) or HEADER.name
        raise UserError(f"the shim's C sources are not in {INSTRUMENT_DIR} (missing {what_is_missing}); "
                        "install scalgraph from its source tree (`pip install -e .`)")
    out_dir = cache_dir() / f"{what}-{key}"
    lib = out_dir / (STATIC_LIB_NAME if static else LIB_NAME)
    if lib.is_file():
        return lib
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the shim cache {out_dir} ({e.strerror}); set SCALGRAPH_CACHE "
                        "to a writable directory") from None
    # build in a private directory and rename: parallel first uses never see a half-written library
    with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmpdir:
        common = [*compiler, *CFLAGS, *defines, "-I", str(INSTRUMENT_DIR)]
        objs = [os.path.join(tmpdir, pathlib.Path(s).stem + ".o") for s in sources]
        _run_build_steps([[*common, "-c", str(INSTRUMENT_DIR / src), "-o", obj]
                          for src, obj in zip(sources, objs)])
        out = os.path.join(tmpdir, "out")
        if static:
            _run_build_steps([[shutil.which("ar") or "ar", "rcs", out, *objs]])
        else:
            _run_build_steps([[*common, "-shared", *objs, "-o", out]])
        os.replace(out, lib)
    return lib


def _run_build_steps(steps: list[list[str]]) -> None:
    """Run independent compiler commands side by side (at most one per core: a first build took
    minutes one file after the other); the first failing one, in the given order, is reported."""
    import concurrent.futures       # only for a first build: it imports logging, 3 ms of every link
    workers = max(1, min(len(steps), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        failures = [f for f in pool.map(_run_build_step, steps) if f]
    if failures:
        raise UserError(failures[0])


def _run_build_step(cmd: list[str]) -> str | None:
    """None if `cmd` succeeded, else the one line that says why it did not."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        return f"cannot run {cmd[0]} to build the scalgraph shim ({e.strerror})"
    if res.returncode == 0:
        return None
    lines = [ln.strip() for ln in res.stderr.strip().splitlines() if ln.strip()]
    # the compiler's error lines, not its first warning: that is what says what went wrong
    errors = [ln for ln in lines if re.search(r"\berror\b|undefined reference", ln, re.I)]
    tail = " | ".join(errors[:3] or lines[-3:])[:600]
    return (f"building the scalgraph shim with {cmd[0]} failed: {tail}; check that this "
            "mpicc works (`mpicc -show`) or point SCALGRAPH_MPICC at another one")


def shim_library(mpicc: str | None = None, static: bool = False) -> pathlib.Path:
    """The shim (MPI wrappers + core) built for the MPI behind `mpicc`; built once, then cached.
    static=True gives libscalgraph.a for static links (put it before -lmpi, like the .so)."""
    cc = find_mpicc(mpicc)
    try:
        show = wrapper_show((cc,)).stdout          # the same answer toolchain.mpi_flags got
    except (OSError, subprocess.TimeoutExpired):
        show = ""
    h = _sources_digest(CORE_SOURCES + MPI_SOURCES)
    h.update(cc.encode() + b"\0" + show.encode() + b"\0" + " ".join(CFLAGS).encode())
    return _build([cc], CORE_SOURCES + MPI_SOURCES, (), h.hexdigest()[:16], "shim", static)


def core_library(cc: str | None = None) -> pathlib.Path:
    """The MPI-free core alone (no constructor: nothing starts by itself), for cffi tests."""
    compiler = cc or os.environ.get("CC") or shutil.which("cc") or find_mpicc()
    h = _sources_digest(CORE_SOURCES)
    h.update(compiler.encode() + b"\0" + " ".join(CFLAGS).encode())
    return _build([compiler], CORE_SOURCES, ("-DSG_NO_AUTOSTART",), h.hexdigest()[:16], "core")


def header_cdef() -> str:
    """The declarations between SG_CDEF_BEGIN and SG_CDEF_END of instrument/scalgraph.h, for cffi."""
    text = HEADER.read_text()
    m = re.search(r"/\* SG_CDEF_BEGIN \*/(.*)/\* SG_CDEF_END \*/", text, re.S)
    if not m:
        raise UserError(f"{HEADER} has no SG_CDEF_BEGIN/END region; the installation is damaged")
    return m.group(1)


def shim_link_args(mpicc: str | None = None) -> list[str]:
    """What sgcc puts on a link line: the static shim by default, so the executable needs nothing
    from the cache at run time; SCALGRAPH_SHIM=shared links the shared one (smaller executables,
    but they only run where the cache directory is)."""
    shared = os.environ.get("SCALGRAPH_SHIM", "static") == "shared"
    return link_flags(shim_library(mpicc, static=not shared))


def link_flags(lib: pathlib.Path) -> list[str]:
    """Arguments that put the shim on a link line (before libmpi, which mpicc appends last)."""
    # -u: nothing in the program calls ompt_start_tool (LLVM's OpenMP runtime looks it up), so the
    # archive member with the OMPT tool (sg_ompt.c) is pulled in by name
    return ["-Wl,-u,ompt_start_tool", str(lib)] if lib.suffix == ".a" else [str(lib), f"-Wl,-rpath,{lib.parent}"]
