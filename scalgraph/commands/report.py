"""`scalgraph report EXP|TRACE -o report.html`: the analysis as one self-contained HTML page.

An experiment directory gets detect's analysis (the same call and options as `scalgraph detect`),
and, when its largest scale was recorded with `scalgraph run --trace`, that trace's sections too.  A
trace (a trace file, an OTF2 archive, or a run directory EXP/scale-P/rep-K of a traced run) gets the
analysis of `scalgraph trace`.  Beside the result dicts, the page needs a few arrays the results
summarise: each repetition's run time, the time of every cause on every rank, the PSG's time per
vertex; they are read here from the same profiles, with the analysis's own functions."""
from __future__ import annotations

import pathlib
import sys

from scalgraph.analysis.defaults import DEFAULT_ABNORM_THD, DEFAULT_MIN_SHARE
from scalgraph.errors import UserError, printable

DEFAULT_OUTPUT = "report.html"
_HEAD = 4096


def add_arguments(p) -> None:
    inp = p.add_argument_group("input")
    inp.add_argument("target", metavar="EXP|TRACE",
                     help="experiment directory written by `scalgraph run`, or a trace: a trace file, an OTF2 "
                          "archive, or a run directory EXP/scale-P/rep-K of `scalgraph run --trace`")
    inp.add_argument("--source-dir", action="append", default=[], metavar="DIR",
                     help="where the source files are; only files under these directories are shown (default: "
                          "the current directory and the experiment's parent); repeatable")
    ana = p.add_argument_group("analysis (as for scalgraph detect / scalgraph trace)")
    ana.add_argument("--abnorm-thd", type=float, default=DEFAULT_ABNORM_THD, metavar="X",
                     help="a rank is abnormal when its value exceeds X times the median rank (default %(default)s)")
    ana.add_argument("--min-share", type=float, default=None, metavar="F",
                     help=f"report causes costing at least this fraction of the run time (default {DEFAULT_MIN_SHARE})")
    ana.add_argument("--clusters", type=int, default=0, metavar="K",
                     help="merge ranks by k-means into K groups and model the slowest group")
    ideal = ana.add_mutually_exclusive_group()
    ideal.add_argument("--weak", dest="weak", action="store_const", const=True, default=None,
                       help="weak scaling: the ideal time stays constant as p grows")
    ideal.add_argument("--strong", dest="weak", action="store_const", const=False,
                       help="strong scaling: the ideal time falls like 1/p")
    ana.add_argument("--no-clock-correction", action="store_true",
                     help="trace: analyse the timestamps as recorded")
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", default=DEFAULT_OUTPUT, metavar="FILE",
                     help="the HTML file to write (default %(default)s); an existing file is replaced only when "
                          "it is a scalgraph report")
    out.add_argument("--top", type=int, default=5, metavar="N", help="show the N most costly root causes (default %(default)s)")


def run(args) -> int:
    from scalgraph.io.safe_read import finite
    finite(args.abnorm_thd, "--abnorm-thd")
    if args.min_share is not None:
        finite(args.min_share, "--min-share")
        if not 0.0 < args.min_share < 1.0:
            raise UserError(f"--min-share must be between 0 and 1 (got {args.min_share})")
    if args.abnorm_thd <= 1.0:
        raise UserError(f"--abnorm-thd must be above 1 (got {args.abnorm_thd}); the paper uses 1.3")
    if args.top < 1 or args.clusters < 0:
        raise UserError("--top must be at least 1 and --clusters at least 0")
    out = pathlib.Path(args.output)
    _check_output(out)
    target = pathlib.Path(args.target)
    if (target / "experiment.json").exists():
        page = experiment_report(args, target)
    elif target.exists():
        page = trace_report(args, target)
    else:
        raise UserError(f"{target}: no such experiment directory or trace; run `scalgraph run -n 2,4,8 -o EXP -- ./app` "
                        "first")
    from scalgraph.io.safe_write import write_atomic
    write_atomic(out, page)
    size = out.stat().st_size
    print(printable(f"scalgraph report: wrote {out} ({size / 1e6:.1f} MB); open it in a web browser "
                    "(it works offline)"), file=sys.stderr)
    return 0


def _check_output(out: pathlib.Path) -> None:
    """Never replace a file that is not one of our reports (a mistyped -o must not eat a source file)."""
    if out.is_dir():
        raise UserError(f"{out} is a directory; give the HTML file to write, e.g. -o {out / DEFAULT_OUTPUT}")
    if out.exists():
        if not out.is_file():
            raise UserError(f"{out} exists and is not a regular file; choose another -o")
        try:
            with open(out, "rb") as f:
                head = f.read(_HEAD)
        except OSError as e:
            raise UserError(f"cannot check {out}: {e.strerror}") from None
        from scalgraph.io.html_report.page import GENERATOR
        if f'<meta name="generator" content="{GENERATOR}">'.encode() not in head:
            raise UserError(f"{out} exists and is not a scalgraph report; choose another -o or remove it first")
    if not out.parent.is_dir():
        raise UserError(f"cannot write {out}: the directory {out.parent} does not exist")


def _roots(args, default: list[pathlib.Path]) -> list[pathlib.Path]:
    dirs = [pathlib.Path(d) for d in args.source_dir]
    for d in dirs:
        if not d.is_dir():
            raise UserError(f"--source-dir {d}: not a directory")
    return dirs or default


# ---- experiments ----

def experiment_report(args, path: pathlib.Path) -> str:
    from scalgraph.analysis.detect import analyse
    from scalgraph.commands.detect import with_trace_evidence
    from scalgraph.io.experiment import read_experiment
    from scalgraph.io.html_report import experiment_page
    exp = read_experiment(path)
    profiles, evidence = with_trace_evidence(exp)
    min_share = DEFAULT_MIN_SHARE if args.min_share is None else args.min_share
    result = analyse(exp.psg, profiles, abnorm_thd=args.abnorm_thd, min_share=min_share, clusters=args.clusters,
                     top=args.top, weak=args.weak, host_cores=exp.meta.get("cores"))
    result["notes"] = exp.warnings + [evidence["note"]] + result["notes"]
    result["evidence"] = {k: v for k, v in evidence.items() if k != "note"}
    views = experiment_views(exp, result, args.clusters)
    roots = _roots(args, [pathlib.Path.cwd(), exp.path.parent])
    trace = trace_views = None
    if evidence.get("waiting") == "trace":
        trace, trace_views = _trace_result(args, pathlib.Path(evidence["trace"]), min_share)
    return experiment_page(result, exp.psg, views, roots, trace, trace_views)


def experiment_views(exp, result: dict, clusters: int) -> dict:
    """The arrays behind the plots, from the experiment's profiles, one scale in memory at a time:
    each repetition's run time; per root cause its time on every rank (the median of the repetitions,
    as detect merges them) and its mean over ranks in each repetition; each vertex's mean time."""
    import numpy as np
    from scalgraph.analysis.constructs import constructs
    from scalgraph.analysis.detect import merged, run_time
    from scalgraph.io.experiment import median_of_repetitions
    cons = constructs(exp.psg)
    causes = result["root_causes"]
    ids = [int(c["construct"]) for c in causes]
    rep_times: dict[str, list[float]] = {}
    per_rank = [{} for _ in causes]
    reps = [{} for _ in causes]
    vertex_time: dict[str, list[float]] = {}
    for p in result["scales"]:
        runs = [exp.read_run(d) for d in exp.run_dirs[p]]
        key = str(p)
        rep_times[key] = [run_time(r) for r in runs]
        for k, c in enumerate(ids):
            reps[k][key] = [float(merged(cons.sum_columns(r.time), clusters)[c]) for r in runs]
        prof = median_of_repetitions(runs)
        summed = cons.sum_columns(prof.time)
        for k, c in enumerate(ids):
            per_rank[k][key] = [float(x) for x in summed[:, c]]
        vertex_time[key] = [float(x) for x in (prof.time.mean(axis=0) if prof.nranks else np.zeros(len(exp.psg)))]
    meta = {k: exp.meta.get(k) for k in ("created", "command", "mpi_library", "host")}
    return {"experiment": str(exp.path), "meta": meta, "rep_times": rep_times, "vertex_time": vertex_time,
            "causes": [{"per_rank": per_rank[k], "reps": reps[k]} for k in range(len(causes))]}


# ---- traces ----

def _run_trace(path: pathlib.Path) -> pathlib.Path:
    """A run directory of `scalgraph run --trace` stands for its trace.sgtrace."""
    from scalgraph.commands.detect import TRACE_FILE
    return path / TRACE_FILE if path.is_dir() and (path / TRACE_FILE).is_file() else path


def _trace_result(args, path: pathlib.Path, min_share: float) -> tuple[dict, dict]:
    """`scalgraph trace --json`'s result for one trace, and where its time starts."""
    from scalgraph.commands.trace import analyse, cpu_evidence
    from scalgraph.io.trace_read import read_trace
    trace = read_trace(path)
    cpu, why = cpu_evidence(trace, str(path))
    result = analyse(trace, clock_correction=not args.no_clock_correction, top=max(args.top, 10), source=str(path),
                     min_share=min_share, cpu=cpu, notes=[why] if why else None)
    starts = [float(ev["time"][0]) for ev in trace.events if len(ev)]
    return result, {"t0": min(starts) if starts else 0.0}


def trace_report(args, target: pathlib.Path) -> str:
    from scalgraph.io.html_report import trace_page
    path = _run_trace(target)
    min_share = 0.05 if args.min_share is None else args.min_share
    result, views = _trace_result(args, path, min_share)
    run_dir = path.parent if path.is_file() else path
    default = [pathlib.Path.cwd(), run_dir]
    if run_dir.parent.name.startswith("scale-") and (run_dir.parent.parent / "experiment.json").exists():
        default.append(run_dir.parent.parent.parent)    # EXP/scale-P/rep-K: the experiment's parent, as for EXP
    return trace_page(result, views, _roots(args, default))
