"""Tracing overhead of the shim's trace mode (SCALGRAPH_TRACE=1) and trace size per event.

For each sample, three builds/modes run in one session, interleaved (plain, profiled, traced, plain, ...):
  plain     the program built with SCALGRAPH_NO_INSTRUMENT=1 sgcc (same compiler and flags, no shim)
  profiled  built with sgcc, the default profile mode (sampling at 200 Hz)
  traced    the same executable with SCALGRAPH_TRACE=1 (profile + event trace)
and the medians of the per-round ratios traced/profiled (the cost of tracing itself) and traced/plain
(the whole tool) are printed side by side.  Goal: traced/profiled <= 1.10 (Scalasca measured 25.3% and
40.9% tracing overhead in seed 003's comparisons).  Bytes per event: the raw per-rank files
(rank-*.sgt, what the shim writes while the program runs: whole files, and their event blocks alone)
and the converted trace that `scalgraph run --trace` keeps (trace.sgtrace, zlib; the raw files are removed).

    .venv/bin/python benchmarks/bench_trace_overhead.py                  # cg zeusmp rma, 4 ranks, 3 rounds
    .venv/bin/python benchmarks/bench_trace_overhead.py --samples cg --rounds 5
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent
SAMPLES = {"cg": "cg/cg.c", "zeusmp": "zeusmp/zeusmp.c", "rma": "rma/rma.c", "masterworker": "masterworker/masterworker.c"}


def build(sample: str, out_dir: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    src = ROOT / "samples" / SAMPLES[sample]
    inst, plain = out_dir / f"{sample}-sg", out_dir / f"{sample}-plain"
    subprocess.run([str(BIN / "sgcc"), "-O2", "-g", str(src), "-o", str(inst)], check=True)
    subprocess.run([str(BIN / "sgcc"), "-O2", "-g", str(src), "-o", str(plain)], check=True,
                   env=dict(os.environ, SCALGRAPH_NO_INSTRUMENT="1"))
    return inst, plain


def wall(exe: pathlib.Path, ranks: int, out: pathlib.Path, trace: bool) -> float:
    from scalgraph.runtime.launch import find_launcher
    launcher = find_launcher(str(exe))
    out.mkdir(parents=True, exist_ok=True)
    for f in out.glob("rank-*"):
        f.unlink()
    env = {**launcher.environment(ranks), "SCALGRAPH_OUT": str(out), "SCALGRAPH_HZ": "200"}
    env.pop("SCALGRAPH_TRACE", None)
    if trace:
        env["SCALGRAPH_TRACE"] = "1"
    t0 = time.perf_counter()
    subprocess.run(launcher.command(ranks, [str(exe)]), env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def trace_size(exe: pathlib.Path, out: pathlib.Path) -> dict:
    """Bytes per event of the raw per-rank files (whole files, and their event blocks alone) and of
    the trace `scalgraph run --trace` keeps (zlib-compressed binary; the raw files are then removed)."""
    from scalgraph.io.trace_shim import convert_shim_trace
    from scalgraph.static import read_psg_from_executable
    raw_bytes = sum(p.stat().st_size for p in out.glob("rank-*.sgt"))
    conv = out / "trace.sgtrace"
    if conv.exists():
        conv.unlink()
    trace = convert_shim_trace(out, conv, read_psg_from_executable(str(exe)))
    m = trace.meta
    return {"events": sum(len(e) for e in trace.events), "raw_events": m["raw_events"],
            "raw_per_event": raw_bytes / m["raw_events"], "blocks_per_event": m["raw_event_bytes"] / m["raw_events"],
            "converted_per_event": conv.stat().st_size / m["raw_events"], "raw_bytes": raw_bytes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", default="cg,zeusmp,rma")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per sample (median; >= 3)")
    args = ap.parse_args()
    if args.rounds < 3:
        ap.error("--rounds must be at least 3")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        tmp = pathlib.Path(tmp)
        for sample in args.samples.split(","):
            inst, plain = build(sample, tmp)
            wall(inst, args.ranks, tmp / "warm", trace=True)          # page cache, shim build cache
            vs_profile, vs_plain = [], []
            for _ in range(args.rounds):
                t_plain = wall(plain, args.ranks, tmp / "plain", trace=False)
                t_prof = wall(inst, args.ranks, tmp / "prof", trace=False)
                t_trace = wall(inst, args.ranks, tmp / "trace", trace=True)
                vs_profile.append(t_trace / t_prof)
                vs_plain.append(t_trace / t_plain)
            size = trace_size(inst, tmp / "trace")
            rows.append((sample, statistics.median(vs_profile), statistics.median(vs_plain), size))
            print(f"{sample}: traced/profiled {[round(x, 3) for x in vs_profile]}, traced/plain "
                  f"{[round(x, 3) for x in vs_plain]}", file=sys.stderr)
    print(f"tracing overhead at {args.ranks} ranks, median of {args.rounds} interleaved rounds "
          f"(goal traced/profiled <= 1.10; Scalasca: 1.253 and 1.409)")
    print(f"{'sample':<14}{'traced/profiled':>16}{'traced/plain':>14}{'events':>10}{'raw B/ev':>10}"
          f"{'blocks B/ev':>13}{'kept B/ev':>11}")
    for sample, a, b, s in rows:
        print(f"{sample:<14}{a:>16.3f}{b:>14.3f}{s['raw_events']:>10}{s['raw_per_event']:>10.1f}"
              f"{s['blocks_per_event']:>13.1f}{s['converted_per_event']:>11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
