"""The instrumented module without its debug info (static/nodebug.py): what clang makes of it is the
same machine code as from the text with debug info, no debug section; a debug node it cannot
remove leaves the build to the fallback (driver.object_from_ir_text), never broken."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import require_tool

C_SOURCE = """
#include <math.h>
double field[64];
static double step(double x) { return x > 1.0 ? sqrt(x) : x * x; }
double kernel(int n, double a)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++)
            s += step(field[(i + j) & 63] * a);
    return s;
}
int main(void) { return (int)kernel(10, 0.5); }
"""

CXX_SOURCE = """
#include <vector>
namespace ns {
struct Grid {
    std::vector<double> v;
    explicit Grid(int n) : v(n, 1.0) {}
    double sweep(double a) {
        double s = 0;
        for (auto &x : v) { x = x * a + 1.0; s += x; }
        return s;
    }
};
}
int main() { ns::Grid g(100); double s = 0; for (int i = 0; i < 4; i++) s += g.sweep(0.5); return s > 1; }
"""


def _backend():
    from scalgraph.static.toolchain import backend_for, find_compiler
    clang = find_compiler("c")
    backend = backend_for(clang)
    require_tool(backend is not None and backend == clang.command, "a clang of llvmlite's LLVM major (clang-22)")
    return backend


def _instrumented_text(backend, tmp: Path, name: str, source: str, debug: str) -> str:
    from scalgraph.static import instrument_ir_text
    src = tmp / name
    src.write_text(source)
    ll = tmp / (name + ".ll")
    driver = [backend[0].replace("clang", "clang++", 1)] if name.endswith(".cpp") else list(backend)
    subprocess.run([*driver, "-S", "-emit-llvm", "-O2", debug, str(src), "-o", str(ll)], check=True)
    text, _ = instrument_ir_text(ll.read_text(), str(src), keep_debug_info=True)
    return text


def _code(backend, tmp: Path, text: str, name: str) -> tuple[str, set[str]]:
    """(disassembly of the object clang makes from the text, its .debug_ sections)."""
    from elftools.elf.elffile import ELFFile
    ll, obj = tmp / f"{name}.ll", tmp / f"{name}.o"
    ll.write_text(text)
    subprocess.run([*backend, "-c", "-O2", "-fPIC", "-Xclang", "-disable-llvm-optzns", str(ll), "-o", str(obj)],
                   check=True, capture_output=True)
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        sections = {s.name for s in elf.iter_sections() if s.name.startswith(".debug_")}
        code = b"".join(s.data() for s in elf.iter_sections() if s.name.startswith(".text"))
    return code.hex(), sections


@pytest.mark.parametrize("name,source,debug", [("k.c", C_SOURCE, "-gline-tables-only"),
                                                ("g.cpp", CXX_SOURCE, "-g")])
def test_without_debug_info_gives_the_same_code_and_no_debug_sections(tmp_path, name, source, debug):
    from scalgraph.static.nodebug import marked_no_debug, without_debug_info
    backend = _backend()
    text = _instrumented_text(backend, tmp_path, name, source, debug)
    assert "!DILocation(" in text and "!dbg !" in text
    stripped = without_debug_info(text)
    assert "!DI" not in stripped and "!dbg" not in stripped and "#dbg_" not in stripped
    assert "@sg_fn_enter" in stripped and "store i32 " in stripped and "__sg_psg_part_" in stripped
    code, sections = _code(backend, tmp_path, stripped, "stripped")
    reference, _ = _code(backend, tmp_path, marked_no_debug(text), "marked")
    assert code == reference and len(code) > 100
    assert not sections


def test_a_debug_node_left_behind_falls_back_to_the_text_with_debug_info(tmp_path):
    from scalgraph.static.args import parse_args
    from scalgraph.static.driver import object_from_ir_text
    from scalgraph.static.nodebug import without_debug_info
    backend = _backend()
    text = _instrumented_text(backend, tmp_path, "k.c", C_SOURCE, "-gline-tables-only")
    # a tuple with a string naming a debug node: nodebug.py leaves it, so it names a removed node
    di = next(line.split(" ")[0] for line in text.splitlines() if " = !DILocation(" in line)
    text += f'!sg.test = !{{!9999}}\n!9999 = !{{!"x, y", {di}}}\n'
    stripped = without_debug_info(text)
    assert f"!9999 = !{{!\"x, y\", {di}}}" in stripped and f"\n{di} = " not in stripped
    with pytest.raises(subprocess.CalledProcessError):      # clang refuses the stripped text
        _code(backend, tmp_path, stripped, "dangling")
    inv = parse_args(["-O2", "-c", "k.c"])
    obj = object_from_ir_text(backend, text, inv, str(tmp_path), "k.c")
    assert obj[:4] == b"\x7fELF" and len(obj) > 500
