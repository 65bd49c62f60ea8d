"""First build of the runtime shim (instrument/*.c), as the first sgcc link or `scalgraph run` pays it.

    .venv/bin/python benchmarks/bench_shim_build.py                   # this tree's shim.py
    .venv/bin/python benchmarks/bench_shim_build.py --against de05fdc # side by side with that commit's

Each build goes into an empty cache directory (SCALGRAPH_CACHE), so nothing is reused; the shared
library and the static archive are two builds, as their first uses are.  Prints wall seconds and the
CPU seconds of the compiler processes per build (best of --repeat).  --against REV runs that git
revision's scalgraph/runtime/shim.py on this tree's C sources, alternating with the current one, and
prints the ratios.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import revision_module  # noqa: E402

from scalgraph.runtime import shim  # noqa: E402


def shim_at(rev: str):
    """scalgraph/runtime/shim.py as it was at `rev`, building this tree's instrument/ sources."""
    mod = revision_module.module_at(rev, "scalgraph/runtime/shim.py")
    mod.INSTRUMENT_DIR, mod.HEADER = shim.INSTRUMENT_DIR, shim.HEADER
    return mod


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_build(module, mpicc: str, static: bool) -> tuple[float, float]:
    """Wall and compiler-CPU seconds of one build into an empty cache."""
    with tempfile.TemporaryDirectory(prefix="bench-shim-cache-") as cache:
        os.environ["SCALGRAPH_CACHE"] = cache
        wall, cpu = time.perf_counter(), children_cpu()
        lib = module.shim_library(mpicc, static=static)
        wall, cpu = time.perf_counter() - wall, children_cpu() - cpu
        assert lib.is_file() and lib.is_relative_to(cache)
    return wall, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mpicc", help="the MPI C wrapper (default: the one scalgraph finds)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--against", metavar="REV", help="also build with this git revision's shim.py, alternating")
    args = ap.parse_args(argv)
    mpicc = shim.find_mpicc(args.mpicc)
    modules = {"current": shim}
    if args.against:
        modules[args.against] = shim_at(args.against)
    best = {(name, kind): (float("inf"), float("inf")) for name in modules for kind in ("shared", "static")}
    load = os.getloadavg()[0]
    for i in range(args.repeat):
        for kind in ("shared", "static"):
            # alternating, and in the other order every second repeat, so that load affects both alike
            for name, module in list(modules.items())[::-1 if i % 2 else 1]:
                wall, cpu = timed_build(module, mpicc, kind == "static")
                old_wall, old_cpu = best[name, kind]
                best[name, kind] = (min(old_wall, wall), min(old_cpu, cpu))
    print(f"shim first build with {mpicc}, {os.cpu_count()} cores, load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; best of {args.repeat}")
    for (name, kind), (wall, cpu) in best.items():
        print(f"  [{name}] {kind:6s} {wall:7.1f} s wall {cpu:7.1f} s compiler CPU")
    if args.against:
        for kind in ("shared", "static"):
            cur, old = best["current", kind], best[args.against, kind]
            print(f"  {kind}: {args.against} / current wall {old[0] / cur[0]:.2f}x, CPU {old[1] / cur[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
