"""How often the samples' planted line is the #1 root cause, over repetitions (issue 9's "9 of 10 runs").

tests/test_e2e_samples.py, test_e2e_trace.py and test_openmp_e2e.py check each sample once per CI run;
this runs every sample with an expected cause (samples/*/expected.json) `--repeat` times in each mode
and prints the top-1 counts side by side:

  profile       `scalgraph run -n <scales>`, then `scalgraph detect --json`
  trace-detect  `scalgraph run --trace -n <scales>`, then `scalgraph detect --json` (trace wait states)
  trace         `scalgraph trace --json` of that traced experiment's largest scale (the verdict)

A planted sample counts when the first cause lies inside its stated lines (as the e2e tests ask); the
balanced control counts when nothing is reported.  Each sample is built once with the compile wrapper
(hybrid samples with -fopenmp, run with their thread count and OMP_WAIT_POLICY=passive as in the tests).

    .venv/bin/python benchmarks/bench_samples_accuracy.py --repeat 10
    .venv/bin/python benchmarks/bench_samples_accuracy.py --samples cg,balanced --modes profile --repeat 3
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
MODES = ("profile", "trace-detect", "trace")
WRAPPER = {".c": "sgcc", ".cpp": "sgcxx", ".f90": "sgfort"}


def expected(name: str) -> dict:
    return json.loads((SAMPLES / name / "expected.json").read_text())


def sample_names() -> list[str]:
    """Samples with an expected.json that states scales (rma is a one-scale trace pattern case)."""
    return sorted(d.name for d in SAMPLES.iterdir()
                  if (d / "expected.json").is_file() and len(expected(d.name).get("scales", [])) >= 2)


def tool(name: str) -> str:
    here = pathlib.Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def scalgraph(args: list[str], cwd: pathlib.Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800)


def build(name: str, out: pathlib.Path) -> pathlib.Path:
    want = expected(name)
    srcs = [str(SAMPLES / name / s) for s in want["sources"]]
    omp = ["-fopenmp"] if "threads" in want else []
    exe = out / f"{name}-sg"
    res = subprocess.run([tool(WRAPPER[pathlib.Path(srcs[0]).suffix]), *omp, "-O2", "-g", "-o", str(exe), *srcs],
                         capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise SystemExit(f"bench_samples_accuracy: building {name} failed:\n{res.stderr[-2000:]}")
    return exe


def run_env(name: str) -> dict:
    want = expected(name)
    if "threads" not in want:
        return dict(os.environ)
    return {**os.environ, "OMP_NUM_THREADS": str(want["threads"]), "OMP_WAIT_POLICY": "passive"}


def verdict(causes: list[dict], rc: dict | None) -> tuple[bool, str]:
    """(counted, what the top said): the top cause inside the stated lines, or nothing for the control."""
    if not causes:
        return rc is None, "no cause"
    top = causes[0]
    where = f"{pathlib.Path(top['file']).name}:{top['line']}"
    if rc is None:
        return False, where
    last = top.get("line_last") or top["line"]
    hit = (pathlib.Path(top["file"]).name == rc["file"] and rc["lines"][0] <= top["line"]
           and last <= rc["lines"][-1])
    return hit, where


def one_repetition(name: str, exe: pathlib.Path, work: pathlib.Path, modes: list[str],
                   run_repeat: int = 1) -> dict[str, tuple[bool, str]]:
    want, env = expected(name), run_env(name)
    scales = ",".join(map(str, want["scales"]))
    repeat = ["--repeat", str(run_repeat)] if run_repeat > 1 else []
    out: dict[str, tuple[bool, str]] = {}
    if "profile" in modes:
        exp = work / "exp-profile"
        res = scalgraph(["run", *repeat, "-n", scales, "-o", str(exp), "--", str(exe)], work, env)
        out["profile"] = (False, f"run failed: {res.stderr.strip()[-200:]}") if res.returncode else detect(exp, work, want)
    traced = [m for m in modes if m != "profile"]
    if traced:
        exp = work / "exp-trace"
        res = scalgraph(["run", "--trace", *repeat, "-n", scales, "-o", str(exp), "--", str(exe)], work, env)
        for m in traced:
            if res.returncode:
                out[m] = (False, f"run failed: {res.stderr.strip()[-200:]}")
            elif m == "trace-detect":
                out[m] = detect(exp, work, want)
            else:
                out[m] = trace_verdict(exp / f"scale-{want['scales'][-1]}" / "rep-0", work, want)
    return out


def detect(exp: pathlib.Path, work: pathlib.Path, want: dict) -> tuple[bool, str]:
    res = scalgraph(["detect", "--json", str(exp)], work, dict(os.environ))
    if res.returncode:
        return False, f"detect failed: {res.stderr.strip()[-200:]}"
    return verdict(json.loads(res.stdout)["root_causes"], want["root_cause"])


def trace_verdict(run_dir: pathlib.Path, work: pathlib.Path, want: dict) -> tuple[bool, str]:
    res = scalgraph(["trace", "--json", str(run_dir)], work, dict(os.environ))
    if res.returncode:
        return False, f"trace failed: {res.stderr.strip()[-200:]}"
    return verdict(json.loads(res.stdout)["root_causes"], want["root_cause"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", help="comma-separated sample names (default: every sample with 2+ scales)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated of " + ", ".join(MODES))
    ap.add_argument("--repeat", type=int, default=3, help="experiments per sample and mode (default 3)")
    ap.add_argument("--run-repeat", type=int, default=1, metavar="K",
                    help="`scalgraph run --repeat K` in each experiment (detect takes the median of the K runs)")
    ap.add_argument("--json-out", help="write every repetition's result to this file")
    ap.add_argument("--keep", metavar="DIR", help="build and run in DIR (new or empty) and keep it, to look at a wrong answer")
    args = ap.parse_args(argv)
    names = args.samples.split(",") if args.samples else sample_names()
    modes = [m for m in args.modes.split(",") if m]
    unknown = [n for n in names if not (SAMPLES / n / "expected.json").is_file()] + [m for m in modes if m not in MODES]
    if unknown or args.repeat < 1:
        print(f"bench_samples_accuracy: unknown sample or mode {unknown} (or --repeat < 1)", file=sys.stderr)
        return 2
    results: dict[str, dict[str, list]] = {}
    if args.keep and pathlib.Path(args.keep).exists() and any(pathlib.Path(args.keep).iterdir()):
        print(f"bench_samples_accuracy: --keep {args.keep} is not empty; name a new directory", file=sys.stderr)
        return 2
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="bench-samples-")) as tmp:
        pathlib.Path(tmp).mkdir(parents=True, exist_ok=True)
        for name in names:
            exe = build(name, pathlib.Path(tmp))
            results[name] = {m: [] for m in modes}
            for k in range(args.repeat):
                work = pathlib.Path(tmp) / f"{name}-{k}"
                work.mkdir()
                for m, (ok, what) in one_repetition(name, exe, work, modes, args.run_repeat).items():
                    results[name][m].append([ok, what])
                    print(f"{name} rep {k + 1} {m}: {'ok' if ok else 'WRONG'} ({what})", flush=True)
    load = os.getloadavg()[0]
    print(f"\nsample | {' | '.join(modes)}   (top-1 counts of {args.repeat}; control: nothing reported; "
          f"load average at the end {load:.1f})")
    for name, per_mode in results.items():
        print(f"{name} | " + " | ".join(f"{sum(ok for ok, _ in per_mode[m])}/{len(per_mode[m])}" for m in modes))
    if args.json_out:
        pathlib.Path(args.json_out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
