"""Shared helpers of the static-pass tests: produce bitcode with the real compilers, run the static
pass (instrument, read the parts back from the objects, link), find expected lines in the sources.
(No tests here.)"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

from conftest import ROOT, require_tool

VENV_BIN = pathlib.Path(sys.executable).parent
ZIG = VENV_BIN / "python-zig"
MPI_INCLUDE = pathlib.Path(sys.prefix) / "include"
FLANG = shutil.which("flang-new-19") or shutil.which("flang-new") or shutil.which("flang")
MPIF_DIRS = [pathlib.Path("/usr/include/x86_64-linux-gnu/mpich"), pathlib.Path("/usr/include/mpich"),
             pathlib.Path("/usr/lib/x86_64-linux-gnu/openmpi/include")]
SAMPLES = ROOT / "samples"


def need_clang() -> None:
    require_tool(ZIG.exists() and (MPI_INCLUDE / "mpi.h").exists(),
                 "clang (ziglang: python-zig) and mpi.h (PyPI mpich) in the venv")


def need_flang() -> pathlib.Path:
    inc = next((d for d in MPIF_DIRS if (d / "mpif.h").exists()), None)
    require_tool(FLANG is not None and inc is not None, "flang-new-19 and an mpif.h (Debian flang-19, libmpich-dev)")
    return inc


def bitcode(source: pathlib.Path, out_dir: pathlib.Path, *, opt: str = "-O0", extra=()) -> bytes:
    """LLVM bitcode with debug info, the way the driver produces it (no text IR: C++ needs bitcode)."""
    out = out_dir / (source.name + ".bc")
    if source.suffix in (".f90", ".f", ".F90"):
        inc = need_flang()
        cmd = [FLANG, "-c", "-emit-llvm", "-g", opt, f"-I{inc}", str(source), "-o", str(out)]
    else:
        need_clang()
        lang = "c++" if source.suffix in (".cpp", ".cc", ".cxx") else "cc"
        cmd = [str(ZIG), lang, "-c", "-emit-llvm", "-g", opt, "-fno-sanitize=all", f"-I{MPI_INCLUDE}",
               *extra, str(source), "-o", str(out)]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
    return out.read_bytes()


def build_psg(sources, tmp: pathlib.Path, *, max_loop_depth: int = 10, opt: str = "-O0"):
    """Instrument each source into an object, read the parts back from the objects, link.
    Returns (psg, tables C source, object paths)."""
    from scalgraph.static import instrument_bitcode, link_psg, read_parts_from_files
    objs = []
    for src in sources:
        src = pathlib.Path(src)
        obj, _part = instrument_bitcode(bitcode(src, tmp, opt=opt), str(src.relative_to(ROOT)),
                                        opt_level=int(opt[2:]), max_loop_depth=max_loop_depth)
        path = tmp / (src.name + ".o")
        path.write_bytes(obj)
        objs.append(str(path))
    psg, tables = link_psg(read_parts_from_files(objs), max_loop_depth=max_loop_depth)
    return psg, tables, objs


def line_of(source: pathlib.Path, needle: str, nth: int = 0) -> int:
    """1-based line of the nth line containing needle (so tests never hard-code line numbers)."""
    hits = [i + 1 for i, text in enumerate(source.read_text().splitlines()) if needle in text]
    assert len(hits) > nth, f"{needle!r} not found in {source}"
    return hits[nth]


def shape(psg, v: int = 0, keep=None):
    """(kind, name, [children...]) nested tuples, optionally keeping only some kinds."""
    kids = [shape(psg, c, keep) for c in psg.children[v] if keep is None or psg.kind_name(c) in keep]
    return (psg.kind_name(v), psg.name[v], kids)


def kinds_of_children(psg, v: int) -> list[str]:
    return [psg.kind_name(c) for c in psg.children[v]]


def find(psg, kind: str, name: str | None = None) -> list[int]:
    return [v for v in range(len(psg)) if psg.kind_name(v) == kind and (name is None or psg.name[v] == name)]
