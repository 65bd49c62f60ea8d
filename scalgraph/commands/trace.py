"""`scalgraph trace TRACE`: wait states, delay costs and the critical path of an event trace, and the
verdict: the computation delays that are root causes naming lines (scalgraph/trace/verdict.py).  When
the trace comes from a scalgraph run directory, the run's profiles (rank-*.sgp) beside it give the
thread-CPU time per rank and PSG vertex that decides whether a delay was real work."""
from __future__ import annotations

import sys


def add_arguments(p) -> None:
    inp = p.add_argument_group("input")
    inp.add_argument("trace", metavar="TRACE",
                     help="trace file: scalgraph binary, JSON, or an OTF2 anchor (traces.otf2) / its directory")
    ana = p.add_argument_group("analysis")
    ana.add_argument("--no-clock-correction", action="store_true",
                     help="analyse the timestamps as recorded (default: correct clock-condition violations first)")
    ana.add_argument("--min-share", type=float, default=0.05, metavar="F",
                     help="a computation delay is a root cause when its cost is at least this fraction of the "
                          "total time summed over the ranks (default %(default)s)")
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
    if prof.nranks != trace.nranks or (want and prof.psg_hash and want != prof.psg_hash):
        return None, (f"the profiles in {run_dir} belong to another run ({prof.nranks} ranks, "
                      f"PSG {prof.psg_hash[:12]}); a delay is not checked for being real work")
    if prof.meta.get("sampler") in (None, "off") or prof.meta.get("incomplete"):
        why = "sampling was off" if prof.meta.get("sampler") in (None, "off") else "ranks are missing"
        return None, (f"the profiles in {run_dir} measured no thread-CPU time ({why}); a delay is not checked for "
                      "being real work")
    cpu = np.where(prof.calls > 0, 0.0, prof.time)
    pairs = [(n, c) for n, c in zip(prof.meta.get("ranks_on_host") or [], prof.meta.get("cores") or []) if n and c]
    shared = any(n > c for n, c in pairs)
    how = (f"{max(n for n, _ in pairs)} ranks on a host with {min(c for _, c in pairs)} cores time-share them"
           if shared else "the ranks did not time-share cores" if pairs else "core counts not recorded")
    note = (f"real work: on each causing rank a computation delay is capped at (ranks - 1) x the rank's extra work "
            f"at its PSG vertex, its thread-CPU excess over the median rank stretched as its time there was "
            f"(profiles in {run_dir}; {how})")
    return CpuEvidence(cpu, note, {"run_dir": str(run_dir), "time_shared": shared}), None


def analyse(trace, clock_correction: bool = True, top: int = 10, source: str = "", min_share: float = 0.05,
            cpu=None, notes=None) -> dict:
    from scalgraph.trace import critical_path, delay, forward, report
    clock = ""
    if clock_correction:
        from scalgraph.trace.clock import correct_clocks
        trace, rep = correct_clocks(trace)
        clock = rep.summary()
    fwd = forward.forward_replay(forward.build_context(trace))
    return report.build_report(fwd, delay.delay_analysis(fwd), critical_path.critical_path(fwd), top=top,
                               clock=clock, source=source, min_share=min_share, cpu=cpu, notes=notes)


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
    if not 0.0 <= args.min_share < 1.0:
        raise UserError(f"--min-share must be a fraction from 0 to below 1 (got {args.min_share:g})")
    if args.parallel:
        from scalgraph.trace.parallel import launch
        return launch(args.parallel, _run_trace(str(args.trace)), top=args.top, as_json=args.json,
                      min_share=args.min_share)
    path = _run_trace(args.trace)
    trace = read_trace(path)
    cpu, why = cpu_evidence(trace, path)
    result = analyse(trace, clock_correction=not args.no_clock_correction, top=args.top, source=str(args.trace),
                     min_share=args.min_share, cpu=cpu, notes=[why] if why else None)
    if args.json:
        report.write_json(result, sys.stdout)
    else:
        report.write_text(result, sys.stdout, top=args.top)
    return 0
