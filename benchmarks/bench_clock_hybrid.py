"""The hybrid controlled logical clock (seed 004 §V, scalgraph/trace/clock_hybrid.py) against the pure
MPI one on a trace with OpenMP threads whose ranks' clocks are skewed (every thread of a rank alike, as
threads share their process's clock): the violations before, the OpenMP violations each correction
leaves (seed 004 Table III: an MPI-only correction creates them), events moved, and CPU seconds.

    .venv/bin/python benchmarks/bench_clock_hybrid.py EXP/scale-4/rep-0          # a traced hybrid run
    .venv/bin/python benchmarks/bench_clock_hybrid.py TRACE --skew 50e-6 --seeds 5

TRACE: anything `scalgraph trace` reads (run directory, .sgtrace, OTF2) that has OpenMP threads.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scalgraph.io.trace_read import read_trace  # noqa: E402
from scalgraph.model import trace as tm  # noqa: E402
from scalgraph.trace import clock, clock_hybrid  # noqa: E402


def skewed(trace: tm.Trace, skew: float, seed: int) -> tm.Trace:
    """A copy whose rank r's locations (its threads alike) are shifted by one offset in [-skew, skew]."""
    rng = np.random.default_rng(seed)
    ranks = [r for r, _ in trace.locations] if trace.locations else list(range(trace.nranks))
    off = rng.uniform(-skew, skew, max(ranks) + 1)
    events = [ev.copy() for ev in trace.events]
    for loc, ev in enumerate(events):
        ev["time"] += off[ranks[loc]]
    return tm.Trace(regions=trace.regions, comms=trace.comms, events=events, windows=trace.windows,
                    meta=dict(trace.meta), program_begin=trace.program_begin, program_end=trace.program_end,
                    locations=trace.locations)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--skew", type=float, default=50e-6, help="largest clock offset of a rank, seconds")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args(argv)
    from scalgraph.commands.trace import _run_trace
    path, _ = _run_trace(args.trace)
    trace = read_trace(path)
    if not clock_hybrid.has_threads(trace):
        print(f"{args.trace}: no OpenMP threads in this trace", file=sys.stderr)
        return 1
    n = sum(len(e) for e in trace.events)
    print(f"{args.trace}: {n} events, {len(trace.events)} locations; rank clocks skewed by up to "
          f"{args.skew * 1e6:g} us")
    print(f"{'seed':>4} {'violations':>10} {'MPI-only: OpenMP left':>22} {'moved':>6} {'CPU s':>6}"
          f" {'hybrid: left':>13} {'moved':>6} {'CPU s':>6}")
    for seed in range(args.seeds):
        tr = skewed(trace, args.skew, seed)
        row = []
        for openmp in (False, True):
            c = time.process_time()
            out, rep = clock.correct_clocks(tr, openmp=openmp)
            cpu = time.process_time() - c
            left = len(clock_hybrid.openmp_violations(out))
            row.append((len(rep.violations), left, rep.jumps, cpu))
        (v, l0, j0, c0), (_, l1, j1, c1) = row
        print(f"{seed:>4} {v:>10} {l0:>22} {j0:>6} {c0:>6.2f} {l1:>13} {j1:>6} {c1:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
