"""Cost of the static pass per 1,000 IR instructions, phase by phase, measured side by side in one run.

    .venv/bin/python benchmarks/bench_static.py [--repeat 3] [--functions 50,200,400]

Inputs: the largest sample (by IR instruction count) and generated C programs of --functions
functions each (loops, branches, MPI calls, calls between them) to show how the cost grows with size.
For each it prints the median seconds of: clang -> bitcode (the compiler's own front end, for
scale), parse + PSG templates + probe rewrite (instrument_text), LLVM re-parse + object emission,
and link_psg; and the PSG build time per 1,000 IR instructions.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ZIG = BIN / "python-zig"
INCLUDE = Path(sys.prefix) / "include"


def clang_bitcode(src: Path, out: Path) -> float:
    lang = "c++" if src.suffix in (".cpp", ".cc") else "cc"
    t = time.perf_counter()
    subprocess.run([str(ZIG), lang, "-c", "-emit-llvm", "-g", "-O0", "-fno-sanitize=all", f"-I{INCLUDE}",
                    str(src), "-o", str(out)], check=True, capture_output=True)
    return time.perf_counter() - t


def count_instructions(text: str) -> int:
    from scalgraph.static.ir import parse_module_text
    return sum(len(b.instrs) for f in parse_module_text(text).functions for b in f.blocks)


def generated_program(n: int) -> str:
    """n functions, each a loop nest with a branch around MPI calls, calling the next one."""
    out = ["#include <mpi.h>", "static double a[64][64]; static int rank, size;"]
    out += [f"void f{i}(int d);" for i in range(n)]
    for i in range(n):
        callee = f"  if (d > 0) f{i + 1}(d - 1);" if i + 1 < n else ""
        out.append(f"""void f{i}(int d) {{
  double s = 0;
  for (int it = 0; it < 3; ++it) {{
    for (int x = 0; x < 64; ++x)
      for (int y = 0; y < 64; ++y)
        s += a[x][y] * (it + {i});
    if (rank % 2 == 0) {{
      if (rank + 1 < size) MPI_Send(&s, 1, MPI_DOUBLE, rank + 1, {i}, MPI_COMM_WORLD);
    }} else {{
      MPI_Recv(&s, 1, MPI_DOUBLE, rank - 1, {i}, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }}
  }}
  MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  a[{i} % 64][0] = s;
{callee}
}}""")
    out.append("""int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  f0(4);
  MPI_Finalize();
  return 0;
}""")
    return "\n".join(out) + "\n"


def measure(src: Path, tmp: Path, repeat: int) -> dict:
    import llvmlite.binding as llvm

    from scalgraph.static.link import link_psg
    from scalgraph.static.probes import instrument_text
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    bc = tmp / (src.name + ".bc")
    times = {"clang": [], "psg": [], "emit": [], "link": []}
    for _ in range(repeat):
        times["clang"].append(clang_bitcode(src, bc))
        text = str(llvm.parse_bitcode(bc.read_bytes()))
        t = time.perf_counter()
        part, new = instrument_text(text, str(src))
        times["psg"].append(time.perf_counter() - t)
        t = time.perf_counter()
        m = llvm.parse_assembly(new)
        tm = llvm.Target.from_triple(m.triple).create_target_machine(opt=0, reloc="pic")
        tm.emit_object(m)
        times["emit"].append(time.perf_counter() - t)
        t = time.perf_counter()
        psg, _ = link_psg([part])
        times["link"].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    med["instructions"] = count_instructions(text)
    med["vertices"] = len(psg)
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--functions", default="50,200,400", help="sizes of the generated programs")
    args = ap.parse_args()
    if not ZIG.exists():
        sys.exit("bench_static: needs python-zig (PyPI ziglang) in the venv")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        candidates = [p for p in (ROOT / "samples").glob("*/*") if p.suffix in (".c", ".cpp")]
        sizes = {}
        for p in candidates:
            import llvmlite.binding as llvm
            clang_bitcode(p, tmp / "probe.bc")
            sizes[p] = count_instructions(str(llvm.parse_bitcode((tmp / "probe.bc").read_bytes())))
        largest = max(sizes, key=sizes.get)
        generated = []
        for n in (int(x) for x in args.functions.split(",") if x.strip()):
            gen = tmp / f"generated_{n}.c"
            gen.write_text(generated_program(n))
            generated.append(gen)
        print(f"{'input':<34} {'IR instr':>9} {'vertices':>9} {'clang s':>8} {'PSG+probes s':>13} "
              f"{'emit s':>7} {'link s':>7} {'PSG ms/1k instr':>16} {'PSG/clang':>10}")
        for src in [largest, *generated]:
            r = measure(src, tmp, args.repeat)
            label = str(src.relative_to(ROOT)) if src.is_relative_to(ROOT) else src.name
            per_k = 1000.0 * (r["psg"] + r["link"]) / (r["instructions"] / 1000.0)
            print(f"{label:<34} {r['instructions']:>9} {r['vertices']:>9} {r['clang']:>8.3f} {r['psg']:>13.3f} "
                  f"{r['emit']:>7.3f} {r['link']:>7.3f} {per_k:>16.2f} {(r['psg'] + r['link']) / r['clang']:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
