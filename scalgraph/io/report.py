"""Writers for the detection result (the dict built by scalgraph.analysis.detect.analyse):
terminal text with source excerpts, and JSON for machines.

A root cause's `cost` is the seconds of waiting it explains (or, for code nobody waits on, the run
time it adds; for an MPI call that is its own cause, its scaling loss): `explains` says which, and
where the waiting was.  A cause is a source construct: `contexts` lists the instances summed into
it (unrolled or inlined copies, call sites), heaviest first."""
from __future__ import annotations

import json
import pathlib

from scalgraph.errors import printable
from scalgraph.io.safe_read import source_allowed

CONTEXT_LINES = 2


def source_excerpt(file: str, first: int, last: int, roots: list[pathlib.Path],
                   context: int = CONTEXT_LINES) -> list[str]:
    """A few numbered lines around first..last, the cause's lines marked with '>'; or one line
    saying why no source is shown."""
    if not file or first <= 0:
        return ["(no source line recorded for this vertex)"]
    path = _find_source(file, roots)
    if path is None and pathlib.Path(file).is_absolute() and pathlib.Path(file).is_file():
        return [f"(source file {file} is not under the source roots: pass --source-dir DIR to show it)"]
    if path is None:
        return [f"(source file {file} not found; run detect from the build directory or pass --source-dir)"]
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return [f"(cannot read {path}: {e.strerror})"]
    last = max(first, last or first)
    if first > len(lines):
        return [f"({path} has only {len(lines)} lines; it changed since the build)"]
    lo, hi = max(1, first - context), min(len(lines), last + context)
    width = len(str(hi))
    return [f"{'>' if first <= n <= last else ' '} {n:>{width}} | {lines[n - 1]}" for n in range(lo, hi + 1)]


def _find_source(file: str, roots: list[pathlib.Path]) -> pathlib.Path | None:
    p = pathlib.Path(file)
    candidates = [p] if p.is_absolute() else [r / p for r in roots] + [r / p.name for r in roots]
    return next((c for c in candidates if source_allowed(c, roots)), None)


def _fmt_s(x: float) -> str:
    if x == 0:
        return "0 s"
    if abs(x) < 1e-3:
        return f"{x * 1e6:.3g} us"
    if abs(x) < 1:
        return f"{x * 1e3:.3g} ms"
    return f"{x:.3g} s"


def _ratio(r) -> str:
    return "only this rank" if r["ratio"] is None else f"x{r['ratio']:.2f}"


def _abnormal_line(entries: list[dict], max_ranks: int = 6) -> list[str]:
    out = []
    for a in entries:
        what = "own time" if a["metric"] == "time" else "waiting"
        ranks = ", ".join(f"rank {r['rank']} ({_ratio(r)}, +{_fmt_s(r['excess'])})" for r in a["ranks"][:max_ranks])
        more = f" and {a['nranks'] - max_ranks} more" if a["nranks"] > max_ranks else ""
        out.append(f"abnormal {what} (median {_fmt_s(a['median'])}): {ranks}{more}")
    return out


def _path_text(path: list[dict]) -> str:
    """vertex@rank hops; runs of steps inside one rank between MPI calls are counted, not listed
    (the JSON output has every step)."""
    hops, skipped = [], 0
    for i, s in enumerate(path):
        keep = i in (0, len(path) - 1) or s["via"] in ("comm", "collective") or s["kind"] == "MPI"
        if not keep:
            skipped += 1
            continue
        node = f"{s['name']}@{s['rank']} ({s['location']})"
        if i == 0:
            hops.append(node)
        else:
            via = s["via"] if not skipped else f"{skipped + 1} steps back in rank {s['rank']}"
            hops.append(f"-[{via}]-> {node}")
        skipped = 0
    return " ".join(hops)


def write_text(result: dict, out, experiment: str = "", source_roots: list[pathlib.Path] | None = None) -> None:
    roots = source_roots or [pathlib.Path.cwd()]
    scales = result["scales"]
    big = scales[-1]
    t = result["thresholds"]
    w = lambda text: out.write(printable(text, keep_layout=True))  # noqa: E731  names from inputs stay inert
    w(f"scalgraph detect {experiment}: scales {', '.join(map(str, scales))}; "
      f"run time at p={big}: {_fmt_s(result['run_time'][str(big)])}\n")
    stretched = (f"; computation, sampled as thread-CPU, below {_fmt_s(t['min_cpu_seconds'])}: a rank's computation "
                 f"took {t['stretch']:.2g}x its thread-CPU in wall time, cores shared with other ranks or jobs"
                 if t.get("stretch", 1.0) >= 1.05 else "")
    w(f"thresholds: AbnormThd {t['abnorm_thd']}, causes below {t['min_share'] * 100:g}% of the run time "
      f"({_fmt_s(t['min_seconds'])}{stretched}) not reported, {t['ideal']}-scaling ideal"
      f"{', ranks merged by the slowest of %d clusters' % t['clusters'] if t['clusters'] > 1 else ''}\n")
    for note in result["notes"]:
        w(f"note: {note}\n")
    if not result["problem_found"]:
        thin = result.get("sampling", {}).get("thin")
        w(f"\nNo scaling problem found{' above the sampling noise (see the note on thin evidence)' if thin else ''}: "
          f"no code costs {t['min_share'] * 100:g}% of the run time or more at p={big}, neither by its own scaling "
          f"loss nor by a rank exceeding {t['abnorm_thd']} x the median.\n")
        if result["non_scalable"]:
            k = len(result["non_scalable"])
            w(f"({k} {'construct loses' if k == 1 else 'constructs lose'} time at p={big}, but to waiting with no "
              "computation behind it that stands out, or in MPI calls that move no more per rank as p grows: "
              "load noise, or more ranks than cores?)\n")
            _write_symptoms(result, w)
        return
    for n, c in enumerate(result["root_causes"], 1):
        w(f"\n#{n} {c['location']}  in {c['function']}  [{c['kind']} {c['name']}]  rank {c['rank']}\n")
        wall = c.get("cost_wall", c["cost"])
        stretched = (f" of thread-CPU, {_fmt_s(wall)} of wall time ({wall / c['cost']:.2g}x: its rank's stretch there)"
                     if c["cost"] > 0 and wall >= 1.05 * c["cost"] else "")
        w(f"   cost {_fmt_s(c['cost'])}{stretched} = {c['cost_share'] * 100:.1f}% of the run time at p={big}: {_explains(c)}; "
          f"mean time share {c['time_share'] * 100:.1f}%\n")
        if c.get("whatif"):
            w(f"   what-if: {_whatif_text(c)}\n")
        for line in _contexts_text(c.get("contexts") or []):
            w(f"   {line}\n")
        means = ", ".join(f"p={p}: {_fmt_s(c['mean_time'][str(p)])} / {_fmt_s(c['max_time'][str(p)])}" for p in scales)
        w(f"   time per rank, mean / slowest: {means}\n")
        if c.get("model"):
            pred = ", ".join(f"p={p}: {_fmt_s(v)}" for p, v in c["predicted"].items())
            w(f"   scaling model of the mean T(p) = {c['model']} (log-log slope {c['log_log_slope']:+.2f}); "
              f"scaling loss at p={big}: {_fmt_s(c['scaling_loss'])}; predicted {pred}\n")
            if c.get("interval"):
                iv = c["interval"]
                w(f"   at p={iv['at']:g} the time lies in {_fmt_s(iv['low'])} .. {_fmt_s(iv['high'])} "
                  "(every model the measurements cannot reject)\n")
            for note in c.get("model_notes") or []:
                w(f"   model: {note}\n")
            m = c["slowest_rank"]
            w(f"   slowest rank: T(p) = {m['model']}; scaling loss at p={big}: {_fmt_s(m['scaling_loss'])}\n")
        else:
            w(f"   scaling model: {c.get('note', 'not fitted')}\n")
        for line in _abnormal_line(c["abnormal"]):
            w(f"   {line}\n")
        if c["abnormal_at_scales"]:
            w(f"   abnormal at scales: {', '.join(map(str, c['abnormal_at_scales']))}\n")
        f = c["found_from"]
        w(f"   found from the {f['reason']} vertex {f['name']}@{f['rank']} ({f['location']}); path:\n")
        w(f"     {_path_text(c['path'])}\n")
        for line in source_excerpt(c["file"], c["line"], c["line_last"], roots):
            w(f"     {line}\n")
    _write_symptoms(result, w)


def _whatif_text(c: dict) -> str:
    """'fixing cg.c:21-22 saves 0.41 s of 1.42 s at p=8 (29 %), ~1.9 s at p=32 (extrapolated)'"""
    wi = c["whatif"]
    gain, fixed = wi["gain"], wi["fixed_run_time"]
    big = max(gain, key=int)
    lines = f"{c['line']}" + (f"-{c['line_last']}" if c.get("line_last", c["line"]) != c["line"] else "")
    where = f"{pathlib.Path(c['file']).name}:{lines}"
    text = (f"fixing {where} saves {_fmt_s(gain[big])} of {_fmt_s(gain[big] + fixed[big])} at p={big} "
            f"({wi['gain_share'][big] * 100:.0f} %)")
    pred = wi.get("predicted") or {}
    if pred:
        text += ", ~" + ", ~".join(f"{_fmt_s(g)} at p={q}" for q, g in pred.items()) + " (extrapolated)"
    smaller = [p for p in sorted(gain, key=int) if p != big]
    if smaller:
        text += "; at " + ", ".join(f"p={p}: {_fmt_s(gain[p])}" for p in smaller)
    return text


def _explains(c: dict) -> str:
    """What the cost is, in words (the JSON has it as `explains`)."""
    e = c.get("explains") or {}
    what = e.get("what")
    if what == "waiting":
        return (f"explains that much of the {_fmt_s(e['waiting'])} rank {e['rank']} waited at {e['name']} "
                f"({e['location']})")
    if what == "own scaling":
        rule = e.get("rule", "")
        vol = (e.get("per_rank") or {}).get("bytes" if rule == "bytes per rank" else "calls", {})
        if rule == "bytes per rank":
            grown = ", ".join(f"p={p}: {_fmt_bytes(b)}" for p, b in vol.items())
        elif rule == "calls per rank":
            grown = ", ".join(f"p={p}: {n:.0f}" for p, n in vol.items())
        else:
            grown = "ranks not oversubscribed"
        why = {"bytes per rank": "the bytes it moves per rank grow with p", "calls per rank":
               "its calls per rank grow with p"}.get(rule, "its time beats a log2(p) latency model")
        return f"the call's own scaling loss; it is its own cause because {why} ({grown})"
    if what == "run time":
        return (f"rank {c['rank']} spends it beyond the median rank and computes that much longer overall, "
                "or every rank spends it and it does not shrink with p")
    if what == "thread waiting":
        return (f"OpenMP thread {e['thread']} ({e['role']}) of rank {e['rank']} runs it beyond its team's median "
                f"and arrives last at the barrier of {e['name']} ({e['location']}), where the other threads "
                f"waited up to {_fmt_s(e['waiting'])}")
    if what == "idle threads":
        return (f"the master thread of rank {e['rank']} runs it outside any parallel region while "
                f"{e['threads'] - 1} other thread(s) idle (Idle Threads {_fmt_s(e['idle_seconds'])}); "
                f"the cost is what running it on all {e['threads']} threads would save")
    return "cost"


def _fmt_bytes(b: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b:.0f} B"


def _contexts_text(ctx: list[dict], limit: int = 3) -> list[str]:
    """The instances summed into one construct (unrolled or inlined copies, several call sites)."""
    if len(ctx) < 2:
        return []
    shown = "; ".join(f"{x['call_path']} {_fmt_s(x['seconds'])}" for x in ctx[:limit])
    more = f"; and {len(ctx) - limit} more" if len(ctx) > limit else ""
    return [f"{len(ctx)} contexts summed, heaviest first on this rank: {shown}{more}"]


def _symptom_label(n: dict, same_place: int) -> str:
    """A non-scalable construct's line; when several share a location, what tells them apart."""
    label = f"{n['location']}  in {n['function']}  [{n['kind']} {n['name']}]"
    if n.get("instances", 1) > 1:
        label += f" x{n['instances']} contexts"
    if same_place > 1 and n.get("contexts"):
        label += f" via {n['contexts'][0]['call_path']}"
    return label


def _write_symptoms(result: dict, w, limit: int = 5) -> None:
    """Where the time is lost (often waiting that the causes above explain)."""
    big = result["scales"][-1]
    threads = result.get("thread_abnormal") or []
    if threads:
        w(f"\nOpenMP thread imbalance at p={big} (a thread above {result['thresholds']['abnorm_thd']} x its team's "
          "median CPU):\n")
        for a in threads[:limit]:
            cpu = " / ".join(_fmt_s(x) for x in a["cpu"])
            w(f"   {a['location']}  [{a['kind']} {a['name']}]  rank {a['rank']} thread {a['thread']} ({a['role']}): "
              f"threads' CPU {cpu}, excess {_fmt_s(a['excess'])} over the median\n")
    if not result["non_scalable"]:
        return
    traced = ", the symptoms the causes above were traced from" if result["problem_found"] else ""
    w(f"\nnon-scalable vertices (scaling loss at p={big}{traced}):\n")
    shown = result["non_scalable"][:limit]
    places = [n["location"] for n in shown]
    for n in shown:
        w(f"   {_symptom_label(n, places.count(n['location']))}  loss {_fmt_s(n['scaling_loss'])} "
          f"({n['loss_share'] * 100:.0f}%), imbalance {n['imbalance'] * 100:.0f}%, T(p) = {n['model']}\n")


def write_json(result: dict, out, experiment: str = "") -> None:
    json.dump({"format": "scalgraph-detect", "version": 1, "experiment": experiment, **result}, out, indent=1)
    out.write("\n")
