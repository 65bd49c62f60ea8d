"""plotly figure specs ({"data": [...], "layout": {...}}, plain JSON) built from the result dicts.

Every text taken from inputs goes through plot_text: plotly reads a few HTML tags in labels."""
from __future__ import annotations

import pathlib

from scalgraph.io.html_report.page import plot_text

FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif'
MEASURED, MEAN, SLOW, MODEL, IDEAL, PRED, BAD, FIX = ("#9ca3af", "#2563eb", "#b91c1c", "#ea580c", "#16a34a",
                                                      "#7c3aed", "#dc2626", "#0d9488")
EDGE_COLOURS = {"start": "#6b7280", "data": "#2563eb", "control": "#d97706", "comm": "#dc2626",
                "collective": "#7c3aed", "more": "#9ca3af"}
PATTERN_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                   "#9c755f", "#bab0ac"]          # Tableau 10: categories told apart at a glance


def _axis(title: str, **kw) -> dict:
    return {"title": {"text": title, "font": {"size": 12}}, "gridcolor": "#eef0f3", "zerolinecolor": "#d1d5db",
            "linecolor": "#9ca3af", "showline": True, "ticks": "outside", "tickcolor": "#d1d5db", **kw}


def _layout(height: int = 320, **kw) -> dict:
    return {"height": height, "margin": {"l": 64, "r": 18, "t": 30, "b": 52},
            "font": {"family": FONT, "size": 12, "color": "#1f2937"}, "paper_bgcolor": "#fff",
            "plot_bgcolor": "#fff", "hovermode": "closest",
            "hoverlabel": {"font": {"family": FONT}},
            "legend": {"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top", "font": {"size": 11}}, **kw}


def _p_axis(ps: list[int], title: str = "processes p", **kw) -> dict:
    ticks = sorted(set(int(p) for p in ps))
    return _axis(title, type="log", tickvals=ticks, ticktext=[str(p) for p in ticks], **kw)


def short(location: str) -> str:
    """'/long/path/cg.c:21-22' -> 'cg.c:21-22'"""
    return pathlib.PurePath(location).name if "/" in location else location


def ideal_line(scales: list[int], t0: float, weak: bool) -> list[float]:
    """The ideal of scalgraph.analysis.scaling: T(p0) p0 / p for strong scaling, T(p0) for weak."""
    return [t0 if weak else t0 * scales[0] / p for p in scales]


def efficiency(scales: list[int], times: list[float], weak: bool) -> list[float | None]:
    """Parallel efficiency in %: the ideal time over the measured one."""
    ideal = ideal_line(scales, times[0], weak)
    return [100.0 * i / t if t > 0 else None for i, t in zip(ideal, times)]


def headline(result: dict, rep_times: dict[str, list[float]]) -> dict:
    """Run time per scale against the ideal (every repetition shown), the run time predicted with each
    root cause fixed (when the analysis gives it), and the parallel efficiency."""
    scales = result["scales"]
    weak = result["thresholds"]["ideal"] == "weak"
    times = [result["run_time"][str(p)] for p in scales]
    xs = [p for p in scales for _ in rep_times.get(str(p), [])]
    ys = [t for p in scales for t in rep_times.get(str(p), [])]
    data = [
        {"type": "scatter", "mode": "markers", "x": xs, "y": ys, "name": "each repetition",
         "marker": {"color": MEASURED, "size": 7, "symbol": "circle-open"},
         "hovertemplate": "p=%{x}: %{y:.4g} s<extra>repetition</extra>"},
        {"type": "scatter", "mode": "lines+markers", "x": scales, "y": times, "name": "run time (median)",
         "line": {"color": MEAN, "width": 2.5}, "marker": {"size": 8},
         "hovertemplate": "p=%{x}: %{y:.4g} s<extra>run time</extra>"},
        {"type": "scatter", "mode": "lines", "x": scales, "y": ideal_line(scales, times[0], weak),
         "name": f"ideal ({'weak' if weak else 'strong'} scaling)", "line": {"color": IDEAL, "dash": "dash"},
         "hovertemplate": "p=%{x}: %{y:.4g} s<extra>ideal</extra>"},
        {"type": "scatter", "mode": "lines+markers", "x": scales, "y": efficiency(scales, times, weak),
         "name": "parallel efficiency", "xaxis": "x2", "yaxis": "y2", "line": {"color": MODEL, "width": 2.5},
         "marker": {"size": 8}, "hovertemplate": "p=%{x}: %{y:.1f} %<extra>efficiency</extra>"},
        {"type": "scatter", "mode": "lines", "x": scales, "y": [100.0] * len(scales), "name": "ideal efficiency",
         "xaxis": "x2", "yaxis": "y2", "line": {"color": IDEAL, "dash": "dot"}, "hoverinfo": "skip",
         "showlegend": False},
    ]
    for n, c in enumerate(result.get("root_causes") or [], 1):
        fixed = (c.get("whatif") or {}).get("fixed_run_time") if isinstance(c.get("whatif"), dict) else None
        if isinstance(fixed, dict) and all(str(p) in fixed for p in scales):
            data.insert(3 + n - 1, {
                "type": "scatter", "mode": "lines+markers", "x": scales, "y": [fixed[str(p)] for p in scales],
                "name": f"predicted with #{n} fixed", "line": {"color": FIX, "dash": "dashdot", "width": 1.5},
                "marker": {"size": 6, "symbol": "triangle-down"}, "visible": True if n == 1 else "legendonly",
                "hovertemplate": f"p=%{{x}}: %{{y:.4g}} s<extra>#{n} fixed</extra>"})
    return {"data": data, "layout": _layout(
        350, xaxis=_p_axis(scales, domain=[0, 0.45]), yaxis=_axis("run time (s)", rangemode="tozero"),
        xaxis2=_p_axis(scales, domain=[0.57, 1], anchor="y2"),
        yaxis2=_axis("parallel efficiency (%)", anchor="x2", rangemode="tozero"),
        annotations=[_title("run time per scale", 0.0), _title("parallel efficiency", 0.57)])}


def _title(text: str, x: float) -> dict:
    return {"text": f"<b>{text}</b>", "x": x, "xref": "paper", "y": 1.0, "yref": "paper", "yanchor": "bottom",
            "xanchor": "left", "showarrow": False, "font": {"size": 12, "color": "#374151"}}


def cause_scaling(cause: dict, scales: list[int], weak: bool, reps: dict[str, list[float]],
                  curve: dict | None) -> dict:
    """The cause's time per rank against p: every repetition, the mean and the slowest rank, the fitted
    model with its leave-one-out error as a band, the ideal line and the model's predictions."""
    mean = [cause["mean_time"][str(p)] for p in scales]
    slow = [cause["max_time"][str(p)] for p in scales]
    pred = cause.get("predicted") or {}
    pred_p = [int(p) for p in pred]
    all_p = scales + pred_p
    data = []
    if curve and curve.get("p"):
        data.append({"type": "scatter", "mode": "lines", "x": curve["p"], "y": curve["t"],
                     "name": f"model T(p) = {plot_text(cause.get('model') or '')}",
                     "line": {"color": MODEL, "width": 2},
                     "hovertemplate": "p=%{x:.0f}: %{y:.4g} s<extra>model</extra>"})
    xs = [int(p) for p in scales for _ in reps.get(str(p), [])]
    ys = [t for p in scales for t in reps.get(str(p), [])]
    data += [
        {"type": "scatter", "mode": "markers", "x": xs, "y": ys, "name": "each repetition (mean over ranks)",
         "marker": {"color": MEASURED, "size": 7, "symbol": "circle-open"},
         "hovertemplate": "p=%{x}: %{y:.4g} s<extra>repetition</extra>"},
        {"type": "scatter", "mode": "lines+markers", "x": scales, "y": mean, "name": "mean over ranks",
         "line": {"color": MEAN, "width": 2.5}, "marker": {"size": 8},
         "hovertemplate": "p=%{x}: %{y:.4g} s<extra>mean</extra>"},
        {"type": "scatter", "mode": "lines+markers", "x": scales, "y": slow, "name": "slowest rank",
         "line": {"color": SLOW, "dash": "dot"}, "marker": {"size": 7, "symbol": "diamond"},
         "hovertemplate": "p=%{x}: %{y:.4g} s<extra>slowest rank</extra>"},
        {"type": "scatter", "mode": "lines", "x": all_p, "y": ideal_line(all_p, mean[0], weak) if mean else [],
         "name": "ideal", "line": {"color": IDEAL, "dash": "dash"},
         "hovertemplate": "p=%{x}: %{y:.4g} s<extra>ideal</extra>"},
    ]
    if pred_p:
        data.append({"type": "scatter", "mode": "markers", "x": pred_p, "y": [pred[str(p)] for p in pred_p],
                     "name": "predicted by the model", "marker": {"color": PRED, "size": 10, "symbol": "star-open",
                                                                  "line": {"width": 2}},
                     "hovertemplate": "p=%{x}: %{y:.4g} s<extra>predicted</extra>"})
    band = cause.get("interval")
    if isinstance(band, dict) and all(isinstance(band.get(k), (int, float)) for k in ("at", "low", "high")):
        mid = pred.get(str(int(band["at"])), (band["low"] + band["high"]) / 2)
        data.append({"type": "scatter", "mode": "markers", "x": [band["at"]], "y": [mid],
                     "name": "the prediction's interval", "marker": {"color": PRED, "size": 1},
                     "error_y": {"type": "data", "symmetric": False, "array": [max(band["high"] - mid, 0.0)],
                                 "arrayminus": [max(mid - band["low"], 0.0)], "color": PRED, "thickness": 2,
                                 "width": 8},
                     "hovertemplate": f"p=%{{x}}: {band['low']:.4g} .. {band['high']:.4g} s<extra>interval</extra>"})
    shown = mean + slow + ys + [pred[str(p)] for p in pred_p] + (curve["t"] if curve and curve.get("t") else [])
    if isinstance(band, dict) and isinstance(band.get("high"), (int, float)):
        shown.append(band["high"])
    top = max([v for v in shown if v is not None] + [0.0])
    return {"data": data, "layout": _layout(
        430, xaxis=_p_axis(all_p), yaxis=_axis("seconds per rank", range=[0, top * 1.12 if top > 0 else 1]),
        legend={"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top", "font": {"size": 11}},
        annotations=[_title("scaling of this code", 0.0)])}


def rank_heatmap(cause: dict, scales: list[int], per_rank: dict[str, list[float]]) -> dict:
    """The cause's time on every rank at every scale; its abnormal ranks (at the largest scale, where
    detection ran) and the rank it was named on are marked."""
    width = max((len(per_rank.get(str(p), [])) for p in scales), default=0)
    z = [[(v[r] if r < len(v) else None) for r in range(width)] for v in (per_rank.get(str(p), []) for p in scales)]
    rows = [f"p={p}" for p in scales]
    data = [{"type": "heatmap", "z": z, "x": list(range(width)), "y": rows, "colorscale": "YlOrRd",
             "reversescale": True, "zmin": 0, "xgap": 2, "ygap": 2, "colorbar": {"title": {"text": "s", "side": "top"}, "thickness": 12},
             "hovertemplate": "rank %{x} at %{y}: %{z:.4g} s<extra></extra>"}]
    if width <= 16:
        data[0]["texttemplate"] = "%{z:.3g}"
        data[0]["textfont"] = {"size": 10}
    big = len(rows) - 1
    abnormal = sorted({int(r["rank"]) for a in cause.get("abnormal") or [] for r in a["ranks"]})
    shapes = [{"type": "rect", "xref": "x", "yref": "y", "x0": r - 0.5, "x1": r + 0.5, "y0": big - 0.5,
               "y1": big + 0.5, "line": {"color": BAD, "width": 3}} for r in abnormal]
    shapes.append({"type": "rect", "xref": "x", "yref": "y", "x0": cause["rank"] - 0.38, "x1": cause["rank"] + 0.38,
                   "y0": big - 0.38, "y1": big + 0.38, "line": {"color": "#111827", "width": 2, "dash": "dot"}})
    # legend entries for the outlines (shapes have none)
    data.append({"type": "scatter", "mode": "markers", "x": [None], "y": [None], "name": "abnormal rank",
                 "marker": {"symbol": "square-open", "size": 12, "color": BAD, "line": {"width": 3}}})
    data.append({"type": "scatter", "mode": "markers", "x": [None], "y": [None],
                 "name": f"rank {int(cause['rank'])}: where the cause was named",
                 "marker": {"symbol": "square-open", "size": 12, "color": "#111827", "line": {"width": 2}}})
    return {"data": data, "layout": _layout(
        max(220, 46 * len(scales) + 140), shapes=shapes,
        xaxis=_axis("rank", dtick=1 if width <= 32 else None, showgrid=False, zeroline=False),
        yaxis=_axis("", showgrid=False, type="category"), annotations=[_title("time on each rank", 0.0)],
        legend={"orientation": "h", "x": 0, "y": -0.45, "yanchor": "top", "font": {"size": 11}})}


def compress_path(steps: list[dict], limit: int = 40) -> list[tuple[dict, str]]:
    """(step, kind of the edge into it).  Beyond `limit` steps, a run of data/control steps inside one
    rank keeps its ends and becomes one edge "more" (n steps)."""
    if len(steps) <= limit:
        return [(s, s["via"]) for s in steps]
    out: list[tuple[dict, str]] = []
    i = 0
    while i < len(steps):
        j = i
        while (j + 1 < len(steps) and steps[j + 1]["via"] in ("data", "control") and steps[j + 1]["rank"] == steps[i]["rank"]
               and steps[j + 1]["kind"] != "MPI"):
            j += 1
        out.append((steps[i], steps[i]["via"]))
        if j - i >= 3:
            out.append((steps[j], f"more:{j - i}"))
            i = j + 1
        else:
            i += 1
    return out


def path_graph(cause: dict) -> dict:
    """The backtracking walk over (vertex, rank): from where the waiting was seen (top) to the cause
    (bottom); x is the rank, each edge coloured by its kind."""
    walk = compress_path(cause["path"])
    xs = [s["rank"] for s, _ in walk]
    ys = list(range(len(walk)))
    labels = [f"{plot_text(s['name'])} {plot_text(short(s['location']))}" for s, _ in walk]
    data = []
    by_kind: dict[str, dict] = {}
    arrows = []
    for i in range(1, len(walk)):
        kind = walk[i][1]
        key = "more" if kind.startswith("more:") else kind
        e = by_kind.setdefault(key, {"x": [], "y": [], "text": []})
        e["x"] += [xs[i - 1], xs[i], None]
        e["y"] += [ys[i - 1], ys[i], None]
        arrows.append({"x": xs[i], "y": ys[i], "ax": xs[i - 1], "ay": ys[i - 1], "xref": "x", "yref": "y",
                       "axref": "x", "ayref": "y", "showarrow": True, "arrowhead": 2, "arrowsize": 1.1,
                       "arrowwidth": 1.5, "arrowcolor": EDGE_COLOURS.get(key, "#6b7280"), "standoff": 7,
                       "startstandoff": 7, "text": ""})
        if key == "more":
            arrows.append({"x": (xs[i] + xs[i - 1]) / 2, "y": (ys[i] + ys[i - 1]) / 2, "xref": "x", "yref": "y",
                           "text": f"{kind[5:]} steps", "showarrow": False, "xanchor": "right", "xshift": -6,
                           "font": {"size": 10, "color": "#6b7280"}})
    names = {"start": "start", "data": "data dependence", "control": "control dependence",
             "comm": "communication (waited for)", "collective": "collective (last to arrive)",
             "more": "steps within one rank, folded"}
    for kind, e in by_kind.items():
        data.append({"type": "scatter", "mode": "lines", "x": e["x"], "y": e["y"], "name": names.get(kind, kind),
                     "line": {"color": EDGE_COLOURS.get(kind, "#6b7280"), "width": 2,
                              "dash": "dot" if kind == "more" else "solid"}, "hoverinfo": "skip"})
    colours = [BAD if i == len(walk) - 1 else ("#0369a1" if s["kind"] == "MPI" else "#374151")
               for i, (s, _) in enumerate(walk)]
    right = max(xs)
    data.append({"type": "scatter", "mode": "markers+text", "x": xs, "y": ys, "text": labels,
                 "textposition": ["middle left" if x == right and x != min(xs) else "middle right" for x in xs], "textfont": {"size": 11}, "name": "(vertex, rank)",
                 "showlegend": False, "cliponaxis": False,
                 "marker": {"size": [14 if i == len(walk) - 1 else 9 for i in ys], "color": colours,
                            "line": {"color": "#fff", "width": 1}},
                 "customdata": [[s["rank"], plot_text(s["kind"]), plot_text(s["location"]), plot_text(s["via"])]
                                for s, _ in walk],
                 "hovertemplate": "%{text}<br>rank %{customdata[0]}, %{customdata[1]}<br>%{customdata[2]}"
                                  "<br>reached by: %{customdata[3]}<extra></extra>"})
    ranks = sorted(set(xs))
    return {"data": data, "layout": _layout(
        max(260, 30 * len(walk) + 110), showlegend=True, annotations=arrows + [_title("backtracking path", 0.0)],
        xaxis=_axis("rank", tickvals=ranks, ticktext=[str(r) for r in ranks],
                    range=[min(ranks) - (1.6 if len(ranks) > 1 else 0.5), max(ranks) + (0.5 if len(ranks) > 1 else 1.6)],
                    showgrid=True, zeroline=False),
        yaxis=_axis("", autorange="reversed", showticklabels=False, showgrid=False, zeroline=False, showline=False,
                    ticks=""),
        margin={"l": 20, "r": 18, "t": 30, "b": 52})}


# ---- trace ----

def pattern_bars(patterns: list[dict]) -> dict:
    """The wait-state pattern tree as indented bars: each pattern's inclusive seconds."""
    depth: dict = {None: -1}
    rows = []
    for p in patterns:
        depth[p["key"]] = depth.get(p["parent"], -1) + 1
        if p["unit"] == "sec" and (p["seconds"] > 0 or p["key"] == "time"):
            rows.append((depth[p["key"]], p))
    rows = rows[::-1]
    labels = ["\u2003" * d + plot_text(p["name"]) for d, p in rows]
    colours = [PATTERN_COLOURS[min(d, len(PATTERN_COLOURS) - 1)] if d else "#6b7280" for d, _ in rows]
    return {"data": [{"type": "bar", "orientation": "h", "y": labels, "x": [p["seconds"] for _, p in rows],
                      "marker": {"color": colours}, "customdata": [[p["percent"]] for _, p in rows],
                      "hovertemplate": "%{y}: %{x:.4g} s, %{customdata[0]:.1f} % of the total time<extra></extra>"}],
            "layout": _layout(max(240, 26 * len(rows) + 90), showlegend=False, bargap=0.25,
                              xaxis=_axis("seconds (inclusive, summed over the ranks)"),
                              yaxis=_axis("", automargin=True, ticks=""), margin={"l": 20, "r": 18, "t": 30, "b": 52},
                              annotations=[_title("wait-state pattern tree", 0.0)])}


def _cp_label(c: dict) -> str:
    return f"{plot_text(short(c['where'].split(' [')[0]) if c.get('where') else '')}  {plot_text(c['callpath'])}"


def delay_bars(causes: list[dict], top: int = 10) -> dict:
    rows = causes[:top][::-1]
    labels = [_cp_label(c) for c in rows]
    return {"data": [
        {"type": "bar", "orientation": "h", "y": labels, "x": [c["short_term"] for c in rows], "name": "short-term",
         "marker": {"color": BAD}, "hovertemplate": "%{y}<br>short-term %{x:.4g} s<extra></extra>"},
        {"type": "bar", "orientation": "h", "y": labels, "x": [c["long_term"] for c in rows], "name": "long-term",
         "marker": {"color": "#f59e0b"}, "hovertemplate": "%{y}<br>long-term %{x:.4g} s<extra></extra>"}],
        "layout": _layout(max(220, 34 * len(rows) + 110), barmode="stack",
                          xaxis=_axis("seconds of waiting caused"), yaxis=_axis("", automargin=True),
                          margin={"l": 20, "r": 18, "t": 30, "b": 52},
                          annotations=[_title("delay costs by call path", 0.0)])}


def critical_path_bars(entries: list[dict]) -> dict:
    rows = entries[::-1]
    labels = [_cp_label(c) for c in rows]
    return {"data": [
        {"type": "bar", "orientation": "h", "y": labels, "x": [c["seconds"] for c in rows], "name": "on the critical path",
         "marker": {"color": MEAN}, "hovertemplate": "%{y}<br>%{x:.4g} s on the path<extra></extra>"},
        {"type": "bar", "orientation": "h", "y": labels, "x": [c["mean_time"] for c in rows], "name": "mean per rank",
         "marker": {"color": "#93c5fd"}, "hovertemplate": "%{y}<br>%{x:.4g} s mean per rank<extra></extra>"}],
        "layout": _layout(max(220, 40 * len(rows) + 110), barmode="group", xaxis=_axis("seconds"),
                          yaxis=_axis("", automargin=True), margin={"l": 20, "r": 18, "t": 30, "b": 52},
                          annotations=[_title("critical-path profile (path time vs. mean time per rank)", 0.0)])}


def wait_timeline(instances: list[dict], nranks: int, t0: float) -> dict:
    """The largest wait states as bars on each rank's line (time since the trace's start), with an
    arrow from the rank that caused each one."""
    pats = sorted({i["pattern"] for i in instances})
    colour = {p: PATTERN_COLOURS[k % len(PATTERN_COLOURS)] for k, p in enumerate(pats)}
    data, arrows = [], []
    for p in pats:
        rows = [i for i in instances if i["pattern"] == p]
        data.append({"type": "bar", "orientation": "h", "name": plot_text(p), "y": [i["rank"] for i in rows],
                     "x": [i["seconds"] for i in rows], "base": [i["enter_time"] - t0 for i in rows],
                     "width": 0.55, "marker": {"color": colour[p], "line": {"width": 0}},
                     "customdata": [[plot_text(i["callpath"]), plot_text(short(i["where"].split(" [")[0])),
                                     i["causer"]] for i in rows],
                     "hovertemplate": f"{plot_text(p)}: %{{x:.4g}} s on rank %{{y}} from %{{base:.4f}} s<br>"
                                      "%{customdata[0]} (%{customdata[1]})<br>caused by rank %{customdata[2]}"
                                      "<extra></extra>"})
        for i in rows:
            if i["causer"] >= 0 and i["causer"] != i["rank"]:
                end = i["enter_time"] - t0 + i["seconds"]
                arrows.append({"x": end, "y": i["rank"], "ax": end, "ay": i["causer"], "xref": "x", "yref": "y",
                               "axref": "x", "ayref": "y", "showarrow": True, "arrowhead": 2, "arrowwidth": 1.3,
                               "arrowcolor": colour[p], "standoff": 6, "opacity": 0.8, "text": ""})
    ends = [i["enter_time"] - t0 + i["seconds"] for i in instances]
    span = max(ends) if ends else 1.0
    return {"data": data, "layout": _layout(
        max(240, 44 * nranks + 120), barmode="overlay", annotations=arrows + [
            _title("largest wait states per rank, arrows from the rank that caused them", 0.0)],
        xaxis=_axis("seconds since the trace started", range=[0, span * 1.03]),
        yaxis=_axis("rank", range=[nranks - 0.5, -0.5], dtick=1 if nranks <= 32 else None, zeroline=False),
        bargap=0.3)}


def rank_split(patterns: list[dict], delay_causes: list[dict], nranks: int) -> dict:
    """Each rank's time, computation and MPI (the pattern tree's Time and MPI per rank), beside the
    waiting it caused on other ranks (its delay costs)."""
    by_key = {p["key"]: p for p in patterns}

    def per_rank(entries) -> list[float]:
        out = [0.0] * nranks
        for c in entries:
            for r, v in enumerate(c.get("per_rank") or []):
                if r < nranks:
                    out[r] += v
        return out
    total = per_rank((by_key.get("time") or {}).get("callpaths", []))
    mpi = per_rank((by_key.get("mpi") or {}).get("callpaths", []))
    caused = per_rank(delay_causes)
    ranks = list(range(nranks))
    bars = [("computation", [max(t - m, 0.0) for t, m in zip(total, mpi)], "#4e79a7", "time"),
            ("in MPI (incl. waiting)", mpi, "#bab0ac", "time"),
            ("waiting it caused on other ranks", caused, "#e15759", "caused")]
    return {"data": [{"type": "bar", "x": ranks, "y": y, "name": name, "marker": {"color": colour},
                      "offsetgroup": group, "hovertemplate": f"rank %{{x}}: %{{y:.4g}} s<extra>{name}</extra>"}
                     for name, y, colour, group in bars],
            "layout": _layout(300, barmode="stack", legend={"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top",
                                                            "traceorder": "normal", "font": {"size": 11}},
                              xaxis=_axis("rank", dtick=1 if nranks <= 32 else None),
                              yaxis=_axis("seconds"), annotations=[_title("time on each rank, and the waiting it caused", 0.0)])}
