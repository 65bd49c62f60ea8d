"""Clock-correction throughput: the controlled logical clock (seed 004) on a synthetic trace whose
ranks' clocks are skewed, so that receives lie before their sends and the correction has real work.

    .venv/bin/python benchmarks/bench_clock.py                 # 1e6 events, 64 ranks
    .venv/bin/python benchmarks/bench_clock.py --events 200000 --skew 5e-6

The trace is bench_replay.py's halo exchange (Irecv/Isend/Waitall/Allreduce, imbalanced compute);
each rank's timestamps are shifted by a random offset of up to --skew seconds.  Prints the number of
violations found, the receives moved, and events/s of the whole correction (logical messages,
forward and backward amortisation) and of the forward amortisation alone.  Goal from issue 11:
>= 1e6 events/s.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_replay import synthetic_trace  # noqa: E402

from scalgraph.trace import clock, matching  # noqa: E402


def skewed(nevents: int, nranks: int, skew: float, seed: int = 3):
    trace = synthetic_trace(nevents, nranks)
    rng = np.random.default_rng(seed)
    for ev, off in zip(trace.events, rng.uniform(-skew, skew, nranks)):
        ev["time"] += off
    return trace


def measure(trace, repeat: int = 3) -> dict:
    n = sum(len(e) for e in trace.events)
    best_all, best_fwd, rep = np.inf, np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        _, rep = clock.correct_clocks(trace)
        best_all = min(best_all, time.perf_counter() - t0)
        lm = clock.logical_messages(trace)
        flat = matching.flatten(trace)
        t = flat.ev["time"].astype(float)
        t0 = time.perf_counter()
        clock._forward(t, flat, lm, clock.ClockParams())
        best_fwd = min(best_fwd, time.perf_counter() - t0)
    return {"events": n, "violations": int(len(rep.violations)), "moved": rep.jumps,
            "total_s": best_all, "total_rate": n / best_all, "forward_s": best_fwd, "forward_rate": n / best_fwd}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--skew", type=float, default=20e-6, help="largest clock offset of a rank, seconds")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    r = measure(skewed(args.events, args.ranks, args.skew), args.repeat)
    print(f"{r['events']} events, {args.ranks} ranks, skew up to {args.skew * 1e6:g} us: {r['violations']} "
          f"violations, {r['moved']} receives moved")
    print(f"  whole correction   {r['total_s']:8.3f} s  {r['total_rate']:12,.0f} events/s")
    print(f"  forward pass alone {r['forward_s']:8.3f} s  {r['forward_rate']:12,.0f} events/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
