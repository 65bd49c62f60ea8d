"""What an sgcc build costs against a plain mpicc build, side by side, on two inputs: the largest
C/C++ sample and a generated MPI program of 20,000 lines of C.

    .venv/bin/python benchmarks/bench_compile.py [--repeat 5] [--lines 20000] [--sources a.c ...]
                                                 [--make] [--phases] [--keep DIR]

Per input, the CPU time (user + system of all child processes: the steadier figure on a shared
machine) and the wall time of three builds at -O2, taken in turn so that drift hits all alike,
median of --repeat runs after one warm-up run (caches of the shim, zig, the Fortran module):
  plain             the venv's mpicc / mpicxx (PyPI MPICH, the system cc / c++ behind it)
  sg-uninstrumented sgcc with SCALGRAPH_NO_INSTRUMENT=1: the same compiler sgcc uses, nothing else
  sg                sgcc: bitcode, static pass, probes, object, PSG link, tables, shim, link
and the ratios sg / plain.  Then where sgcc's own time goes (the static pass in process, on the IR
sgcc gives it).  The builds run without PYTHONDONTWRITEBYTECODE, as an installed scalgraph runs.
--make also builds the generated program split into 8 files with make -j1 and
-j2, plain and sg (wall time: separate compiles must scale with the jobs).  --phases splits one sg
build's CPU: each process sgcc starts (front end, code generation, tables, link, mpicc -show) and
sgcc's own python (start-up, imports, static pass, debug-info strip, PSG link, the rest).
Every build gets a -D never seen before, so no compiler cache (zig's) answers instead of a compile.
"""
from __future__ import annotations

import argparse
import json
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


def largest_sample() -> Path:
    candidates = [p for p in (ROOT / "samples").glob("*/*") if p.suffix in (".c", ".cpp")]
    if not candidates:
        sys.exit("bench_compile: no C/C++ sample under samples/; pass --sources")
    return max(candidates, key=lambda p: p.stat().st_size)


def generate_program(lines: int, files: int = 1) -> list[tuple[str, str]]:
    """A deterministic MPI program of about `lines` lines of C in `files` files: kernels with loop
    nests, branches and calls, every fourth reducing over MPI, every fourth exchanging with its
    neighbours, in call chains of eight (kernel k calls k-1 unless k is a multiple of 8: call depths
    of a real program, not a 1,000-deep chain that each caller expands again), main calling the
    head of every chain.  (file name, text) pairs; main is in the first file."""
    per_file = max(40, lines // files)
    header = ["#include <mpi.h>", "#include <math.h>", "extern double field[4096];"]
    sources: list[list[str]] = [list(header) for _ in range(files)]
    k = 0
    f = 0
    while sum(len(s) for s in sources) < lines - 40:
        out = sources[f]
        out += [f"double kernel_{k}(int n, double a, MPI_Comm comm)", "{", "    double s = 0.0;",
                "    for (int i = 0; i < n; i++) {",
                f"        for (int j = 0; j < {8 + k % 5}; j++) {{",
                f"            double x = field[(i * {k % 7 + 1} + j) & 4095] * a + {k}.0;",
                "            if (x > 1.0)", f"                s += sqrt(x) * {1 + k % 3};", "            else",
                "                s -= x * x;", "        }", f"        field[(i + {k}) & 4095] = s * 1e-3;", "    }"]
        if k % 4 == 0:
            out += ["    double g = 0.0;", "    MPI_Allreduce(&s, &g, 1, MPI_DOUBLE, MPI_SUM, comm);", "    s = g;"]
        elif k % 4 == 1:
            out += ["    int rank, size;", "    MPI_Comm_rank(comm, &rank);", "    MPI_Comm_size(comm, &size);",
                    "    double r = 0.0;", "    MPI_Sendrecv(&s, 1, MPI_DOUBLE, (rank + 1) % size, 7, &r, 1, MPI_DOUBLE,",
                    "                 (rank + size - 1) % size, 7, comm, MPI_STATUS_IGNORE);", "    s += r;"]
        if k % 8:
            out.insert(len(header), f"double kernel_{k - 1}(int n, double a, MPI_Comm comm);")
            out += [f"    if (n > {k % 11})", f"        s += kernel_{k - 1}(n / 2, a * 0.5, comm);"]
        out += ["    return s;", "}", ""]
        k += 1
        if len(out) >= per_file and f + 1 < files:
            f += 1
    main = ["#include <stdio.h>", "double field[4096];"]
    heads = [i for i in range(k) if i % 8 == 7 or i == k - 1]
    main += [f"double kernel_{i}(int n, double a, MPI_Comm comm);" for i in heads]
    main += ["int main(int argc, char **argv)", "{", "    MPI_Init(&argc, &argv);", "    double t = 0.0;",
             "    for (int it = 0; it < 2; it++) {"]
    main += [f"        t += kernel_{i}(8, 1.0 + it, MPI_COMM_WORLD);" for i in heads]
    main += ["    }", '    printf("%g\\n", t);', "    MPI_Finalize();", "    return 0;", "}", ""]
    sources[0] += main
    return [(f"gen{i}.c", "\n".join(s) + "\n") for i, s in enumerate(sources)]


def timed(cmd: list[str], cwd: str, env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child processes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode:
        sys.exit(f"bench_compile: {' '.join(cmd[:3])} ... failed:\n{r.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def builds(cxx: bool) -> dict[str, tuple[str, dict]]:
    base = dict(os.environ)
    base.pop("SCALGRAPH_NO_INSTRUMENT", None)
    # an installed scalgraph runs from its compiled bytecode; with this set (some shells and CI
    # set it), every sgcc call would compile scalgraph's sources again (about 30 ms a call)
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    mpicc = str(BIN / ("mpicxx" if cxx else "mpicc"))
    sgcc = str(BIN / ("sgcxx" if cxx else "sgcc"))
    return {"plain": (mpicc, base),
            "sg-uninstrumented": (sgcc, dict(base, SCALGRAPH_NO_INSTRUMENT="1")),
            "sg": (sgcc, base)}


def compare(name: str, sources: list[Path], repeat: int, work: str, warm: bool = True) -> dict[str, tuple[float, float]]:
    """Median (wall, cpu) per build of `sources`, printed as one table (warm: one untimed run first)."""
    cxx = any(p.suffix == ".cpp" for p in sources)
    table = builds(cxx)
    wall: dict[str, list[float]] = {k: [] for k in table}
    cpu: dict[str, list[float]] = {k: [] for k in table}
    nonce = f"{os.getpid()}_{time.time_ns()}"
    for run in range(0 if warm else 1, repeat + 1):      # run 0 warms the caches
        for build, (tool, env) in table.items():
            cmd = [tool, "-O2", f"-DSG_BENCH_RUN={nonce}_{run}", *map(str, sources), "-o", f"{build}.exe", "-lm"]
            w, c = timed(cmd, work, env)
            if run:
                wall[build].append(w)
                cpu[build].append(c)
    med = {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in table}
    loc = sum(len(p.read_text().splitlines()) for p in sources)
    print(f"{name} ({loc} lines, {len(sources)} file{'s' if len(sources) > 1 else ''}), -O2, median of {repeat}")
    print(f"  {'build':20s} {'wall ms':>9s} {'cpu ms':>9s}")
    for build, (w, c) in med.items():
        print(f"  {build:20s} {w * 1000:9.0f} {c * 1000:9.0f}")
    print(f"  sg / plain: cpu {med['sg'][1] / med['plain'][1]:.2f}x, wall {med['sg'][0] / med['plain'][0]:.2f}x;"
          f" sg / sg-uninstrumented: cpu {med['sg'][1] / med['sg-uninstrumented'][1]:.2f}x")
    return med


def static_pass_cost(sources: list[Path], work: str) -> None:
    """The static pass alone, in process, on the input sgcc gives it: IR text from a clang of
    llvmlite's LLVM (instrument_ir_text: read, analyse, probe, print), else bitcode through llvmlite
    (instrument_bitcode: also parse, print, re-parse, verify, emit)."""
    from scalgraph.static import instrument_bitcode, instrument_ir_text
    from scalgraph.static.driver import added_debug_flags
    from scalgraph.static.toolchain import backend_for, find_compiler, find_mpi_wrapper, mpi_flags
    for src in sources:
        lang = "c++" if src.suffix == ".cpp" else "c"
        cc, mpi = find_compiler(lang), mpi_flags(find_mpi_wrapper(lang))
        as_text = backend_for(cc) == cc.command and not cc.flags
        ir = os.path.join(work, src.stem + (".ll" if as_text else ".bc"))
        subprocess.run([*cc.command, *cc.flags, "-S" if as_text else "-c", "-emit-llvm",
                        *added_debug_flags(lang, []), "-O2", *mpi.compile, str(src), "-o", ir], check=True)
        data = Path(ir).read_bytes()
        t = time.process_time()
        if as_text:
            _, part = instrument_ir_text(data.decode(), str(src), keep_debug_info=False)
        else:
            _, part = instrument_bitcode(data, str(src), opt_level=2, keep_debug_info=False)
        secs = time.process_time() - t
        n = sum(sum(f["full_counts"].values()) for f in part["functions"])
        print(f"  static pass on {src.name}: {secs * 1000:.0f} ms CPU for {n} local PSG vertices, "
              f"{'IR text' if as_text else 'bitcode'} by {cc.origin} {' '.join(cc.command[-1:])}")


# run in a child python as sgcc runs: every process sgcc starts timed (CPU of the child), and
# sgcc's own CPU split into start-up, imports, the static pass, the debug-info strip and the rest
_PHASES_CHILD = r"""
import json, resource, subprocess, sys, time
start_cpu = time.process_time()
real_run, spent = subprocess.run, []
def timed(cmd, *a, **k):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        return real_run(cmd, *a, **k)
    finally:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent.append((list(map(str, cmd)), after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
subprocess.run = timed
t = time.process_time()
import scalgraph.static
from scalgraph.static.driver import main
try:
    import scalgraph.static.nodebug as nodebug
except ImportError:                # an older scalgraph (a "before" run) has none
    nodebug = None
imports_cpu, own = time.process_time() - t, {}
def own_time(module, name, label):
    inner = getattr(module, name)
    def wrapped(*a, **k):
        t = time.process_time()
        try:
            return inner(*a, **k)
        finally:
            own[label] = own.get(label, 0.0) + time.process_time() - t
    setattr(module, name, wrapped)
own_time(scalgraph.static, "instrument_ir_text", "static pass (python)")
own_time(scalgraph.static, "instrument_bitcode", "static pass (python)")
if nodebug is not None:
    own_time(nodebug, "without_debug_info", "debug info stripped (python)")
own_time(scalgraph.static, "link_psg", "PSG link and tables source (python)")
if hasattr(scalgraph.static, "link_psg_json"):     # the driver's entry since it also gives the JSON text
    own_time(scalgraph.static, "link_psg_json", "PSG link and tables source (python)")
rc = main(sys.argv[1], sys.argv[2:])
total = time.process_time()
own["python start-up"] = start_cpu
own["imports"] = imports_cpu
own["rest of sgcc (python)"] = total - sum(own.values())
print(json.dumps({"rc": rc, "children": spent, "own": own}))
"""


def phase_of(cmd: list[str]) -> str:
    """Which step of an sgcc call a command it ran is."""
    if "-emit-llvm" in cmd:
        return "front end (IR)"
    if "-disable-llvm-optzns" in cmd:
        return "code generation"
    if any(a.endswith("sg_psg_tables.c") for a in cmd):
        return "tables object"
    if "-show" in cmd or "--showme" in cmd:
        return "mpicc -show"
    if "-c" in cmd or "-S" in cmd:
        return "other compile"
    return "link"


def phases(sources: list[Path], work: str) -> None:
    """Where the CPU of one sg build goes: per process sgcc starts, and sgcc's own parts."""
    lang = "c++" if any(p.suffix == ".cpp" for p in sources) else "c"
    env = builds(lang == "c++")["sg"][1]
    cmd = [sys.executable, "-c", _PHASES_CHILD, lang, "-O2", f"-DSG_BENCH_PHASES={time.time_ns()}",
           *map(str, sources), "-o", "phases.exe", "-lm"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode or not r.stdout.strip():
        sys.exit(f"bench_compile: the phase run failed:\n{r.stderr}")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rows: dict[str, float] = {}
    for child, secs in got["children"]:
        rows[phase_of(child)] = rows.get(phase_of(child), 0.0) + secs
    rows.update(got["own"])
    print(f"  one sg build, CPU per part (total {total * 1000:.0f} ms):")
    for name, secs in sorted(rows.items(), key=lambda kv: -kv[1]):
        print(f"    {name:38s} {secs * 1000:8.0f} ms  {100 * secs / total:5.1f} %")


def make_scaling(lines: int, work: str) -> None:
    """The generated program in 8 files, built by make -j1 and -j2, plain and sg (wall seconds)."""
    d = Path(work) / "make"
    d.mkdir()
    names = []
    for name, text in generate_program(lines, files=8):
        (d / name).write_text(text)
        names.append(name[:-2])
    objs = " ".join(f"{n}.o" for n in names)
    (d / "Makefile").write_text(f"prog: {objs}\n\t$(CC) -O2 -o $@ {objs} -lm\n%.o: %.c\n\t$(CC) -O2 -c $<\n"
                                "clean:\n\trm -f prog *.o\n")
    print(f"make: the generated program in {len(names)} files, wall seconds (cpu)")
    for build, (tool, env) in builds(False).items():
        if build == "sg-uninstrumented":
            continue
        row = []
        for jobs in (1, 2):
            subprocess.run(["make", "-s", "clean"], cwd=d, check=True)
            w, c = timed(["make", "-s", f"-j{jobs}", f"CC={tool}"], str(d), env)
            row.append(f"-j{jobs} {w:6.2f} s ({c:.2f})")
        print(f"  {build:6s} " + "   ".join(row))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--lines", type=int, default=20000, help="size of the generated program (0: skip it)")
    ap.add_argument("--sources", nargs="+", type=Path, help="measure these instead of the largest sample")
    ap.add_argument("--make", action="store_true", help="also time make -j1/-j2 on the generated program")
    ap.add_argument("--phases", action="store_true",
                    help="also split one sg build's CPU into its processes and sgcc's own parts")
    ap.add_argument("--keep", type=Path, help="build in this directory and keep it")
    args = ap.parse_args()
    if not shutil.which("cc"):
        sys.exit("bench_compile: plain mpicc needs a system cc to compare with")
    sample = [p.resolve() for p in args.sources] if args.sources else [largest_sample()]
    with tempfile.TemporaryDirectory(prefix="bench-compile-") as tmp:
        work = str(args.keep.resolve()) if args.keep else tmp
        os.makedirs(work, exist_ok=True)
        name = ", ".join(p.relative_to(ROOT).as_posix() if p.is_relative_to(ROOT) else str(p) for p in sample)
        compare(name, sample, args.repeat, work)
        static_pass_cost(sample, work)
        if args.phases:
            phases(sample, work)
        if args.lines:
            gen = Path(work) / "generated.c"
            gen.write_text(generate_program(args.lines)[0][1])
            compare("generated MPI program", [gen], args.repeat, work, warm=False)   # the sample warmed them
            static_pass_cost([gen], work)
            if args.phases:
                phases([gen], work)
            if args.make:
                make_scaling(args.lines, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
