"""scalgraph psg APP: print the Program Structure Graph of an executable built with sgcc/sgcxx/sgfort
as an indented tree, with the vertex counts before/after contraction (the paper's Table II columns),
or export it as Graphviz dot or JSON."""
from __future__ import annotations

import json
import os
import sys

from scalgraph.errors import UserError, printable
from scalgraph.io.safe_write import write_output
from scalgraph.model.psg import COMP, FUNCTION, KINDS, LOOP, MPI, PSG


def add_arguments(p) -> None:
    g = p.add_argument_group("input")
    g.add_argument("app", metavar="APP", help="executable built with sgcc/sgcxx/sgfort (or its .psg.json)")
    a = p.add_argument_group("display")
    a.add_argument("--max-loop-depth", type=int, default=None, metavar="N",
                   help="show loops deeper than N without MPI merged into their parent (display only)")
    o = p.add_argument_group("output")
    o.add_argument("--dot", metavar="FILE", help="write the PSG as Graphviz dot ('-' = stdout)")
    o.add_argument("--json", metavar="FILE", help="write the PSG as JSON ('-' = stdout)")


def run(args) -> int:
    from scalgraph.static import read_psg_from_executable
    if args.max_loop_depth is not None and args.max_loop_depth < 0:
        raise UserError("--max-loop-depth must be 0 or more")
    if args.json and args.dot and args.json == args.dot and args.json != "-":
        raise UserError(f"--json and --dot both name {args.json}; give two files")
    for out in (args.json, args.dot):
        if out and out != "-" and os.path.realpath(out) == os.path.realpath(args.app):
            raise UserError(f"{out} is the input {args.app}: writing there would destroy it; give another file")
    psg = read_psg_from_executable(args.app)
    if args.json:
        _write(args.json, json.dumps(psg.to_dict(), indent=1, sort_keys=True) + "\n")
    if args.dot:
        _write(args.dot, to_dot(psg))
    if not args.json and not args.dot:
        sys.stdout.write(printable(render_tree(psg, args.max_loop_depth), keep_layout=True))
        sys.stdout.write(printable(render_counts(psg), keep_layout=True))
    return 0


def _write(target: str, text: str) -> None:
    if target == "-":
        sys.stdout.write(text)
        return
    write_output(target, text)          # complete or not at all: FILE is never left truncated


def _short(path: str) -> str:
    if not path:
        return "?"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path


def _label(psg: PSG, v: int, home: str = "") -> str:
    f, a, b = _short(psg.file[v]), psg.line_first[v], psg.line_last[v]
    loc = f"{f}:{a}" if b in (0, a) else f"{f}:{a}-{b}"
    if a == 0:
        loc = f
    extra = f"  -> #{psg.recursion_target[v]} (recursion)" if psg.recursion_target[v] >= 0 else ""
    if home and psg.kind[v] != FUNCTION and psg.function[v] != home:
        extra += f"  [inlined from {psg.function[v]}]"
    return f"{KINDS[psg.kind[v]]} {psg.name[v]}  {loc}  #{v}{extra}"


def _has_mpi(psg: PSG) -> list[bool]:
    out = [False] * len(psg)
    for v in range(len(psg) - 1, -1, -1):
        if psg.kind[v] == MPI:
            out[v] = True
        if out[v] and psg.parent[v] >= 0:
            out[psg.parent[v]] = True
    return out


def render_tree(psg: PSG, max_loop_depth: int | None = None) -> str:
    """Indented tree.  With max_loop_depth, a display-time re-contraction: loops deeper than it
    without MPI, and the COMPs next to them, print as one merged COMP line (the ids stay those of
    the program, listed on the line)."""
    mpi = _has_mpi(psg) if max_loop_depth is not None else None

    def merged(v: int) -> bool:
        return mpi is not None and psg.kind[v] == LOOP and psg.loop_depth[v] > max_loop_depth and not mpi[v]

    lines: list[str] = []
    roots = [v for v in range(len(psg)) if psg.parent[v] < 0]
    stack: list = [(r, 0, psg.function[r]) for r in reversed(roots)]
    while stack:
        item, d, home = stack.pop()
        if isinstance(item, list):                      # a run of merged vertices
            lo = min(psg.line_first[v] for v in item if psg.line_first[v] > 0) if any(
                psg.line_first[v] > 0 for v in item) else 0
            hi = max(psg.line_last[v] for v in item)
            ids = ",".join(f"#{v}" for v in item)
            lines.append("  " * d + f"COMP (merged)  {_short(psg.file[item[0]])}:{lo}-{hi}  {ids}")
            continue
        v = item
        if psg.kind[v] == FUNCTION:
            home = psg.function[v]
        lines.append("  " * d + _label(psg, v, home))
        groups: list = []
        for c in psg.children[v]:
            if mpi is not None and (merged(c) or psg.kind[c] == COMP):
                if groups and isinstance(groups[-1], list) and psg.file[groups[-1][0]] == psg.file[c]:
                    groups[-1].append(c)
                else:
                    groups.append([c])
            else:
                groups.append(c)
        groups = [g[0] if isinstance(g, list) and len(g) == 1 and not merged(g[0]) else g for g in groups]
        stack.extend((g, d + 1, home) for g in reversed(groups))
    return "\n".join(lines) + "\n"


def render_counts(psg: PSG) -> str:
    before = psg.meta.get("counts_before", {})
    after = psg.meta.get("counts_after", {})
    rows = [f"\nvertices by kind (MaxLoopDepth={psg.meta.get('max_loop_depth', '?')}):",
            f"  {'kind':<9} {'before':>8} {'after':>8}"]
    for k in KINDS:
        rows.append(f"  {k:<9} {before.get(k, 0):>8} {after.get(k, 0):>8}")
    rows.append(f"  {'total':<9} {sum(before.values()):>8} {sum(after.values()):>8}")
    return "\n".join(rows) + "\n"


def to_dot(psg: PSG) -> str:
    shapes = {"FUNCTION": "box", "LOOP": "ellipse", "BRANCH": "diamond", "CALL": "box",
              "INDIRECT": "octagon", "MPI": "box", "COMP": "plaintext"}
    out = ["digraph psg {", "  node [fontname=Helvetica fontsize=10];"]
    for v in range(len(psg)):
        kind = KINDS[psg.kind[v]]
        label = f"{kind} {psg.name[v]}\\n{os.path.basename(psg.file[v] or '?')}:{psg.line_first[v]} #{v}"
        style = ' style=filled fillcolor="#f4cccc"' if kind == "MPI" else ""
        out.append(f'  v{v} [shape={shapes[kind]} label="{_dot_escape(label)}"{style}];')
    for v in range(len(psg)):
        kids = psg.children[v]
        for c in kids:
            out.append(f"  v{v} -> v{c};")
        for a, b in zip(kids, kids[1:]):          # execution order within the parent
            out.append(f"  v{a} -> v{b} [style=dashed constraint=false];")
        if psg.recursion_target[v] >= 0:
            out.append(f"  v{v} -> v{psg.recursion_target[v]} [color=red label=recursion];")
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_escape(s: str) -> str:
    """Quoted dot string: backslashes and quotes escaped, control characters shown, not kept."""
    return printable(s.replace("\\", "\\\\").replace('"', '\\"')).replace("\\\\n", "\\n")
