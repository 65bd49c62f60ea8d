"""Whole-program PSG from the parts of all objects (seed 003 §III-A, inter-procedural phase), and
the C source of the tables object that tells the runtime shim how to resolve its probes.

Top-down from main: every kept call to a user function expands that function's template into a new
*instance* (context-sensitive copy); a call to a function already on the path is recursion and
points back to the call vertex that entered it.  The link step knows every user function, so it
finishes the contraction the compile step had to leave open: calls that reach no kept vertex, and
loops deeper than max_loop_depth in the calling context, fold into the surrounding COMP (their
locals map to that COMP's vertex id).
"""
from __future__ import annotations

import json

from scalgraph.errors import UserError
from scalgraph.model.psg import BRANCH, CALL, COMP, FUNCTION, KINDS, PSG
from scalgraph.static.gcpause import gc_paused
from scalgraph.static.walk import run

PART_FORMAT = "scalgraph-psg-part"
ROOT_NAMES = ("_QQmain", "main", "MAIN__")   # a Fortran program first: its main is glue
MAX_VERTICES = 2_000_000          # beyond this, further calls are not expanded (meta["truncated"])
_KIND = {k: i for i, k in enumerate(KINDS)}


def link_psg(parts: list[dict], *, max_loop_depth: int = 10) -> tuple[PSG, str]:
    psg, source, _ = link_psg_json(parts, max_loop_depth=max_loop_depth)
    return psg, source


def link_psg_json(parts: list[dict], *, max_loop_depth: int = 10, tables_as: str = "c") -> tuple[PSG, str, str]:
    """link_psg and the full PSG's JSON text, the one the tables embed (the driver writes it to
    <exe>.psg.json): serialising a large PSG again costs 0.1-0.2 s each time.  tables_as="ir": the
    tables as LLVM IR to append to a module (tables_ir), not as C."""
    with gc_paused():
        functions = _function_table(parts)
        builder = _Builder(functions, max_loop_depth)
        psg = builder.build()
        whole = psg.to_dict()
        full = json.dumps(whole, sort_keys=True, separators=(",", ":"))
        make = tables_ir if tables_as == "ir" else tables_c_source
        return psg, make(psg, builder, full, whole["hash"]), full


PART_VERSION = 1
_FUNCTION_FIELDS = ("key", "name", "display", "fid_symbol", "vertices", "full_counts", "full_calls")


def _function_table(parts: list[dict]) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for part in parts:
        if not isinstance(part, dict) or part.get("format") != PART_FORMAT or \
                part.get("version") != PART_VERSION or not isinstance(part.get("functions"), list):
            where = part.get("source", "an object") if isinstance(part, dict) else "an object"
            raise UserError(f"{where}: its PSG part is not one this scalgraph reads; recompile it with this sgcc")
        for f in part["functions"]:
            if not isinstance(f, dict) or any(k not in f for k in _FUNCTION_FIELDS):
                raise UserError(f"{part.get('source', 'an object')}: damaged PSG part; recompile it with sgcc")
            if f["key"] not in table:              # inline/template functions: the first copy wins
                for v in f["vertices"]:            # what the part left out (see part._compact)
                    v.setdefault("file", f.get("file", ""))
                    v.setdefault("callee", None)
                table[f["key"]] = f
    return table


class _Builder:
    """Holds the growing PSG columns and instance tables while the expansion walks the program."""

    def __init__(self, functions: dict[str, dict], max_loop_depth: int):
        self.f = functions
        self.max_depth = max_loop_depth
        self.g = PSG()
        self.inst_callee: list[list[int]] = []
        self.truncated = False
        instrumented = [k for k, f in functions.items() if f.get("instrumented", True)]
        self.fid = {k: i for i, k in enumerate(instrumented)}
        self.may_mpi, self.has_loops = self._facts()
        self._mpi_subtree: dict[str, list[bool]] = {}

    # ---- what the whole program knows ---------------------------------------------------------
    def _user(self, key) -> bool:
        return key in self.fid

    def _facts(self) -> tuple[dict[str, bool], dict[str, bool]]:
        may_mpi = {k: any(v["kind"] in ("MPI", "INDIRECT") for v in self.f[k]["vertices"]) for k in self.fid}
        loops = {k: any(v["kind"] == "LOOP" for v in self.f[k]["vertices"]) for k in self.fid}
        calls = {k: {v["callee"] for v in self.f[k]["vertices"] if v["kind"] == "CALL"} & set(self.fid)
                 for k in self.fid}
        changed = True
        while changed:
            changed = False
            for k, cs in calls.items():
                m = may_mpi[k] or any(may_mpi[c] for c in cs)
                lp = loops[k] or any(loops[c] for c in cs)
                if (m, lp) != (may_mpi[k], loops[k]):
                    may_mpi[k], loops[k] = m, lp
                    changed = True
        return may_mpi, loops

    def _subtree_mpi(self, key: str) -> list[bool]:
        got = self._mpi_subtree.get(key)
        if got is None:
            verts = self.f[key]["vertices"]
            got = [False] * len(verts)
            for i in range(len(verts) - 1, -1, -1):
                v = verts[i]
                if v["kind"] in ("MPI", "INDIRECT") or (
                        v["kind"] == "CALL" and self._user(v["callee"]) and self.may_mpi[v["callee"]]):
                    got[i] = True
                if got[i] and v["parent"] >= 0:
                    got[v["parent"]] = True
            self._mpi_subtree[key] = got
        return got

    def _kept(self, key: str, local: int, ctx: int) -> bool:
        v = self.f[key]["vertices"][local]
        kind = v["kind"]
        if kind in ("MPI", "INDIRECT"):
            return True
        if kind == "CALL":
            c = v["callee"]
            return self._user(c) and (self.may_mpi[c] or (self.has_loops[c] and ctx + v["depth"] < self.max_depth))
        if kind == "LOOP":
            return self._subtree_mpi(key)[local] or ctx + v["depth"] <= self.max_depth
        if kind == "BRANCH":
            return self._subtree_mpi(key)[local]
        return False

    # ---- building ---------------------------------------------------------------------------
    def _vertex(self, kind: int, name: str, function: str, file: str, first: int, last: int,
                parent: int, instance: int, local: int, depth: int) -> int:
        g = self.g
        vid = len(g.kind)
        g.kind.append(kind)
        g.name.append(name)
        g.function.append(function)
        g.file.append(file)
        g.line_first.append(first)
        g.line_last.append(last)
        g.parent.append(parent)
        g.children.append([])
        g.instance.append(instance)
        g.local.append(local)
        g.loop_depth.append(depth)
        g.recursion_target.append(-1)
        if parent >= 0:
            g.children[parent].append(vid)
        return vid

    def _new_instance(self, key: str) -> int:
        n = len(self.f[key]["vertices"])
        self.g.inst_func.append(self.fid[key])
        self.g.inst_vid.append([-1] * n)
        self.inst_callee.append([-1] * n)
        return len(self.g.inst_func) - 1

    def build(self) -> PSG:
        g = self.g
        g.functions = [self.f[k]["name"] for k in self.fid]
        root = next((k for k in ROOT_NAMES if k in self.fid), None)
        self.first_instance: dict[str, int] = {}
        self.first_folded: dict[str, int] = {}
        self.active: dict[str, tuple[int, int]] = {}      # functions on the current call path
        if root is not None:
            run(self._expand(root, parent=-1, ctx=0)[1])
        else:
            self._vertex(FUNCTION, "<program>", "<program>", "", 0, 0, -1, -1, -1, 0)
        defaults = []
        for key in self.fid:
            if key in self.first_instance:
                continue
            if key in self.first_folded:                    # called, but merged at every call site
                self.first_instance[key] = self.first_folded[key]
            elif self.may_mpi[key] or self.has_loops[key]:  # reachable only through pointers
                defaults.append(key)
                run(self._expand(key, parent=0, ctx=0)[1])
            else:                                           # nothing kept: its time is main's own
                self.first_instance[key] = self._folded(key, 0)
        g.func_default_inst = [self.first_instance[k] for k in self.fid]
        g.meta = self._meta(root, defaults)
        return g

    # The expansion follows call chains as deep as the program's: generators driven by walk.run.
    def _expand(self, key: str, *, parent: int, ctx: int):
        """Start one instance of `key`'s template below `parent`: (instance, walk of its body)."""
        f = self.f[key]
        verts = f["vertices"]
        inst = self._new_instance(key)
        self.first_instance.setdefault(key, inst)
        v0 = verts[0]
        root_vid = self._vertex(FUNCTION, f["display"], f["display"], v0["file"], v0["first"], v0["last"],
                                parent, inst, 0, ctx)
        self.g.inst_vid[inst][0] = root_vid
        return inst, self._body(key, inst, root_vid, parent if parent >= 0 else root_vid, ctx)

    def _body(self, key: str, inst: int, root_vid: int, call_vid: int, ctx: int):
        verts = self.f[key]["vertices"]
        children: list[list[int]] = [[] for _ in verts]
        for i in range(1, len(verts)):
            children[verts[i]["parent"]].append(i)
        self.active[key] = (inst, call_vid)
        yield self._level(key, inst, children, children[0], root_vid, ctx, {"open": -1})
        del self.active[key]

    def _level(self, key, inst, children, locals_, parent_vid, ctx, state):
        verts = self.f[key]["vertices"]
        g = self.g
        for local in locals_:
            v = verts[local]
            kind = _KIND[v["kind"]]
            if self._kept(key, local, ctx):
                state["open"] = -1
                vid = self._vertex(kind, self._name(v), v.get("function") or self.f[key]["display"],
                                   v["file"], v["first"], v["last"], parent_vid, inst, local, ctx + v["depth"])
                g.inst_vid[inst][local] = vid
                if kind == CALL:
                    body = self._call(v["callee"], inst, local, vid, ctx + v["depth"])
                    if body is not None:
                        yield body
                if children[local]:
                    yield self._level(key, inst, children, children[local], vid, ctx, {"open": -1})
            elif kind == BRANCH:                          # the branch goes, what it holds stays
                g.inst_vid[inst][local] = self._open_comp(state, v, parent_vid, key, ctx, inst, local)
                yield self._level(key, inst, children, children[local], parent_vid, ctx, state)
            else:
                if v.get("brk"):                           # another arm, not a continuation
                    state["open"] = -1
                comp = self._open_comp(state, v, parent_vid, key, ctx, inst, local)
                stack = [local]
                while stack:
                    x = stack.pop()
                    g.inst_vid[inst][x] = comp
                    if verts[x]["kind"] == "CALL" and self._user(verts[x]["callee"]):
                        self.inst_callee[inst][x] = self._folded(verts[x]["callee"], comp)
                    stack.extend(children[x])

    def _open_comp(self, state, v, parent_vid, key, ctx, inst, local) -> int:
        g = self.g
        if state["open"] < 0:
            state["open"] = self._vertex(COMP, "comp", v.get("function") or self.f[key]["display"],
                                         v["file"], v["first"], v["last"], parent_vid, inst, local,
                                         ctx + v["depth"])
        comp = state["open"]
        if v["file"] == g.file[comp] and v["first"] > 0:
            g.line_first[comp] = min(x for x in (g.line_first[comp], v["first"]) if x > 0)
            g.line_last[comp] = max(g.line_last[comp], v["last"])
        return comp

    def _call(self, callee: str, inst: int, local: int, vid: int, ctx: int):
        """Resolve a kept call: recursion closes the cycle, otherwise a new instance (its walk)."""
        if callee in self.active:                       # recursion: a cycle back to the enclosing call
            cinst, call_vid = self.active[callee]
            self.g.recursion_target[vid] = call_vid
            self.inst_callee[inst][local] = cinst
            return None
        if len(self.g.kind) > MAX_VERTICES:
            self.truncated = True
            return None
        cinst, body = self._expand(callee, parent=vid, ctx=ctx)
        self.inst_callee[inst][local] = cinst
        return body

    def _folded(self, key: str, vid: int) -> int:
        """An instance of `key` whose every local maps to `vid` (a call the contraction merged),
        and the same for everything it calls."""
        made: dict[str, int] = {}
        pending: list[str] = []

        def make(k: str) -> int:
            if len(self.g.inst_func) > MAX_VERTICES:
                self.truncated = True
                return -1
            inst = self._new_instance(k)
            made[k] = inst
            self.first_folded.setdefault(k, inst)
            self.g.inst_vid[inst] = [vid] * len(self.f[k]["vertices"])
            pending.append(k)
            return inst

        first = make(key)
        while pending:
            k = pending.pop()
            for i, v in enumerate(self.f[k]["vertices"]):
                if v["kind"] == "CALL" and self._user(v["callee"]):
                    c = v["callee"]
                    self.inst_callee[made[k]][i] = made[c] if c in made else make(c)
        return first

    def _name(self, v: dict) -> str:
        if v["kind"] == "CALL":
            callee = self.f.get(v["callee"])
            return callee["display"] if callee else v["name"]
        return v["name"]

    # ---- Table II -----------------------------------------------------------------------------
    def _meta(self, root, defaults) -> dict:
        after = {k: 0 for k in KINDS}
        for k in self.g.kind:
            after[KINDS[k]] += 1
        before = {k: 0 for k in KINDS}
        memo: dict[str, dict[str, int]] = {}
        roots = ([root] if root else []) + defaults
        for key in roots:
            _add(before, self._full(key, memo))
        return {"max_loop_depth": self.max_depth, "root": root or "<program>",
                "counts_before": before, "counts_after": after,
                "vertices_before": sum(before.values()), "vertices_after": len(self.g.kind),
                "default_instances": [self.f[k]["display"] for k in defaults],
                "truncated": self.truncated}

    def _full(self, key: str, memo: dict) -> dict[str, int]:
        """Uncontracted vertex counts of `key` with its user callees expanded (a recursive call
        counts once); an explicit stack, since call chains can be deep."""
        if key in memo:
            return memo[key]
        active = {key}
        stack = [(key, dict(self.f[key]["full_counts"]), iter(self.f[key]["full_calls"]))]
        while stack:
            k, acc, calls = stack[-1]
            c = next((c for c in calls if c in self.f and c not in active), None)
            if c is None:
                stack.pop()
                active.discard(k)
                memo[k] = acc
                if stack:
                    _add(stack[-1][1], acc)
            elif c in memo:
                _add(acc, memo[c])
            else:
                active.add(c)
                stack.append((c, dict(self.f[c]["full_counts"]), iter(self.f[c]["full_calls"])))
        return memo[key]


def _add(into: dict[str, int], counts: dict[str, int]) -> None:
    for kind, n in counts.items():
        into[kind] = into.get(kind, 0) + n


# ---- the tables object ----------------------------------------------------------------------------

_STRUCT = """struct sg_psg_tables {
    const char *psg_hash;
    uint32_t nvertices, nfunctions, ninstances;
    const uint32_t *inst_base;
    const uint32_t *inst_func;
    const uint32_t *inst_vid;
    const int32_t *inst_callee;
    const uint32_t *func_default_inst;
    uint32_t * const *fid_slots;
    const uint8_t *vertex_kind;
};"""


def _flat_instances(psg: PSG, builder: _Builder) -> tuple[list[int], list[int], list[int]]:
    """(each instance's first index, the instances' vertex ids, their callee instances), flattened."""
    bases, flat_vid, flat_callee = [], [], []
    for vids, callees in zip(psg.inst_vid, builder.inst_callee):
        bases.append(len(flat_vid))
        flat_vid.extend(max(v, 0) for v in vids)
        flat_callee.extend(callees)
    return bases, flat_vid, flat_callee


def tables_c_source(psg: PSG, builder: _Builder, full: str | None = None, psg_hash: str | None = None) -> str:
    bases, flat_vid, flat_callee = _flat_instances(psg, builder)
    symbols = [builder.f[k]["fid_symbol"] for k in builder.fid]
    if full is None or psg_hash is None:
        whole = psg.to_dict()
        full = json.dumps(whole, sort_keys=True, separators=(",", ":"))
        psg_hash = whole["hash"]
    lines = ["/* generated by scalgraph link_psg: PSG tables for the runtime shim (docs/runtime-abi.md) */",
             "#include <stdint.h>", _STRUCT,
             "void sg_register_psg(const struct sg_psg_tables *t);"]
    # weak: a function of an archive member the linker does not pull in leaves its slot NULL
    # instead of dragging the member (and what it needs) into the program
    lines += [f'extern uint32_t {s} __attribute__((weak, visibility("hidden")));' for s in symbols]
    lines += [_array("static const uint32_t", "sg_inst_base", bases),
              _array("static const uint32_t", "sg_inst_func", psg.inst_func),
              _array("static const uint32_t", "sg_inst_vid", flat_vid),
              _array("static const int32_t", "sg_inst_callee", flat_callee),
              _array("static const uint32_t", "sg_func_default_inst", psg.func_default_inst),
              _array("static const uint8_t", "sg_vertex_kind", psg.kind),
              "static uint32_t * const sg_fid_slots[] = {" +
              (", ".join(f"&{s}" for s in symbols) or "0") + "};",
              f'static const char sg_psg_hash[] = "{psg_hash}";',
              # retain (SHF_GNU_RETAIN) and the reference in the constructor below: linkers that
              # collect unreferenced sections (zig's lld does by default) must keep the PSG
              '__attribute__((used, retain, section(".scalgraph.psgfull"))) static const char sg_psg_full[] =',
              _c_string(full) + ";",
              "static const struct sg_psg_tables sg_tables = {",
              f"    sg_psg_hash, {len(psg)}u, {len(symbols)}u, {len(psg.inst_func)}u,",
              "    sg_inst_base, sg_inst_func, sg_inst_vid, sg_inst_callee, sg_func_default_inst,",
              "    sg_fid_slots, sg_vertex_kind",
              "};",
              "__attribute__((constructor)) static void sg_psg_tables_register(void) {",
              '    __asm__ volatile("" : : "r"(sg_psg_full));',
              "    sg_register_psg(&sg_tables);",
              "}",
              ""]
    return "\n".join(lines)


TABLES_IR_SLOT = "@{} = extern_weak hidden global i32, align 4"      # a slot the tables refer to


def tables_ir(psg: PSG, builder: _Builder, full: str, psg_hash: str) -> str:
    """The tables of tables_c_source as LLVM IR globals to append to an instrumented module (a call
    that compiles and links makes them in its code generator's process instead of starting a C
    compile): the same arrays, hash, full PSG section and registration, all internal and named with
    the PSG hash; a `.init_array` entry instead of llvm.global_ctors, which the module may already
    define.  Each fid slot is declared on a line of its own (TABLES_IR_SLOT): the caller drops the
    declarations of the slots its module defines."""
    bases, flat_vid, flat_callee = _flat_instances(psg, builder)
    symbols = [builder.f[k]["fid_symbol"] for k in builder.fid]
    h = psg_hash
    data = full.encode("utf-8", "surrogateescape")
    lines = [TABLES_IR_SLOT.format(s) for s in symbols]
    lines += [_ir_array("i32", f"__sg_inst_base_{h}", bases),
              _ir_array("i32", f"__sg_inst_func_{h}", psg.inst_func),
              _ir_array("i32", f"__sg_inst_vid_{h}", flat_vid),
              _ir_array("i32", f"__sg_inst_callee_{h}", flat_callee),
              _ir_array("i32", f"__sg_func_default_inst_{h}", psg.func_default_inst),
              _ir_array("i8", f"__sg_vertex_kind_{h}", psg.kind),
              f"@__sg_fid_slots_{h} = internal constant [{max(1, len(symbols))} x ptr] [" +
              (", ".join(f"ptr @{s}" for s in symbols) or "ptr null") + "], align 8",
              f'@__sg_psg_hash_{h} = internal constant [{len(h) + 1} x i8] c"{h}\00", align 1',
              f'@__sg_psg_full_{h} = internal constant [{len(data) + 1} x i8] c"'
              f'{data.decode("latin-1").translate(_IR_ESCAPES)}\00", section ".scalgraph.psgfull", align 1',
              f"@__sg_tables_{h} = internal constant {{ ptr, i32, i32, i32, ptr, ptr, ptr, ptr, ptr, ptr, ptr }} "
              f"{{ ptr @__sg_psg_hash_{h}, i32 {len(psg)}, i32 {len(symbols)}, i32 {len(psg.inst_func)}, "
              f"ptr @__sg_inst_base_{h}, ptr @__sg_inst_func_{h}, ptr @__sg_inst_vid_{h}, "
              f"ptr @__sg_inst_callee_{h}, ptr @__sg_func_default_inst_{h}, ptr @__sg_fid_slots_{h}, "
              f"ptr @__sg_vertex_kind_{h} }}, align 8",
              f'@__sg_tables_init_{h} = internal global ptr @__sg_tables_register_{h}, section ".init_array", align 8',
              "declare void @sg_register_psg(ptr)",
              f"define internal void @__sg_tables_register_{h}() nounwind {{",
              # the asm operand keeps the full PSG referenced, as the C tables' constructor does
              f'  call void asm sideeffect "", "r"(ptr @__sg_psg_full_{h})',
              f"  call void @sg_register_psg(ptr @__sg_tables_{h})",
              "  ret void",
              "}", ""]
    return "\n".join(lines)


def _ir_array(itype: str, name: str, values) -> str:
    vals = [f"{itype} {int(v)}" for v in values] or [f"{itype} 0"]
    return f"@{name} = internal constant [{len(vals)} x {itype}] [" + ", ".join(vals) + f"], align {4 if itype == 'i32' else 1}"


# an IR c"..." string: printable ASCII as is, " and \\ and the rest as \XX
_IR_ESCAPES = {o: f"\\{o:02X}" for o in range(256) if not 32 <= o < 127 or chr(o) in '"\\'}


def _array(ctype: str, name: str, values) -> str:
    vals = [str(int(v)) for v in values] or ["0"]
    rows = [", ".join(vals[i:i + 20]) for i in range(0, len(vals), 20)]
    return f"{ctype} {name}[] = {{\n    " + ",\n    ".join(rows) + "\n};"


# per byte: printable ASCII as is, " \\ ? escaped, the rest octal; str.translate does it at C speed
_C_ESCAPES = {o: ("\\" + chr(o) if chr(o) in '"\\?' else f"\\{o:03o}")
              for o in range(256) if not 32 <= o < 127 or chr(o) in '"\\?'}


def _c_string(text: str) -> str:
    """A C string literal of the UTF-8 bytes of `text` (non-ASCII as octal escapes, byte for byte),
    100 bytes a row."""
    data = text.encode("utf-8", "surrogateescape")
    rows = [data[i:i + 100].decode("latin-1").translate(_C_ESCAPES) for i in range(0, len(data), 100)]
    return "\n".join(f'    "{r}"' for r in rows) or '    ""'
