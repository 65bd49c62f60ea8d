"""Probe insertion (docs/runtime-abi.md) and object emission for one translation unit.

The probes are written into the module text: `sg_fn_enter(fid)` at the top of each instrumented
function, `sg_fn_exit()` before each return, and `store i32 <local>, ptr @sg_cur` wherever the
running vertex changes.  A data-flow pass over the CFG knows which local sg_cur already holds at
each block entry, so blocks of a contracted loop (one local throughout) get no store at all.
"""
from __future__ import annotations

import json

from scalgraph.errors import UserError
from scalgraph.static.gcpause import gc_paused
from scalgraph.static.ir import LEADING, Module, parse_module_text, successors
from scalgraph.static.nodebug import marked_no_debug_lines
from scalgraph.static.part import FunctionPlan, build_part, module_hash

PART_SECTION = ".scalgraph.psg"
_UNKNOWN = -2       # sg_cur may hold anything here
_TOP = -3           # not reached yet by the data-flow pass


def instrument_bitcode(bitcode: bytes, source_path: str, *, opt_level: int, max_loop_depth: int = 10,
                       as_bitcode: bool = False, keep_debug_info: bool = True) -> tuple[bytes, dict]:
    """(object file, part); as_bitcode=True: (instrumented bitcode, part), for a clang of llvmlite's
    LLVM to compile (its code generator is about 1.7x faster than llvmlite's, built with assertions)."""
    llvm = _llvm()
    try:
        module = llvm.parse_bitcode(bitcode)
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "unknown reason"
        raise UserError(f"{source_path}: LLVM {_llvm_version(llvm)} cannot read the bitcode ({first}); "
                        f"compile it with a clang of LLVM {_llvm_version(llvm)} or older") from None
    try:
        part, text = instrument_text(str(module), source_path, max_loop_depth=max_loop_depth,
                                     keep_debug_info=keep_debug_info)
    except ValueError as e:            # IR text this reader does not understand
        raise UserError(f"{source_path}: scalgraph cannot read this IR ({e}); "
                        "please report this, or build this file with plain mpicc") from None
    try:
        rewritten = llvm.parse_assembly(text)
        rewritten.verify()
    except RuntimeError as e:
        raise UserError(f"{source_path}: the instrumented IR does not verify ({str(e).strip()[:200]}); "
                        "please report this, or build this file with plain mpicc") from None
    if as_bitcode:
        return rewritten.as_bitcode(), part
    target = llvm.Target.from_triple(rewritten.triple or llvm.get_process_triple())
    tm = target.create_target_machine(opt=max(0, min(3, opt_level)), reloc="pic", codemodel="default")
    return tm.emit_object(rewritten), part


def instrument_ir_text(text: str, source_path: str, *, max_loop_depth: int = 10,
                       keep_debug_info: bool = True) -> tuple[str, dict]:
    """(instrumented module text, part) for the IR text a clang of llvmlite's LLVM wrote (-S
    -emit-llvm); that clang compiles the result.  No llvmlite here: reading and printing the module
    there cost as much as the pass itself on large files, and the clang parses its own text anyway.
    keep_debug_info=False (the user did not ask for -g; we added it for the PSG's source lines): the
    object gets no debug info, as a plain build, and its code generation skips the variable
    locations and DWARF that made it 1.5x slower."""
    try:
        part, out = instrument_text(text, source_path, max_loop_depth=max_loop_depth,
                                    keep_debug_info=keep_debug_info)
    except ValueError as e:            # IR text this reader does not understand
        raise UserError(f"{source_path}: scalgraph cannot read this IR ({e}); "
                        "please report this, or build this file with plain mpicc") from None
    return out, part


def instrument_text(text: str, source_path: str, *, max_loop_depth: int = 10,
                    keep_debug_info: bool = True) -> tuple[dict, str]:
    """(PSG part, instrumented module text) for the text of one module (str(module))."""
    with gc_paused():
        mod = parse_module_text(text)
        modhash = module_hash(source_path, text)
        part, plans = build_part(mod, source_path, modhash, max_loop_depth=max_loop_depth)
        part["warnings"] = _warnings(part, source_path)
        return part, rewrite(mod, plans, part, modhash, keep_debug_info=keep_debug_info)


def _warnings(part: dict, source_path: str) -> list[str]:
    out = []
    if not part["has_debug_info"]:
        out.append(f"{source_path}: no debug info, the PSG will have no source lines (compile with -g)")
    if not part["has_main"]:
        out.append(f"{source_path}: no main program in this file (fine for a library part)")
    if part["has_main"] and not part["has_mpi"]:       # a helper file without MPI is normal
        out.append(f"{source_path}: the main program makes no MPI call (no MPI call in this file)")
    return out


def rewrite(mod: Module, plans: list[FunctionPlan], part: dict, modhash: str, *,
            keep_debug_info: bool = True) -> str:
    before: dict[int, list[str]] = {}
    symbols: list[tuple[str, bool]] = []
    for plan in plans:
        if not plan.instrumented:
            continue
        symbols.append((plan.fid_symbol, plan.fn.internal))
        _probe_function(plan, before)
    out: list[str] = []
    done = 0
    lines = mod.lines
    for no in sorted(before):          # the module's lines in slices, the probes between them
        out += lines[done:no]
        out += before[no]
        done = no
    out += lines[done:]
    if not keep_debug_info:
        out = marked_no_debug_lines(out)
    out.append("")
    out.append("@sg_cur = external thread_local(initialexec) global i32")
    out.append("declare void @sg_fn_enter(i32)")
    out.append("declare void @sg_fn_exit()")
    for sym, _internal in symbols:
        # linkonce_odr: the copies of an inline function, or one file linked in twice, share a slot
        out.append(f"@{sym} = linkonce_odr hidden global i32 -1")
    blob = json.dumps(part, sort_keys=True, separators=(",", ":"))        # ASCII: json escapes the rest
    out.append(f"@__sg_psg_part_{modhash} = weak_odr hidden constant [{len(blob) + 1} x i8] "
               f"c\"{_ir_ascii(blob)}\\00\", section \"{PART_SECTION}\", align 1")
    return "\n".join(out) + "\n"


def _ir_ascii(text: str) -> str:
    """An IR c"..." string body of ASCII text: \\, " and DEL as \\XX (json escapes control characters)."""
    return text.replace("\\", "\\5C").replace('"', "\\22").replace("\x7f", "\\7F")


def _probe_function(plan: FunctionPlan, before: dict[int, list[str]]) -> None:
    fn = plan.fn
    blocks = fn.blocks
    index = {b.label: i for i, b in enumerate(blocks)}
    succs = [[index[s] for s in successors(b) if s in index] for b in blocks]
    preds: list[list[int]] = [[] for _ in blocks]
    for u, ss in enumerate(succs):
        for v in ss:
            preds[v].append(u)
    local: list[list[int]] = [[-1] * len(b.instrs) for b in blocks]     # -1: owned by no vertex
    for b, lo, hi, value in plan.instr_local:
        local[b][lo:hi] = [value] * (hi - lo)
    # per block, the enforced instructions where the wanted local changes: (index, local); the
    # others need no store (sg_cur already holds their local)
    changes = [_changes(b, block.instrs, local[b], plan) for b, block in enumerate(blocks)]
    end = [_TOP] * len(blocks)
    entry = [_TOP] * len(blocks)
    changed = True
    while changed:                     # forward data flow: which local does sg_cur hold
        changed = False
        for b in range(len(blocks)):
            e = 0 if b == 0 else _meet(end[p] for p in preds[b])
            if b == 0 and preds[b]:
                e = _meet([0] + [end[p] for p in preds[b]])
            x = changes[b][-1][1] if changes[b] else e
            if e != entry[b] or x != end[b]:
                entry[b], end[b] = e, x
                changed = True
    first = blocks[0].instrs[0].line_no
    before.setdefault(first, []).extend([
        f"  %__sg_fid = load i32, ptr @{plan.fid_symbol}, align 4",
        "  call void @sg_fn_enter(i32 %__sg_fid)"])
    for b, block in enumerate(blocks):
        cur = _UNKNOWN if entry[b] == _TOP else entry[b]
        for idx, want in changes[b]:
            if want != cur:
                before.setdefault(block.instrs[idx].line_no, []).append(
                    f"  store i32 {want}, ptr @sg_cur, align 4")
                cur = want
        after_musttail = False
        for ins in block.instrs:
            musttail = ins.is_call and "musttail call" in ins.text
            # leave before the call a musttail `ret` must follow directly
            if musttail or (ins.opcode in ("ret", "resume") and not after_musttail):
                before.setdefault(ins.line_no, []).append("  call void @sg_fn_exit()")
            after_musttail = musttail or (after_musttail and ins.opcode == "bitcast")


def _changes(b: int, instrs: list, local: list[int], plan: FunctionPlan) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    prev = None
    for idx, want in enumerate(local):
        if want != prev and _enforced(instrs[idx], (b, idx), want, plan):
            out.append((idx, want))
            prev = want
    return out


def _enforced(ins, ref, want: int, plan: FunctionPlan) -> bool:
    """Instructions before which sg_cur must hold their local.  Leading instructions (phi,
    landingpad), allocas and plain terminators just continue the vertex before them."""
    if want < 0 or ins.opcode in LEADING or ins.opcode == "alloca":
        return False
    if ins.is_call and (ins.callee or "").startswith("llvm."):
        return False
    if ins.opcode in ("br", "switch", "ret", "unreachable", "resume", "indirectbr"):
        return ref in plan.branch_terminators
    return True


def _meet(values) -> int:
    out = _TOP
    for v in values:
        if v == _TOP:
            continue
        if out == _TOP:
            out = v
        elif out != v:
            return _UNKNOWN
    return out


def _llvm():
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


def _llvm_version(llvm) -> str:
    return ".".join(str(x) for x in llvm.llvm_version_info[:1])
