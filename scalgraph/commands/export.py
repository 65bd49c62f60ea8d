"""`scalgraph export INPUT --FORMAT OUT ...`: an experiment or a trace in the formats of the tools people
already use (docs/exports.md): Hatchet and Thicket, Extra-P, Cube (Scalasca), OTF2, and Chrome trace-event
JSON for Perfetto / chrome://tracing.  Several formats may be asked for at once.  Each output is written
to a temporary file beside it and renamed; an existing output is replaced only with --force."""
from __future__ import annotations

import json
import pathlib
import sys

from scalgraph.errors import UserError
from scalgraph.io import export_write

EXP_FORMATS = ("hatchet", "thicket", "extrap")
TRACE_FORMATS = ("otf2", "perfetto")
TRACE_FILE = "trace.sgtrace"


def add_arguments(p) -> None:
    inp = p.add_argument_group("input")
    inp.add_argument("input", metavar="EXP|TRACE",
                     help="experiment directory (scalgraph run), or a trace: file, OTF2 anchor, or a run directory "
                          "holding trace.sgtrace")
    inp.add_argument("--scale", type=int, default=0, metavar="P",
                     help="for an experiment: the scale whose profile (--cube) or trace (--otf2, --perfetto) is "
                          "exported (default: the largest)")
    out = p.add_argument_group("output (one or more)")
    out.add_argument("--hatchet", metavar="FILE", help="experiment: per scale a call tree for Hatchet (JSON)")
    out.add_argument("--thicket", metavar="FILE", help="experiment: all scales as one Thicket ensemble (JSON)")
    out.add_argument("--extrap", metavar="FILE", help="experiment: Extra-P input")
    out.add_argument("--cube", metavar="FILE.cubex",
                     help="Cube4 file for Scalasca's Cube: profile metrics of an experiment, or wait states and "
                          "delay costs of a trace")
    out.add_argument("--otf2", metavar="DIR", help="trace: an OTF2 archive in DIR (DIR/traces.otf2)")
    out.add_argument("--perfetto", metavar="FILE",
                     help="trace: Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing)")
    out.add_argument("--force", action="store_true", help="replace outputs that already exist")
    ana = p.add_argument_group("analysis (traces)")
    ana.add_argument("--no-clock-correction", action="store_true",
                     help="--perfetto and --cube use the timestamps as recorded (default: corrected as `scalgraph "
                          "trace` does); --otf2 always keeps them as recorded")


def _wanted(args) -> dict[str, str]:
    return {f: getattr(args, f) for f in (*EXP_FORMATS, "cube", *TRACE_FORMATS) if getattr(args, f)}


def _is_experiment(path: pathlib.Path) -> bool:
    return path.is_dir() and (path / "experiment.json").is_file()


def run(args) -> int:
    wanted = _wanted(args)
    if not wanted:
        raise UserError("nothing to export: give one or more of --hatchet, --thicket, --extrap, --cube, --otf2, "
                        "--perfetto with an output name")
    src = pathlib.Path(args.input)
    if not src.exists():
        raise UserError(f"{src}: no such experiment or trace")
    outs = [pathlib.Path(o).resolve() for o in wanted.values()]
    if len(set(outs)) != len(outs):
        raise UserError("two exports name the same output; give each its own file")
    here = src.resolve()
    for o in outs:
        if o == here or o in here.parents or (o.exists() and here.is_dir() and here in o.parents):
            raise UserError(f"{o}: is the input or part of it; write the export elsewhere")
    for fmt, dest in wanted.items():     # fail before any work when an output cannot be written
        export_write.check_destination(dest, args.force, "directory" if fmt == "otf2" else "file")
    if _is_experiment(src):
        _export_experiment(src, args, wanted)
    else:
        if src.is_dir() and not (src / TRACE_FILE).is_file() and not any(src.glob("*.otf2")):
            raise UserError(f"{src}: neither an experiment (no experiment.json) nor a trace (no {TRACE_FILE} or "
                            "*.otf2 in it); pass the directory `scalgraph run -o` wrote, or a trace")
        if args.scale:
            raise UserError(f"--scale picks a scale of an experiment; {src} is not an experiment directory")
        misplaced = [f"--{f}" for f in wanted if f in EXP_FORMATS]
        if misplaced:
            raise UserError(f"{' '.join(misplaced)} need{'s' if len(misplaced) == 1 else ''} an experiment "
                            f"directory (with experiment.json); {src} is not one")
        _export_trace(_trace_path(src), args, wanted)
    for fmt, dest in wanted.items():
        print(f"scalgraph export: wrote {dest} ({fmt})", file=sys.stderr)   # stdout may be the output
    return 0


def _json(doc: dict, compact: bool = False) -> str:
    try:
        return json.dumps(doc, allow_nan=False, separators=(",", ":") if compact else None)
    except ValueError:
        raise UserError("the input holds values that are not finite numbers (NaN or infinity); the data is "
                        "damaged, record it again") from None


def _trace_path(p: pathlib.Path) -> pathlib.Path:
    return p / TRACE_FILE if p.is_dir() and (p / TRACE_FILE).is_file() else p


# --- experiments ---------------------------------------------------------------------------------

def _export_experiment(src: pathlib.Path, args, wanted: dict[str, str]) -> None:
    from scalgraph.io.experiment import read_experiment
    exp = read_experiment(src)
    scale = args.scale or exp.scales[-1]
    if scale not in exp.scales:
        raise UserError(f"--scale {scale}: {src} has no successful run at that scale (scales: {exp.scales})")
    trace_fmts = [f for f in wanted if f in TRACE_FORMATS]
    if trace_fmts:
        trace = exp.run_dirs[scale][0] / TRACE_FILE
        if not trace.is_file():
            raise UserError(f"--{trace_fmts[0]} needs a trace, and {src} has none at p={scale} (record one with "
                            f"`scalgraph run --trace`, or pass a trace file)")
        _export_trace(trace, args, {f: wanted[f] for f in trace_fmts})
    if "hatchet" in wanted or "thicket" in wanted:
        from scalgraph.io import export_hatchet
        profiles = exp.profiles()          # read one scale at a time, when its turn comes
        if "hatchet" in wanted:
            doc = export_hatchet.hatchet_document(exp.psg, profiles, str(src))
            export_write.write_new(wanted["hatchet"], _json(doc), args.force)
        if "thicket" in wanted:
            doc = export_hatchet.thicket_document(exp.psg, profiles, str(src), exp.meta)
            export_write.write_new(wanted["thicket"], _json(doc), args.force)
    if "cube" in wanted:
        from scalgraph.io import export_cube
        data = export_cube.cube_from_profile(exp.psg, exp.profile(scale), source=f"{src} p={scale}")
        export_write.write_new(wanted["cube"], export_cube.cubex_bytes(data), args.force)
    if "extrap" in wanted:
        _export_extrap(src, wanted["extrap"], args.force)
    for note in exp.warnings:             # partial data found while reading: the exports carry it as it is
        print(f"scalgraph export: note: {note}", file=sys.stderr)


def _export_extrap(src: pathlib.Path, dest: str, force: bool) -> None:
    try:
        from scalgraph.io.extrap_export import write_extrap
    except ModuleNotFoundError as e:
        if e.name != "scalgraph.io.extrap_export":
            raise
        raise UserError("--extrap: Extra-P export is not available in this build") from None
    write_extrap(src, dest, force=force)      # writes through a temporary file, refuses to overwrite


# --- traces --------------------------------------------------------------------------------------

def _export_trace(path: pathlib.Path, args, wanted: dict[str, str]) -> None:
    from scalgraph.io.trace_read import read_trace
    trace = read_trace(path)
    if "otf2" in wanted:
        from scalgraph.io.trace_otf2 import write_otf2
        with export_write.new_directory(wanted["otf2"], args.force) as tmp:
            write_otf2(trace, tmp / "traces.otf2")
    if "perfetto" in wanted or "cube" in wanted:
        from scalgraph.commands.trace import analyse_forward
        fwd = analyse_forward(trace, clock_correction=not args.no_clock_correction)
        if "perfetto" in wanted:
            from scalgraph.io import export_perfetto
            doc = export_perfetto.chrome_trace(**_perfetto_inputs(fwd), source=str(path))
            export_write.write_new(wanted["perfetto"], _json(doc, compact=True), args.force)
        if "cube" in wanted:
            from scalgraph.io import export_cube
            data = export_cube.cube_from_replay(**_cube_inputs(fwd, trace), source=str(path))
            export_write.write_new(wanted["cube"], export_cube.cubex_bytes(data), args.force)


def _perfetto_inputs(fwd) -> dict:
    """The replay's region visits, messages and wait states as the plain arrays export_perfetto takes."""
    import numpy as np
    from scalgraph.io import export_perfetto as ep
    from scalgraph.model.trace import ENTER
    from scalgraph.trace import patterns
    ctx = fwd.ctx
    t, t_exit, rank = ctx.time, ctx.exit_time, ctx.flat.rank
    enter = np.flatnonzero(ctx.ev["kind"] == ENTER)
    slices = np.zeros(len(enter), ep.SLICE_DTYPE)
    slices["rank"], slices["region"] = rank[enter], ctx.ev["region"][enter]
    slices["t0"], slices["t1"] = t[enter], t_exit[enter]
    m = ctx.msgs
    msgs = np.zeros(len(m), ep.MSG_DTYPE)
    msgs["src"], msgs["dst"], msgs["tag"] = m.src, m.dst, m.tag
    msgs["bytes"] = m.nbytes
    # arrows bind to the slice around their time stamp: the middle of each call is inside it
    msgs["t_send"] = (t[m.send_op] + t_exit[m.send_op]) / 2
    msgs["t_recv"] = (t[m.recv_op] + t_exit[m.recv_op]) / 2
    # a sub-pattern (Late Sender / Wrong Order, ...) re-classifies its parent's rows: show each wait once
    evaluated = {p.key for p in patterns.PATTERNS if p.evaluate is not None}
    top = np.array([p.evaluate is not None and p.parent not in evaluated for p in patterns.PATTERNS])
    w = fwd.waits[top[fwd.waits["pattern"]]]
    at_end = np.array([p.key.endswith("_completion") for p in patterns.PATTERNS])[w["pattern"]]
    te, tx, omega = t[w["op"]], t_exit[w["op"]], w["wait"]
    waits = np.zeros(len(w), ep.WAIT_DTYPE)
    waits["rank"], waits["pattern"], waits["causer"] = w["rank"], w["pattern"], w["causer"]
    waits["t0"] = np.where(at_end, np.maximum(tx - omega, te), te)
    waits["t1"] = np.where(at_end, tx, np.minimum(te + omega, tx))
    c_op = np.maximum(w["causer_op"], 0)
    waits["t_causer"] = np.where(w["causer"] >= 0, (t[c_op] + t_exit[c_op]) / 2, 0.0)
    regions = ctx.trace.regions
    return {"nranks": ctx.nranks, "region_names": [r.name for r in regions],
            "region_is_mpi": [r.is_mpi for r in regions], "slices": slices, "messages": msgs, "waits": waits,
            "pattern_names": [p.name for p in patterns.PATTERNS]}


def _cube_inputs(fwd, trace) -> dict:
    """The replay's severities, visits and delay costs per call path and rank, for export_cube."""
    import numpy as np
    from scalgraph.model.trace import ENTER
    from scalgraph.trace import patterns
    from scalgraph.trace.delay import delay_analysis
    ctx = fwd.ctx
    enter = np.flatnonzero(ctx.ev["kind"] == ENTER)
    ncp, p = ctx.ncallpaths, ctx.nranks
    visits = np.bincount(ctx.nest.callpath[enter] * p + ctx.flat.rank[enter], minlength=ncp * p).reshape(ncp, p)
    from scalgraph.trace.critical_path import critical_path
    dr = delay_analysis(fwd)
    hosts = trace.meta.get("hosts")
    if not isinstance(hosts, list) or len(hosts) != p:
        hosts = ["localhost"] * p
    return {"patterns": [{"key": q.key, "name": q.name, "parent": q.parent, "description": q.description,
                          "unit": q.unit} for q in patterns.PATTERNS],
            "cube": fwd.cube, "visits": visits.astype(float), "delay_short": dr.short_by_pattern,
            "delay_long": dr.long_by_pattern, "cp_parent": ctx.nest.cp_parent.tolist(),
            "cp_region": ctx.nest.cp_region.tolist(),
            "regions": [{"name": r.name, "file": r.file, "begin": r.line or -1, "end": -1,
                         "paradigm": "mpi" if r.is_mpi else "user", "role": "function"} for r in ctx.trace.regions],
            "hosts": [str(h) for h in hosts], "critical_path": critical_path(fwd).profile}
