"""Reading speed and memory of OTF2 against scalgraph's own binary format (issue 11 item 8: at least
10^6 events/s per process, at most ~100 bytes held per event).

One synthetic trace (benchmarks/bench_replay.py's halo exchange + allreduce) is written as OTF2 and
as the binary format; each read runs in a fresh process (`read_trace(path, validate=False)`), whose
peak resident memory growth over the read, divided by the events, is the bytes per event held.
The "block" rows read one quarter of the ranks, as one of 4 parallel-replay processes does
(`read_trace(path, ranks=...)`: OTF2 opens only those ranks' locations).  Medians of --repeat runs.

    .venv/bin/python benchmarks/bench_otf2_read.py                     # 10^6 events, 16 ranks
    .venv/bin/python benchmarks/bench_otf2_read.py --events 3200000 --ranks 64
    .venv/bin/python benchmarks/bench_otf2_read.py --analyse          # also the whole `scalgraph trace`
    .venv/bin/python benchmarks/bench_otf2_read.py --events 1000000 --ranks 16 --analyse --against e562101

--analyse also runs the whole analysis, `scalgraph trace traces.otf2` (text; with --json too when
--json-output is given), in a fresh process each: wall and CPU seconds from the start of the
command (imports done) to its end, events/s of both, and the peak resident memory over the
interpreter's (imports done, no trace), per event: the child's own high-water mark (VmHWM; until
2026-11-26 ru_maxrss, which carried the benchmark's own ~233 MB over the fork and made every tree
read 178 bytes per event).  Then one more process times each phase in CPU
seconds (read, validation, clock correction, replay, delay costs, critical path, report, what-if,
text of the complete report as the command prints it, JSON with --json-output), which says where
the time goes.

--against REV (implies --analyse) runs the same analysis with that git revision's scalgraph package
(`git archive REV scalgraph` into a temporary directory, imported from there) on the same archive,
alternating with the current tree run by run, and prints both side by side with the ratios; the
load average is printed before and after (the CPU figures are the steadier ones on a busy machine).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

CHILD = r"""
import json, os, sys, threading, time
from scalgraph.io.trace_read import read_trace
from scalgraph.io import otf2_native, trace_otf2
otf2_native.library()                      # built and loaded before the clock starts
import otf2, _otf2                         # noqa: F401
path, lo, hi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ranks = None if lo < 0 else range(lo, hi)
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page
peak, done = [rss()], []
def watch():                               # peak resident memory during the read, sampled every ms
    while not done:
        peak[0] = max(peak[0], rss())
        time.sleep(0.001)
before = rss()
w = threading.Thread(target=watch)
w.start()
t0 = time.perf_counter()
trace = read_trace(path, validate=False, ranks=ranks)
seconds = time.perf_counter() - t0
done.append(1)
w.join()
peak[0] = max(peak[0], rss())
events = sum(len(e) for e in trace.events)
print(json.dumps({"seconds": seconds, "events": events, "rss_growth": peak[0] - before,
                  "held": sum(e.nbytes for e in trace.events)}))
"""


ANALYSE = r"""
import contextlib, json, os, sys, time
from scalgraph import cli
from scalgraph.commands import trace as _cmd                              # noqa: F401
from scalgraph.trace import clock, critical_path, delay, forward, report, retime, validate  # noqa: F401
from scalgraph.io import otf2_native, trace_otf2, trace_read              # noqa: F401
otf2_native.library()
import otf2, _otf2                                                         # noqa: F401
path, extra = sys.argv[1], sys.argv[2:]
page = os.sysconf("SC_PAGE_SIZE")
with open("/proc/self/statm") as f:
    base = int(f.read().split()[1]) * page
w, c = time.perf_counter(), time.process_time()
with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
    rc = cli.main(["trace", path] + extra)
wall, cpu = time.perf_counter() - w, time.process_time() - c
# this process's own peak (VmHWM: the high-water mark of its memory map, new at exec); ru_maxrss
# would carry the parent's resident size over the fork (the benchmark holds the trace it wrote)
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
print(json.dumps({"rc": rc, "wall": wall, "cpu": cpu, "base": base, "peak": peak}))
"""

PHASES = r"""
import io, json, os, sys, threading, time
from scalgraph.io.trace_read import read_trace
from scalgraph.trace import critical_path, delay, forward, report, retime, validate
from scalgraph.trace.clock import ClockParams, correct_clocks
page = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page
rows, peak, current, done = [], {}, [None], []
base = rss()
def watch():                               # resident memory sampled every ms, the peak per phase
    while not done:
        if current[0]:
            peak[current[0]] = max(peak.get(current[0], 0), rss() - base)
        time.sleep(0.001)
watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
def phase(name, f):
    current[0] = name
    c = time.process_time()
    out = f()
    rows.append((name, time.process_time() - c, max(peak.get(name, 0), rss() - base)))
    current[0] = None
    return out
tr = phase("read", lambda: read_trace(sys.argv[1], validate=False))
phase("validate", lambda: validate.check_trace(tr))
try:                                     # the command's path: flattened once, corrected in place
    from scalgraph.trace.clock import correct_flat
    from scalgraph.trace.matching import flatten
except ImportError:                      # a revision before it
    correct_flat = None
if correct_flat is None:
    tr2, rep = phase("clock correction", lambda: correct_clocks(tr, ClockParams()))
    ctx = phase("replay context", lambda: forward.build_context(tr2))
else:
    try:                                 # each location's events dropped once copied, as the command does
        flat = phase("flatten", lambda: flatten(tr, release=True))
    except TypeError:                    # a revision before it
        flat = phase("flatten", lambda: flatten(tr))
    tr.events = [e[:0].copy() for e in tr.events]
    rep = phase("clock correction", lambda: correct_flat(tr, flat, ClockParams()))
    ctx = phase("replay context", lambda: forward.build_context(tr, flat=flat))
    del flat
fwd = phase("forward replay", lambda: forward.forward_replay(ctx))
dl = phase("delay costs", lambda: delay.delay_analysis(fwd, delay.DelayOptions()))
cp = phase("critical path", lambda: critical_path.critical_path(fwd))
json_too = sys.argv[2:] == ["json"]      # the complete report (--json) or the one the text prints, as the command
res = phase("report", lambda: report.build_report(fwd, dl, cp, top=10, clock=rep.summary(),
                                                  clock_correction=rep.as_dict(), complete=json_too))
del dl                                   # the command holds only what the what-if reads
phase("what-if", lambda: retime.add_whatif(res["root_causes"], fwd, None))
phase("text", lambda: report.write_text(res if json_too else report.limited(res, 10), io.StringIO(), top=10))
if json_too:
    phase("json", lambda: report.write_json(res, io.StringIO()))
print(json.dumps(rows))
"""


ROOT = pathlib.Path(__file__).resolve().parent.parent


def analyse_in_child(path: str, extra: list[str], tree: pathlib.Path = ROOT) -> dict:
    """`python -c` imports scalgraph from its working directory: `tree` is the code measured."""
    out = subprocess.run([sys.executable, "-c", ANALYSE, path, *extra], capture_output=True, text=True,
                         check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def phases_in_child(path: str, tree: pathlib.Path = ROOT, json_too: bool = False) -> list:
    out = subprocess.run([sys.executable, "-c", PHASES, path, *(["json"] if json_too else [])],
                         capture_output=True, text=True,
                         check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def tree_at(rev: str, into: str) -> pathlib.Path:
    """That revision's scalgraph package alone, unpacked under `into` (no worktree left behind)."""
    out = pathlib.Path(into) / f"rev-{rev}"
    out.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "scalgraph"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def analyse_side_by_side(path: str, n: int, args, trees: dict) -> None:
    """The whole `scalgraph trace` with each tree, alternating run by run; medians."""
    print(f"whole analysis of the OTF2 archive, medians of {args.repeat} runs, each in a fresh process"
          + (", trees alternating" if len(trees) > 1 else "") + f"; load average {load()}")
    print(f"{'command':<32}{'code':>10}{'wall s':>8}{'events/s':>12}{'CPU s':>8}{'events/s':>12}{'peak MB':>9}"
          f"{'B/ev':>7}")
    commands = (("scalgraph trace", []), ("scalgraph trace --json", ["--json"]))[:1 + args.json_output]
    for label, extra in commands:
        runs: dict = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, tree in trees.items():
                runs[name].append(analyse_in_child(path, extra, tree))
        med = {}
        for name, rs in runs.items():
            wall = statistics.median(r["wall"] for r in rs)
            cpu = statistics.median(r["cpu"] for r in rs)
            peak = statistics.median(r["peak"] for r in rs)
            grow = statistics.median(r["peak"] - r["base"] for r in rs)
            med[name] = (wall, cpu, grow)
            print(f"{label:<32}{name:>10}{wall:>8.2f}{n / wall:>12,.0f}{cpu:>8.2f}{n / cpu:>12,.0f}"
                  f"{peak / 2**20:>9.0f}{grow / n:>7.0f}")
        if len(trees) > 1:
            (_, (w0, c0, g0)), (old, (w1, c1, g1)) = list(med.items())[:2]
            print(f"{'':<32}{'ratio':>10}  {old} / current: wall {w1 / w0:.2f}x, CPU {c1 / c0:.2f}x, "
                  f"memory {g1 / max(g0, 1):.2f}x")
    for name, tree in trees.items():
        rows = phases_in_child(path, tree, args.json_output)
        print(f"CPU seconds per phase [{name}]: " + ", ".join(f"{k} {sec:.2f}" for k, sec, _ in rows)
              + f"; total {sum(sec for _, sec, _ in rows):.2f}")
        print(f"peak bytes per event over the interpreter's, per phase [{name}]: "
              + ", ".join(f"{k} {grow / n:.0f}" for k, _, grow in rows))
    print(f"load average after: {load()}")


def read_in_child(path: str, lo: int = -1, hi: int = -1) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(lo), str(hi)], capture_output=True, text=True,
                         check=True, cwd=pathlib.Path(__file__).resolve().parent.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--analyse", action="store_true", help="also time the whole `scalgraph trace` on the OTF2 archive")
    ap.add_argument("--json-output", action="store_true", help="with --analyse: also `scalgraph trace --json`")
    ap.add_argument("--against", metavar="REV", help="also analyse with this git revision's scalgraph, alternating "
                                                       "(implies --analyse)")
    args = ap.parse_args(argv)
    args.analyse = args.analyse or bool(args.against)
    from bench_replay import synthetic_trace
    from scalgraph.io.trace_read import write_trace
    trace = synthetic_trace(args.events, args.ranks)
    for ev in trace.events:                     # recorded traces tick in whole nanoseconds
        ev["time"] = np.rint(ev["time"] * 1e9) / 1e9
    n = sum(len(e) for e in trace.events)
    with tempfile.TemporaryDirectory(prefix="bench-otf2-") as tmp:
        paths = {"binary": os.path.join(tmp, "t.sgtrace"), "binary zlib": os.path.join(tmp, "z.sgtrace"),
                 "otf2": os.path.join(tmp, "traces.otf2")}
        t0 = time.perf_counter()
        write_trace(trace, paths["otf2"], "otf2")
        t_write = time.perf_counter() - t0
        write_trace(trace, paths["binary"], "binary")
        write_trace(trace, paths["binary zlib"], "binary", compress=True)
        del trace
        sizes = {k: sum(f.stat().st_size for f in pathlib.Path(tmp).rglob("*") if f.is_file()
                        and (f.name == pathlib.Path(p).name or (k == "otf2" and "traces" in str(f))))
                 for k, p in paths.items()}
        print(f"{n} events, {args.ranks} ranks; OTF2 written in {t_write:.1f} s "
              f"({n / t_write:,.0f} events/s); medians of {args.repeat} reads, each in a fresh process")
        print(f"{'format':<22}{'events':>10}{'seconds':>9}{'events/s':>13}{'peak B/ev':>11}{'held B/ev':>11}"
              f"{'file B/ev':>11}")
        quarter = max(1, args.ranks // 4)
        for fmt, path in paths.items():
            for label, lo, hi in ((fmt, -1, -1), (f"{fmt}, 1/4 block", 0, quarter)):
                runs = [read_in_child(path, lo, hi) for _ in range(args.repeat)]
                sec = statistics.median(r["seconds"] for r in runs)
                ev = runs[0]["events"]
                peak = statistics.median(r["rss_growth"] for r in runs) / max(ev, 1)
                held = runs[0]["held"] / max(ev, 1)
                print(f"{label:<22}{ev:>10}{sec:>9.3f}{ev / sec:>13,.0f}{peak:>11.1f}{held:>11.1f}"
                      f"{sizes[fmt] / n:>11.1f}")
        if args.analyse:
            trees = {"current": ROOT}
            if args.against:
                trees[args.against] = tree_at(args.against, tmp)
            analyse_side_by_side(paths["otf2"], n, args, trees)
    return 0


if __name__ == "__main__":
    sys.exit(main())
