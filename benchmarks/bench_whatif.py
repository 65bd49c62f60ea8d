"""What-if checked against the real fix: for each sample with a planted cause, the gain scalgraph
predicts for fixing it next to the gain measured by running the fixed program.

Per sample: build it once with the compile wrapper; `scalgraph run -n 2,4,8 --repeat K` the program as
it is (plain and, with --modes trace, traced), and again with SAMPLE_FIXED=1 in the environment (every
sample with a planted cause skips it then; samples/README.md).  The measured gain at p is the median
wall time of the broken runs minus the median of the fixed runs; the predicted gain is the `whatif`
of the root cause `scalgraph detect --json` (profile mode) or `scalgraph trace --json` (trace mode,
largest traced scale's run directory) reports on the planted lines.  A prediction is good when it is
within 15 % of the measured gain or within 3 % of the run time, whichever is larger (issue 14).

    .venv/bin/python benchmarks/bench_whatif.py                      # all samples, 3 repetitions
    .venv/bin/python benchmarks/bench_whatif.py --samples cg --repeat 1 --modes profile

Both variants run at every scale in one sitting, alternating, so the machine's load changes them
alike; a loaded machine still widens the error (the measured gain is a difference of two noisy
times): read the figures from a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ["cg", "stencil2d", "sweep", "zeusmp", "masterworker", "rma"]
WRAPPER = {".c": "sgcc", ".cpp": "sgcxx", ".f90": "sgfort"}


def tool(name: str) -> str:
    here = pathlib.Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def expected(name: str) -> dict:
    return json.loads((ROOT / "samples" / name / "expected.json").read_text())


def build(name: str, work: pathlib.Path) -> pathlib.Path:
    srcs = [ROOT / "samples" / name / s for s in expected(name)["sources"]]
    exe = work / name
    subprocess.run([tool(WRAPPER[srcs[0].suffix]), "-O2", "-g", "-o", str(exe), *map(str, srcs)], check=True,
                   capture_output=True, text=True, timeout=900)
    return exe


def scalgraph(*args: str, cwd: pathlib.Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=3600)


def run(exe: pathlib.Path, exp: pathlib.Path, scales: str, repeat: int, fixed: bool, trace: bool) -> dict[int, float]:
    env = dict(os.environ)
    env.pop("SAMPLE_FIXED", None)
    if fixed:
        env["SAMPLE_FIXED"] = "1"
    args = ["run", "-n", scales, "--repeat", str(repeat), "-o", str(exp), *(["--trace"] if trace else []),
            "--", str(exe)]
    res = scalgraph(*args, cwd=exe.parent, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"scalgraph run failed for {exe.name}: {res.stderr.strip().splitlines()[-1:]}")
    runs = json.loads((exp / "experiment.json").read_text())["runs"]
    walls: dict[int, list[float]] = {}
    for r in runs:
        if r.get("status") == "ok":
            walls.setdefault(int(r["scale"]), []).append(float(r["wall_time"]))
    return {p: statistics.median(w) for p, w in walls.items()}


def on_planted(cause: dict, rc: dict) -> bool:
    file = cause.get("file") or ""
    line = cause.get("line")
    return (pathlib.Path(file).name == rc["file"] and line is not None
            and rc["lines"][0] <= int(line) <= rc["lines"][-1])


def predicted_profile(exp: pathlib.Path, rc: dict) -> dict[int, float] | None:
    res = scalgraph("detect", "--json", str(exp), cwd=exp.parent)
    causes = json.loads(res.stdout).get("root_causes", []) if res.returncode == 0 else []
    for c in causes:
        if on_planted(c, rc) and c.get("whatif"):
            return {int(p): g for p, g in c["whatif"]["gain"].items()}
    return None


def predicted_trace(exp: pathlib.Path, rc: dict) -> dict[int, float] | None:
    """Trace mode: each traced scale's `scalgraph trace --json` verdict cause on the planted lines."""
    out = {}
    for d in sorted(exp.glob("scale-*")):
        p = int(d.name.split("-")[1])
        res = scalgraph("trace", "--json", str(d / "rep-0"), cwd=exp.parent)
        if res.returncode != 0:
            continue
        for c in json.loads(res.stdout).get("root_causes", []):
            if on_planted(c, rc) and c.get("whatif"):
                out[p] = float(c["whatif"]["gain"])
                break
    return out or None


def verdict(pred: float | None, meas: float, run_time: float) -> str:
    if pred is None:
        return "no prediction"
    tol = max(0.15 * abs(meas), 0.03 * run_time)
    return "ok" if abs(pred - meas) <= tol else "off"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", default=",".join(SAMPLES), metavar="A,B")
    ap.add_argument("--scales", default="2,4,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default="profile,trace", metavar="M,M", help="profile, trace (default both)")
    ap.add_argument("--json-out", metavar="FILE")
    args = ap.parse_args(argv)
    modes = args.modes.split(",")
    rows = []
    with tempfile.TemporaryDirectory(prefix="sg-whatif-") as tmp:
        for name in args.samples.split(","):
            work = pathlib.Path(tmp) / name
            work.mkdir()
            exe = build(name, work)
            rc = expected(name)["root_cause"]
            for mode in modes:
                trace = mode == "trace"
                broken = run(exe, work / f"{mode}-broken", args.scales, args.repeat, False, trace)
                fixed = run(exe, work / f"{mode}-fixed", args.scales, args.repeat, True, trace)
                pred = (predicted_trace if trace else predicted_profile)(work / f"{mode}-broken", rc) or {}
                for p in sorted(broken):
                    meas = broken[p] - fixed.get(p, float("nan"))
                    rows.append({"sample": name, "mode": mode, "p": p, "run_time": broken[p],
                                 "measured_gain": meas, "predicted_gain": pred.get(p),
                                 "verdict": verdict(pred.get(p), meas, broken[p])})
                    r = rows[-1]
                    pg = "-" if r["predicted_gain"] is None else f"{r['predicted_gain']:.3f}"
                    print(f"{name:13s} {mode:8s} p={p:<3d} run {broken[p]:7.3f} s  measured gain {meas:7.3f} s  "
                          f"predicted {pg:>7s} s  {r['verdict']}", flush=True)
    good = sum(r["verdict"] == "ok" for r in rows)
    print(f"{good} of {len(rows)} predictions within 15 % of the measured gain (or 3 % of the run time)")
    if args.json_out:
        pathlib.Path(args.json_out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
