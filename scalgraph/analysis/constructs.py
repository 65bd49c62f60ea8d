"""Source constructs: the PSG vertices a user would call one line of code.

The PSG is context-sensitive: a loop in a function called from three places is three vertices, and
a loop body the compiler unrolled or inlined eleven times is eleven.  Costs are a property of the
source construct, so ranking sums the instances: two vertices are one construct when they have the
same kind, file, line span, name and enclosing function.  A construct id per vertex lets [R x V]
arrays be summed to [R x C] in one pass.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from scalgraph.model.psg import CALL, COMP, FUNCTION, INDIRECT, LOOP, MPI, PSG


@dataclass
class Constructs:
    cid: np.ndarray                  # [V] construct id of each vertex
    instances: list[list[int]]       # [C] the vertices of each construct, in vertex order
    order: np.ndarray                # [V] vertices sorted by construct id
    starts: np.ndarray               # [C] offset of each construct in `order`

    def __len__(self) -> int:
        return len(self.instances)

    def sum_columns(self, a: np.ndarray) -> np.ndarray:
        """[R x V] -> [R x C]: each construct's instances summed per row."""
        a = np.asarray(a, dtype=float)
        if a.shape[1] == 0:
            return np.zeros((a.shape[0], 0))
        if len(self.instances) == len(self.cid):        # every construct one vertex: ids are vertex ids
            return a
        return np.add.reduceat(a[:, self.order], self.starts, axis=1)

    def sum_rows(self, a: np.ndarray) -> np.ndarray:
        """[V x S] -> [C x S]."""
        return self.sum_columns(np.asarray(a, dtype=float).T).T

    def dominant(self, c: int, weight: np.ndarray) -> int:
        """The instance of construct c with the largest weight ([V] values, e.g. one rank's times)."""
        inst = self.instances[c]
        return int(inst[int(np.argmax(np.asarray(weight)[inst]))])


def construct_key(psg: PSG, v: int) -> tuple:
    return (psg.kind[v], psg.file[v], psg.line_first[v], psg.line_last[v], psg.name[v], psg.function[v])


def nest_key(psg: PSG, v: int, spans: dict | None = None) -> tuple:
    """construct_key, except that a computation (COMP or LOOP) whose lines lie inside a loop of the
    same function that begins on its first line or the line before (the loop's header) is that loop:
    the outermost such COMP/LOOP span with no MPI call and no call out of the function inside.  Which
    vertex of one loop a sample lands on depends on the code the compiler made for this problem size
    (vectorised body, remainder loop, versioned or inlined copy: the balanced sample's relax loop split
    0.64 / 0.40 s between two vertices at p=2 and 0.24 / 0 s at p=8, a scaling loss that was not
    there), so the loop is the unit that scales.  An inner loop further down the body stays its own
    construct (a hot sub-loop is named by its own lines).  `spans`: nest_spans(psg), computed once by
    a caller that asks for many vertices."""
    if psg.kind[v] not in (COMP, LOOP) or psg.line_first[v] <= 0:
        return construct_key(psg, v)
    group = (nest_spans(psg) if spans is None else spans).get((psg.file[v], psg.function[v]))
    if group is None:
        return construct_key(psg, v)
    first, last, keys = group
    lo, hi = psg.line_first[v], psg.line_last[v]
    # spans that begin on v's first line or the line before (the loop's header): sorted by first
    # line, widest first, so the first that reaches past v's last line is the outermost such span
    a, b = np.searchsorted(first, [lo - 1, lo], side="left")[0], np.searchsorted(first, lo, side="right")
    for k in range(int(a), int(b)):
        if last[k] >= hi:
            return keys[k]
    return construct_key(psg, v)


def nest_spans(psg: PSG) -> dict:
    """(file, function) -> (first lines, last lines, keys) of the COMP/LOOP spans that
    hold no MPI call and no call out of the function, sorted by first line."""
    blockers: dict[tuple, list[int]] = {}
    for u in range(len(psg)):
        if psg.kind[u] in (MPI, CALL, INDIRECT) and psg.line_first[u] > 0:
            blockers.setdefault((psg.file[u], psg.function[u]), []).append(psg.line_first[u])
    for lines in blockers.values():
        lines.sort()
    out: dict[tuple, list] = {}
    seen = set()
    for u in range(len(psg)):
        if psg.kind[u] not in (COMP, LOOP) or psg.line_first[u] <= 0:
            continue
        where = (psg.file[u], psg.function[u])
        lo, hi = psg.line_first[u], psg.line_last[u]
        if (where, lo, hi) in seen:
            continue
        lines = blockers.get(where, [])
        i = bisect.bisect_left(lines, lo)
        if i < len(lines) and lines[i] <= hi:
            continue                          # an MPI call or a call out of the function inside
        seen.add((where, lo, hi))
        out.setdefault(where, []).append((lo, -hi, ("NEST", psg.file[u], lo, hi, psg.function[u])))
    groups = {}
    for where, spans in out.items():          # sorted by first line, widest first; reach = running max
        spans.sort(key=lambda x: (x[0], x[1]))
        first = np.array([a for a, _, _ in spans])
        last = np.array([-b for _, b, _ in spans])
        groups[where] = (first, last, [key for _, _, key in spans])
    return groups


def constructs(psg: PSG) -> Constructs:
    ids: dict[tuple, int] = {}
    cid = np.empty(len(psg), dtype=np.int64)
    spans = nest_spans(psg)
    for v in range(len(psg)):
        cid[v] = ids.setdefault(nest_key(psg, v, spans), len(ids))
    order = np.argsort(cid, kind="stable")
    starts = np.searchsorted(cid[order], np.arange(len(ids)))
    instances = [order[a:b].tolist() for a, b in zip(starts, list(starts[1:]) + [len(order)])]
    return Constructs(cid, instances, order, starts)


def call_path(psg: PSG, v: int) -> str:
    """The calls and loops enclosing v, outermost first: 'main > loop (cg.c:64-86) > step (cg.c:66)'.
    It tells apart the instances of one construct (each call site, each enclosing loop); copies
    that still look alike (unrolled in place) are numbered by `contexts`."""
    hops = []
    u = psg.parent[v]
    while u >= 0:
        if psg.kind[u] in (CALL, INDIRECT, LOOP):
            hops.append(f"{psg.name[u]} ({_short(psg.location(u))})")
        elif psg.kind[u] == FUNCTION and psg.parent[u] < 0:
            hops.append(psg.name[u])
        u = psg.parent[u]
    return " > ".join(reversed(hops)) or psg.function[v]


def _short(location: str) -> str:
    return location.rsplit("/", 1)[-1]


def contexts(psg: PSG, inst: list[int], weight: np.ndarray) -> list[dict]:
    """One entry per instance, heaviest first: vertex, call path (numbered when copies share one),
    weight (e.g. seconds on the cause's rank) and whether it dominates."""
    paths = [call_path(psg, v) for v in inst]
    seen: dict[str, int] = {}
    total = {p: paths.count(p) for p in paths}
    out = []
    for v, p in zip(inst, paths):
        if total[p] > 1:
            seen[p] = seen.get(p, 0) + 1
            p = f"{p} (copy {seen[p]} of {total[p]})"
        out.append({"vertex": int(v), "call_path": p, "seconds": float(weight[v])})
    out.sort(key=lambda x: -x["seconds"])
    for i, x in enumerate(out):
        x["dominant"] = i == 0
    return out
