"""The trace report: one JSON-ready dict built from the forward replay, the delay analysis and the
critical path, and its terminal rendering.

Sections: the verdict first -- `root_causes`, the computation delays that are root causes naming
lines (scalgraph/trace/verdict.py), and `problem_found` -- then what Scalasca users will recognise: the
pattern tree x call path x rank in seconds and %
of total time; the delay costs of every call path with their short/long-term split
(Scalasca's numbers; each marked computation or communication); the wait-state
classification (direct/indirect, propagating/terminal); the critical-path profile with its
imbalance; the most severe instances of every pattern (like Scalasca's trace.stat).  Call paths
carry the source line of their innermost region that has one (and its PSG vertex, when the trace
came from a scalgraph run): an MPI call path names the call's own line and vertex, not its
caller's.
"""
from __future__ import annotations

import numpy as np

from scalgraph.errors import printable
from scalgraph.trace import json_rows, mpi_names, patterns
from scalgraph.trace.json_rows import encode_lines
from scalgraph.trace.critical_path import CriticalPath
from scalgraph.trace import verdict as verdicts
from scalgraph.trace.retime import whatif_line
from scalgraph.trace.delay import DelayResult, mpi_callpaths
from scalgraph.trace.forward import ForwardResult
from scalgraph.trace.matching import callpath_names


def _where(fwd: ForwardResult) -> list[dict]:
    """Per call path: where its innermost region is in the source.  A region with a line names it
    with its own vertex (an MPI call at a PSG vertex: the call's line, in the file of the region around
    it, since MPI regions have the file "MPI"); one without a line takes its caller's place."""
    nest, regions = fwd.ctx.nest, fwd.ctx.trace.regions
    out: list[dict] = []
    for par, reg in zip(nest.cp_parent.tolist(), nest.cp_region.tolist()):
        r = regions[reg] if 0 <= reg < len(regions) else None
        outer = out[par] if par >= 0 else {"file": "", "line": 0, "vertex": -1, "region": ""}
        if r is not None and r.line > 0 and not mpi_names.is_mpi_region(r):
            out.append({"file": r.file, "line": r.line, "vertex": r.vertex, "region": r.name})
        elif r is not None and r.line > 0 and (outer["file"] or r.file not in ("", "MPI")):
            # an MPI call site: its own line and vertex, in its own file or the caller's
            out.append({"file": r.file if r.file not in ("", "MPI") else outer["file"], "line": r.line,
                        "vertex": r.vertex, "region": r.name})
        else:
            out.append({**outer, "region": r.name if r else outer["region"]})
    return out


_loc = verdicts._loc


def _floats(values: np.ndarray) -> list[float]:
    """A numeric array as a list of Python floats (tolist, not a float() per element)."""
    return np.asarray(values, dtype=np.float64).tolist()


def _rank_summary(values: np.ndarray) -> dict:
    return {"max": float(values.max()), "max_rank": int(values.argmax()), "mean": float(values.mean()),
            "min": float(values.min())}


def _who(locations, loc: int) -> str:
    """'rank 3', or with OpenMP thread locations 'rank 1 thread 1'."""
    if not locations or not 0 <= loc < len(locations):
        return f"rank {loc}"
    r, th = locations[loc]
    return f"rank {r} thread {th}"


def build_report(fwd: ForwardResult, dl: DelayResult, cp: CriticalPath, top: int = 10,
                 clock: str = "", source: str = "", min_share: float = verdicts.MIN_SHARE,
                 cpu: verdicts.CpuEvidence | None = None, notes: list[str] | None = None,
                 clock_correction: dict | None = None, program_time: float = 0.0,
                 verdict_delay: DelayResult | None = None, complete: bool = True) -> dict:
    """The whole report: everything the analysis computed (`--top` limits the text rendering only);
    with `complete=False`, what `limited(report, top)` keeps, without building the rest (the
    instances and waits of a 10^6-event trace are 10^5 rows each).
    `cpu`: the run's thread-CPU seconds per [rank, vertex] for the verdict's real-work rule (None: a
    trace without profiles, only the size floor applies).  `clock_correction`: what the clock
    correction found and did (clock.ClockReport.as_dict), None when it did not run.  `program_time`:
    time between the program's begin/end records and its first/last event, summed over the ranks
    (OTF2 ProgramBegin/End; Scalasca counts it in the total time).  `verdict_delay`: the delay costs
    the verdict reads (verdict.py: rooted collectives synchronise their root only), default `dl`."""
    ctx = fwd.ctx
    names = callpath_names(ctx.nest, ctx.trace.regions)
    where = _where(fwd)
    total = float(fwd.cube[patterns.PATTERN_INDEX["time"]].sum()) + program_time
    pct = (lambda x: 100.0 * x / total) if total > 0 else (lambda x: 0.0)

    def cp_entry(c: int, per_rank: np.ndarray) -> dict:
        return {"callpath": names[c], "where": _loc(where[c]), "vertex": where[c]["vertex"],
                "seconds": float(per_rank.sum()), "percent": pct(float(per_rank.sum())),
                "ranks": _rank_summary(per_rank), "per_rank": _floats(per_rank)}

    tree = []
    for i, pat in enumerate(patterns.PATTERNS):
        incl = fwd.cube[i]
        child = [patterns.PATTERN_INDEX[k] for k in patterns.children(pat.key)]
        excl = incl - sum((fwd.cube[j] for j in child), np.zeros_like(incl))
        per_cp = incl.sum(axis=1)
        order = [int(c) for c in np.argsort(-per_cp) if per_cp[c] > 0]
        if pat.unit != "sec":       # a count (RMA pairwise syncs): "seconds" holds it, % of its root
            root = patterns.PATTERN_INDEX[pat.parent] if pat.parent else i
            denom = float(fwd.cube[root].sum())
            share = 100.0 * float(incl.sum()) / denom if denom > 0 else 0.0
        else:
            share = pct(float(incl.sum()))
        tree.append({"key": pat.key, "name": pat.name, "parent": pat.parent, "unit": pat.unit,
                     "description": pat.description, "seconds": float(incl.sum()),
                     "percent": share, "exclusive_seconds": float(np.maximum(excl, 0).sum()),
                     "callpaths": [cp_entry(c, incl[c]) for c in order]})

    cost = dl.short_term + dl.long_term
    per_cp = cost.sum(axis=1)
    total_wait = float(dl.waits["wait"].sum())
    is_mpi = mpi_callpaths(ctx)
    causes = []
    for c in [int(c) for c in np.argsort(-per_cp, kind="stable") if per_cp[c] > 0]:
        e = cp_entry(c, cost[c])
        e["kind"] = "communication" if is_mpi[c] else "computation"
        by_pat = (dl.short_by_pattern[:, c] + dl.long_by_pattern[:, c]).sum(axis=1)
        e.update(short_term=float(dl.short_term[c].sum()), long_term=float(dl.long_term[c].sum()),
                 percent_of_waiting=100.0 * float(per_cp[c]) / total_wait if total_wait > 0 else 0.0,
                 by_pattern={patterns.PATTERNS[i].name: float(v) for i, v in enumerate(by_pat) if v > 0})
        causes.append(e)
    # delay costs per family (the pattern of the wait explained; long-term: see classification["families"])
    fam_short, fam_long = dl.short_by_pattern.sum(axis=(1, 2)), dl.long_by_pattern.sum(axis=(1, 2))
    families = {patterns.PATTERNS[i].key: {"name": patterns.PATTERNS[i].name, "short_term": float(fam_short[i]),
                                            "long_term": float(fam_long[i])}
                for i in range(len(fam_short)) if fam_short[i] > 0 or fam_long[i] > 0}
    prop = dl.propagating
    classification = {
        "waiting_time": total_wait, "short_term": float(dl.short_term.sum()), "long_term": float(dl.long_term.sum()),
        "unexplained": dl.unexplained, "direct": float(dl.direct.sum()), "indirect": float(dl.indirect.sum()),
        "propagating": float(dl.waits["wait"][prop].sum()), "terminal": float(dl.waits["wait"][~prop].sum()),
        "scaling": ("s = 1/(sum(delta) + W); a point-to-point wait distributes min(omega, sum(delta) + W) "
                    "(Scalasca 2.6: short-term factor clipped at 1)" if dl.options.scale == "scalasca" else
                    "s = 1/(sum(delta) + W), unclipped (seed 000, Algorithm 1)"),
        "families": ("long-term costs under the pattern of the wait at the end of the propagation chain (Scalasca 2.6)"
                     if dl.options.family == "chain-end" else
                     "long-term costs under the pattern of the wait they directly explain"),
        "interval_start": ("end of the waiting time of the previous synchronisation with the same peer (a message "
                           + ("that produced a wait state" if dl.options.sync_points == "waits" else "of any kind")
                           + ") or communicator"),
        "delays": "every call path: computation, and the non-waiting part of MPI calls as communication "
                  "(Scalasca, seed 000)",
    }
    wall = fwd.cube[patterns.PATTERN_INDEX["time"]]
    v_cost = cost if verdict_delay is None else verdict_delay.short_term + verdict_delay.long_term
    locations = getattr(ctx.trace, "locations", None)      # the parallel replay's stand-in has none
    rank_of = np.array([r for r, _ in locations], np.int64) if locations else None
    found = verdicts.verdict(v_cost, wall, is_mpi, where, names, total, min_share, cpu, rank_of)
    notes = list(notes or [])
    nranks = max(wall.shape[1], 1)         # the parallel replay's context holds no events
    if cpu is not None:
        notes.append(f"root causes: computation whose extra thread-CPU on some rank (at least "
                     f"{cpu.ratio:g}x the median rank's there{'; ranks time-shared cores' if cpu.ratio > verdicts.ABNORMAL_RATIO else ''}) and the waiting it caused are each at "
                     f"least {100 * min_share:g} % of the run time ({min_share * total / nranks:.6g} s of "
                     f"{total / nranks:.6g} s); communication delays are listed under delay, never as a line cause")
    else:
        notes.append(f"root causes: computation delays of at least {100 * min_share:g} % of the total time "
                     f"({min_share * total:.6g} s of {total:.6g} s summed over the ranks); communication delays "
                     "are listed under delay, never as a line cause")
    if cpu is not None:
        notes.append(cpu.note)
    elif not any("real work" in n for n in notes):
        notes.append("no thread-CPU profile used: a delay is not checked for being real work (a rank descheduled on "
                     "a shared core looks like a rank with more work); the serial replay of a `scalgraph run --trace` "
                     "run directory reads the run's profiles for that")

    length = cp.length
    per_cp_path = cp.per_callpath
    busy = cp.time.sum(axis=1)
    path = []
    # every call path on the path (largest first), then those off it that ran (largest activity first)
    listed = sorted((c for c in range(len(per_cp_path)) if per_cp_path[c] > 0 or busy[c] > 0),
                    key=lambda c: (-per_cp_path[c], -busy[c], c))
    per_rank = _floats
    for c in listed:
        e = cp_entry(c, cp.profile[c])
        e.update(on_path=bool(per_cp_path[c] > 0),
                 percent_of_path=100.0 * float(per_cp_path[c]) / length if length > 0 else 0.0,
                 imbalance=float(cp.imbalance[c]), mean_time=float(cp.time[c].mean()),
                 time_per_rank=per_rank(cp.time[c]),
                 activity=float(cp.activity[c].sum()), activity_per_rank=per_rank(cp.activity[c]),
                 non_critical=float(cp.non_critical[c].sum()), non_critical_per_rank=per_rank(cp.non_critical[c]),
                 imbalance_impact=float(cp.imbalance_impact[c].sum()),
                 imbalance_impact_per_rank=per_rank(cp.imbalance_impact[c]),
                 inter_partition=float(cp.inter_partition[c].sum()),
                 inter_partition_per_rank=per_rank(cp.inter_partition[c]),
                 intra_partition=float(cp.intra_partition[c].sum()),
                 intra_partition_per_rank=per_rank(cp.intra_partition[c]))
        path.append(e)
    segments = [list(s) for s in zip(cp.seg_rank.astype(np.int64).tolist(), cp.seg_start.astype(np.float64).tolist(),
                                     cp.seg_end.astype(np.float64).tolist())]   # (tolist: no numpy scalar per value)

    t = ctx.time
    instances = instance_table(fwd.waits, t, ctx.nest.callpath, names, [_loc(w) for w in where],
                               None if complete else min(top, 5))

    return {"source": source, "ranks": ctx.nranks, "events": ctx.nevents, "callpaths": ctx.ncallpaths,
            "run_length": float(t.max() - t.min()) if len(t) else 0.0, "total_time": total,
            "problem_found": bool(found), "root_causes": found, "min_share": min_share,
            "cpu_checked": cpu is not None, "notes": notes, "clock": clock,
            "clock_violations_after_correction": fwd.clock_violations,
            "clock_violations_before_correction": (clock_correction or {}).get("violations_before_correction"),
            "clock_correction": clock_correction, "program_time": program_time,
            "patterns": tree,
            "delay": {"classification": classification, "root_causes": causes, "families": families,
                      "waits": wait_table(ctx, dl) if complete else []},
            "critical_path": {"length": length, "segments": int(len(cp.seg_rank)), "path": segments,
                              "callpaths": path},
            "instances": instances,
            **({"locations": [[int(r), int(th)] for r, th in locations]} if locations else {})}


def wait_table(ctx, dl: DelayResult) -> list[dict]:
    """Every wait state the delay analysis explained: ω, the waiting it distributed, ΣΔ and W of the
    causer's interval, the scale s, Γ (the waiting it propagated), its direct and indirect parts.
    In a canonical order (pattern, rank, enter time, causer), the same for the serial and parallel
    replay."""
    w = dl.waits
    if dl.scale is None or len(w) == 0:
        return []
    enter = dl.enter if dl.enter is not None else ctx.time[w["op"]]
    order = np.lexsort((-w["wait"], w["causer"], enter, w["rank"], w["pattern"]))
    prop = dl.propagating
    cols = {"seconds": w["wait"], "distributed": dl.distributed, "sum_delta": dl.sum_delta,
            "wait_in_interval": dl.wait_in_interval, "scale": dl.scale, "gamma": dl.gamma, "direct": dl.direct,
            "indirect": dl.indirect}
    cols = {k: np.asarray(v, float)[order].tolist() for k, v in cols.items()}
    pat = [_PATTERN_NAMES[p] for p in w["pattern"][order].tolist()]
    rank, causer = w["rank"][order].tolist(), w["causer"][order].tolist()
    ent, pr = enter[order].tolist(), prop[order].tolist()
    # one dict display per row over zipped columns (no per-row indexing: 10^5 waits in a few ms)
    return [{"pattern": p, "rank": r, "enter_time": e, "causer": c, "seconds": s, "distributed": d,
             "sum_delta": sd, "wait_in_interval": wi, "scale": sc, "gamma": g, "direct": di, "indirect": ind,
             "propagating": pp}
            for p, r, e, c, s, d, sd, wi, sc, g, di, ind, pp in
            zip(pat, rank, ent, causer, *cols.values(), pr)]


_PATTERN_NAMES = [p.name for p in patterns.PATTERNS]


def instance_table(waits: np.ndarray, time: np.ndarray, callpath: np.ndarray, names: list[str],
                   locs: list[str], per_pattern: int | None = None) -> list[dict]:
    """Every wait state as an instance (or the `per_pattern` most severe of each pattern): grouped by
    pattern (in the pattern tree's order), the most severe first within a pattern (ties in replay
    order).  Columns gathered with numpy, one dict per row built from zipped lists."""
    pat = waits["pattern"].astype(np.int64)
    keep = np.flatnonzero((pat >= 0) & (pat < len(_PATTERN_NAMES)))
    order = keep[np.lexsort((-waits["wait"][keep], pat[keep]))]      # lexsort is stable: ties in replay order
    if per_pattern is not None and len(order):
        grouped = pat[order]
        first = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
        rank_in_group = np.arange(len(order)) - np.repeat(first, np.diff(np.r_[first, len(order)]))
        order = order[rank_in_group < per_pattern]
    rows = waits[order]
    cps = callpath[rows["op"]].tolist()
    return [{"pattern": _PATTERN_NAMES[p], "seconds": s, "rank": r, "enter_time": e, "callpath": names[c],
             "where": locs[c], "causer": k}
            for p, s, r, e, c, k in zip(pat[order].tolist(), rows["wait"].astype(float).tolist(),
                                        rows["rank"].tolist(), time[rows["op"]].astype(float).tolist(), cps,
                                        rows["causer"].tolist())]


def limited(report: dict, top: int) -> dict:
    """The report as earlier versions returned it, for views that show the largest items only (the
    text, the HTML page): the top `top` call paths on the critical path, min(top, 5) instances per
    pattern, no per-wait table.  `--json` prints the complete report."""
    out = dict(report)
    out["delay"] = {**report["delay"], "waits": []}
    cp = dict(report["critical_path"])
    cp["callpaths"] = [e for e in cp["callpaths"] if e.get("on_path", True)][:top]
    out["critical_path"] = cp
    seen: dict[str, int] = {}
    keep = []
    for i in report["instances"]:
        seen[i["pattern"]] = seen.get(i["pattern"], 0) + 1
        if seen[i["pattern"]] <= min(top, 5):
            keep.append(i)
    out["instances"] = keep
    return out


_ENCODE = json_rows.ENCODE     # the C encoder (json.dump with indent is pure Python)
_ROWS_PER_WRITE = 4096


def write_json(report: dict, out) -> None:
    """The complete report as JSON: one key per line down the dicts, one line per element of a list
    of records (call paths, instances, waits), encoded a chunk at a time (json_rows: orjson, else as
    the C encoder); streamed in chunks, so neither the time nor the memory grows with an indenting
    pure-Python encoder's."""
    _write_value(report, out, 0)
    out.write("\n")


def _write_value(value, out, depth: int) -> None:
    pad, sep = " " * (depth + 1), ",\n"
    if isinstance(value, dict) and value:
        out.write("{\n")
        for k, (key, v) in enumerate(value.items()):
            out.write(f"{sep if k else ''}{pad}{_ENCODE(_json_key(key))}:")
            _write_value(v, out, depth + 1)
        out.write(f"\n{' ' * depth}}}")
    elif isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in value):
        out.write("[\n")
        for i in range(0, len(value), _ROWS_PER_WRITE):
            out.write((",\n" if i else "") + encode_lines(value[i:i + _ROWS_PER_WRITE], pad))
        out.write(f"\n{' ' * depth}]")
    else:
        out.write(_ENCODE(value))


def _json_key(key) -> str:
    """A dict key as json turns it into a string (3 -> "3", True -> "true", None -> "null")."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _ENCODE(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _subtree(tree: list[dict], key: str) -> set[str]:
    """Keys of a pattern and all its descendants."""
    out = {key}
    for p in tree:                      # parents come before their children in the tree
        if p["parent"] in out:
            out.add(p["key"])
    return out


def _s(x: float) -> str:
    return f"{x:10.6f} s"


def _escaped(value):
    """Every string in the report (region and file names, notes: they come from the input) with its
    control characters shown as escapes, so a crafted trace cannot drive the terminal or break a line."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value


def scaling_line(s: dict) -> str:
    """'its own cost grows with p: bytes per rank 2.5e+07, 5e+07, 1e+08 at p=2, 4, 8; 0.371 s per rank at p=8'"""
    per = (s.get("per_rank") or {}).get("bytes" if s.get("rule") == "bytes per rank" else "calls") or {}
    growth = (f"{s['rule']} " + ", ".join(f"{per[str(p)]:.3g}" for p in s["scales"] if str(p) in per)
              + f" at p={', '.join(map(str, s['scales']))}" if per and s.get("rule") else
              f"T(p) = {s.get('model')} over p={', '.join(map(str, s['scales']))}")
    return (f"its own cost grows with p: {growth}; {s['seconds_per_rank']:.3g} s per rank at p={s['scales'][-1]} "
            f"(detect's rule on the experiment's profiles)")


def write_text(report: dict, out, top: int = 10) -> None:
    """The terminal rendering: the largest `top` items of each section.  Only what is printed is
    escaped (_escaped per item shown): the complete report holds a row per wait state."""
    clock = [printable(line) for line in (report["clock"] or "").splitlines()]
    w = out.write
    locs = report.get("locations")
    who = (f"{len({r for r, _ in locs})} ranks with {len(locs)} threads" if locs else f"{report['ranks']} ranks")
    w(f"scalgraph trace {_escaped(report['source'])}: {who}, {report['events']} events, "
      f"run length {report['run_length']:.6g} s, total time {report['total_time']:.6g} s\n")
    for line in clock:
        w(f"  clock: {line}\n")

    found = report["root_causes"]
    if found:
        comm = any(c.get("kind") == "communication" for c in found)
        w(f"\nRoot causes ({len(found)}): computation that made other ranks wait, in seconds of waiting caused and "
          f"% of the total time{'; communication whose own cost grows with p, in its seconds' if comm else ''}\n")
        for k, c in enumerate(map(_escaped, found[:top]), 1):
            if c.get("kind") == "communication":
                w(f"  #{k} {c['where']}  {c['seconds']:.6f} s ({c['percent']:.1f} %)  {' '.join(c['callpaths'][:2])}\n"
                  f"{'':6}{scaling_line(c['scaling'])}\n")
                continue
            ranks = ", ".join(f"{r} ({v:.3f} s)" for r, v in sorted(c["ranks"].items(), key=lambda kv: -kv[1])[:4])
            real = ("" if not report["cpu_checked"] else
                    f", {100 * c['real_work']:.0f} % of its delay cost backed by extra thread-CPU work")
            w(f"  #{k} {c['where'] or c['callpaths'][0]}  {c['seconds']:.6f} s ({c['percent']:.1f} %)  "
              f"{' '.join(c['callpaths'][:2])}\n{'':6}on rank {ranks}{real}\n")
            if c.get("whatif"):
                w(f"{'':6}what-if: {whatif_line(c)}\n")
    else:
        w("\nNo root cause: no computation delay reaches "
          f"{100 * report['min_share']:g} % of the total time (the delay costs below are the account)\n")
    for n in report["notes"]:
        w(f"  note: {_escaped(n)}\n")

    w("\nWait states (pattern tree; inclusive seconds, % of total time; top call paths and ranks)\n")
    depth = {None: -1}
    one_sided = _subtree(report["patterns"], "rma") | _subtree(report["patterns"], "rma_pairwise_sync")
    hidden = [p for p in report["patterns"] if p["key"] in one_sided and p["seconds"] == 0]
    # OpenMP patterns only for traces with threads (an MPI-only report reads as it always did)
    openmp = set() if locs else _subtree(report["patterns"], "omp") | _subtree(report["patterns"], "omp_idle_threads")
    for p in report["patterns"]:
        depth[p["key"]] = depth[p["parent"]] + 1
        if p in hidden or p["key"] in openmp:   # one-sided patterns: only what is non-zero (summary line below)
            continue
        ind = "  " * depth[p["key"]]
        top3 = [_escaped(c) for c in p["callpaths"][:3]]
        p = _escaped({k: v for k, v in p.items() if k != "callpaths"})
        value = _s(p["seconds"]) if p["unit"] == "sec" else f"{p['seconds']:10.0f} {p['unit']}"
        w(f"  {ind}{p['name']:<{34 - len(ind)}} {value} {p['percent']:6.2f} %\n")
        if p["key"] in ("time", "mpi", "p2p", "collective", "synchronization", "init_exit", "rma", "rma_sync",
                        "rma_active", "rma_passive", "rma_window", "rma_comm", "omp"):
            continue
        if p["unit"] != "sec":
            for c in top3:
                w(f"  {ind}    {c['seconds']:.0f} {p['unit']}  {c['callpath']}  {c['where']}\n")
            continue
        for c in top3:
            r = c["ranks"]
            w(f"  {ind}    {c['seconds']:.6f} s  {c['callpath']}  {c['where']}  "
              f"(max {r['max']:.6f} s on {_who(locs, r['max_rank'])}, mean {r['mean']:.6f} s)\n")

    if hidden:
        n = sum(1 for p in report["patterns"] if p["key"] in one_sided)
        w(f"  one-sided (RMA): {n} patterns checked, {n - len(hidden)} non-zero "
          f"({'none shown: no RMA time' if len(hidden) == n else 'the zero ones not shown'})\n")

    d = report["delay"]
    cl = d["classification"]
    w(f"\nDelay costs (what caused the {cl['waiting_time']:.6f} s of waiting, Scalasca's accounting; short-term = "
      f"direct waits caused, long-term = waits propagated further)\n")
    for c in map(_escaped, d["root_causes"][:top]):
        w(f"  {c['seconds']:10.6f} s ({c['percent_of_waiting']:5.1f} % of waiting)  {c['kind']:<13}  "
          f"short {c['short_term']:.6f}  long {c['long_term']:.6f}  {c['callpath']}  {c['where']}  "
          f"(mostly {_who(locs, c['ranks']['max_rank'])})\n")
        shares = ", ".join(f"{k} {100 * v / c['seconds']:.0f} %" for k, v in
                           sorted(c["by_pattern"].items(), key=lambda kv: -kv[1]) if v >= 0.005 * c["seconds"])
        if shares:
            w(f"{'':14}explains: {shares}\n")
    if not d["root_causes"]:
        w("  no wait state with a causer\n")
    w(f"  waiting: direct {cl['direct']:.6f} s, indirect {cl['indirect']:.6f} s; propagating "
      f"{cl['propagating']:.6f} s, terminal {cl['terminal']:.6f} s; unexplained {cl['unexplained']:.6f} s\n")

    c = report["critical_path"]
    w(f"\nCritical path ({c['length']:.6f} s over {c['segments']} segments; imbalance = path time - mean time "
      f"per rank)\n")
    for e in map(_escaped, [e for e in c["callpaths"] if e["on_path"]][:top]):
        w(f"  {e['seconds']:10.6f} s {e['percent_of_path']:5.1f} %  imbalance {e['imbalance']:.6f} s  "
          f"impact {e['imbalance_impact']:.6f} s  {e['callpath']}  {e['where']}\n")

    if report["instances"]:
        w("\nMost severe instances\n")
        shown: dict[str, int] = {}
        for i in report["instances"]:
            shown[i["pattern"]] = shown.get(i["pattern"], 0) + 1
            if shown[i["pattern"]] > min(top, 5):
                continue
            i = _escaped(i)
            cause = f", caused by {_who(locs, i['causer'])}" if i["causer"] >= 0 else ""
            w(f"  {i['pattern']:<26} {i['seconds']:.6f} s  {_who(locs, i['rank'])} at t={i['enter_time']:.6f}  "
              f"{i['callpath']}  {i['where']}{cause}\n")
