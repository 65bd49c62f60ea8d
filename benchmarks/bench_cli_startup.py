"""Start-up time of the `scalgraph` command: median wall time of `--help` calls, next to a bare
`python -c pass`, so the figure says how much of a call is ours and not the interpreter's.

    .venv/bin/python benchmarks/bench_cli_startup.py                    # 15 runs each
    .venv/bin/python benchmarks/bench_cli_startup.py -n 30 --before /tmp/before

--before DIR runs the same commands with PYTHONPATH=DIR (another checkout, e.g. made with
`git worktree add /tmp/before <commit>`) and prints both columns side by side.  Runs are interleaved
(every command and checkout once per round) so that load from other processes hits all alike.

Measured 2026-11-25 (2 cores, load average 6-7; `-n 15 --before` a worktree of 31eec6c, the commit
before command modules imported numpy/scipy lazily): python -c pass 0.085 s; scalgraph --help
2.857 -> 0.129 s; detect --help 3.022 -> 0.114 s; trace --help 2.813 -> 0.133 s.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent.parent
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "scalgraph --help": ["-m", "scalgraph.cli", "--help"],
    "scalgraph detect --help": ["-m", "scalgraph.cli", "detect", "--help"],
    "scalgraph trace --help": ["-m", "scalgraph.cli", "trace", "--help"],
}


def wall(args: list[str], root: pathlib.Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(root))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, cwd=root, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="runs per command (default %(default)s)")
    ap.add_argument("--before", type=pathlib.Path, help="another checkout to compare against")
    args = ap.parse_args()
    roots = {"now": HERE} | ({"before": args.before.resolve()} if args.before else {})
    print(f"median wall time of {args.n} runs, seconds ({sys.executable})")
    print(f"{'command':<26}" + "".join(f"{name:>10}" for name in roots))
    times = {(label, name): [] for label in COMMANDS for name in roots}
    for _ in range(args.n):                 # round-robin: a burst of load hits every column alike
        for label, cmd in COMMANDS.items():
            for name, root in roots.items():
                times[label, name].append(wall(cmd, root))
    for label in COMMANDS:
        print(f"{label:<26}" + "".join(f"{statistics.median(times[label, name]):>10.3f}" for name in roots))
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
