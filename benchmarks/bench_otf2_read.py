"""Reading speed and memory of OTF2 against scalgraph's own binary format (issue 11 item 8: at least
10^6 events/s per process, at most ~100 bytes held per event).

One synthetic trace (benchmarks/bench_replay.py's halo exchange + allreduce) is written as OTF2 and
as the binary format; each read runs in a fresh process (`read_trace(path, validate=False)`), whose
peak resident memory growth over the read, divided by the events, is the bytes per event held.
The "block" rows read one quarter of the ranks, as one of 4 parallel-replay processes does
(`read_trace(path, ranks=...)`: OTF2 opens only those ranks' locations).  Medians of --repeat runs.

    .venv/bin/python benchmarks/bench_otf2_read.py                     # 10^6 events, 16 ranks
    .venv/bin/python benchmarks/bench_otf2_read.py --events 3200000 --ranks 64
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


def read_in_child(path: str, lo: int = -1, hi: int = -1) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(lo), str(hi)], capture_output=True, text=True,
                         check=True, cwd=pathlib.Path(__file__).resolve().parent.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
