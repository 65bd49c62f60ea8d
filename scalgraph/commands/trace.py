"""`scalgraph trace TRACE`: wait states, delay costs and the critical path of an event trace, and the
verdict: the computation delays that are root causes naming lines (scalgraph/trace/verdict.py).  When
the trace comes from a scalgraph run directory, the run's profiles (rank-*.sgp) beside it give the
thread-CPU time per rank and PSG vertex that decides whether a delay was real work."""
from __future__ import annotations

import sys
from dataclasses import replace


def add_arguments(p) -> None:
    inp = p.add_argument_group("input")
    inp.add_argument("trace", metavar="TRACE",
                     help="trace file: scalgraph binary, JSON, or an OTF2 anchor (traces.otf2) / its directory; "
                          "a run directory EXP/scale-P/rep-K of `scalgraph run --trace`, or the experiment EXP "
                          "itself (its largest traced scale)")
    ana = p.add_argument_group("analysis")
    ana.add_argument("--no-clock-correction", action="store_true",
                     help="analyse the timestamps as recorded (default: correct clock-condition violations first)")
    clc = p.add_argument_group("clock correction (controlled logical clock, seed 004; defaults are Scalasca's)")
    clc.add_argument("--clc-gamma", type=float, default=0.99999, metavar="G",
                     help="interval-preservation factor of the forward amortisation, 0 < G <= 1 (default %(default)s)")
    clc.add_argument("--clc-delta", type=float, default=1e-9, metavar="S",
                     help="minimum distance of consecutive events on a location, seconds (default %(default)s)")
    clc.add_argument("--clc-min-latency", type=float, default=1e-6, metavar="S",
                     help="minimum message latency, seconds: a receive ends at least this long after its send "
                          "(default %(default)s)")
    clc.add_argument("--clc-min-latency-collective", type=float, default=None, metavar="S",
                     help="minimum latency of a collective's logical messages (default: --clc-min-latency)")
    clc.add_argument("--clc-min-latency-omp", type=float, default=1e-8, metavar="S",
                     help="minimum latency between OpenMP threads (fork, join, barrier, lock hand-over) in the "
                          "hybrid correction of traces with threads (default %(default)s)")
    clc.add_argument("--write-corrected", metavar="FILE",
                     help="also write the clock-corrected trace: JSON for *.json, an OTF2 archive for *.otf2 "
                          "(anchor FILE, data in the directory of FILE's stem), else scalgraph binary")
    dly = p.add_argument_group("definitions (defaults: Scalasca 2.6's; docs/trace-analysis.md)")
    dly.add_argument("--delay-scale", choices=("scalasca", "seed"), default="scalasca",
                     help="scalasca: a point-to-point wait's short-term factor is clipped at 1; seed: s = 1/(sum "
                          "delta + W) unclipped (seed 000, Algorithm 1)")
    dly.add_argument("--delay-family", choices=("chain-end", "direct"), default="chain-end",
                     help="long-term delay costs under the pattern of the wait at the end of the propagation "
                          "chain (chain-end, scout) or of the wait they directly explain (direct)")
    dly.add_argument("--sync-points", choices=("waits", "messages"), default="waits",
                     help="point-to-point synchronisation points that start a delay interval: messages that "
                          "produced a wait state (waits, scout) or every message with the partner (messages)")
    ana.add_argument("--min-share", type=float, default=0.05, metavar="F",
                     help="a computation delay is a root cause when its cost is at least this fraction of the "
                          "total time summed over the ranks (default %(default)s)")
    ana.add_argument("--parallel", type=int, default=0, metavar="N",
                     help="replay with N analysis processes over MPI (mpi4py); applies measured clock offsets "
                          "but not the controlled logical clock")
    out = p.add_argument_group("output")
    out.add_argument("--top", type=int, default=10, metavar="N",
                     help="show the N most costly root causes, call paths and instances (default %(default)s)")
    out.add_argument("--json", action="store_true",
                     help="print the whole result as JSON (every call path, cause, instance and wait; --top "
                          "applies to the text only)")


def analyse_forward(trace, clock_correction: bool = True):
    """Clock correction (unless off) and the forward replay: the wait states of a trace."""
    from scalgraph.trace import forward
    if clock_correction:
        from scalgraph.trace.clock import correct_clocks
        trace, _ = correct_clocks(trace)
    return forward.forward_replay(forward.build_context(trace))


def cpu_evidence(trace, path: str):
    """The thread-CPU seconds per [rank, PSG vertex] of the run that recorded this trace, from the
    profiles (rank-*.sgp) in its run directory; (evidence or None, note when there is none)."""
    import pathlib
    import numpy as np
    from scalgraph.errors import UserError
    from scalgraph.io.profile_file import read_run
    from scalgraph.trace.verdict import CpuEvidence
    p = pathlib.Path(path)
    run_dir = p if p.is_dir() else p.parent
    if not any(run_dir.glob("rank-*.sgp")):
        return None, None
    try:
        prof = read_run(run_dir)
    except UserError as e:
        return None, f"the profiles beside the trace were not used ({e}); a delay is not checked for being real work"
    want = str(trace.meta.get("psg_hash") or "")
    from scalgraph.model.trace import mpi_locations
    if prof.nranks != len(mpi_locations(trace)) or (want and prof.psg_hash and want != prof.psg_hash):
        return None, (f"the profiles in {run_dir} belong to another run ({prof.nranks} ranks, "
                      f"PSG {prof.psg_hash[:12]}); a delay is not checked for being real work")
    if prof.meta.get("sampler") in (None, "off") or prof.meta.get("incomplete"):
        why = "sampling was off" if prof.meta.get("sampler") in (None, "off") else "ranks are missing"
        return None, (f"the profiles in {run_dir} measured no thread-CPU time ({why}); a delay is not checked for "
                      "being real work")
    cpu = np.where(prof.calls > 0, 0.0, prof.time)
    from scalgraph.analysis.mpi_cost import compute_stretch
    from scalgraph.analysis.whatif import rank_stretch
    stretch = compute_stretch(rank_stretch(prof))   # wall per thread-CPU second, as detect's floors
    pairs = [(n, c) for n, c in zip(prof.meta.get("ranks_on_host") or [], prof.meta.get("cores") or []) if n and c]
    shared = any(n > c for n, c in pairs)
    how = (f"{max(n for n, _ in pairs)} ranks on a host with {min(c for _, c in pairs)} cores time-share them"
           if shared else "the ranks did not time-share cores" if pairs else "core counts not recorded")
    note = (f"real work: on each causing rank a computation delay is capped at (ranks - 1) x the rank's extra work "
            f"at its PSG vertex, its thread-CPU excess over the median rank stretched as its time there was "
            f"(profiles in {run_dir}; {how})")
    if stretch >= 1.05:
        note += (f"; a rank's computation took {stretch:.2g}x its thread-CPU in wall time (cores shared with other ranks or jobs), "
                 "by which thread-CPU is scaled before it is compared with the run time")
    from scalgraph.analysis.defaults import abnorm_thd_for
    from scalgraph.trace.verdict import ABNORMAL_RATIO
    return CpuEvidence(cpu, note, {"run_dir": str(run_dir), "time_shared": shared, "stretch": stretch},
                       stretch=stretch, ratio=abnorm_thd_for(ABNORMAL_RATIO, shared),
                       stretch_of=_segment_stretch_of(trace, path, prof)), None


def _segment_stretch_of(trace, path: str, prof):
    """vertices -> [R] wall seconds per thread-CPU second of the computation segments they run in
    (analysis.whatif.segment_stretch, as detect stretches a cause), from the run's profile and the
    experiment's PSG; None where the PSG is not the trace's or the profile has no segments."""
    from scalgraph.analysis.whatif import rank_stretch, segment_stretch
    psg = experiment_psg(trace, path)
    if psg is None or getattr(prof, "comp_wall", None) is None or prof.comp_wall.shape[1] != len(psg):
        return None
    whole = rank_stretch(prof)
    return lambda vertices: segment_stretch(psg, prof.comp_wall, prof.comp_cpu, whole, list(vertices))


def experiment_psg(trace, path: str):
    """The PSG of the experiment the traced run directory belongs to (EXP/scale-P/rep-K), when its
    hash is the trace's; else None."""
    import pathlib
    from scalgraph.errors import UserError
    from scalgraph.io.safe_read import load_json_file, psg_checked
    p = pathlib.Path(path)
    run_dir = p if p.is_dir() else p.parent
    psg_file = run_dir.parent.parent / "psg.json"
    want = str(trace.meta.get("psg_hash") or "")
    if not want or not psg_file.is_file():
        return None
    try:
        psg = psg_checked(load_json_file(psg_file, "PSG"), psg_file)
    except UserError:
        return None
    return psg if psg.hash() == want else None


def psg_spans(trace, path: str) -> dict | None:
    """PSG vertex -> (file, first line, last line), from the experiment's PSG (experiment_psg)."""
    psg = experiment_psg(trace, path)
    if psg is None:
        return None
    return {v: (psg.file[v], psg.line_first[v], psg.line_last[v]) for v in range(len(psg))}


def scaling_communication_causes(path: str, result: dict, min_share: float) -> tuple[list, str | None]:
    """MPI calls whose own cost grows with p, as verdict causes: one trace cannot tell growth with p,
    so where the traced run belongs to an experiment (EXP/scale-P/rep-K) with two or more scales and P
    is its largest, detect's rule judges the experiment's profiles (a call's bytes or calls per rank
    growing like p^0.75 or faster, or its own time beating a latency model), as `scalgraph detect`
    does.  Each is weighed like a computation cause: its share of the run time at P times the total
    time.  Returns (causes, note saying what was judged) or ([], None) without such an experiment."""
    import pathlib
    from scalgraph.analysis.detect import analyse as detect_causes
    from scalgraph.errors import UserError
    from scalgraph.io.experiment import read_experiment
    run_dir = pathlib.Path(path).parent
    exp_dir = run_dir.parent.parent
    if not (exp_dir / "experiment.json").is_file() or not run_dir.parent.name.startswith("scale-"):
        return [], None
    try:
        exp = read_experiment(exp_dir)
        scales = exp.scales
        if len(scales) < 2 or run_dir.parent.name != f"scale-{scales[-1]}":
            return [], None
        found = detect_causes(exp.psg, exp.profiles(), min_share=min_share, weak=None,
                              host_cores=exp.meta.get("cores"))
    except UserError as e:
        return [], f"the experiment {exp_dir} was not judged for communication that grows with p ({e})"
    by_vertex = {c.get("vertex"): c["callpath"] for c in result["critical_path"].get("callpaths", [])}
    causes = []
    for c in found["root_causes"]:
        if c.get("kind") != "MPI":
            continue
        why = c.get("explains") or {}
        seconds = float(c["cost_share"]) * float(result["total_time"])
        causes.append({
            "file": c["file"], "line": c["line"], "vertex": c["vertex"], "vertices": [c["vertex"]],
            "where": f"{c['location']} [vertex {c['vertex']}]",
            "callpaths": [by_vertex.get(c["vertex"], f"{c['function']}/{c['name']}")],
            "seconds": seconds, "share": float(c["cost_share"]), "percent": 100 * float(c["cost_share"]),
            "delay_seconds": 0.0, "real_work": None, "rank": c.get("rank"), "ranks": {},
            "kind": "communication",
            "scaling": {"scales": list(found["scales"]), "rule": why.get("rule"), "model": c.get("model"),
                        "per_rank": why.get("per_rank"), "seconds_per_rank": float(c["cost"]),
                        "log_log_slope": c.get("log_log_slope")},
        })
    note = (f"communication that grows with p: the profiles of {exp_dir} at p={', '.join(map(str, scales))} judged by "
            f"detect's rule (an MPI call is a cause of its own when its bytes or calls per rank grow like p^0.75 or "
            f"faster, or its own time beats a latency model); {len(causes) or 'no'} such call{'s' * (len(causes) != 1)}")
    return causes, note


def program_time(trace) -> float:
    """Time between each rank's program begin record and its first event, and between its last
    event and its program end record (OTF2 ProgramBegin/ProgramEnd), summed: Scalasca counts it in
    the total time.  Taken from the recorded times (the clock correction moves neither end)."""
    begin = getattr(trace, "program_begin", None) or trace.meta.get("program_begin") or {}
    end = getattr(trace, "program_end", None) or trace.meta.get("program_end") or {}
    total = 0.0
    for r, ev in enumerate(trace.events):
        if len(ev) == 0:
            continue
        b, e = begin.get(r, begin.get(str(r))), end.get(r, end.get(str(r)))
        total += max(float(ev["time"][0]) - float(b), 0.0) if b is not None else 0.0
        total += max(float(e) - float(ev["time"][-1]), 0.0) if e is not None else 0.0
    return total


def clock_params(args):
    from scalgraph.trace.clock import ClockParams
    lat = args.clc_min_latency
    coll = lat if args.clc_min_latency_collective is None else args.clc_min_latency_collective
    return ClockParams(delta=args.clc_delta, gamma=args.clc_gamma, l_min_p2p=lat, l_min_coll=coll,
                       l_min_omp=args.clc_min_latency_omp)


def analyse(trace, clock_correction: bool = True, top: int = 10, source: str = "", min_share: float = 0.05,
            cpu=None, notes=None, params=None, delay_options=None, write_corrected: str | None = None,
            complete: bool = False, spans: dict | None = None, release: bool = False) -> dict:
    """The whole analysis of one trace: clock correction (unless off; `params`: ClockParams), the
    forward replay, delay costs (`delay_options`: delay.DelayOptions), the critical path, the report:
    complete (what `--json` prints) or, by default, limited to the `top` largest call paths on the
    path and instances per pattern (report.limited, what a page of the largest items needs).  `spans`:
    PSG vertex -> (file, first line, last line) (psg_spans), so a cause's what-if covers its loop nest.
    `release`: the caller needs the trace's events no more; they are dropped (`trace.events` emptied)
    once flattened: the clock correction and the replay context work on the flat columns, so every
    event is held once during the analysis (with `write_corrected`, once the context holds them)."""
    from scalgraph.trace import critical_path, delay, forward, report, retime
    from scalgraph.trace.clock import ClockParams, correct_clocks, correct_flat
    clock, info = "", None
    extra = program_time(trace)
    if release and not write_corrected:
        from scalgraph.trace.matching import flatten
        flat = flatten(trace, release=True)
        _drop_events(trace)
        if clock_correction:
            rep = correct_flat(trace, flat, params or ClockParams())
            clock, info = rep.summary(), rep.as_dict()
        ctx = forward.build_context(trace, flat=flat)
        del flat
    else:
        if clock_correction:
            corrected, rep = correct_clocks(trace, params or ClockParams())
            clock, info = rep.summary(), rep.as_dict()
            if release:
                _drop_events(trace)         # ranks the correction left alone stay in `corrected`
            trace = corrected
        if write_corrected:
            write_trace_by_name(trace, write_corrected)
        ctx = forward.build_context(trace)
        if release:
            _drop_events(trace)             # the context's flat columns hold them
    fwd = forward.forward_replay(ctx)
    options = delay_options or delay.DelayOptions()
    dl = delay.delay_analysis(fwd, options)
    # the verdict reads delays whose intervals a rooted collective does not cut for its non-root ranks
    dl_verdict = dl
    if options.collectives != "root" and delay.has_rooted_collectives(fwd.ctx):
        dl_verdict = delay.delay_analysis(fwd, replace(options, collectives="root"))
    result = report.build_report(fwd, dl, critical_path.critical_path(fwd), top=top, clock=clock, source=source,
                                 min_share=min_share, cpu=cpu, notes=notes, clock_correction=info,
                                 program_time=extra, verdict_delay=dl_verdict, complete=complete)
    del dl, dl_verdict                  # the what-if's re-timing is the peak: hold only what it reads
    retime.add_whatif(result["root_causes"], fwd, spans)      # what fixing each verdict cause would save
    return result if complete else report.limited(result, top)


def _drop_events(trace) -> None:
    """Empty each location's event array (the locations stay, so nranks and the tables do)."""
    trace.events = [e[:0].copy() for e in trace.events]


def write_trace_by_name(trace, path: str) -> None:
    """Write a trace in the format its file name asks for (.json, .otf2, else scalgraph binary)."""
    from scalgraph.io.trace_read import write_trace
    name = str(path).lower()
    fmt = "json" if name.endswith(".json") else "otf2" if name.endswith(".otf2") else "binary"
    write_trace(trace, path, fmt)


def _run_trace(path: str) -> tuple[str, str | None]:
    """A run directory of `scalgraph run --trace` (EXP/scale-P/rep-K) stands for its trace.sgtrace;
    an experiment directory EXP for the trace of its largest traced scale (first repetition).
    Returns (trace path, a note saying which one was taken, or None)."""
    import pathlib
    import re
    p = pathlib.Path(path)
    if p.is_dir() and (p / "trace.sgtrace").is_file():
        return str(p / "trace.sgtrace"), None
    if p.is_dir():
        found = []
        for t in p.glob("scale-*/rep-*/trace.sgtrace"):
            m = re.fullmatch(r"scale-(\d+)/rep-(\d+)", f"{t.parent.parent.name}/{t.parent.name}")
            if m:
                found.append((-int(m.group(1)), int(m.group(2)), t))
        if found:
            found.sort()
            scales = sorted({-s for s, _, _ in found})
            _, _, t = found[0]
            note = (f"experiment {p}: analysing its largest traced scale, {-found[0][0]} ranks "
                    f"({t.relative_to(p)}; traced scales: {', '.join(map(str, scales))}); pass "
                    f"{p}/scale-P/rep-K for another")
            return str(t), note
        if (p / "experiment.json").is_file() and not any(p.glob("*.otf2")):
            from scalgraph.errors import UserError
            raise UserError(f"{p}: this experiment holds no traces (scale-P/rep-K/trace.sgtrace); record one with "
                            f"`scalgraph run --trace`")
    return path, None


def run(args) -> int:
    from scalgraph.errors import UserError
    from scalgraph.io.trace_read import read_trace
    from scalgraph.trace import report
    if args.top < 1:
        raise UserError(f"--top must be at least 1 (got {args.top})")
    if not 0.0 <= args.min_share < 1.0:
        raise UserError(f"--min-share must be a fraction from 0 to below 1 (got {args.min_share:g})")
    from scalgraph.trace.delay import DelayOptions
    options = DelayOptions(scale=args.delay_scale, family=args.delay_family, sync_points=args.sync_points)
    params = clock_params(args)                      # checks the values even when not used
    path, which = _run_trace(str(args.trace))
    if which:
        print(f"scalgraph trace: {which}", file=sys.stderr)
    if args.write_corrected and args.no_clock_correction:
        raise UserError("--write-corrected writes the clock-corrected trace; it cannot go with --no-clock-correction")
    if args.parallel:
        if args.write_corrected:
            raise UserError("--write-corrected needs the serial replay (the parallel one does not run the "
                            "controlled logical clock); drop --parallel")
        from scalgraph.trace.parallel import launch
        return launch(args.parallel, path, top=args.top, as_json=args.json, min_share=args.min_share,
                      options=options)
    if args.write_corrected:
        import pathlib
        if pathlib.Path(args.write_corrected).exists():
            raise UserError(f"{args.write_corrected}: already exists; choose another name or remove it")
    trace = read_trace(path)
    cpu, why = cpu_evidence(trace, path)
    notes = [n for n in (which, why) if n]
    spans = psg_spans(trace, path)
    result = analyse(trace, clock_correction=not args.no_clock_correction, top=args.top, source=str(args.trace),
                     min_share=args.min_share, cpu=cpu, notes=notes or None, params=params, delay_options=options,
                     write_corrected=args.write_corrected, complete=args.json, spans=spans, release=True)
    if which:                   # an experiment: each cause's what-if at its other traced scales too
        from scalgraph.trace.retime import whatif_across_experiment
        whatif_across_experiment(result["root_causes"], str(args.trace), path, not args.no_clock_correction,
                                 params, spans)
    grows, judged = scaling_communication_causes(path, result, args.min_share)
    if grows:                   # ranked with the computation causes by their share of the total time
        result["root_causes"] = sorted(result["root_causes"] + grows, key=lambda c: -c["seconds"])
        result["problem_found"] = True
    if judged:
        result["notes"] = list(result.get("notes") or []) + [judged]
    if args.json:
        report.write_json(result, sys.stdout)
    else:
        report.write_text(result, sys.stdout, top=args.top)
    return 0
