"""Bad input to the static pass and `scalgraph psg`: one clear line, non-zero exit, no traceback;
warnings (not failures) for no debug info / no main / no MPI; the psg command's outputs."""
from __future__ import annotations

import json
import subprocess

import pytest
from test_static_support import MPI_INCLUDE, SAMPLES, ZIG, bitcode, build_psg, need_clang

from scalgraph.cli import main
from scalgraph.errors import UserError

FIG3 = SAMPLES / "fig3" / "fig3.c"


def test_unparsable_bitcode_is_one_line_user_error():
    pytest.importorskip("llvmlite")
    from scalgraph.static import instrument_bitcode
    with pytest.raises(UserError) as e:
        instrument_bitcode(b"BC\xc0\xde not really bitcode", "src/broken.c", opt_level=0)
    msg = str(e.value)
    assert "src/broken.c" in msg and "\n" not in msg and "clang" in msg


def test_no_debug_info_warns_and_still_builds(tmp_path, capsys):
    need_clang()
    from scalgraph.static import instrument_bitcode
    src = tmp_path / "nodbg.c"
    src.write_text("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n")
    out = tmp_path / "nodbg.bc"
    subprocess.run([str(ZIG), "cc", "-c", "-emit-llvm", "-g0", "-O0", "-fno-sanitize=all", f"-I{MPI_INCLUDE}",
                    str(src), "-o", str(out)], check=True, capture_output=True)
    obj, part = instrument_bitcode(out.read_bytes(), str(src), opt_level=0)
    assert capsys.readouterr().err == ""           # the link warns, once per program (driver)
    assert not part["has_debug_info"] and any("no debug info" in w and "-g" in w for w in part["warnings"])
    assert obj.startswith(b"\x7fELF")
    kinds = [v["kind"] for v in part["functions"][0]["vertices"]]
    assert kinds.count("MPI") == 2


def test_no_main_and_no_mpi_warn(tmp_path, capsys):
    need_clang()
    from scalgraph.static import instrument_bitcode
    src = tmp_path / "plain.c"
    src.write_text("double twice(double x) { double s = 0; for (int i = 0; i < 2; ++i) s += x; return s; }\n")
    obj, part = instrument_bitcode(bitcode(src, tmp_path), str(src), opt_level=0)
    assert capsys.readouterr().err == ""           # compiling is quiet; the link judges the program
    err = " ".join(part["warnings"])
    assert not part["has_main"] and "no main" in err and "MPI" not in err   # a helper file without MPI is normal
    assert obj.startswith(b"\x7fELF") and part["functions"][0]["name"] == "twice"
    serial = tmp_path / "serial.c"
    serial.write_text("int main(void) { long s = 0; for (int i = 0; i < 9; ++i) s += i; return (int)s; }\n")
    _, part = instrument_bitcode(bitcode(serial, tmp_path), str(serial), opt_level=0)
    err = " ".join(part["warnings"])
    assert part["has_main"] and not part["has_mpi"] and "no MPI call" in err and "no main" not in err


def test_no_probe_inside_a_contracted_loop(tmp_path):
    """With MaxLoopDepth=1 the inner loops of Fig. 3 are merged: no sg_cur store in their blocks;
    with the default depth their headers get one."""
    need_clang()
    import llvmlite.binding as llvm

    from scalgraph.static import cfg
    from scalgraph.static.ir import parse_module_text
    from scalgraph.static.probes import instrument_text
    text = str(llvm.parse_bitcode(bitcode(FIG3, tmp_path)))

    def stores_in_inner_loops(depth: int) -> int:
        _, new = instrument_text(text, "fig3.c", max_loop_depth=depth)
        main_fn = next(f for f in parse_module_text(new).functions if f.name == "main")
        flow = cfg.analyse(main_fn)
        inner = set().union(*(r.blocks for r in flow.regions if r.kind == cfg.LOOP and r.depth == 2))
        return sum("@sg_cur" in ins.text for b in inner for ins in main_fn.blocks[b].instrs)

    assert stores_in_inner_loops(1) == 0
    assert stores_in_inner_loops(10) >= 2


def test_read_psg_from_executable_and_json_fallback(tmp_path):
    need_clang()
    from scalgraph.static import read_psg_from_executable
    psg, tables, objs = build_psg([FIG3], tmp_path)
    (tmp_path / "tables.c").write_text(tables)
    lib = tmp_path / "libfake.c"              # the executable only has to link, not run
    lib.write_text("#include <stdint.h>\n__thread uint32_t sg_cur; void sg_fn_enter(uint32_t f){(void)f;}"
                   "void sg_fn_exit(void){} void sg_register_psg(const void *t){(void)t;}\n")
    exe = tmp_path / "app"
    venv_lib = MPI_INCLUDE.parent / "lib"
    subprocess.run([str(ZIG), "cc", *objs, str(tmp_path / "tables.c"), str(lib), f"-L{venv_lib}", "-lmpi",
                    "-o", str(exe)], check=True, capture_output=True)
    assert read_psg_from_executable(str(exe)).to_dict() == psg.to_dict()
    # fallback: a file without the section, with <exe>.psg.json beside it
    other = tmp_path / "other"
    other.write_bytes(b"#!/bin/sh\n")
    (tmp_path / "other.psg.json").write_text(json.dumps(psg.to_dict()))
    assert read_psg_from_executable(str(other)).hash() == psg.hash()


@pytest.fixture(scope="module")
def fig3_json(tmp_path_factory):
    need_clang()
    tmp = tmp_path_factory.mktemp("fig3cli")
    psg = build_psg([FIG3], tmp)[0]
    path = tmp / "fig3.psg.json"
    path.write_text(json.dumps(psg.to_dict()))
    return psg, path


def test_psg_command_tree_and_counts(fig3_json, capsys):
    psg, path = fig3_json
    assert main(["psg", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("FUNCTION main") and lines[0].endswith("#0")
    send = next(v for v in range(len(psg)) if psg.name[v] == "MPI_Send")
    (row,) = [ln for ln in lines if ln.strip().startswith("MPI MPI_Send")]
    assert row.endswith(f"#{send}") and f"fig3.c:{psg.line_first[send]}" in row
    assert len(row) - len(row.lstrip()) == 8            # main > CALL foo > FUNCTION foo > BRANCH > MPI
    (total,) = [ln for ln in lines if ln.strip().startswith("total")]
    assert total.split()[1:] == [str(psg.meta["vertices_before"]), str(len(psg))]


def test_psg_command_exports(fig3_json, capsys, tmp_path):
    psg, path = fig3_json
    dot = tmp_path / "g.dot"
    assert main(["psg", str(path), "--dot", str(dot), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["hash"] == psg.hash()
    text = dot.read_text()
    assert text.startswith("digraph psg {") and text.count("->") >= len(psg) - 1
    assert main(["psg", str(path), "--max-loop-depth", "1"]) == 0
    out = capsys.readouterr().out
    # Loop 1's COMP and the two inner loops print as one merged COMP: Fig. 4(c)
    assert out.count("COMP (merged)") == 1 and out.count("LOOP loop") == 1
    (row,) = [ln for ln in out.splitlines() if "COMP (merged)" in ln]
    loop1 = next(v for v in range(len(psg)) if psg.kind_name(v) == "LOOP")
    assert row.startswith("    COMP (merged)") and row.endswith(",".join(f"#{c}" for c in psg.children[loop1]))


def test_psg_command_bad_input(tmp_path, capsys):
    assert main(["psg", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err and "Traceback" not in err
    junk = tmp_path / "junk"
    junk.write_text("not a program")
    assert main(["psg", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sgcc" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "other"}')
    assert main(["psg", str(bad)]) == 2
    assert "not a scalgraph PSG" in capsys.readouterr().err
