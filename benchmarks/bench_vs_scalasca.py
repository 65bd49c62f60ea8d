"""scalgraph and Scalasca's scout side by side on the same OTF2 archives, per pattern.

    .venv/bin/python benchmarks/bench_vs_scalasca.py ARCHIVE/traces.otf2 [MORE ...]
    .venv/bin/python benchmarks/bench_vs_scalasca.py --time-correct ARCHIVE/traces.otf2
    .venv/bin/python benchmarks/bench_vs_scalasca.py --export TRACE.sgtrace   # our trace, exported to OTF2 first

Needs `scout.mpi` (Scalasca 2.6) and Cube's `cube_dump` on PATH, and an `mpiexec` for the MPICH that
scout was built with; without scout it prints "scout not found" and exits 0 (docs/trace-analysis.md
says how to build Score-P, Cube and Scalasca from source).  For each archive it copies the archive
to a scratch directory (scout writes its report beside the anchor), runs `mpiexec -n P scout.mpi
[--time-correct]` with P = the number of MPI locations, reads the pattern totals of scout.cubex
with `cube_dump`, runs `scalgraph trace --json` on the same anchor (clock correction on with
--time-correct, off without, as scout), and prints per pattern, delay-cost family (short/long
term) and the critical path: scout, scalgraph and the relative difference, plus both run times.
The issue-11 acceptance bound is 1 % per pattern; rows beyond it are marked.  Exit code 1 when a
row is beyond --tolerance.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

# scalgraph pattern key -> Scalasca metric unique name (Scalasca 2.6 / Cube 4)
PATTERNS = {
    "time": "time", "mpi": "mpi", "p2p": "mpi_point2point", "late_sender": "mpi_latesender",
    "late_sender_wrong_order": "mpi_latesender_wo", "late_sender_wrong_order_different": "mpi_lswo_different",
    "late_sender_wrong_order_same": "mpi_lswo_same", "late_receiver": "mpi_latereceiver",
    "collective": "mpi_collective", "early_reduce": "mpi_earlyreduce", "early_scan": "mpi_earlyscan",
    "late_broadcast": "mpi_latebroadcast", "wait_nxn": "mpi_wait_nxn", "nxn_completion": "mpi_nxn_completion",
    "wait_barrier": "mpi_barrier_wait", "barrier_completion": "mpi_barrier_completion",
    "init_completion": "mpi_init_completion", "wait_finalize": "mpi_finalize_wait",
    "rma_late_post": "mpi_rma_late_post", "rma_early_wait": "mpi_rma_early_wait",
    "rma_late_complete": "mpi_rma_late_complete", "rma_wait_at_fence": "mpi_rma_wait_at_fence",
    "rma_early_fence": "mpi_rma_early_fence", "rma_early_transfer": "mpi_rma_early_transfer",
    "rma_wait_at_create": "mpi_rma_wait_at_create", "rma_wait_at_free": "mpi_rma_wait_at_free",
}
# delay-cost families: scalgraph's wait pattern -> Scalasca's short-term metric (long-term: + "_longterm")
FAMILIES = {"late_sender": "delay_latesender", "late_receiver": "delay_latereceiver",
            "wait_barrier": "delay_barrier", "wait_nxn": "delay_n2n", "late_broadcast": "delay_12n",
            "early_reduce": "delay_n21"}
ROOT = pathlib.Path(__file__).resolve().parent.parent


def scout_totals(cubex: pathlib.Path) -> dict[str, float]:
    """Every metric's total (inclusive over metrics and the call tree, summed over locations) from
    `cube_dump -m all -x incl -z incl -c roots -t aggr -s csv2`: lines `metric,cnode,value`."""
    out = subprocess.run(["cube_dump", "-m", "all", "-x", "incl", "-z", "incl", "-c", "roots", "-t", "aggr",
                          "-s", "csv2", str(cubex)], capture_output=True, text=True, check=True).stdout
    totals: dict[str, float] = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        try:
            value = float(parts[-1])
        except ValueError:
            continue
        totals[parts[0]] = totals.get(parts[0], 0.0) + value
    if not totals:
        raise RuntimeError(f"cube_dump printed nothing readable for {cubex}:\n{out[:2000]}")
    return totals


def run_scout(anchor: pathlib.Path, nranks: int, time_correct: bool, scratch: pathlib.Path):
    copy = scratch / "archive"
    shutil.copytree(anchor.parent, copy)
    cmd = [shutil.which("mpiexec") or "mpiexec", "-n", str(nranks), "scout.mpi"]
    cmd += ["--time-correct"] if time_correct else []
    t0 = time.perf_counter()
    res = subprocess.run(cmd + [str(copy / anchor.name)], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"scout failed ({res.returncode}): {res.stderr[-2000:] or res.stdout[-2000:]}")
    return scout_totals(copy / "scout.cubex"), seconds


def run_scalgraph(anchor: pathlib.Path, time_correct: bool):
    cmd = [sys.executable, "-m", "scalgraph.cli", "trace", str(anchor), "--json"]
    cmd += [] if time_correct else ["--no-clock-correction"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"scalgraph trace failed: {res.stderr[-2000:]}")
    return json.loads(res.stdout), seconds


def ours(report: dict) -> dict[str, float]:
    """Scalasca metric name -> our value."""
    tree = {p["key"]: p["seconds"] for p in report["patterns"]}
    out = {scout: tree.get(key, 0.0) for key, scout in PATTERNS.items()}
    out["time"] = report["total_time"]
    fam = report["delay"].get("families", {})
    for key, metric in FAMILIES.items():
        out[metric] = fam.get(key, {}).get("short_term", 0.0)
        out[metric + "_longterm"] = fam.get(key, {}).get("long_term", 0.0)
    out["critical_path"] = report["critical_path"]["length"]
    return out


def compare(name: str, theirs: dict, mine: dict, tolerance: float) -> int:
    bad = 0
    print(f"\n{name}\n  {'metric':<32} {'scout':>14} {'scalgraph':>14} {'diff':>9}")
    for metric in sorted(mine):
        if metric == "critical_path":
            # scout's metric is the path's time summed over its call paths per location; compare the length
            theirs_v = max(theirs.get("critical_path", 0.0), 0.0)
        else:
            theirs_v = theirs.get(metric)
        if theirs_v is None:
            continue
        a, b = float(theirs_v), float(mine[metric])
        if a == 0 and b == 0:
            continue
        rel = (b - a) / a if a else float("inf")
        flag = "" if abs(rel) <= tolerance else "  <-- beyond tolerance"
        bad += bool(flag)
        print(f"  {metric:<32} {a:14.6f} {b:14.6f} {100 * rel:8.2f} %{flag}")
    return bad


def nranks_of(anchor: pathlib.Path) -> int:
    from scalgraph.io.trace_read import read_trace
    return read_trace(str(anchor)).nranks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("archives", nargs="*", help="OTF2 anchors (traces.otf2) or, with --export, scalgraph traces")
    ap.add_argument("--time-correct", action="store_true", help="scout --time-correct and our clock correction")
    ap.add_argument("--export", action="store_true", help="the inputs are scalgraph traces: export each to OTF2 first")
    ap.add_argument("--tolerance", type=float, default=0.01, help="relative difference flagged (default 1 %%)")
    args = ap.parse_args(argv)
    if shutil.which("scout.mpi") is None:
        print("scout not found (scout.mpi is not on PATH; see docs/trace-analysis.md to build Scalasca 2.6)")
        return 0
    if shutil.which("cube_dump") is None:
        print("scout found but cube_dump (CubeLib) is not on PATH; install CubeLib with Scalasca")
        return 0
    bad = 0
    with tempfile.TemporaryDirectory(prefix="sg-vs-scout-") as tmp:
        for i, name in enumerate(args.archives):
            anchor = pathlib.Path(name).resolve()
            if args.export:
                from scalgraph.io.trace_read import read_trace, write_trace
                out = pathlib.Path(tmp) / f"export{i}" / "traces.otf2"
                out.parent.mkdir()
                write_trace(read_trace(str(anchor)), out, "otf2")
                anchor = out
            scratch = pathlib.Path(tmp) / f"run{i}"
            scratch.mkdir()
            theirs, t_scout = run_scout(anchor, nranks_of(anchor), args.time_correct, scratch)
            report, t_ours = run_scalgraph(anchor, args.time_correct)
            bad += compare(f"{name} ({report['ranks']} ranks, {report['events']} events; scout {t_scout:.2f} s, "
                           f"scalgraph {t_ours:.2f} s{', --time-correct' if args.time_correct else ''})",
                           theirs, ours(report), args.tolerance)
    print(f"\n{bad} rows beyond {100 * args.tolerance:g} %")
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    sys.exit(main())
