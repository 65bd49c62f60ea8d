"""The ways sgcc makes an instrumented object give one PSG and one program behaviour: IR text that
the front end's own clang (of llvmlite's LLVM major) compiles again, bitcode read by llvmlite (any
other clang), line tables only or full -g.  Without -g the object carries no debug info, as a
plain build's does not; with -g it does."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from conftest import ROOT, require_tool
from test_driver_build import MPICC, MPIEXEC, instrumentation_available, mpirun, sg

SAMPLE = ROOT / "samples" / "cg" / "cg.c"


def psg_without_hashes(path: Path) -> dict:
    """A module's hash names its internal functions; it comes from the IR text, which the two paths
    print differently (attribute group numbers), so it is left out of the comparison."""
    return json.loads(re.sub(r"\b[0-9a-f]{10}\b", "H", path.read_text()))


def debug_sections(obj: Path) -> set[str]:
    from elftools.elf.elffile import ELFFile
    with open(obj, "rb") as f:
        return {s.name for s in ELFFile(f).iter_sections() if s.name.startswith(".debug_")}


def test_text_and_bitcode_paths_and_debug_levels_give_one_psg(tmp_path):
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (pip install mpich)")
    require_tool(instrumentation_available(), "static pass or runtime shim not installed")
    from scalgraph.static.toolchain import backend_for, find_compiler
    clang = find_compiler("c")
    require_tool(backend_for(clang) == clang.command, "a clang of llvmlite's LLVM major (Debian clang-22)")
    shutil.copy(SAMPLE, tmp_path / "cg.c")
    builds = {"text": ([], {}), "user -g": (["-g"], {}),
              # a compiler with a flag of its own is not taken for the code generator: bitcode path
              "bitcode": ([], {"SCALGRAPH_CC": f"{clang.command[0]} -fno-color-diagnostics"})}
    outputs = {}
    for name, (flags, env) in builds.items():
        obj, exe = tmp_path / f"{name.replace(' ', '')}.o", tmp_path / name.replace(" ", "")
        sg("sgcc", ["-O2", *flags, "-c", "cg.c", "-o", obj.name], tmp_path, "instrumented", env=env)
        sg("sgcc", ["-O2", obj.name, "-o", exe.name, "-lm"], tmp_path, "instrumented", env=env)
        outputs[name] = (psg_without_hashes(tmp_path / f"{exe.name}.psg.json"), mpirun(exe, 2, cwd=tmp_path),
                         debug_sections(obj))
    psg, out, sections = outputs["text"]
    assert len(psg["kind"]) > 5 and "cg: ranks=2" in out
    for name in ("user -g", "bitcode"):
        assert outputs[name][0] == psg, f"{name} build gives another PSG"
        assert outputs[name][1] == out, f"{name} build behaves differently"
    assert not sections and not outputs["bitcode"][2]      # no -g asked for: none, as a plain build
    assert ".debug_info" in outputs["user -g"][2] and ".debug_line" in outputs["user -g"][2]
