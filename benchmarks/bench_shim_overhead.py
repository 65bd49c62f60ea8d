"""Overhead of the runtime shim: wall time of sample programs built with sgcc (probes + shim, sampling
at --hz, default the shim's 1000 Hz, with --sampler, default task-clock) divided by the same program built plainly (SCALGRAPH_NO_INSTRUMENT=1 sgcc: same compiler,
same flags, no probes, no shim).  Both run in the same session, interleaved (plain, instrumented,
plain, ...), and the median of the per-pair ratios is printed; then the bytes of each rank file for
the default iterations and for ten times as many (they must not grow).

Each sample runs --scale times its default iterations (default 4: a few seconds instead of 0.7-1.6 s),
so that the launcher's start-up jitter (tens of ms between two identical runs) does not swamp a 2 %
difference; the shim's own fixed costs (start-up, writing the profile: about 1 ms of CPU per rank)
are still in every run.  The load average is printed before and after: other jobs on the cores
stretch both builds, and the ratios get noisier, not smaller.

    .venv/bin/python benchmarks/bench_shim_overhead.py                 # cg zeusmp masterworker, 4 and 8 ranks
    .venv/bin/python benchmarks/bench_shim_overhead.py --samples cg --ranks 4 --reps 3
    .venv/bin/python benchmarks/bench_shim_overhead.py --samples cg hybrid_master hybrid_imbalance --ranks 2 4
    .venv/bin/python benchmarks/bench_shim_overhead.py --hz 10000 --sampler itimer
    .venv/bin/python benchmarks/bench_shim_overhead.py --only-calls       # ns added per probe / MPI call, us per sample
"""
from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent
SAMPLES = {"cg": "cg/cg.c", "zeusmp": "zeusmp/zeusmp.c", "masterworker": "masterworker/masterworker.c",
           "hybrid_master": "hybrid_master/hybrid_master.c", "hybrid_imbalance": "hybrid_imbalance/hybrid_imbalance.c"}
# MPI + OpenMP samples: built with -fopenmp, run with 2 threads per rank that sleep at barriers
# (the machine is oversubscribed); the user's own OMP_* settings win
OPENMP = {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"}
SAMPLING = {"SCALGRAPH_HZ": "1000", "SCALGRAPH_SAMPLER": "task-clock"}   # set from the command line


def build(sample: str, out_dir: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    src = ROOT / "samples" / SAMPLES[sample]
    inst, plain = out_dir / f"{sample}-sg", out_dir / f"{sample}-plain"
    sgcc = str(BIN / "sgcc")
    omp = ["-fopenmp"] if sample.startswith("hybrid") else []
    subprocess.run([sgcc, "-O2", *omp, str(src), "-o", str(inst)], check=True)
    subprocess.run([sgcc, "-O2", *omp, str(src), "-o", str(plain)], check=True,
                   env=dict(os.environ, SCALGRAPH_NO_INSTRUMENT="1"))
    return inst, plain


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def wall(exe: pathlib.Path, ranks: int, out: pathlib.Path, args=(), cpu: list | None = None) -> float:
    """Wall seconds of one mpiexec run; its CPU seconds (all ranks, user+system) appended to `cpu`."""
    env = dict(os.environ, SCALGRAPH_OUT=str(out), **SAMPLING)
    env.update({k: os.environ.get(k, v) for k, v in OPENMP.items()})
    c0, t0 = cpu_seconds(), time.perf_counter()
    subprocess.run([str(BIN / "mpiexec"), "-n", str(ranks), str(exe), *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    t = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(cpu_seconds() - c0)
    return t


def rank_file_bytes(out: pathlib.Path) -> int:
    sizes = [p.stat().st_size for p in out.glob("rank-*.sgp")]
    return max(sizes) if sizes else 0


def iterations_of(exe: pathlib.Path, ranks: int, tmp: pathlib.Path) -> int | None:
    """The sample's default iteration count, read from its one output line (`iterations=N`)."""
    res = subprocess.run([str(BIN / "mpiexec"), "-n", str(ranks), str(exe)], capture_output=True, text=True,
                         env=dict(os.environ, SCALGRAPH_OUT=str(tmp / "probe")), check=True)
    words = res.stdout.replace(",", " ").split()
    for i, word in enumerate(words):
        if word.startswith(("iterations=", "iters=", "tasks=", "steps=")):
            return int(word.split("=")[1])
        if word == "iterations" and i > 0 and words[i - 1].isdigit():   # the hybrid samples: "20 iterations"
            return int(words[i - 1])
    return None


SPIN, FAST_HZ = 100_000_000, 10_000   # ~0.4 s of additions; 10 kHz makes a sample's cost stand out

STUB = ('#include <stdint.h>\n#include "scalgraph.h"\n__thread uint32_t sg_cur;\n'
        "void sg_register_psg(const struct sg_psg_tables *t) { (void)t; }\n"
        "void sg_fn_enter(uint32_t f) { (void)f; }\nvoid sg_fn_exit(void) {}\n")


def per_call_costs(tmp: pathlib.Path, reps: int) -> None:
    """ns per probe pair / MPI_Iprobe / self Irecv+Isend+Waitall, with the shim and with empty probes
    (one rank, so the figure is not at the mercy of oversubscription); and the CPU one sample costs."""
    sys.path.insert(0, str(ROOT))
    from scalgraph.runtime.shim import INSTRUMENT_DIR, link_flags, shim_library
    mpicc = str(BIN / "mpicc")
    src = INSTRUMENT_DIR / "testprogs" / "callcost.c"
    (tmp / "stub.c").write_text(STUB)
    common = [mpicc, "-O2", "-I", str(INSTRUMENT_DIR), str(src)]
    subprocess.run([*common, *link_flags(shim_library(mpicc)), "-o", str(tmp / "cc-shim")], check=True)
    subprocess.run([*common, str(tmp / "stub.c"), "-o", str(tmp / "cc-plain")], check=True)
    # cost of one sample: the shim build's CPU for SPIN additions unsampled vs at FAST_HZ
    runs = {"plain": ("plain", None), "shim": ("shim", None), "off": ("shim", "0"), "fast": ("shim", str(FAST_HZ))}
    results = {kind: [] for kind in runs}
    for _ in range(reps):
        for kind, (exe, hz) in runs.items():
            env = dict(os.environ, SCALGRAPH_OUT=str(tmp / "cc-out"))
            args = []
            if hz is not None:
                env["SCALGRAPH_HZ"] = hz
                args = ["20000", str(SPIN)]   # few calls, then the spin loop
            out = subprocess.run([str(BIN / "mpiexec"), "-n", "1", str(tmp / f"cc-{exe}"), *args], check=True,
                                 capture_output=True, text=True, env=env).stdout.split()
            results[kind].append({out[i]: float(out[i + 1]) for i in range(0, len(out), 2)})
    print(f"\n{'per call (ns, median of ' + str(reps) + ')':<34}{'empty probes':>13}{'shim':>9}{'added':>9}")
    for key, label in (("probe_pair_ns", "sg_fn_enter + sg_fn_exit"), ("iprobe_ns", "MPI_Iprobe"),
                       ("exchange_ns", "Irecv + Isend + Waitall (self)")):
        a = statistics.median(r[key] for r in results["plain"])
        b = statistics.median(r[key] for r in results["shim"])
        print(f"{label:<34}{a:>13.1f}{b:>9.1f}{b - a:>9.1f}")
    off = statistics.median(r["spin_cpu_ns"] for r in results["off"])
    fast = statistics.median(r["spin_cpu_ns"] for r in results["fast"])
    samples = fast * 1e-9 * FAST_HZ   # the task-clock event fires once per period of thread CPU
    print(f"{'one sample (us; CPU of a loop)':<34}{'unsampled':>13}{f'{FAST_HZ // 1000} kHz':>9}{'per sample':>11}")
    print(f"{'signal + handler + re-arm':<34}{off * 1e-9:>12.3f}s{fast * 1e-9:>8.3f}s{(fast - off) / samples * 1e-3:>11.1f}"
          f"   (at 1 kHz: {(fast - off) / samples * 1e-6 * 100:.1f} % of the CPU time)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", nargs="+", default=list(SAMPLES), choices=list(SAMPLES))
    ap.add_argument("--ranks", nargs="+", type=int, default=[4, 8])
    ap.add_argument("--reps", type=int, default=5, help="interleaved pairs per sample and scale")
    ap.add_argument("--scale", type=int, default=4,
                    help="run each sample with this many times its default iterations (default %(default)s)")
    ap.add_argument("--only-calls", action="store_true", help="only the per-call costs")
    ap.add_argument("--hz", type=float, default=1000.0, help="sampling rate (default %(default)g)")
    ap.add_argument("--sampler", choices=["task-clock", "itimer"], default="task-clock")
    args = ap.parse_args()
    if not 0 <= args.hz <= 10000:
        ap.error("--hz must be from 0 to 10000")
    if args.scale < 1:
        ap.error("--scale must be at least 1")
    SAMPLING.update(SCALGRAPH_HZ=f"{args.hz:g}", SCALGRAPH_SAMPLER=args.sampler)
    if args.only_calls:
        with tempfile.TemporaryDirectory(prefix="sg-bench-") as tmpname:
            per_call_costs(pathlib.Path(tmpname), args.reps)
        return 0
    with tempfile.TemporaryDirectory(prefix="sg-bench-") as tmpname:
        tmp = pathlib.Path(tmpname)
        print(f"sampling: {args.sampler} at {args.hz:g} Hz; each sample at {args.scale}x its default iterations; "
              f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"{'sample':<17}{'ranks':>6}{'iters':>7}{'plain s':>9}{'shim s':>9}{'ratio':>8}{'cpu ratio':>11}   "
              f"(medians of {args.reps} interleaved pairs; ratios = medians of per-pair ratios)")
        all_ratios, all_cpu = [], []
        by_kind: dict[tuple[str, int], list[tuple[float, float]]] = {}
        built = {s: build(s, tmp) for s in args.samples}
        default_iters = {s: iterations_of(inst, min(args.ranks), tmp) for s, (inst, _) in built.items()}
        for sample, (inst, plain) in built.items():
            n = default_iters[sample]
            run_args = [str(args.scale * n)] if n else []   # no count printed: the default workload
            for p in args.ranks:
                wall(plain, p, tmp / "warm", run_args)   # page cache, first-run effects
                pairs, cpu_plain, cpu_inst = [], [], []
                for rep in range(args.reps):
                    a = wall(plain, p, tmp / "x", run_args, cpu=cpu_plain)
                    b = wall(inst, p, tmp / f"o-{sample}-{p}", run_args, cpu=cpu_inst)
                    pairs.append((a, b))
                ratio = statistics.median(b / a for a, b in pairs)
                cpu_ratio = statistics.median(b / a for a, b in zip(cpu_plain, cpu_inst))
                all_ratios.append(ratio)
                all_cpu.append(cpu_ratio)
                by_kind.setdefault(("MPI + OpenMP" if sample.startswith("hybrid") else "MPI only", p), []).append(
                    (ratio, cpu_ratio))
                print(f"{sample:<17}{p:>6}{args.scale * n if n else '-':>7}{statistics.median(a for a, _ in pairs):>9.3f}"
                      f"{statistics.median(b for _, b in pairs):>9.3f}{ratio:>8.3f}{cpu_ratio:>11.3f}")
        print(f"overall median ratio: wall {statistics.median(all_ratios):.3f}, cpu {statistics.median(all_cpu):.3f}"
              f"  (load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        kinds = sorted({k for k, _ in by_kind})
        if len(kinds) > 1:   # the hybrid samples' ratios beside the MPI-only ones, per rank count
            print(f"\n{'ranks':>5}" + "".join(f"{k + ' wall':>20}{'cpu':>7}" for k in kinds))
            for p in args.ranks:
                cells = [by_kind.get((k, p), []) for k in kinds]
                print(f"{p:>5}" + "".join(f"{statistics.median(r for r, _ in c):>20.3f}{statistics.median(x for _, x in c):>7.3f}"
                                          if c else f"{'-':>20}{'-':>7}" for c in cells))

        print(f"\n{'sample':<17}{'ranks':>6}{'iters':>7}{'bytes/rank':>12}{'10x iters':>10}{'bytes/rank':>12}")
        for sample, (inst, _) in built.items():
            p = min(args.ranks)
            n = default_iters[sample]
            if n is None:
                print(f"{sample:<17}{p:>6}   (no iteration count printed; skipped)")
                continue
            wall(inst, p, tmp / f"b1-{sample}", [str(n)])
            wall(inst, p, tmp / f"b10-{sample}", [str(10 * n)])
            print(f"{sample:<17}{p:>6}{n:>7}{rank_file_bytes(tmp / f'b1-{sample}'):>12}{10 * n:>10}"
                  f"{rank_file_bytes(tmp / f'b10-{sample}'):>12}")
        per_call_costs(tmp, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
