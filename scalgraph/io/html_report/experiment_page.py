"""The page for an experiment: the headline, the ranked root causes, the non-scalable and abnormal
vertices, the whole PSG, and (when the experiment was traced) the trace's sections.

Input: the dict of scalgraph.analysis.detect.analyse (as `scalgraph detect --json` prints it), the
PSG, and `views`, the per-rank and per-repetition arrays the report command read for the plots:
  {"experiment": path, "meta": experiment.json's description fields,
   "rep_times": {p: [run time of each repetition]},
   "causes": [{"per_rank": {p: [time on each rank]}, "reps": {p: [mean over ranks, each repetition]},
               }]   (one per root cause),
   "vertex_time": {p: [mean exclusive time per rank of each vertex]}}"""
from __future__ import annotations

import pathlib

from scalgraph.io.html_report import figures as fig
from scalgraph.io.html_report.model_text import model_curve
from scalgraph.io.html_report.page import document, esc, plot_div
from scalgraph.io.html_report.psg_tree import tree_html
from scalgraph.io.html_report.source import excerpt
from scalgraph.io.html_report.trace_page import trace_sections
from scalgraph.io.report import _explains, _fmt_s
from scalgraph.model.psg import PSG


def experiment_page(result: dict, psg: PSG, views: dict, roots: list[pathlib.Path], trace: dict | None = None,
                    trace_views: dict | None = None) -> str:
    figures: dict = {}
    name = views.get("experiment", "")
    parts = [_summary(result, views, figures), _causes(result, views, roots, figures),
             _non_scalable(result), _abnormal(result), _tree(result, psg, views), _notes(result, views)]
    nav = [("summary", "Summary"), ("causes", "Root causes"), ("non-scalable", "Non-scalable"),
           ("abnormal", "Abnormal"), ("program", "Program tree"), ("notes", "Notes")]
    if trace is not None:
        tnav, tbody = trace_sections(trace, trace_views or {}, roots, figures, prefix="trace-",
                                     heading=f"Trace at p={trace.get('ranks')}")
        parts.insert(5, tbody)
        nav[5:5] = tnav
    scales = result["scales"]
    created = str(views.get("meta", {}).get("created") or "")
    when = f" &middot; run {esc(created[:16].replace('T', ' '))} UTC" if created else ""
    header = (f"<h1>Scaling report</h1><p class=\"sub\">{esc(name)} &middot; scales "
              f"{esc(', '.join(map(str, scales)))}{when}</p>")
    return document(f"scalgraph report: {name}", header, nav, "\n".join(parts), figures)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _summary(result: dict, views: dict, figures: dict) -> str:
    scales = result["scales"]
    big = scales[-1]
    weak = result["thresholds"]["ideal"] == "weak"
    times = [result["run_time"][str(p)] for p in scales]
    eff = fig.efficiency(scales, times, weak)[-1]
    causes = result["root_causes"]
    kpis = [("scales", ", ".join(map(str, scales)), ""), (f"run time at p={big}", _fmt_s(times[-1]), ""),
            (f"parallel efficiency at p={big}", f"{eff:.0f} %" if eff is not None else "n/a",
             "bad" if eff is not None and eff < 70 else "good" if eff is not None else ""),
            ("root causes", str(len(causes)), "bad" if causes else "good"),
            ("ideal", f"{'weak' if weak else 'strong'} scaling", "")]
    cards = "".join(f'<div class="kpi {cls}"><div class="v">{esc(v)}</div><div class="l">{esc(label)}</div></div>'
                    for label, v, cls in kpis)
    if causes:
        c = causes[0]
        verdict = (f'<p class="verdict">The costliest root cause is <span class="mono">{esc(fig.short(c["location"]))}'
                   f'</span> in <span class="mono">{esc(c["function"])}</span> on rank {int(c["rank"])}: it costs '
                   f'{esc(_fmt_s(c.get("cost_wall", c["cost"])))}, {esc(_pct(c["cost_share"]))} of the run time at p={big}.</p>')
    else:
        t = result["thresholds"]
        verdict = (f'<p class="verdict none">No scaling problem found: no code costs {t["min_share"] * 100:g} % of '
                   f'the run time or more at p={big}.</p>')
    plot = plot_div("headline", figures, fig.headline(result, views.get("rep_times", {}))) if len(scales) else ""
    return f'<section id="summary"><h2>Summary</h2>{verdict}<div class="kpis">{cards}</div>{plot}</section>'


def _causes(result: dict, views: dict, roots: list[pathlib.Path], figures: dict) -> str:
    causes = result["root_causes"]
    if not causes:
        return ('<section id="causes"><h2>Root causes</h2><p class="note">None above the reporting floor '
                f'({esc(_fmt_s(result["thresholds"]["min_seconds"]))}).</p></section>')
    extra = views.get("causes") or [{} for _ in causes]
    cards = [_cause(n, c, extra[n - 1] if n - 1 < len(extra) else {}, result, roots, figures)
             for n, c in enumerate(causes, 1)]
    tools = ('<div class="tools"><button data-open="1" data-scope="causes">expand all</button>'
             '<button data-open="0" data-scope="causes">collapse all</button>'
             '<span class="muted">ranked by cost: the seconds of waiting (or run time) each explains</span></div>')
    return f'<section id="causes"><h2>Root causes</h2>{tools}{"".join(cards)}</section>'


def _whatif(c: dict, scales: list[int]) -> str:
    """The predicted gain of fixing the cause (scalgraph/analysis/whatif.py), when the analysis gives it."""
    w = c.get("whatif")
    if not isinstance(w, dict) or not isinstance(w.get("gain"), dict):
        return ""
    gain, fixed, share = w["gain"], w.get("fixed_run_time") or {}, w.get("gain_share") or {}
    big = str(scales[-1])
    if big not in gain:
        return ""
    parts = [f"fixing it saves <b>{esc(_fmt_s(gain[big]))}</b>"
             + (f" of {esc(_fmt_s(gain[big] + fixed[big]))}" if big in fixed else "") + f" at p={esc(big)}"
             + (f" ({100 * share[big]:.0f} %)" if big in share else "")]
    pred = w.get("predicted") or {}
    if pred:
        parts.append("extrapolated " + ", ".join(f"~{esc(_fmt_s(g))} at p={esc(q)}" for q, g in pred.items()))
    smaller = [str(p) for p in scales[:-1] if str(p) in gain]
    if smaller:
        parts.append("measured scales: " + ", ".join(f"p={esc(p)}: {esc(_fmt_s(gain[p]))}" for p in smaller))
    how = f' <span class="muted">({esc(w.get("method", ""))} what-if)</span>' if w.get("method") else ""
    return f'<div class="whatif"><b>Predicted gain.</b> {"; ".join(parts)}.{how}</div>'


def _cause(n: int, c: dict, extra: dict, result: dict, roots: list[pathlib.Path], figures: dict) -> str:
    scales = result["scales"]
    big = scales[-1]
    weak = result["thresholds"]["ideal"] == "weak"
    ex = excerpt(c["file"], c["line"], c["line_last"], roots)
    if ex.lines:
        code = "".join(f'<span class="ln{" hit" if hit else ""}"><span class="n">{k}</span>{esc(t, keep_tab=True)}</span>'
                       for k, t, hit in ex.lines)
        source = f'<div class="src-file">{esc(ex.path)}</div><pre class="source">{code}</pre>'
    else:
        source = f'<p class="note">{esc(ex.note)}</p>'
    whatif = _whatif(c, scales)
    f = c["found_from"]
    facts = [("function", esc(c["function"])), ("construct", f'{esc(c["kind"])} {esc(c["name"])}'),
             ("rank", str(int(c["rank"]))),
             ("mean time share", _pct(c["time_share"])),
             ("time per rank, mean / slowest", ", ".join(
                 f"p={p}: {esc(_fmt_s(c['mean_time'][str(p)]))} / {esc(_fmt_s(c['max_time'][str(p)]))}" for p in scales)),
             ("scaling model", f'<span class="mono">{esc(c.get("model") or c.get("note", "not fitted"))}</span>'
              + (f' (log-log slope {c["log_log_slope"]:+.2f})' if c.get("model") else "")),
             (f"scaling loss at p={big}", esc(_fmt_s(c["scaling_loss"]))),
             *([("model notes", esc("; ".join(map(str, c["model_notes"]))))] if c.get("model_notes") else []),
             ("found from", f'the {esc(f["reason"])} vertex {esc(f["name"])}@{int(f["rank"])} '
                            f'<span class="mono">{esc(fig.short(f["location"]))}</span>')]
    if c.get("abnormal_at_scales"):
        facts.append(("abnormal at scales", esc(", ".join(map(str, c["abnormal_at_scales"])))))
    ctx = c.get("contexts") or []
    if len(ctx) > 1:
        facts.append(("contexts", "<br>".join(f'<span class="mono">{esc(x["call_path"])}</span> {esc(_fmt_s(x["seconds"]))}'
                                             for x in ctx[:6])))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    key = f"cause{n}"
    plots = plot_div(f"{key}-scaling", figures, fig.cause_scaling(c, scales, weak, extra.get("reps") or {},
                                                                 model_curve(c, scales)))
    if extra.get("per_rank"):
        plots += plot_div(f"{key}-ranks", figures, fig.rank_heatmap(c, scales, extra["per_rank"]))
    path = plot_div(f"{key}-path", figures, fig.path_graph(c)) if c.get("path") else ""
    share = max(0.0, min(1.0, c["cost_share"]))
    summary = (f'<summary><div class="rankno">#{n}</div><div><div class="where">{esc(fig.short(c["location"]))}'
               f' <span class="badge k-{esc(c["kind"])}">{esc(c["kind"])}</span></div>'
               f'<div class="why">{esc(_explains(c))}</div></div>'
               f'<div class="cost"><div class="v">{esc(_fmt_s(c["cost"]))}</div>'
               f'<div class="muted">{_pct(c["cost_share"])} of the run time at p={big}</div>'
               f'<div class="bar"><span style="width:{100 * share:.1f}%"></span></div></div></summary>')
    body = (f'<div class="cause-body">{whatif}<div class="grid2"><div><h3>Source</h3>{source}<h3>Facts</h3>'
            f'<dl class="facts">{dl}</dl></div><div><h3>Backtracking path</h3>{path}</div></div>'
            f'<h3>Time and scaling</h3><div class="grid2">{plots}</div></div>')
    return f'<details class="cause" id="{key}"{" open" if n == 1 else ""}>{summary}{body}</details>'


def _non_scalable(result: dict) -> str:
    rows = result["non_scalable"]
    big = result["scales"][-1]
    if not rows:
        return ('<section id="non-scalable"><h2>Non-scalable vertices</h2><p class="note">None: no code loses '
                f'{result["thresholds"]["min_share"] * 100:g} % of the run time at p={big} to scaling.</p></section>')
    body = "".join(
        f'<tr><td class="mono">{esc(fig.short(n["location"]))}</td><td>{esc(n["function"])}</td>'
        f'<td><span class="badge k-{esc(n["kind"])}">{esc(n["kind"])}</span>{esc(n["name"])}</td>'
        f'<td class="num" data-v="{n["scaling_loss"]:.9g}">{esc(_fmt_s(n["scaling_loss"]))}</td>'
        f'<td class="num" data-v="{n["loss_share"]:.9g}">{_pct(n["loss_share"])}</td>'
        f'<td class="num" data-v="{n["mean_time"]:.9g}">{esc(_fmt_s(n["mean_time"]))}</td>'
        f'<td class="num" data-v="{n["max_time"]:.9g}">{esc(_fmt_s(n["max_time"]))}</td>'
        f'<td class="num" data-v="{n["imbalance"]:.9g}">{_pct(n["imbalance"])}</td>'
        f'<td class="num" data-v="{int(n.get("instances", 1))}">{int(n.get("instances", 1))}</td>'
        f'<td class="mono">{esc(n["model"])}</td></tr>' for n in rows)
    head = ("<tr><th>location</th><th>function</th><th>construct</th><th class=num>scaling loss</th>"
            "<th class=num>of run time</th><th class=num>mean</th><th class=num>slowest rank</th>"
            "<th class=num>imbalance</th><th class=num>contexts</th><th>model T(p)</th></tr>")
    return (f'<section id="non-scalable"><h2>Non-scalable vertices</h2><p class="muted">Scaling loss at p={big}: '
            "time beyond the ideal share (often waiting that the root causes explain). Click a column to sort.</p>"
            f'<table class="sortable" id="ns-table"><thead>{head}</thead><tbody>{body}</tbody></table></section>')


def _abnormal(result: dict) -> str:
    rows = result.get("abnormal") or []
    big = result["scales"][-1]
    if not rows:
        return (f'<section id="abnormal"><h2>Abnormal vertices</h2><p class="note">No rank exceeds '
                f'{result["thresholds"]["abnorm_thd"]} &times; the median rank at p={big}.</p>'
                f'{_thread_abnormal(result)}</section>')
    body = "".join(
        f'<tr><td class="mono">{esc(fig.short(a["location"]))}</td><td>{esc(a["function"])}</td>'
        f'<td><span class="badge k-{esc(a["kind"])}">{esc(a["kind"])}</span>{esc(a["name"])}</td>'
        f'<td>{"own time" if a["metric"] == "time" else "waiting"}</td>'
        f'<td class="num" data-v="{a["median"]:.9g}">{esc(_fmt_s(a["median"]))}</td>'
        f'<td>{esc(", ".join(_rank_text(r) for r in a["ranks"][:8]))}'
        f'{_more(a["nranks"] - 8)}</td>'
        f'<td class="num" data-v="{max((r["excess"] for r in a["ranks"]), default=0):.9g}">'
        f'{esc(_fmt_s(max((r["excess"] for r in a["ranks"]), default=0)))}</td></tr>' for a in rows)
    head = ("<tr><th>location</th><th>function</th><th>construct</th><th>metric</th><th class=num>median rank</th>"
            "<th>abnormal ranks</th><th class=num>largest excess</th></tr>")
    return (f'<section id="abnormal"><h2>Abnormal vertices</h2><p class="muted">Ranks above '
            f'{result["thresholds"]["abnorm_thd"]} &times; the median rank at p={big}.</p>'
            f'<table class="sortable" id="abn-table"><thead>{head}</thead><tbody>{body}</tbody></table>'
            f'{_thread_abnormal(result)}</section>')


def _thread_abnormal(result: dict) -> str:
    """OpenMP threads above AbnormThd x their team's median (detect's `thread_abnormal`), if any."""
    rows = result.get("thread_abnormal") or []
    if not rows:
        return ""
    body = "".join(
        f'<tr><td class="mono">{esc(fig.short(a["location"]))}</td><td>{esc(a["function"])}</td>'
        f'<td><span class="badge k-{esc(a["kind"])}">{esc(a["kind"])}</span>{esc(a["name"])}</td>'
        f'<td class="num">{int(a["rank"])}</td><td>{int(a["thread"])} ({esc(a["role"])})</td>'
        f'<td>{esc(" / ".join(_fmt_s(x) for x in a["cpu"]))}</td>'
        f'<td class="num" data-v="{a["excess"]:.9g}">{esc(_fmt_s(a["excess"]))}</td></tr>' for a in rows)
    head = ("<tr><th>location</th><th>function</th><th>construct</th><th class=num>rank</th><th>thread</th>"
            "<th>CPU per thread</th><th class=num>excess over the team median</th></tr>")
    return (f'<h3>OpenMP thread imbalance</h3><p class="muted">Threads above {result["thresholds"]["abnorm_thd"]} '
            f'&times; their team\'s median CPU at p={result["scales"][-1]}.</p>'
            f'<table class="sortable" id="thread-abn-table"><thead>{head}</thead><tbody>{body}</tbody></table>')


def _more(n: int) -> str:
    return f" and {n} more" if n > 0 else ""


def _rank_text(r: dict) -> str:
    ratio = "only this rank" if r["ratio"] is None else f"x{r['ratio']:.2f}"
    return f"rank {int(r['rank'])} ({ratio}, +{_fmt_s(r['excess'])})"


def _tree(result: dict, psg: PSG, views: dict) -> str:
    marks: dict[int, list[str]] = {}
    for n, c in enumerate(result["root_causes"], 1):
        marks.setdefault(int(c["vertex"]), []).append(f"root cause #{n}")
    for n in result["non_scalable"]:
        marks.setdefault(int(n["vertex"]), []).append("non-scalable")
    tree = tree_html(psg, views.get("vertex_time") or {}, result["scales"], marks)
    tools = ('<div class="tools"><input id="tree-search" type="search" placeholder="search: name, file:line, function"'
             ' aria-label="search the program tree"><button data-open="1" data-scope="psg-tree">expand all</button>'
             '<button data-open="0" data-scope="psg-tree">collapse all</button><span id="tree-count" class="muted">'
             '</span></div>')
    return (f'<section id="program"><h2>Program tree</h2><p class="muted">The Program Structure Graph: every loop, '
            f'branch, call and MPI call of the program, with its time per scale.</p>{tools}{tree}</section>')


def _notes(result: dict, views: dict) -> str:
    t = result["thresholds"]
    meta = views.get("meta") or {}
    items = [f"thresholds: AbnormThd {t['abnorm_thd']}, causes below {t['min_share'] * 100:g} % of the run time "
             f"({_fmt_s(t['min_seconds'])}) not reported, {t['ideal']}-scaling ideal"
             + (f", ranks merged by the slowest of {t['clusters']} clusters" if t.get("clusters", 0) > 1 else "")]
    items += list(result.get("notes") or [])
    if meta.get("command"):
        items.append("program: " + " ".join(map(str, meta["command"])))
    if meta.get("mpi_library"):
        items.append(f"MPI: {meta['mpi_library']}")
    lis = "".join(f"<li>{esc(x)}</li>" for x in items)
    return f'<section id="notes"><h2>Notes</h2><ul class="notes">{lis}</ul></section>'
