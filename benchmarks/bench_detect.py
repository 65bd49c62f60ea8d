"""Detection time and peak memory on large synthetic experiments (issue 4 "Must show").

For each size the script generates every scale lazily (as the experiment reader does: one scale in
memory at a time), runs the whole analysis (merge, fits, abnormal vertices, PPG, backtracking,
ranking) and prints, side by side in this one run:
  gen s      time to produce the input arrays (what reading the profile files would cost at best)
  detect s   analysis time, input generation excluded
  peak MB    peak traced memory during the analysis (a second, traced pass), input included
  input MB   size of the largest scale's arrays (time, samples, calls, wait, dependence rows)
  mem ratio  peak / input: how much the analysis adds on top of holding one scale
  detect/gen detect time over generation time, both measured here: steadier than seconds on a shared machine
  found      whether the planted root cause (one slow rank's COMP vertex) is the top cause
The sizes: the issue's 2,000 and 60,000 vertices x 128 ranks x 4 scales (goals: <= 1 s and <= 10 s;
ScalAna reports 0.29-11.81 s post-mortem at 128 processes) and 5,000 vertices x 1,024 ranks.

  .venv/bin/python benchmarks/bench_detect.py            # all three sizes
  .venv/bin/python benchmarks/bench_detect.py --quick    # the smallest only
"""
from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Mapping

from scalgraph.analysis.detect import analyse
from scalgraph.analysis.synthetic import large_psg, large_run

SIZES = [(2_000, 128, (16, 32, 64, 128)), (60_000, 128, (16, 32, 64, 128)), (5_000, 1_024, (128, 256, 512, 1024))]


class GeneratedScales(Mapping):
    """Scales produced when looked up, with the time spent producing them recorded apart."""

    def __init__(self, psg, scales, slow_vertex):
        self.psg, self.scales, self.slow_vertex = psg, scales, slow_vertex
        self.gen_seconds = 0.0
        self.input_bytes = 0

    def __getitem__(self, p):
        t0 = time.perf_counter()
        prof = large_run(self.psg, p, self.slow_vertex)
        self.gen_seconds += time.perf_counter() - t0
        self.input_bytes = max(self.input_bytes, sum(a.nbytes for a in (prof.time, prof.samples, prof.calls,
                                                                          prof.wait, prof.deps)))
        return prof

    def __iter__(self):
        return iter(self.scales)

    def __len__(self):
        return len(self.scales)


def bench(nvertices: int, nranks_max: int, scales) -> dict:
    psg = large_psg(nvertices)
    comps = [v for v in range(len(psg)) if psg.kind_name(v) == "COMP"]
    slow_vertex = comps[len(comps) // 2]
    # timing pass without tracemalloc (tracing every allocation slows numpy down), then a memory pass
    data = GeneratedScales(psg, scales, slow_vertex)
    t0 = time.perf_counter()
    result = analyse(psg, data)
    total = time.perf_counter() - t0
    tracemalloc.start()
    analyse(psg, GeneratedScales(psg, scales, slow_vertex))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    top = result["root_causes"][0] if result["root_causes"] else {}
    return {"vertices": len(psg), "ranks": nranks_max, "scales": len(scales), "gen": data.gen_seconds,
            "detect": total - data.gen_seconds, "peak_mb": peak / 2**20, "input_mb": data.input_bytes / 2**20,
            "found": top.get("vertex") == slow_vertex and top.get("rank") == nranks_max // 3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(f"{'vertices':>8} {'ranks':>6} {'scales':>6} {'gen s':>7} {'detect s':>9} {'peak MB':>8} "
          f"{'input MB':>9} {'mem ratio':>9} {'detect/gen':>10}  found")
    for nv, nr, scales in SIZES[:1] if args.quick else SIZES:
        r = bench(nv, nr, scales)
        print(f"{r['vertices']:>8} {r['ranks']:>6} {r['scales']:>6} {r['gen']:>7.2f} {r['detect']:>9.2f} "
              f"{r['peak_mb']:>8.0f} {r['input_mb']:>9.0f} {r['peak_mb'] / r['input_mb']:>9.2f} "
              f"{r['detect'] / r['gen']:>10.2f}  {r['found']}")


if __name__ == "__main__":
    main()
