"""Bad input through the wrappers: one clear line, the right exit status, no traceback, nothing
overwritten; and the inputs that are odd but fine (no main, no MPI, no debug info) still build."""
from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from conftest import require_tool
from scalgraph.model.psg import LOOP
from test_driver_build import HAVE_ZIG, MPICC, MPIEXEC, instrumentation_available, mpirun, sg


@pytest.fixture
def instrumented():
    require_tool(MPICC is not None and MPIEXEC is not None and HAVE_ZIG, "no MPI/zig in the venv")
    require_tool(instrumentation_available(), "static pass or runtime shim not installed")
    return "instrumented"


def fake_compiler(d: Path, body: str) -> str:
    """A real executable standing in for clang, to produce the broken outputs a real toolchain can."""
    path = d / "fakecc"
    path.write_text(f"#!{sys.executable}\nimport os, subprocess, sys\nargs = sys.argv[1:]\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_bitcode_that_cannot_be_parsed_is_one_line_naming_the_file(tmp_path, instrumented):
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "a.o").write_bytes(b"previous")
    cc = fake_compiler(tmp_path, "open(args[args.index('-o') + 1], 'wb').write(b'BC\\xc0\\xde garbage')")
    r = sg("sgcc", ["-c", "a.c"], tmp_path, instrumented, env={"SCALGRAPH_CC": cc}, check=False)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "a.c" in lines[0] and "bitcode" in lines[0] and "clang" in lines[0]
    assert (tmp_path / "a.o").read_bytes() == b"previous"


def test_no_debug_info_builds_and_says_so(tmp_path, instrumented):
    (tmp_path / "p.c").write_text('#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { int r;\n'
                                  'MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);\n'
                                  'if (r == 0) puts("ok"); MPI_Finalize(); return 0; }\n')
    body = (f"os.execv({sys.executable!r}, [{sys.executable!r}, '-m', 'ziglang', 'cc', "
            "'-fno-sanitize=all', *args, '-g0'])")
    cc = fake_compiler(tmp_path, body)
    r = sg("sgcc", ["p.c", "-o", "p"], tmp_path, instrumented, env={"SCALGRAPH_CC": cc})
    assert "no debug info" in r.stderr and "p.c" in r.stderr
    assert mpirun(tmp_path / "p", 2, cwd=tmp_path) == "ok\n"


def test_files_without_main_or_mpi_build_quietly_the_program_warns_once(tmp_path, instrumented):
    """A library part has no main and a main may reach MPI through another file: no warning for
    either; only a linked program with no main (or no MPI call at all) gets one, once."""
    (tmp_path / "lib.c").write_text("#include <mpi.h>\nvoid sync_all(void) { MPI_Barrier(MPI_COMM_WORLD); }\n")
    (tmp_path / "app.c").write_text('#include <mpi.h>\n#include <stdio.h>\nvoid sync_all(void);\n'
                                    'int main(int c, char **v) { MPI_Init(&c, &v); sync_all(); puts("ok");\n'
                                    'MPI_Finalize(); return 0; }\n')
    r = sg("sgcc", ["-O5", "-c", "lib.c"], tmp_path, instrumented)
    assert (tmp_path / "lib.o").is_file() and r.stderr == ""
    r = sg("sgcc", ["-Ofast", "-c", "app.c"], tmp_path, instrumented)
    assert r.stderr == ""
    r = sg("sgcc", ["-O5", "app.o", "lib.o", "-o", "app"], tmp_path, instrumented)
    assert r.stderr == ""
    # the launcher forwards the two ranks' output in chunks that may interleave ("okok\n\n")
    out = mpirun(tmp_path / "app", 2, cwd=tmp_path)
    assert out.count("ok") == 2 and out.replace("ok", "").strip() == "", out
    r = sg("sgcc", ["lib.o", "-o", "nomain"], tmp_path, instrumented, check=False)
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "no main" in warnings[0], r.stderr


def test_program_without_mpi_builds_runs_and_warns(tmp_path, instrumented):
    (tmp_path / "serial.c").write_text('#include <stdio.h>\nint main(void) { long s = 0;\n'
                                       'for (int i = 0; i < 1000; i++) s += i;\nprintf("%ld\\n", s); }\n')
    r = sg("sgcc", ["-O1", "serial.c", "-o", "serial"], tmp_path, instrumented)
    assert "warning" in r.stderr and "MPI" in r.stderr
    assert mpirun(tmp_path / "serial", 1, cwd=tmp_path) == "499500\n"


def test_bad_max_loop_depth_is_one_line(tmp_path, instrumented):
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    r = sg("sgcc", ["-c", "a.c"], tmp_path, instrumented, env={"SCALGRAPH_MAX_LOOP_DEPTH": "-3"}, check=False)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "SCALGRAPH_MAX_LOOP_DEPTH" in r.stderr
    assert not (tmp_path / "a.o").exists()


def test_max_loop_depth_reaches_the_graph(tmp_path, instrumented):
    (tmp_path / "n.c").write_text('#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) {\n'
                                  'MPI_Init(&c, &v); double s = 0;\n'
                                  'for (int i = 0; i < 50; i++)\n  for (int j = 0; j < 50; j++)\n'
                                  '    for (int k = 0; k < 50; k++) s += i * j + k;\n'
                                  'printf("%.0f\\n", s); MPI_Finalize(); return 0; }\n')
    import json
    loops = {}
    for depth in ("1", "10"):
        sg("sgcc", ["-O0", "n.c", "-o", f"n{depth}"], tmp_path, instrumented,
           env={"SCALGRAPH_MAX_LOOP_DEPTH": depth})
        psg = json.loads((tmp_path / f"n{depth}.psg.json").read_text())
        loops[depth] = psg["kind"].count(LOOP)
    assert loops == {"1": 1, "10": 3}
