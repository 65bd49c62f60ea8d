"""The whole PSG as a collapsible, searchable tree with each vertex's time per scale.

Times are the mean over ranks of the inclusive time (a vertex's exclusive time plus its subtree's,
the PSG's rule for inclusive values).  A very large PSG keeps its most costly vertices (and their
ancestors, and every marked vertex) so the page stays small; the page says how many were left out."""
from __future__ import annotations

import numpy as np

from scalgraph.io.html_report.page import esc
from scalgraph.model.psg import PSG

MAX_NODES = 1500
OPEN_DEPTH = 2


def inclusive(psg: PSG, exclusive: np.ndarray) -> np.ndarray:
    """[V] subtree sums; vertex ids are a pre-order, so every child comes after its parent."""
    out = np.array(exclusive, dtype=float, copy=True)
    for v in range(len(psg) - 1, 0, -1):
        par = psg.parent[v]
        if 0 <= par < v:
            out[par] += out[v]
    return out


def _kept(psg: PSG, weight: np.ndarray, marked: set[int], limit: int) -> np.ndarray:
    keep = np.zeros(len(psg), dtype=bool)
    if len(psg) <= limit:
        keep[:] = True
        return keep
    keep[np.argsort(-weight, kind="stable")[:limit]] = True
    keep[[v for v in marked if 0 <= v < len(psg)]] = True
    for v in np.flatnonzero(keep).tolist():          # ancestors, so every kept vertex hangs in the tree
        par = psg.parent[v]
        while par >= 0 and not keep[par]:
            keep[par] = True
            par = psg.parent[par]
    return keep


def _fmt(x: float) -> str:
    if x <= 0:
        return "0"
    if x < 1e-3:
        return f"{x * 1e6:.3g} \u00b5s"
    if x < 1:
        return f"{x * 1e3:.3g} ms"
    return f"{x:.3g} s"


def tree_html(psg: PSG, vertex_time: dict[str, list[float]], scales: list[int], marks: dict[int, list[str]],
              limit: int = MAX_NODES) -> str:
    """`vertex_time`: scale -> [V] mean exclusive time per rank; `marks`: vertex -> badges to show."""
    if len(psg) == 0:
        return '<p class="note">The program graph is empty.</p>'
    incl = {p: inclusive(psg, np.asarray(vertex_time[str(p)], dtype=float)) for p in scales if str(p) in vertex_time}
    shown = [p for p in scales if p in incl]
    big = incl[shown[-1]] if shown else np.zeros(len(psg))
    top = float(big[0]) if len(big) and big[0] > 0 else float(big.max()) if len(big) else 0.0
    keep = _kept(psg, big, set(marks), limit)
    opened = np.zeros(len(psg), dtype=bool)
    for v in marks:                                   # the way down to every cause is open
        par = psg.parent[v] if 0 <= v < len(psg) else -1
        while par >= 0:
            opened[par] = True
            par = psg.parent[par]
    cols = f"repeat({len(shown)}, 96px)"
    head = "".join(f'<span class="t">p={p}</span>' for p in shown)
    out = [f'<div class="tree-head" style="--cols: {cols}"><span>vertex (inclusive time, mean per rank)</span>'
           f'{head}</div><ul class="tree" id="psg-tree" style="--cols: {cols}">']
    # iterative pre-order walk: a deep PSG must not hit Python's recursion limit
    stack: list[tuple[int, int, bool]] = [(0, 0, False)]
    while stack:
        v, depth, closing = stack.pop()
        if closing:
            out.append("</ul></details></li>")
            continue
        kids = [c for c in psg.children[v] if keep[c]]
        out.append(_node(psg, v, depth, bool(kids), incl, shown, top, marks.get(v, []),
                         depth < OPEN_DEPTH or opened[v]))
        if kids:
            stack.append((v, depth, True))
            stack.extend((c, depth + 1, False) for c in reversed(kids))
    out.append("</ul>")
    left_out = int((~keep).sum())
    if left_out:
        out.append(f'<p class="note">{left_out} of {len(psg)} vertices with the least time are not shown.</p>')
    return "".join(out)


def _node(psg: PSG, v: int, depth: int, has_kids: bool, incl: dict, shown: list[int], top: float,
          badges: list[str], is_open: bool) -> str:
    kind = psg.kind_name(v)
    loc = psg.location(v)
    fn = psg.function[v]
    text = f"{kind} {psg.name[v]} {loc} {fn}".lower()
    marks = "".join(f'<span class="badge bad">{esc(b)}</span>' for b in badges)
    where = loc.rsplit("/", 1)[-1]
    label = (f'<span class="label" title="{esc(loc)}"><span class="badge k-{esc(kind)}">{esc(kind)}</span>'
             f'{esc(psg.name[v])} <span class="mono muted">{esc(where)}</span> <span class="muted">in {esc(fn)}</span> '
             f'{marks}</span>')
    times = "".join(
        f'<span class="t" title="p={p}: {esc(_fmt(incl[p][v]))} inclusive">{esc(_fmt(incl[p][v]))}'
        f'<span class="tb" style="width:{min(100.0, 100.0 * incl[p][v] / top) if top > 0 else 0:.1f}%"></span></span>'
        for p in shown)
    row = f'<span class="row">{label}{times}</span>'
    if not has_kids:
        return f'<li class="leaf" data-text="{esc(text)}">{row}</li>'
    return (f'<li data-text="{esc(text)}"><details{" open" if is_open else ""}><summary>{row}</summary><ul>')
