"""`scalgraph trace TRACE`: wait states, delay costs and the critical path of an event trace."""
from __future__ import annotations

import sys


def add_arguments(p) -> None:
    inp = p.add_argument_group("input")
    inp.add_argument("trace", metavar="TRACE",
                     help="trace file: scalgraph binary, JSON, or an OTF2 anchor (traces.otf2) / its directory")
    ana = p.add_argument_group("analysis")
    ana.add_argument("--no-clock-correction", action="store_true",
                     help="analyse the timestamps as recorded (default: correct clock-condition violations first)")
    ana.add_argument("--communication-delays", action="store_true",
                     help="also count the non-waiting part of MPI calls as delays (seed 000's accounting; "
                          "default: only computation delays, MPI time no pattern classifies is communication)")
    ana.add_argument("--parallel", type=int, default=0, metavar="N",
                     help="replay with N analysis processes over MPI (mpi4py); applies measured clock offsets "
                          "but not the controlled logical clock")
    out = p.add_argument_group("output")
    out.add_argument("--top", type=int, default=10, metavar="N",
                     help="show the N most costly root causes, call paths and instances (default %(default)s)")
    out.add_argument("--json", action="store_true", help="print the whole result as JSON")


def analyse_forward(trace, clock_correction: bool = True):
    """Clock correction (unless off) and the forward replay: the wait states of a trace."""
    from scalgraph.trace import forward
    if clock_correction:
        from scalgraph.trace.clock import correct_clocks
        trace, _ = correct_clocks(trace)
    return forward.forward_replay(forward.build_context(trace))


def analyse(trace, clock_correction: bool = True, top: int = 10, source: str = "",
            communication: bool = False) -> dict:
    from scalgraph.trace import critical_path, delay, forward, report
    clock = ""
    if clock_correction:
        from scalgraph.trace.clock import correct_clocks
        trace, rep = correct_clocks(trace)
        clock = rep.summary()
    fwd = forward.forward_replay(forward.build_context(trace))
    return report.build_report(fwd, delay.delay_analysis(fwd, communication), critical_path.critical_path(fwd),
                               top=top, clock=clock, source=source, communication=communication)


def _run_trace(path: str) -> str:
    """A run directory of `scalgraph run --trace` (EXP/scale-P/rep-K) stands for its trace.sgtrace."""
    import pathlib
    p = pathlib.Path(path)
    return str(p / "trace.sgtrace") if p.is_dir() and (p / "trace.sgtrace").is_file() else path


def run(args) -> int:
    from scalgraph.errors import UserError
    from scalgraph.io.trace_read import read_trace
    from scalgraph.trace import report
    if args.top < 1:
        raise UserError(f"--top must be at least 1 (got {args.top})")
    if args.parallel and args.communication_delays:
        raise UserError("--communication-delays is not available with --parallel; run the serial replay")
    if args.parallel:
        from scalgraph.trace.parallel import launch
        return launch(args.parallel, _run_trace(str(args.trace)), top=args.top, as_json=args.json)
    trace = read_trace(_run_trace(args.trace))
    result = analyse(trace, clock_correction=not args.no_clock_correction, top=args.top, source=str(args.trace),
                     communication=args.communication_delays)
    if args.json:
        report.write_json(result, sys.stdout)
    else:
        report.write_text(result, sys.stdout, top=args.top)
    return 0
