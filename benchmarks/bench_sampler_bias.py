"""Sampler bias: does a phase get the CPU time it used?  instrument/testprogs/phases.c runs rounds of
{nanosleep 0.5 ms; phase A 2.5 ms CPU; phase B 7.5 ms CPU} with each phase on its own vertex and
measures each phase's thread CPU time itself (CLOCK_THREAD_CPUTIME_ID).  Both samplers run, side by
side: the perf task-clock default and the ITIMER_PROF fallback (SCALGRAPH_SAMPLER=itimer).  Printed
per phase: samples, the samples expected at the asked rate, the sampled CPU seconds (the profile's
time, from sample_ns) and their error against the truth.

Two set-ups: one rank alone, and two ranks with an MPI_Barrier closing every round (rank 1 computes,
rank 0 waits), where the computation between the barriers (comp_cpu of the round barrier) is also
checked against the program's own measurement.  Last, the cost of one thread CPU clock read.

    .venv/bin/python benchmarks/bench_sampler_bias.py
    .venv/bin/python benchmarks/bench_sampler_bias.py --hz 10000 --rounds 100
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from scalgraph.io.profile_file import read_run  # noqa: E402
from scalgraph.runtime.shim import INSTRUMENT_DIR, link_flags, shim_library  # noqa: E402

V_A, V_B, V_ROUND = 5, 6, 7     # vertices of phases.c
SAMPLERS = ("task-clock", "itimer")
TOLERANCE = 0.03                 # the default sampler, per phase


def build(tmp: pathlib.Path) -> pathlib.Path:
    mpicc = str(BIN / "mpicc")
    exe = tmp / "phases"
    subprocess.run([mpicc, "-O2", "-g", "-I", str(INSTRUMENT_DIR), str(INSTRUMENT_DIR / "testprogs" / "phases.c"),
                    *link_flags(shim_library(mpicc)), "-o", str(exe)], check=True)
    return exe


def run(exe: pathlib.Path, out: pathlib.Path, ranks: int, args, sampler: str, hz: float) -> tuple[dict, object]:
    """({rank: the program's line as a dict}, RunProfile)"""
    env = dict(os.environ, SCALGRAPH_OUT=str(out), SCALGRAPH_SAMPLER=sampler, SCALGRAPH_HZ=f"{hz:g}")
    res = subprocess.run([str(BIN / "mpiexec"), "-n", str(ranks), str(exe), *map(str, args)], env=env,
                         capture_output=True, text=True, check=True, timeout=1800)
    lines = {}
    for line in res.stdout.splitlines():
        words = line.split()
        lines[int(words[1])] = {words[i]: float(words[i + 1]) for i in range(2, len(words) - 1, 2)}
    return lines, read_run(out)


def report(label: str, sampler: str, hz: float, rank: int, truth: dict, prof) -> list[float]:
    """Print one row per phase; returns the relative errors of the sampled CPU seconds."""
    errors = []
    for phase, v, key in (("A", V_A, "a_ns"), ("B", V_B, "b_ns")):
        true_s = truth[key] * 1e-9
        got = float(prof.time[rank, v])
        err = got / true_s - 1 if true_s > 0 else float("nan")
        errors.append(err)
        print(f"{label:<22}{sampler:<12}{hz:>7g}{prof.meta['hz']:>10.0f}   {phase:<3}{true_s:>9.4f}"
              f"{int(prof.samples[rank, v]):>9}{true_s * hz:>10.0f}{got:>11.4f}{100 * err:>+9.1f} %")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--hz", type=float, default=1000.0, help="asked sampling rate (default %(default)g)")
    ap.add_argument("--phase-us", type=float, nargs=2, default=[2500.0, 7500.0], metavar=("A", "B"))
    ap.add_argument("--sleep-us", type=int, default=500)
    args = ap.parse_args()
    if args.rounds < 1 or not 0 < args.hz <= 10000:
        ap.error("--rounds must be 1 or more and --hz from 1 to 10000")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="sg-bias-") as tmpname:
        tmp = pathlib.Path(tmpname)
        exe = build(tmp)
        print(f"{args.rounds} rounds of {{sleep {args.sleep_us} us; A {args.phase_us[0]:g} us CPU; "
              f"B {args.phase_us[1]:g} us CPU}}; truth = CLOCK_THREAD_CPUTIME_ID inside the program")
        print(f"{'set-up':<22}{'sampler':<12}{'asked':>7}{'delivered':>10}   {'ph':<3}{'truth s':>9}{'samples':>9}"
              f"{'expected':>10}{'sampled s':>11}{'error':>11}")
        comp_rows = []
        for label, ranks, worker in (("1 rank", 1, -1), ("2 ranks, barrier", 2, 1)):
            rank = max(worker, 0)
            for sampler in SAMPLERS:
                prog_args = [args.rounds, *args.phase_us, args.sleep_us, worker]
                lines, prof = run(exe, tmp / f"out-{ranks}-{sampler}", ranks, prog_args, sampler, args.hz)
                if prof.meta["sampler"] != sampler:
                    print(f"{label:<22}{sampler:<12}  not available here (the profile says {prof.meta['sampler']})")
                    continue
                errors = report(label, sampler, args.hz, rank, lines[rank], prof)
                if sampler == SAMPLERS[0]:
                    worst = max(worst, *map(abs, errors))
                if ranks > 1:
                    comp_rows.append((sampler, lines[rank], prof.comp_cpu[rank, V_ROUND],
                                      prof.comp_wall[rank, V_ROUND], prof.mpi_cpu[rank, V_ROUND]))
        print("\ncomputation between the round barriers, rank 1 (shim vs the program's own clocks):")
        for sampler, truth, cpu, wall, mpi_cpu in comp_rows:
            print(f"  {sampler:<12}comp_cpu {cpu:.4f} s vs {truth['between_cpu_ns'] * 1e-9:.4f} s "
                  f"({100 * (cpu / (truth['between_cpu_ns'] * 1e-9) - 1):+.2f} %), comp_wall {wall:.4f} s vs "
                  f"{truth['between_wall_ns'] * 1e-9:.4f} s, CPU inside the barriers {mpi_cpu:.4f} s")
        lines, _ = run(exe, tmp / "cost", 1, [1, 100, 100, 0, -1, "cost"], SAMPLERS[0], args.hz)
        print(f"\ncost of one read: CLOCK_THREAD_CPUTIME_ID {lines[0]['thread_clock_ns']:.0f} ns, "
              f"CLOCK_MONOTONIC {lines[0]['monotonic_ns']:.0f} ns  (load average {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores)")
    verdict = "within" if worst <= TOLERANCE else "NOT within"
    print(f"default sampler ({SAMPLERS[0]}): worst phase error {100 * worst:.1f} %, {verdict} "
          f"{100 * TOLERANCE:.0f} %")
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
