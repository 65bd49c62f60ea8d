"""Per-function templates: the local PSG of each function (seed 003 §III-A, intra-procedural phase)
and its compile-time contraction.

`local_tree` builds the uncontracted local PSG: FUNCTION, LOOP, BRANCH, CALL, INDIRECT, MPI and COMP
vertices, every IR instruction owned by exactly one of them.  `contract` applies the paper's rules
with what one translation unit knows (a call to a function defined elsewhere may reach MPI, so it
stays a CALL); the result, numbered in pre-order, is the function's *template*: local 0 is the
FUNCTION vertex, and every instruction maps to the local whose probe value covers it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, repeat

from scalgraph.model.psg import BRANCH, CALL, COMP, FUNCTION, INDIRECT, KINDS, LOOP, MPI
from scalgraph.static import cfg
from scalgraph.static.ir import FREE, TERMINATORS, DebugInfo, Function, Instr
from scalgraph.static.openmp import forked_function, source_function
from scalgraph.static.walk import run

TRIVIAL_COMP = 3     # a run of at most this many plain instructions next to a structure is not a vertex


@dataclass
class Node:
    kind: int
    name: str
    parent: int
    children: list[int] = field(default_factory=list)
    callee: str | None = None       # CALL: callee key
    depth: int = 0                  # LOOP: its nesting depth; others: depth of the enclosing loops
    seq_break: bool = False         # COMP: not a continuation of the computation before it (other arm)
    trivial: bool = False           # COMP: too small to be a vertex; joins a neighbouring COMP or its parent
    source: tuple[str, int] = ("", 0)   # LOOP: file and line of its header (to spot optimiser copies)


@dataclass
class LocalTree:
    nodes: list[Node]
    # which node owns which instructions: runs (block, first index, end index, node), in the order
    # the walk assigned them (attach_lines reads the instructions in this order); a run per
    # straight-line stretch, not an entry per instruction: large files have 10^5 instructions
    owner: list[tuple[int, int, int, int]]


@dataclass
class Template:
    vertices: list[dict]                    # pre-order; local 0 = FUNCTION
    instr_local: dict[tuple[int, int], int]
    full_counts: dict[str, int]             # uncontracted vertices by kind
    full_calls: list[str]                   # callee keys of the uncontracted CALL vertices


def classify_call(ins: Instr, resolve) -> tuple[int, str, str | None] | None:
    """(kind, name, callee key) for an instruction that is a vertex of its own, None for computation.
    resolve(name) -> ("lib", None) | ("mpi", display name) | ("call", callee key)."""
    if not ins.is_call or ins.inline_asm:
        return None
    forked = forked_function(ins)          # an OpenMP fork: a call of its outlined region
    if forked is not None and resolve(forked)[0] == "call":
        return (CALL, forked, resolve(forked)[1])
    if ins.indirect:
        return (INDIRECT, "indirect", None)
    what, value = resolve(ins.callee or "")
    if what == "lib":
        return None
    if what == "mpi":
        return (MPI, value, None)
    return (CALL, ins.callee or "", value)


def _counts_as_work(ins: Instr) -> bool:
    if ins.opcode in FREE or ins.opcode in TERMINATORS:
        return False
    return not (ins.is_call and (ins.callee or "").startswith("llvm.dbg"))


def _run_counts(instrs: list[Instr], lo: int, hi: int) -> tuple[int, int]:
    """(instructions that count as work, calls of non-intrinsics) among instrs[lo:hi]."""
    work = calls = 0
    for ins in instrs[lo:hi]:
        if ins.is_call:                  # invoke and callbr are terminators: no work
            callee = ins.callee or ""
            work += ins.opcode == "call" and not callee.startswith("llvm.dbg")
            calls += not callee.startswith("llvm.")
        elif ins.opcode not in FREE and ins.opcode not in TERMINATORS:
            work += 1
    return work, calls


def local_tree(fn: Function, cf: cfg.ControlFlow, display_name: str, resolve, locate=None) -> LocalTree:
    """locate(dbg id) -> (file, line), used to recognise loop copies made by the optimiser."""
    nodes = [Node(FUNCTION, display_name, -1)]
    owner: list[tuple[int, int, int, int]] = []
    blocks_of: dict[int, list[int]] = {}
    dead: list[int] = []
    for b in range(len(fn.blocks)):
        if b in cf.reachable and b not in cf.exceptional:
            blocks_of.setdefault(cf.block_region[b], []).append(b)
        elif fn.blocks[b].instrs:        # dead code, exception cleanup: no vertex of their own
            dead.append(b)
    dead_branch: dict[int, int] = {}     # a branch in exception cleanup: its terminator's node
    children_of: dict[int, list[int]] = {}
    for ri, r in enumerate(cf.regions):
        children_of.setdefault(r.parent, []).append(ri)

    def new(kind, name, parent, **kw) -> int:
        nodes.append(Node(kind, name, parent, **kw))
        return len(nodes) - 1

    def level(region: int, me: int):
        # a block's instructions come in execution order of the blocks; a loop headed by a block
        # comes before it, a branch ending a block after it
        items: list[tuple[int, int, int]] = [(cf.order[b], 0, b) for b in blocks_of.get(region, [])]
        for ri in children_of.get(region, []):
            r = cf.regions[ri]
            items.append((cf.order[r.head], -1 if r.kind == cfg.LOOP else 1, ri))
        items.sort()
        entries: list = []           # node ids, or [runs, work, calls, last block, break] segments
        seg: list | None = None
        brk = False
        for _, what, x in items:
            if what == 0:
                b = x
                instrs = fn.blocks[b].instrs
                end = len(instrs) - 1 if b in cf.branch_of_block else len(instrs)
                lo = 0
                while lo < end:
                    # the next instruction that is a vertex of its own (a call of MPI or user code)
                    idx, c = lo, None
                    while idx < end:
                        ins = instrs[idx]
                        if ins.is_call:
                            c = classify_call(ins, resolve)
                            if c is not None:
                                break
                        idx += 1
                    if idx > lo:                         # computation instrs[lo:idx]
                        if seg is not None and b != seg[3] and b not in cf.succs[seg[3]]:
                            seg = None                   # not straight-line: e.g. the other arm
                            brk = True
                        if seg is None:
                            seg = [[], 0, 0, b, brk]
                            entries.append(seg)
                            brk = False
                        seg[3] = b
                        seg[0].append((b, lo, idx))
                        work, calls = _run_counts(instrs, lo, idx)
                        seg[1] += work
                        seg[2] += calls
                    if c is not None:
                        seg, brk = None, False
                        nid = new(c[0], c[1], me, callee=c[2])
                        owner.append((b, idx, idx + 1, nid))
                        entries.append(nid)
                    lo = idx + 1
            else:
                seg, brk = None, False
                r = cf.regions[x]
                if r.kind == cfg.LOOP:
                    nid = new(LOOP, "loop", me, depth=r.depth, source=_header_line(fn, r.head, locate))
                else:
                    last = len(fn.blocks[r.head].instrs) - 1
                    nid = new(BRANCH, "branch", me)
                    if r.head in cf.reachable and r.head not in cf.exceptional:
                        owner.append((r.head, last, last + 1, nid))
                    else:
                        dead_branch[r.head] = nid
                entries.append(nid)
                yield level(x, nid)
        has_structure = any(isinstance(e, int) for e in entries)
        kids: list[int] = []
        for e in entries:
            if isinstance(e, int):
                kids.append(e)
                continue
            runs, work, calls, _, seq_break = e
            trivial = work == 0 or (has_structure and work <= TRIVIAL_COMP and calls == 0)
            target = new(COMP, "comp", me, seq_break=seq_break, trivial=trivial)
            kids.append(target)
            owner.extend((b, lo, hi, target) for b, lo, hi in runs)
        nodes[me].children = kids

    run(level(-1, 0))
    _set_depths(nodes, 0, 0)
    # the dead blocks first (the walk's order); a branch there owns its terminator
    first: list[tuple[int, int, int, int]] = []
    for b in dead:
        last = len(fn.blocks[b].instrs) - 1
        if b in dead_branch:
            first += [(b, 0, last, 0)] if last else []
            first.append((b, last, last + 1, dead_branch[b]))
        else:
            first.append((b, 0, last + 1, 0))
    return LocalTree(nodes, first + owner)


def _header_line(fn: Function, head: int, locate) -> tuple[str, int]:
    if locate is None:
        return ("", 0)
    lines = [locate(ins.dbg) for ins in fn.blocks[head].instrs if ins.dbg >= 0]
    lines = [fl for fl in lines if fl[1] > 0]
    return min(lines, key=lambda fl: fl[1]) if lines else ("", 0)


def _set_depths(nodes: list[Node], nid: int, depth: int) -> None:
    stack = [(nid, depth)]
    while stack:
        n, d = stack.pop()
        node = nodes[n]
        if node.kind == LOOP:
            d = node.depth
        else:
            node.depth = d
        stack.extend((c, d) for c in node.children)


def reaches_mpi(tree: LocalTree, callee_mpi) -> list[bool]:
    """Per node: does its subtree contain MPI, an indirect call, or a call that may reach MPI."""
    out = [False] * len(tree.nodes)
    for nid in reversed(_preorder(tree.nodes)):
        n = tree.nodes[nid]
        if n.kind in (MPI, INDIRECT):
            out[nid] = True
        elif n.kind == CALL:
            out[nid] = callee_mpi(n.callee)
        else:
            out[nid] = any(out[c] for c in n.children)
    return out


def _preorder(nodes: list[Node]) -> list[int]:
    order, stack = [], [0]
    while stack:
        n = stack.pop()
        order.append(n)
        stack.extend(reversed(nodes[n].children))
    return order


def contract(tree: LocalTree, *, max_loop_depth: int, callee_mpi, callee_loops) -> tuple[list[dict], list[int]]:
    """The paper's contraction: keep MPI and the structures containing it, other loops down to
    max_loop_depth, merge everything else into COMP vertices.  Returns (template vertices in
    pre-order, local of each node)."""
    nodes = tree.nodes
    mpi = reaches_mpi(tree, callee_mpi)
    verts: list[dict] = []
    node_local = [-1] * len(nodes)

    def kept(nid: int) -> bool:
        n = nodes[nid]
        if n.kind in (MPI, INDIRECT):
            return True
        if n.kind == CALL:
            return mpi[nid] or (callee_loops(n.callee) and n.depth < max_loop_depth)
        if n.kind == LOOP:
            return mpi[nid] or n.depth <= max_loop_depth
        if n.kind == BRANCH:
            return mpi[nid]
        return False

    def vertex(kind: int, name: str, parent: int, depth: int, callee=None) -> int:
        verts.append({"kind": KINDS[kind], "name": name, "parent": parent, "depth": depth,
                      "callee": callee})
        return len(verts) - 1

    def emit(nid: int, parent: int) -> None:
        n = nodes[nid]
        local = vertex(n.kind, n.name, parent, n.depth, n.callee)
        node_local[nid] = local
        yield fold_children(n.children, local, {"open": None})

    def open_comp(state: dict, parent: int, depth: int) -> int:
        if state["open"] is None:
            state["open"] = vertex(COMP, "comp", parent, depth)
        return state["open"]

    def fold_children(children: list[int], parent: int, state: dict) -> None:
        loops_here: dict[tuple[str, int], int] = state.setdefault("loops", {})   # shared with spliced branches
        for c in children:
            n = nodes[c]
            if n.kind == COMP and n.trivial:          # no vertex of its own
                node_local[c] = state["open"] if state["open"] is not None else parent
            elif n.kind == LOOP and not mpi[c] and n.source[1] > 0 and n.source in loops_here and kept(c):
                # a copy of the same source loop (vectorised body and remainder, versioning):
                # one vertex for the source loop, its work in that loop's COMP
                first = loops_here[n.source]
                inner = next((i for i in range(first + 1, len(verts))
                              if verts[i]["parent"] == first and verts[i]["kind"] == "COMP"), first)
                node_local[c] = first
                stack = list(n.children)
                while stack:
                    x = stack.pop()
                    node_local[x] = inner
                    stack.extend(nodes[x].children)
                state["open"] = None
            elif kept(c):
                yield emit(c, parent)
                if n.kind == LOOP and not mpi[c]:
                    loops_here.setdefault(n.source, node_local[c])
                state["open"] = None
            elif n.kind == BRANCH:                      # the branch goes, its kept loops stay
                node_local[c] = open_comp(state, parent, n.depth)
                yield fold_children(n.children, parent, state)
            else:
                if n.kind == COMP and n.seq_break and state["open"] is not None:
                    state["open"] = None
                    local = open_comp(state, parent, n.depth)
                    verts[local]["brk"] = True   # the link step must not merge it with the COMP before
                else:
                    local = open_comp(state, parent, n.depth)
                stack = [c]
                while stack:
                    x = stack.pop()
                    node_local[x] = local
                    stack.extend(nodes[x].children)

    run(emit(0, -1))
    return verts, node_local


def full_counts(tree: LocalTree) -> tuple[dict[str, int], list[str]]:
    counts = {k: 0 for k in KINDS}
    calls = []
    for n in tree.nodes:
        if n.trivial:
            continue
        counts[KINDS[n.kind]] += 1
        if n.kind == CALL and n.callee:
            calls.append(n.callee)
    return counts, calls


def attach_lines(verts: list[dict], instr_local: list[tuple[int, int, int, int]], fn: Function,
                 dbg: DebugInfo, home_file: str, home_line: int) -> None:
    """file, first and last line of every template vertex; instr_local: runs (block, first index,
    end index, local) in the order the instructions are read.

    MPI, CALL and INDIRECT vertices take their call's own line (inside an inlined function, the
    line there).  Structures and COMPs span their subtree's lines *at their own inlining level*: a
    loop of main that contains code inlined from a helper spans main's lines (the helper's code
    counts at its call site), while a loop inlined from the helper spans the helper's lines.
    Spans are kept per inlining level and merged bottom-up, so the cost is linear in the code."""
    parent = [v["parent"] for v in verts]
    leaf = [v["kind"] in ("MPI", "CALL", "INDIRECT") for v in verts]
    level = [1 << 30] * len(verts)          # inlining depth of each vertex's own code
    # acc[v][c] = {file: [first, last]} of v's subtree seen at inlining level c; mids[v][c] = a
    # DILocation there (to name the function of inlined code)
    acc: list[dict[int, dict[str, list[int]]]] = [{} for _ in verts]
    mids: list[dict[int, int]] = [{} for _ in verts]
    own: list[tuple[str, int, int] | None] = [None] * len(verts)    # a leaf's own location
    blocks = fn.blocks
    ids: dict[int, list[int]] = {}          # block -> its instructions' DILocation ids
    for b, _, _, _ in instr_local:
        if b not in ids:
            ids[b] = [ins.dbg for ins in blocks[b].instrs]
    # each (local, DILocation) once, in reading order (a second one changes nothing), at C speed
    pairs = dict.fromkeys(chain.from_iterable(zip(repeat(local), ids[b][lo:hi]) for b, lo, hi, local in instr_local))
    for local, mid in pairs:
        locations = dbg.chain(mid)
        if locations[0][1] <= 0:
            continue
        depth = len(locations) - 1
        if depth < level[local]:
            level[local] = depth
        if leaf[local] and own[local] is None:
            own[local] = locations[0]
        into, named = acc[local], mids[local]
        for c in range(depth + 1):
            file, line, where = locations[depth - c]
            if line <= 0:
                continue
            span = into.get(c)
            if span is None:
                into[c] = {file: [line, line]}
                named[c] = where
                continue
            cur = span.get(file)
            if cur is None:
                span[file] = [line, line]
            elif line < cur[0]:
                cur[0] = line
            elif line > cur[1]:
                cur[1] = line
    structure = [v["kind"] in ("FUNCTION", "LOOP", "BRANCH") for v in verts]
    for local in range(len(verts) - 1, 0, -1):      # children come after parents in pre-order
        p = parent[local]
        level[p] = min(level[p], level[local])      # a structure without code of its own: its children's
        if structure[p]:
            for c, span in acc[local].items():
                into = acc[p].setdefault(c, {})
                for file, (a, z) in span.items():
                    _widen(into, file, a, z)
                mids[p].setdefault(c, mids[local][c])
    for i, v in enumerate(verts):
        if leaf[i] and own[i] is not None:
            span, where = {own[i][0]: [own[i][1], own[i][1]]}, own[i][2]
        else:
            span, where = acc[i].get(level[i], {}), mids[i].get(level[i], -1)
        if i == 0 and home_line > 0:
            _widen(span, home_file, home_line, home_line)
        file = home_file if home_file in span else (min(span) if span else home_file)
        a, z = span.get(file, (0, 0))
        v["file"], v["first"], v["last"] = file, a, z
        if i > 0 and level[i] > 0 and where >= 0:   # code inlined from another function: say which
            name = source_function(dbg.function_of(where))   # an OpenMP region's body: its function
            if name:
                v["function"] = name


def _widen(span: dict[str, list[int]], file: str, a: int, z: int) -> None:
    cur = span.get(file)
    if cur is None:
        span[file] = [a, z]
    else:
        cur[0] = min(cur[0], a)
        cur[1] = max(cur[1], z)
