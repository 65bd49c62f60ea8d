"""Program Structure Graph (seed 003 §III-A): the contracted, context-sensitive tree of one program.

Vertices are dense ids 0..n-1 in a stable pre-order of the expanded tree; vertex 0 is the root
(the FUNCTION vertex of `main`).  Columns are plain lists/arrays so that analysis code indexes them
by vertex id.  Execution order within a process is the pre-order of each vertex's children; the
`children` lists are in that order.

Context sensitivity: every user function has one *template* (its own contracted graph, local
indices 0..T-1, local 0 = the FUNCTION vertex).  Each place the template is expanded is an
*instance*; `inst_vid[inst][local]` gives the global vertex id.  The compiled probes only know
(function id, local index); the runtime shim resolves the global id through these tables
(see docs/runtime-abi.md).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

KINDS = ("FUNCTION", "LOOP", "BRANCH", "CALL", "INDIRECT", "MPI", "COMP")
FUNCTION, LOOP, BRANCH, CALL, INDIRECT, MPI, COMP = range(len(KINDS))

FORMAT = "scalgraph-psg"
VERSION = 1


@dataclass
class PSG:
    kind: list[int] = field(default_factory=list)          # index into KINDS
    name: list[str] = field(default_factory=list)          # function, callee, MPI routine or "loop"/"branch"/"comp"
    function: list[str] = field(default_factory=list)      # enclosing (source-level) function
    file: list[str] = field(default_factory=list)
    line_first: list[int] = field(default_factory=list)    # 0 when unknown
    line_last: list[int] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)        # -1 for the root
    children: list[list[int]] = field(default_factory=list)
    instance: list[int] = field(default_factory=list)      # function instance the vertex belongs to
    local: list[int] = field(default_factory=list)         # index in that function's template
    loop_depth: list[int] = field(default_factory=list)    # loop nesting depth (0 outside loops)
    # recursion: a CALL whose target instance is an ancestor; -1 otherwise (the cycle back edge)
    recursion_target: list[int] = field(default_factory=list)
    # instance tables for the runtime (docs/runtime-abi.md)
    functions: list[str] = field(default_factory=list)     # function id -> linkage name
    func_default_inst: list[int] = field(default_factory=list)
    inst_func: list[int] = field(default_factory=list)
    inst_vid: list[list[int]] = field(default_factory=list)
    meta: dict = field(default_factory=dict)               # max_loop_depth, counts before/after contraction, ...

    def __len__(self) -> int:
        return len(self.kind)

    def kind_name(self, v: int) -> str:
        return KINDS[self.kind[v]]

    def location(self, v: int) -> str:
        """file:line or file:first-last, the way a user looks a vertex up."""
        f, a, b = self.file[v] or "?", self.line_first[v], self.line_last[v]
        return f"{f}:{a}" if b in (0, a) else f"{f}:{a}-{b}"

    def to_dict(self) -> dict:
        cols = {k: getattr(self, k) for k in _COLUMNS}
        return {"format": FORMAT, "version": VERSION, "hash": self.hash(), **cols}

    def hash(self) -> str:
        """Content hash (hex, 16 chars) recorded by the runtime so profiles match their graph."""
        cols = {k: getattr(self, k) for k in _COLUMNS if k != "meta"}
        blob = json.dumps(cols, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


_COLUMNS = ("kind", "name", "function", "file", "line_first", "line_last", "parent", "children",
            "instance", "local", "loop_depth", "recursion_target", "functions", "func_default_inst",
            "inst_func", "inst_vid", "meta")


def psg_from_dict(d: dict) -> PSG:
    from scalgraph.errors import UserError
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise UserError("not a scalgraph PSG file (missing format tag); rebuild the program with sgcc")
    if d.get("version") != VERSION:
        raise UserError(f"PSG version {d.get('version')} is not supported (this scalgraph reads {VERSION}); rebuild with sgcc")
    try:
        g = PSG(**{k: d[k] for k in _COLUMNS})
    except KeyError as e:
        raise UserError(f"PSG file is missing the column {e}; rebuild the program with sgcc") from None
    return g
