"""One translation unit -> its PSG part: the templates of its user functions, as JSON-able data.

The part is what an object file carries (section .scalgraph.psg) and what link_psg combines:
  {"format": "scalgraph-psg-part", "version": 1, "source", "modhash", "max_loop_depth",
   "has_debug_info", "has_main", "has_mpi", "warnings",
   "functions": [{"key"       linkage name, or "<modhash>:<name>" for internal functions,
                  "name", "display" (source name), "internal", "file", "line",
                  "fid_symbol" (the __sg_fid_* slot), "instrumented" (False: no probes at all),
                  "vertices": template in pre-order, local 0 = FUNCTION; each {"kind", "name",
                              "parent", "depth" (loop depth inside the function), "first", "last",
                              optional "file" (if not the function's), "callee" (CALL: key),
                              "function" (inlined code: its function), "brk" (COMP of another arm)},
                  "full_counts" / "full_calls": the uncontracted local PSG, for Table II}]}
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from scalgraph.static import cfg
from scalgraph.static.classify import is_library, is_mpi, is_system_file, mpi_display_name
from scalgraph.static.ir import DebugInfo, Function, Module
from scalgraph.static.templates import attach_lines, contract, full_counts, local_tree

PART_FORMAT = "scalgraph-psg-part"
PART_VERSION = 1
MAIN_NAMES = ("main", "_QQmain", "MAIN__")


@dataclass
class FunctionPlan:
    """What the probe inserter needs for one instrumented function."""
    fn: Function
    fid_symbol: str
    instr_local: list[tuple[int, int, int, int]]    # runs (block, first index, end index, local)
    instrumented: bool                              # False: no loops, no MPI reachable: no probes
    branch_terminators: set[tuple[int, int]]        # conditional terminators of BRANCH vertices


def module_hash(source_path: str, ir_text: str) -> str:
    return hashlib.sha256((source_path + "\0" + ir_text).encode()).hexdigest()[:10]


def fid_symbol(name: str, internal: bool, modhash: str) -> str:
    safe = re.sub(r'[^A-Za-z0-9_]', '_', name)
    if safe != name:
        safe += "_" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"__sg_fid_{modhash if internal else 'g'}_{safe}"


def function_key(name: str, internal: bool, modhash: str) -> str:
    return f"{modhash}:{name}" if internal else name


def user_functions(module: Module, dbg: DebugInfo) -> list[Function]:
    """Defined functions that are the user's code (not library inlines, not compiler glue)."""
    out = []
    fortran_program = any(f.name == "_QQmain" for f in module.functions)
    for f in module.functions:
        if f.linkage == "available_externally" or is_library(f.name) or not f.blocks:
            continue
        if fortran_program and f.name == "main":     # flang's glue that calls the program _QQmain
            continue
        if f.dbg >= 0 and is_system_file(dbg.subprogram(f.dbg)[1]):
            continue
        out.append(f)
    return out


def build_part(module: Module, source_path: str, modhash: str, *, max_loop_depth: int
               ) -> tuple[dict, list[FunctionPlan]]:
    dbg = DebugInfo(module.metadata)
    users = user_functions(module, dbg)
    user_keys = {f.name: function_key(f.name, f.internal, modhash) for f in users}
    defined = {f.name for f in module.functions}

    resolved: dict[str, tuple] = {}

    def resolve(name: str):
        got = resolved.get(name)
        if got is None:
            got = resolved[name] = _resolve(name)
        return got

    def _resolve(name: str):
        if name in user_keys:
            return ("call", user_keys[name])
        if name in defined or is_library(name):
            return ("lib", None)
        if is_mpi(name):
            return ("mpi", mpi_display_name(name))
        return ("call", name)            # defined elsewhere: maybe user code, decided at link time

    trees = {}
    for f in users:
        display = dbg.subprogram(f.dbg)[0] or f.name
        if f.name == "_QQmain":
            display = _fortran_program_name(*dbg.subprogram(f.dbg)[1:]) or display
        trees[f.name] = (f, cfg.analyse(f), display)
    local = {name: local_tree(f, cf, display, resolve, dbg.location) for name, (f, cf, display) in trees.items()}
    may_mpi, has_loops = _callee_facts(local, user_keys)

    def callee_mpi(key: str) -> bool:
        return may_mpi.get(key, True)        # unknown external: conservatively yes

    def callee_loops(key: str) -> bool:
        return has_loops.get(key, True)

    functions, plans = [], []
    for name, (f, _, display) in trees.items():
        tree = local[name]
        verts, node_local = contract(tree, max_loop_depth=max_loop_depth,
                                     callee_mpi=callee_mpi, callee_loops=callee_loops)
        instr_local = [(b, lo, hi, node_local[nid]) for b, lo, hi, nid in tree.owner]
        _, home_file, home_line = dbg.subprogram(f.dbg)
        attach_lines(verts, instr_local, f, dbg, home_file, home_line)
        counts, calls = full_counts(tree)
        sym = fid_symbol(f.name, f.internal, modhash)
        key = user_keys[name]
        instrumented = may_mpi[key] or has_loops[key] or f.name in MAIN_NAMES
        functions.append({
            "key": user_keys[name], "name": f.name, "display": display, "internal": f.internal,
            "file": home_file, "line": home_line, "fid_symbol": sym,
            "vertices": _compact(verts, home_file), "full_counts": counts, "full_calls": calls,
            "instrumented": instrumented,
        })
        branch_terms = {(r.head, len(f.blocks[r.head].instrs) - 1)
                        for r in trees[name][1].regions if r.kind == cfg.BRANCH}
        plans.append(FunctionPlan(f, sym, instr_local, instrumented, branch_terms))
    part = {"format": PART_FORMAT, "version": PART_VERSION, "source": source_path,
            "modhash": modhash, "max_loop_depth": max_loop_depth, "functions": functions,
            "has_debug_info": dbg.has_debug_info(),
            "has_main": any(f.name in MAIN_NAMES for f in users),
            "has_mpi": any(is_mpi(d) for d in module.declared) or any(
                v["kind"] == "MPI" for fn in functions for v in fn["vertices"])}
    return part, plans


def _compact(verts: list[dict], home_file: str) -> list[dict]:
    """Leave out what the link step can fill in (the function's own file, no callee): parts travel
    in every object and are loaded with the program."""
    out = []
    for v in verts:
        v = {k: x for k, x in v.items() if x is not None}
        if v.get("file") == home_file:
            del v["file"]
        out.append(v)
    return out


def _fortran_program_name(path: str, line: int) -> str:
    """flang names the main program _QQmain; its `program NAME` line says what the user called it."""
    try:
        with open(path, errors="replace") as fh:
            for i, text in enumerate(fh, 1):
                if i == line:
                    m = re.match(r'\s*program\s+(\w+)', text, re.IGNORECASE)
                    return m.group(1) if m else ""
    except OSError:
        pass
    return ""


def _callee_facts(local: dict, user_keys: dict[str, str]) -> tuple[dict[str, bool], dict[str, bool]]:
    """Least fixpoint over the unit's user functions: may reach MPI / contains loops, transitively."""
    from scalgraph.model.psg import CALL, INDIRECT, LOOP, MPI
    own_mpi, own_loops, calls = {}, {}, {}
    for name, tree in local.items():
        key = user_keys[name]
        own_mpi[key] = any(n.kind in (MPI, INDIRECT) for n in tree.nodes)
        own_loops[key] = any(n.kind == LOOP for n in tree.nodes)
        calls[key] = {n.callee for n in tree.nodes if n.kind == CALL}
    may_mpi = dict(own_mpi)
    has_loops = dict(own_loops)
    changed = True
    while changed:
        changed = False
        for key, callees in calls.items():
            m = may_mpi[key] or any(may_mpi.get(c, True) for c in callees)
            lp = has_loops[key] or any(has_loops.get(c, True) for c in callees)
            if m != may_mpi[key] or lp != has_loops[key]:
                may_mpi[key], has_loops[key] = m, lp
                changed = True
    return may_mpi, has_loops
