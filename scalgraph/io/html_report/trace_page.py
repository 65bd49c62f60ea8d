"""The page (or the sections of an experiment's page) for an event trace: the verdict's root causes
with their source, the wait-state pattern tree with severities, the delay costs with their call
paths, the critical path's profile, and a per-rank timeline of the largest wait states.

Input: the dict of scalgraph.trace.report.build_report (as `scalgraph trace --json` prints it) and
`views` = {"t0": the trace's first timestamp (the timeline starts there)}."""
from __future__ import annotations

import pathlib

from scalgraph.io.html_report import figures as fig
from scalgraph.io.html_report.page import document, esc, plot_div
from scalgraph.io.html_report.source import excerpt

_STRUCTURAL = {"time", "mpi", "p2p", "collective", "synchronization", "rma", "rma_sync", "rma_active",
               "rma_passive", "rma_window", "rma_comm"}


def _s(x: float) -> str:
    return f"{x:.4g} s"


def trace_page(result: dict, views: dict, roots: list[pathlib.Path]) -> str:
    figures: dict = {}
    nav, body = trace_sections(result, views, roots, figures)
    header = (f"<h1>Trace report</h1><p class=\"sub\">{esc(result.get('source', ''))} &middot; "
              f"{int(result['ranks'])} ranks &middot; {int(result['events'])} events</p>")
    return document(f"scalgraph report: {result.get('source', '')}", header, nav, body, figures)


def trace_sections(result: dict, views: dict, roots: list[pathlib.Path], figures: dict, prefix: str = "",
                   heading: str = "") -> tuple[list[tuple[str, str]], str]:
    """(navigation entries, HTML) of the trace's sections; ids carry `prefix`."""
    parts = [_summary(result, figures, prefix, heading), _causes(result, roots, prefix),
             _patterns(result, figures, prefix), _delay(result, figures, prefix),
             _critical(result, figures, prefix), _timeline(result, views, figures, prefix)]
    nav = [(f"{prefix}summary", heading or "Summary"), (f"{prefix}causes", "Trace causes" if prefix else "Root causes"),
           (f"{prefix}patterns", "Wait states"), (f"{prefix}delay", "Delay costs"),
           (f"{prefix}critical", "Critical path"), (f"{prefix}timeline", "Timeline")]
    if not prefix:
        parts.append(_notes(result))
        nav.append(("notes", "Notes"))
    return nav, "\n".join(parts)


def _summary(result: dict, figures: dict, prefix: str, heading: str) -> str:
    cl = result["delay"]["classification"]
    cp = result["critical_path"]
    kpis = [("ranks", str(int(result["ranks"]))), ("events", f"{int(result['events']):,}"),
            ("run length", _s(result["run_length"])), ("waiting in wait states", _s(cl["waiting_time"])),
            ("critical path", _s(cp["length"]))]
    cards = "".join(f'<div class="kpi"><div class="v">{esc(v)}</div><div class="l">{esc(k)}</div></div>'
                    for k, v in kpis)
    found = result["root_causes"]
    if found:
        c = found[0]
        verdict = (f'<p class="verdict">The costliest root cause is <span class="mono">{esc(_where(c))}</span> on rank '
                   f'{int(c["rank"])}: the waiting it caused is {esc(_s(c["seconds"]))}, {c["percent"]:.1f} % of the total '
                   "time summed over the ranks.</p>")
    else:
        verdict = (f'<p class="verdict none">No root cause: no computation delay reaches {100 * result["min_share"]:g} % '
                   "of the total time (the delay costs below are the account).</p>")
    clock = "".join(f"<li>clock: {esc(line)}</li>" for line in (result.get("clock") or "").splitlines())
    clock = f'<ul class="notes">{clock}</ul>' if clock else ""
    plot = plot_div(f"{prefix}ranks-plot", figures, fig.rank_split(result["patterns"], result["delay"]["root_causes"], int(result["ranks"])))
    return (f'<section id="{prefix}summary"><h2>{esc(heading or "Summary")}</h2>{verdict}<div class="kpis">{cards}</div>'
            f"{plot}{clock}</section>")


def _where(c: dict) -> str:
    w = (c.get("where") or "").split(" [")[0]
    return fig.short(w) if w else (c.get("callpaths") or [""])[0]


def _causes(result: dict, roots: list[pathlib.Path], prefix: str) -> str:
    found = result["root_causes"]
    if not found:
        return (f'<section id="{prefix}causes"><h2>Root causes</h2><p class="note">No computation delay is a root '
                "cause.</p></section>")
    cards = []
    for n, c in enumerate(found, 1):
        ex = excerpt(c.get("file", ""), int(c.get("line") or 0), int(c.get("line") or 0), roots)
        if ex.lines:
            code = "".join(f'<span class="ln{" hit" if hit else ""}"><span class="n">{k}</span>{esc(t, keep_tab=True)}'
                           "</span>" for k, t, hit in ex.lines)
            source = f'<div class="src-file">{esc(ex.path)}</div><pre class="source">{code}</pre>'
        else:
            source = f'<p class="note">{esc(ex.note)}</p>'
        ranks = ", ".join(f"rank {esc(r)}: {esc(_s(v))}" for r, v in sorted(c["ranks"].items(), key=lambda kv: -kv[1])[:6])
        real = (f"<dt>backed by extra thread-CPU work</dt><dd>{100 * c['real_work']:.0f} % of its delay cost</dd>"
                if result.get("cpu_checked") else "")
        paths = "<br>".join(f'<span class="mono">{esc(p)}</span>' for p in c["callpaths"][:4])
        share = max(0.0, min(1.0, c["percent"] / 100))
        cards.append(
            f'<details class="cause" id="{prefix}cause{n}"{" open" if n == 1 else ""}><summary>'
            f'<div class="rankno">#{n}</div><div><div class="where">{esc(_where(c))}</div>'
            f'<div class="why">computation on rank {int(c["rank"])} that made other ranks wait</div></div>'
            f'<div class="cost"><div class="v">{esc(_s(c["seconds"]))}</div><div class="muted">{c["percent"]:.1f} % of '
            f'the total time</div><div class="bar"><span style="width:{100 * share:.1f}%"></span></div></div></summary>'
            f'<div class="cause-body">{_whatif(c)}<div class="grid2"><div><h3>Source</h3>{source}</div><div><h3>Facts</h3>'
            f'<dl class="facts"><dt>call paths</dt><dd>{paths}</dd><dt>delay cost</dt><dd>{esc(_s(c["delay_seconds"]))}'
            f"</dd><dt>on ranks</dt><dd>{ranks}</dd>{real}</dl></div></div></div></details>")
    return f'<section id="{prefix}causes"><h2>Root causes</h2>{"".join(cards)}</section>'


def _whatif(c: dict) -> str:
    """The gain of fixing the cause by re-timing the trace (scalgraph/trace/retime.py), when given."""
    w = c.get("whatif")
    if not isinstance(w, dict) or not all(isinstance(w.get(k), (int, float)) for k in ("gain", "run_length")):
        return ""
    share = f" ({100 * w['gain_share']:.0f} % of the run)" if isinstance(w.get("gain_share"), (int, float)) else ""
    return (f'<div class="whatif"><b>Predicted gain.</b> fixing it saves <b>{esc(_s(w["gain"]))}</b> of '
            f'{esc(_s(w["run_length"]))}{share}. <span class="muted">(trace re-timing)</span></div>')


def _patterns(result: dict, figures: dict, prefix: str) -> str:
    pats = result["patterns"]
    depth: dict = {None: -1}
    rows = []
    top = max((p["seconds"] for p in pats if p["unit"] == "sec"), default=0.0)
    for p in pats:
        depth[p["key"]] = depth.get(p["parent"], -1) + 1
        if p["seconds"] <= 0 and p["key"] != "time":
            continue
        d = depth[p["key"]]
        value = esc(_s(p["seconds"])) if p["unit"] == "sec" else f"{p['seconds']:.0f} {esc(p['unit'])}"
        width = 100.0 * p["seconds"] / top if p["unit"] == "sec" and top > 0 else 0.0
        paths = ""
        if p["key"] not in _STRUCTURAL and p["callpaths"]:
            paths = "<br>".join(
                f'<span class="mono">{esc(c["callpath"])}</span> <span class="muted">{esc(_where(c))}</span> '
                f'{esc(_s(c["seconds"]) if p["unit"] == "sec" else str(int(c["seconds"])))}'
                + (f' <span class="muted">(max on rank {int(c["ranks"]["max_rank"])})</span>' if "ranks" in c else "")
                for c in p["callpaths"][:3])
        rows.append(f'<tr><td class="name" style="padding-left:{10 + 18 * d}px" title="{esc(p["description"])}">'
                    f'{esc(p["name"])}</td><td class="num" data-v="{p["seconds"]:.9g}">{value}</td>'
                    f'<td class="num" data-v="{p["percent"]:.9g}">{p["percent"]:.2f} %</td>'
                    f'<td><span class="sev" style="width:{width:.1f}%"></span></td><td>{paths}</td></tr>')
    table = ('<table class="ptree"><thead><tr><th>pattern</th><th class=num>inclusive</th><th class=num>'
             f'of total</th><th style="width:18%">severity</th><th>worst call paths</th></tr></thead><tbody>{"".join(rows)}'
             "</tbody></table>")
    plot = plot_div(f"{prefix}patterns-plot", figures, fig.pattern_bars(pats))
    return (f'<section id="{prefix}patterns"><h2>Wait states</h2><p class="muted">Scalasca\'s pattern tree: '
            f"seconds in each wait state (inclusive of its sub-patterns) and % of the total time.</p>"
            f'{plot}{table}</section>')


def _delay(result: dict, figures: dict, prefix: str) -> str:
    d = result["delay"]
    causes = d["root_causes"]
    cl = d["classification"]
    if not causes:
        return f'<section id="{prefix}delay"><h2>Delay costs</h2><p class="note">No wait state with a causer.</p></section>'
    rows = "".join(
        f'<tr><td class="mono">{esc(c["callpath"])}</td><td class="mono">{esc(_where(c))}</td><td>{esc(c["kind"])}</td>'
        f'<td class="num" data-v="{c["seconds"]:.9g}">{esc(_s(c["seconds"]))}</td>'
        f'<td class="num" data-v="{c["percent_of_waiting"]:.9g}">{c["percent_of_waiting"]:.1f} %</td>'
        f'<td class="num" data-v="{c["short_term"]:.9g}">{esc(_s(c["short_term"]))}</td>'
        f'<td class="num" data-v="{c["long_term"]:.9g}">{esc(_s(c["long_term"]))}</td>'
        f'<td class="num" data-v="{int(c["ranks"]["max_rank"])}">{int(c["ranks"]["max_rank"])}</td>'
        f'<td>{esc(_explained(c))}</td></tr>'
        for c in causes[:25])
    head = ("<tr><th>call path</th><th>where</th><th>kind</th><th class=num>delay cost</th><th class=num>of waiting</th>"
            "<th class=num>short-term</th><th class=num>long-term</th><th class=num>mostly rank</th><th>explains</th></tr>")
    plot = plot_div(f"{prefix}delay-plot", figures, fig.delay_bars(causes))
    return (f'<section id="{prefix}delay"><h2>Delay costs</h2><p class="muted">What caused the {esc(_s(cl["waiting_time"]))} '
            f"of waiting (Scalasca's accounting): short-term costs are the waits a delay caused directly, long-term "
            f"the waits they propagated into. Direct {esc(_s(cl['direct']))}, indirect {esc(_s(cl['indirect']))}; "
            f"propagating {esc(_s(cl['propagating']))}, terminal {esc(_s(cl['terminal']))}.</p>{plot}"
            f'<table class="sortable"><thead>{head}</thead><tbody>{rows}</tbody></table></section>')


def _explained(c: dict) -> str:
    """The wait-state patterns a delay's cost is made of, in % of it."""
    if c["seconds"] <= 0:
        return ""
    parts = sorted(c["by_pattern"].items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {100 * v / c['seconds']:.0f} %" for k, v in parts)


def _critical(result: dict, figures: dict, prefix: str) -> str:
    cp = result["critical_path"]
    entries = cp["callpaths"]
    if not entries:
        return f'<section id="{prefix}critical"><h2>Critical path</h2><p class="note">Empty.</p></section>'
    rows = "".join(
        f'<tr><td class="mono">{esc(e["callpath"])}</td><td class="mono">{esc(_where(e))}</td>'
        f'<td class="num" data-v="{e["seconds"]:.9g}">{esc(_s(e["seconds"]))}</td>'
        f'<td class="num" data-v="{e["percent_of_path"]:.9g}">{e["percent_of_path"]:.1f} %</td>'
        f'<td class="num" data-v="{e["mean_time"]:.9g}">{esc(_s(e["mean_time"]))}</td>'
        f'<td class="num" data-v="{e["imbalance"]:.9g}">{esc(_s(e["imbalance"]))}</td></tr>' for e in entries)
    head = ("<tr><th>call path</th><th>where</th><th class=num>on the path</th><th class=num>of the path</th>"
            "<th class=num>mean per rank</th><th class=num>imbalance</th></tr>")
    plot = plot_div(f"{prefix}critical-plot", figures, fig.critical_path_bars(entries))
    return (f'<section id="{prefix}critical"><h2>Critical path</h2><p class="muted">{esc(_s(cp["length"]))} over '
            f'{int(cp["segments"])} segments; imbalance is the path time minus the mean time per rank.</p>{plot}'
            f'<table class="sortable"><thead>{head}</thead><tbody>{rows}</tbody></table></section>')


def _timeline(result: dict, views: dict, figures: dict, prefix: str) -> str:
    inst = result.get("instances") or []
    if not inst:
        return f'<section id="{prefix}timeline"><h2>Timeline</h2><p class="note">No wait states.</p></section>'
    t0 = float(views.get("t0", min(i["enter_time"] for i in inst)))
    plot = plot_div(f"{prefix}timeline-plot", figures, fig.wait_timeline(inst, int(result["ranks"]), t0))
    rows = "".join(
        f'<tr><td>{esc(i["pattern"])}</td><td class="num" data-v="{i["seconds"]:.9g}">{esc(_s(i["seconds"]))}</td>'
        f'<td class="num" data-v="{int(i["rank"])}">{int(i["rank"])}</td>'
        f'<td class="num" data-v="{i["enter_time"] - t0:.9g}">{i["enter_time"] - t0:.4f} s</td>'
        f'<td class="mono">{esc(i["callpath"])}</td><td class="mono">{esc(_where(i))}</td>'
        f'<td class="num" data-v="{int(i["causer"])}">{int(i["causer"]) if i["causer"] >= 0 else "-"}</td></tr>'
        for i in sorted(inst, key=lambda i: -i["seconds"]))
    head = ("<tr><th>pattern</th><th class=num>waiting</th><th class=num>rank</th><th class=num>at</th>"
            "<th>call path</th><th>where</th><th class=num>caused by rank</th></tr>")
    return (f'<section id="{prefix}timeline"><h2>Timeline of the largest wait states</h2>{plot}'
            f'<details><summary>the wait states as a table</summary><table class="sortable"><thead>{head}</thead>'
            f"<tbody>{rows}</tbody></table></details></section>")


def _notes(result: dict) -> str:
    items = list(result.get("notes") or [])
    lis = "".join(f"<li>{esc(x)}</li>" for x in items)
    return f'<section id="notes"><h2>Notes</h2><ul class="notes">{lis}</ul></section>'
