"""Clock-correction throughput: the controlled logical clock (seed 004) on a synthetic trace whose
ranks' clocks are skewed, so that receives lie before their sends and the correction has real work.

    .venv/bin/python benchmarks/bench_clock.py                 # 1e6 events, 64 ranks
    .venv/bin/python benchmarks/bench_clock.py --events 200000 --skew 5e-6
    .venv/bin/python benchmarks/bench_clock.py --against a6bbe12   # side by side with that commit's clock.py

The trace is bench_replay.py's halo exchange (Irecv/Isend/Waitall/Allreduce, imbalanced compute);
each rank's timestamps are shifted by a random offset of up to --skew seconds.  Prints the number of
violations found, the receives moved, and events/s of the whole correction (logical messages,
forward and backward amortisation) and of the forward amortisation alone, in wall-clock and in CPU
seconds (best of --repeat; on a loaded machine the CPU figure is the steadier one).  --against REV
runs that git revision's scalgraph/trace/clock.py in turn with the current one (same trace, same
process, alternating) and prints the ratios.  Goal from issue 11: >= 1e6 events/s.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import revision_module  # noqa: E402
from bench_replay import synthetic_trace  # noqa: E402

from scalgraph.trace import clock, matching  # noqa: E402


def skewed(nevents: int, nranks: int, skew: float, seed: int = 3):
    trace = synthetic_trace(nevents, nranks)
    rng = np.random.default_rng(seed)
    for ev, off in zip(trace.events, rng.uniform(-skew, skew, nranks)):
        ev["time"] += off
    return trace


def measure(trace, repeat: int = 3, modules=None) -> dict:
    """Best wall and CPU seconds of the whole correction and of the forward pass, per clock module."""
    n = sum(len(e) for e in trace.events)
    modules = modules or {"current": clock}
    best = {name: {"total_s": np.inf, "total_cpu": np.inf, "forward_s": np.inf, "forward_cpu": np.inf}
            for name in modules}
    rep = None
    lm = clock.logical_messages(trace)
    flat = matching.flatten(trace)
    t = flat.ev["time"].astype(float)
    for _ in range(repeat):
        for name, mod in modules.items():          # alternating, so that load affects all alike
            b = best[name]
            w, c = time.perf_counter(), time.process_time()
            _, rep = mod.correct_clocks(trace)
            b["total_s"] = min(b["total_s"], time.perf_counter() - w)
            b["total_cpu"] = min(b["total_cpu"], time.process_time() - c)
            w, c = time.perf_counter(), time.process_time()
            mod._forward(t, flat, lm, mod.ClockParams())
            b["forward_s"] = min(b["forward_s"], time.perf_counter() - w)
            b["forward_cpu"] = min(b["forward_cpu"], time.process_time() - c)
    return {"events": n, "violations": int(len(rep.violations)), "moved": rep.jumps, "best": best}


def module_at(rev: str):
    """scalgraph/trace/clock.py as it was at git revision `rev`, imported as its own module."""
    return revision_module.module_at(rev, "scalgraph/trace/clock.py")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--skew", type=float, default=20e-6, help="largest clock offset of a rank, seconds")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", metavar="REV", help="also run this git revision's clock.py, alternating")
    args = ap.parse_args(argv)
    modules = {"current": clock}
    if args.against:
        modules[args.against] = module_at(args.against)
    r = measure(skewed(args.events, args.ranks, args.skew), args.repeat, modules)
    n = r["events"]
    print(f"{n} events, {args.ranks} ranks, skew up to {args.skew * 1e6:g} us: {r['violations']} "
          f"violations, {r['moved']} receives moved; best of {args.repeat}")
    for name, b in r["best"].items():
        print(f"  [{name}] whole correction   {b['total_s']:7.3f} s wall {n / b['total_s']:>12,.0f} events/s"
              f"   {b['total_cpu']:7.3f} s CPU {n / b['total_cpu']:>12,.0f} events/s")
        print(f"  [{name}] forward pass alone {b['forward_s']:7.3f} s wall {n / b['forward_s']:>12,.0f} events/s"
              f"   {b['forward_cpu']:7.3f} s CPU {n / b['forward_cpu']:>12,.0f} events/s")
    if args.against:
        cur, old = r["best"]["current"], r["best"][args.against]
        print(f"  current / {args.against}: whole {old['total_s'] / cur['total_s']:.2f}x faster (wall), "
              f"{old['total_cpu'] / cur['total_cpu']:.2f}x (CPU); forward {old['forward_cpu'] / cur['forward_cpu']:.2f}x (CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
