"""LLVM IR -> Program Structure Graph, probe insertion, whole-program link (the only llvmlite user).

Interface used by the compiler driver (scalgraph/static/driver.py):

instrument_bitcode(bitcode: bytes, source_path: str, *, opt_level: int, max_loop_depth: int = 10)
        -> tuple[bytes, dict]
    Parse one translation unit's bitcode, build its per-function templates, insert the probes of
    docs/runtime-abi.md, embed the part (JSON) in ELF section ".scalgraph.psg" and return
    (ELF object file bytes, PSG part dict).  Raises UserError on IR that cannot be parsed; prints
    nothing: the part's has_main / has_mpi / has_debug_info let the link warn once per program.
    as_bitcode=True returns the instrumented bitcode instead of the object (for codegen by a clang of
    llvmlite's LLVM version, see static/toolchain.py backend_for).  keep_debug_info=False: the
    object carries no debug info (the user did not ask for -g; the part still has the source lines).
instrument_ir_text(text: str, source_path: str, *, max_loop_depth: int = 10, keep_debug_info: bool = True)
        -> tuple[str, dict]
    The same for the IR text a clang of llvmlite's LLVM wrote: (instrumented IR text, part), no
    llvmlite involved; that clang makes the object from the text.
read_parts_from_files(paths: list[str]) -> list[dict]
    The ".scalgraph.psg" parts of .o files and of .a archive members (files without one are skipped).
link_psg(parts: list[dict], *, max_loop_depth: int = 10) -> tuple[PSG, str]
    Whole-program PSG and the C source of the tables object (struct sg_psg_tables, a constructor
    calling sg_register_psg, the full PSG JSON in section ".scalgraph.psgfull").
link_psg_json(parts: list[dict], *, max_loop_depth: int = 10, tables_as: str = "c") -> tuple[PSG, str, str]
    The same and the full PSG's JSON text (what the tables embed; the driver writes it to <exe>.psg.json);
    tables_as="ir": the tables as LLVM IR to append to a module instead of C (a call that also compiles).
read_psg_from_executable(path: str) -> PSG
    From the executable's ".scalgraph.psgfull" section, falling back to <exe>.psg.json.
"""
from __future__ import annotations


def instrument_bitcode(bitcode: bytes, source_path: str, *, opt_level: int, max_loop_depth: int = 10,
                       as_bitcode: bool = False, keep_debug_info: bool = True):
    from scalgraph.static.probes import instrument_bitcode as impl
    return impl(bitcode, source_path, opt_level=opt_level, max_loop_depth=max_loop_depth, as_bitcode=as_bitcode,
                keep_debug_info=keep_debug_info)


def instrument_ir_text(text: str, source_path: str, *, max_loop_depth: int = 10, keep_debug_info: bool = True):
    from scalgraph.static.probes import instrument_ir_text as impl
    return impl(text, source_path, max_loop_depth=max_loop_depth, keep_debug_info=keep_debug_info)


def read_parts_from_files(paths):
    from scalgraph.static.elfparts import read_parts_from_files as impl
    return impl(paths)


def link_psg(parts, *, max_loop_depth: int = 10):
    from scalgraph.static.link import link_psg as impl
    return impl(parts, max_loop_depth=max_loop_depth)


def link_psg_json(parts, *, max_loop_depth: int = 10, tables_as: str = "c"):
    from scalgraph.static.link import link_psg_json as impl
    return impl(parts, max_loop_depth=max_loop_depth, tables_as=tables_as)


def read_psg_from_executable(path):
    from scalgraph.static.elfparts import read_psg_from_executable as impl
    return impl(path)


__all__ = ["instrument_bitcode", "instrument_ir_text", "read_parts_from_files", "link_psg", "link_psg_json",
           "read_psg_from_executable"]
