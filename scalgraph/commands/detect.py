"""`scalgraph detect EXP`: rank the source lines that cause scaling loss in an experiment."""
from __future__ import annotations

import pathlib
import shlex
import sys

from scalgraph.analysis.defaults import DEFAULT_ABNORM_THD, DEFAULT_MIN_SHARE
from scalgraph.errors import UserError, printable

EXIT_ONE_SCALE = 3   # report printed, but the scaling half of the analysis could not run


def add_arguments(p) -> None:
    inp = p.add_argument_group("input")
    inp.add_argument("experiment", metavar="EXP", help="experiment directory written by `scalgraph run`")
    inp.add_argument("--source-dir", action="append", default=[], metavar="DIR",
                     help="where to look for source files (default: the current directory); repeatable")
    ana = p.add_argument_group("analysis")
    ana.add_argument("--abnorm-thd", type=float, default=DEFAULT_ABNORM_THD, metavar="X",
                     help="a rank is abnormal when its value exceeds X times the median rank (default %(default)s)")
    ana.add_argument("--min-share", type=float, default=DEFAULT_MIN_SHARE, metavar="F",
                     help="report causes costing at least this fraction of the run time (default %(default)s)")
    ana.add_argument("--clusters", type=int, default=0, metavar="K",
                     help="merge ranks by k-means into K groups and model the slowest group (default: mean of all ranks)")
    ideal = ana.add_mutually_exclusive_group()
    ideal.add_argument("--weak", dest="weak", action="store_const", const=True, default=None,
                       help="weak scaling: the ideal time stays constant as p grows (default: judged from the "
                            "computation summed over the ranks, which grows like p under weak scaling)")
    ideal.add_argument("--strong", dest="weak", action="store_const", const=False,
                       help="strong scaling: the ideal time falls like 1/p")
    out = p.add_argument_group("output")
    out.add_argument("--top", type=int, default=5, metavar="N", help="show the N most costly root causes (default %(default)s)")
    out.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    from scalgraph.analysis.detect import analyse          # numpy, scipy: only when the command runs
    from scalgraph.io.experiment import read_experiment
    from scalgraph.io.report import write_json, write_text
    from scalgraph.io.safe_read import finite
    finite(args.abnorm_thd, "--abnorm-thd")
    finite(args.min_share, "--min-share")
    if args.abnorm_thd <= 1.0:
        raise UserError(f"--abnorm-thd must be above 1 (got {args.abnorm_thd}); the paper uses 1.3")
    if not 0.0 < args.min_share < 1.0:
        raise UserError(f"--min-share must be between 0 and 1 (got {args.min_share})")
    if args.top < 1 or args.clusters < 0:
        raise UserError("--top must be at least 1 and --clusters at least 0")
    exp = read_experiment(args.experiment)
    profiles, evidence = with_trace_evidence(exp)
    result = analyse(exp.psg, profiles, abnorm_thd=args.abnorm_thd, min_share=args.min_share,
                     clusters=args.clusters, top=args.top, weak=args.weak, host_cores=exp.meta.get("cores"))
    result["notes"] = exp.warnings + [evidence["note"]] + result["notes"]
    result["evidence"] = {k: v for k, v in evidence.items() if k != "note"}
    if args.json:
        write_json(result, sys.stdout, str(args.experiment))
    else:
        roots = [pathlib.Path(d) for d in args.source_dir] or [pathlib.Path.cwd(), exp.path.parent]
        write_text(result, sys.stdout, str(args.experiment), roots)
        print("\n" + printable(f"HTML report with plots, source and the program tree: scalgraph report {shlex.quote(str(args.experiment))} -o report.html"))
    if len(result["scales"]) < 2:
        failed = sorted({r.get("scale") for r in exp.meta.get("runs", [])
                         if isinstance(r, dict) and r.get("status") != "ok" and r.get("scale") not in result["scales"]},
                        key=str)
        why = (f"the runs at p={','.join(map(str, failed))} did not succeed (see experiment.json; run the same "
               "`scalgraph run` command again to retry them)" if failed else
               "finding non-scalable code needs runs at 2 or more scales (scalgraph run -n 2,4,8)")
        print(printable(f"scalgraph detect: {args.experiment} has a successful run at one scale only "
                        f"(p={result['scales'][0]}): abnormal ranks are shown, but {why}"), file=sys.stderr)
        return EXIT_ONE_SCALE
    return 0


TRACE_FILE = "trace.sgtrace"


def with_trace_evidence(exp):
    """Where a scale was recorded with `scalgraph run --trace`, the trace replay's wait states give its
    dependence edges their exact costs (who waited for whom, how long); MPI time that no pattern
    classifies stays waiting as the profile measured it, never the call's own work
    (scalgraph/trace/evidence.py).  Returns (scale -> RunProfile mapping, what was used)."""
    profiles = exp.profiles()
    if not exp.scales:
        return profiles, {"waiting": "profile", "note": "waiting evidence: profile (no runs)"}
    traced = [p for p in exp.scales if (exp.run_dirs[p][0] / TRACE_FILE).is_file()]
    if exp.scales[-1] not in traced:
        return profiles, {"waiting": "profile",
                          "note": "waiting evidence: the profiles' blocked time in MPI (no traces; record them "
                                  "with `scalgraph run --trace` for exact wait states)"}
    merged, explained, kept = {}, 0.0, 0.0
    for p in exp.scales:
        if p not in traced:
            merged[p] = profiles[p]
            continue
        merged[p], (e, k) = _traced_profile(profiles[p], exp.run_dirs[p][0] / TRACE_FILE)
        if p == exp.scales[-1]:
            explained, kept = e, k
    big = exp.scales[-1]
    trace_path = exp.run_dirs[big][0] / TRACE_FILE
    return merged, {"waiting": "trace", "trace": str(trace_path), "scale": big, "traced_scales": traced,
                    "wait_states": explained, "unclassified_mpi_wait": kept,
                    "note": f"waiting evidence at p={','.join(map(str, traced))}: exact wait states from the trace "
                            f"replay ({explained:.3g} s at p={big}, of {trace_path}); MPI time no pattern classifies "
                            f"({kept:.3g} s) stays waiting as the profile measured it"}


def _traced_profile(prof, trace_path):
    """The profile with its trace's wait states; (seconds of wait states, seconds of waiting the
    profile measured beyond them)."""
    from scalgraph.commands.trace import analyse_forward
    from scalgraph.io.trace_read import read_trace
    from scalgraph.trace.evidence import profile_with_trace_waits, waits_by_vertex
    waits = waits_by_vertex(analyse_forward(read_trace(trace_path)))
    out = profile_with_trace_waits(prof, waits)
    explained = float(sum(waits.values()))
    return out, (explained, max(float(out.wait.sum()) - explained, 0.0))
