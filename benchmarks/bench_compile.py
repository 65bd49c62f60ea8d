"""Compile-time cost of the wrapper, measured side by side in one run on the largest C/C++ sample.

    .venv/bin/python benchmarks/bench_compile.py [--repeat 5] [--sources a.c b.c]

Prints the median wall time of three builds of the same sources at -O2, taken in turn so drift hits
all alike: plain mpicc (the system cc), sgcc with SCALGRAPH_NO_INSTRUMENT=1 (same compiler as sgcc,
zig's clang: the price of the compiler alone) and sgcc (bitcode, static pass, probes, PSG link, shim
link); their ratios; and the static pass alone (instrument_bitcode, in process) per 1,000 IR
instructions.  ScalAna reports 0.28-3.01% compile overhead with a pass inside the compiler.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def largest_sample() -> list[Path]:
    candidates = [p for p in (ROOT / "samples").glob("*/*") if p.suffix in (".c", ".cpp")]
    if not candidates:
        sys.exit("bench_compile: no C/C++ sample under samples/; pass --sources")
    return [max(candidates, key=lambda p: p.stat().st_size)]


def timed(cmd: list[str], cwd: str, env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child processes): on a shared machine the CPU time is the
    steadier figure, the wall time is what a user waits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        sys.exit(f"bench_compile: {' '.join(cmd[:3])} ... failed:\n{r.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def static_pass_cost(sources: list[Path], repeat: int) -> tuple[int, float]:
    """(IR instructions, seconds of instrument_bitcode) summed over the sources, median of runs."""
    from llvmlite import binding as llvm
    from scalgraph.static import instrument_bitcode
    from scalgraph.static.toolchain import find_compiler, find_mpi_wrapper, mpi_flags
    instructions, seconds = 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for src in sources:
            lang = "c++" if src.suffix == ".cpp" else "c"
            cc, mpi = find_compiler(lang), mpi_flags(find_mpi_wrapper(lang))
            bc = os.path.join(tmp, src.stem + ".bc")
            subprocess.run([*cc.command, *cc.flags, "-c", "-emit-llvm", "-g", "-O2", *mpi.compile, str(src),
                            "-o", bc], check=True)
            data = Path(bc).read_bytes()
            module = llvm.parse_bitcode(data)
            instructions += sum(1 for f in module.functions for b in f.blocks for _ in b.instructions)
            runs = []
            for _ in range(repeat):
                t = time.perf_counter()
                instrument_bitcode(data, str(src), opt_level=2)
                runs.append(time.perf_counter() - t)
            seconds += statistics.median(runs)
    return instructions, seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sources", nargs="+", type=Path)
    args = ap.parse_args()
    sources = [p.resolve() for p in args.sources] if args.sources else largest_sample()
    cxx = any(p.suffix == ".cpp" for p in sources)
    mpicc = str(BIN / ("mpicxx" if cxx else "mpicc"))
    sgcc = str(BIN / ("sgcxx" if cxx else "sgcc"))
    if not shutil.which("cc"):
        sys.exit("bench_compile: plain mpicc needs a system cc to compare with")
    srcs = [str(p) for p in sources]
    base = dict(os.environ)
    base.pop("SCALGRAPH_NO_INSTRUMENT", None)
    plain_name = "mpicxx" if cxx else "mpicc"
    builds = {plain_name: ([mpicc], "plain", base),
              "sg-uninstrumented": ([sgcc], "plainzig", dict(base, SCALGRAPH_NO_INSTRUMENT="1")),
              "sg": ([sgcc], "wrapped", base)}
    wall: dict[str, list[float]] = {k: [] for k in builds}
    cpu: dict[str, list[float]] = {k: [] for k in builds}
    nonce = f"{os.getpid()}_{time.time_ns()}"
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.repeat + 1):        # run 0 warms zig's and the shim's caches
            for name, (tool, out, env) in builds.items():
                # a -D never seen before: zig caches objects by command line, a real rebuild is wanted
                w, c = timed([*tool, "-O2", f"-DSG_BENCH_RUN={nonce}_{run}", *srcs, "-o", out, "-lm"], tmp, env)
                if run:
                    wall[name].append(w)
                    cpu[name].append(c)
    mw = {k: statistics.median(v) for k, v in wall.items()}
    mc = {k: statistics.median(v) for k, v in cpu.items()}
    loc = sum(len(p.read_text().splitlines()) for p in sources)
    print(f"sources: {', '.join(p.relative_to(ROOT).as_posix() if p.is_relative_to(ROOT) else str(p) for p in sources)}"
          f" ({loc} lines), -O2, median of {args.repeat}")
    print(f"  {'build':22s} {'wall ms':>8s} {'cpu ms':>8s}")
    for name in builds:
        print(f"  {name:22s} {mw[name] * 1000:8.0f} {mc[name] * 1000:8.0f}")
    for other in (plain_name, "sg-uninstrumented"):
        print(f"  ratio sg / {other:18s} wall {mw['sg'] / mw[other]:.2f}x   cpu {mc['sg'] / mc[other]:.2f}x")
    n, secs = static_pass_cost(sources, args.repeat)
    print(f"  static pass (instrument_bitcode): {secs * 1000:.0f} ms for {n} IR instructions = "
          f"{secs * 1000 / max(n, 1) * 1000:.1f} ms per 1,000 instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
