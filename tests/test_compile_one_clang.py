"""A call that compiles and links (`sgcc -O2 app.c -o app`) makes the PSG tables in its module's code
generator (link.tables_ir, driver.objects_and_tables) instead of a C compile of their own: the same
tables, byte for byte, and the same PSG and behaviour as compiling and linking in two calls (C
tables); tables or modules clang refuses go the separate way, never a broken build."""
from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ROOT, require_tool
from test_driver_build import MPICC, MPIEXEC, instrumentation_available, mpirun, sg
from test_static_nodebug import C_SOURCE, _backend, _instrumented_text

SAMPLE = ROOT / "samples" / "cg" / "cg.c"
TABLES = ("inst_base", "inst_func", "inst_vid", "inst_callee", "func_default_inst", "vertex_kind", "psg_hash",
          "psg_full", "fid_slots")


def _sections(path: Path, prefixes: tuple[str, ...]) -> dict[str, bytes]:
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        return {s.name: s.data() for s in ELFFile(f).iter_sections() if s.name.startswith(prefixes)}


def _table_bytes(path: Path) -> dict[str, bytes]:
    """Each table's bytes in an executable, by its symbol (sg_<table> from C, __sg_<table>_<hash> from
    IR); the fid slots (addresses) by their size only."""
    from elftools.elf.elffile import ELFFile
    out = {}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            for table in TABLES:
                if sym.name == f"sg_{table}" or sym.name.startswith(f"__sg_{table}_"):
                    sec = elf.get_section(sym["st_shndx"])
                    at = sym["st_value"] - sec["sh_addr"]
                    data = sec.data()[at:at + sym["st_size"]]
                    out[table] = data if table != "fid_slots" else len(data)
    return out


def test_one_call_gives_the_tables_psg_and_behaviour_of_compile_then_link(tmp_path):
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (pip install mpich)")
    require_tool(instrumentation_available(), "static pass or runtime shim not installed")
    _backend()
    for name in ("cg.c", "cg.h"):
        if (SAMPLE.parent / name).is_file():
            shutil.copy(SAMPLE.parent / name, tmp_path / name)
    sg("sgcc", ["-O2", "-c", "cg.c", "-o", "cg.o"], tmp_path, "instrumented")
    sg("sgcc", ["-O2", "cg.o", "-o", "two", "-lm"], tmp_path, "instrumented")
    sg("sgcc", ["-O2", "cg.c", "-o", "one", "-lm"], tmp_path, "instrumented")
    one, two = (tmp_path / "one.psg.json").read_text(), (tmp_path / "two.psg.json").read_text()
    assert one == two and '"kind"' in one
    from elftools.elf.elffile import ELFFile
    with open(tmp_path / "one", "rb") as f:        # the one-call build's tables came from IR
        names = {sym.name for sym in ELFFile(f).get_section_by_name(".symtab").iter_symbols()}
    assert any(n.startswith("__sg_tables_init_") for n in names) and "sg_tables" not in names
    tables = _table_bytes(tmp_path / "one")
    assert set(tables) == set(TABLES) and tables == _table_bytes(tmp_path / "two")
    assert tables["psg_full"] == one.encode() + b"\0"
    out = mpirun(tmp_path / "one", 2, cwd=tmp_path)
    assert "cg: ranks=2" in out and out == mpirun(tmp_path / "two", 2, cwd=tmp_path)


def _part_and_text(tmp: Path, backend) -> tuple[dict, str]:
    from scalgraph.static.probes import instrument_text
    text = _instrumented_text(backend, tmp, "k.c", C_SOURCE, "-gline-tables-only")
    part, _ = instrument_text(text, str(tmp / "k.c"))
    return part, text


def test_tables_clang_refuses_are_made_from_c_beside_the_module(tmp_path):
    from scalgraph.static import link_psg_json
    from scalgraph.static.args import parse_args
    from scalgraph.static.driver import HeldBack, objects_and_tables
    backend = _backend()
    part, text = _part_and_text(tmp_path, backend)
    inv = parse_args(["-O2", "k.c", "-o", "k"])
    held = [HeldBack(backend, text, str(tmp_path / "k.o"), "k.c")]
    c_source = link_psg_json([part])[1]
    tables = objects_and_tables(held, "@broken = not ir", inv, str(tmp_path), lambda: c_source)
    assert tables and ".scalgraph.psgfull" in _sections(Path(tables), (".scalgraph",))
    assert ".init_array" not in _sections(tmp_path / "k.o", (".init_array",))     # no tables in the module
    ir = link_psg_json([part], tables_as="ir")[1]
    assert objects_and_tables(held, ir, inv, str(tmp_path), lambda: c_source) is None
    assert ".init_array" in _sections(tmp_path / "k.o", (".init_array",))
    full = _sections(tmp_path / "k.o", (".scalgraph.psgfull",))[".scalgraph.psgfull"]
    assert full == _sections(Path(tables), (".scalgraph.psgfull",))[".scalgraph.psgfull"]
