"""sgcc/sgcxx as drop-in mpicc/mpicxx: real compiles (zig's clang), real links, real MPI runs.

Every build test runs twice: plain (SCALGRAPH_NO_INSTRUMENT=1: the argument handling alone) and
instrumented (static pass + runtime shim), so a failure says which half broke."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN, ROOT, require_tool, venv_tool

PROGRAMS = {"sgcc": "c", "sgcxx": "c++", "sgfort": "fortran"}


MPICC, MPICXX, MPIEXEC = venv_tool("mpicc"), venv_tool("mpicxx"), venv_tool("mpiexec")
HAVE_ZIG = importlib.util.find_spec("ziglang") is not None


def instrumentation_available() -> bool:
    return (importlib.util.find_spec("scalgraph.static.probes") is not None
            and importlib.util.find_spec("scalgraph.runtime.shim") is not None)


def sg(prog: str, args: list[str], cwd: Path, mode: str = "plain", env: dict | None = None,
       check: bool = True) -> subprocess.CompletedProcess:
    """Run one of the wrappers the way a build system would, with this test's Python."""
    e = dict(os.environ, **(env or {}))
    e.pop("SCALGRAPH_NO_INSTRUMENT", None)
    if mode == "plain":
        e["SCALGRAPH_NO_INSTRUMENT"] = "1"
    code = f"import sys; from scalgraph.static.driver import main; sys.exit(main({PROGRAMS[prog]!r}, sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=e, capture_output=True, text=True,
                       timeout=300)
    if check:
        assert r.returncode == 0, f"{prog} {' '.join(args)} failed ({r.returncode}):\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    return r


def mpirun(exe: Path, n: int, *args: str, cwd: Path) -> str:
    r = subprocess.run([MPIEXEC, "-n", str(n), str(exe), *args], cwd=cwd, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"{exe} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(params=["plain", "instrumented"])
def mode(request):
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (pip install mpich)")
    require_tool(HAVE_ZIG, "no ziglang (pip install ziglang)")
    if request.param == "instrumented":
        require_tool(instrumentation_available(), "static pass or runtime shim not installed")
    return request.param


HEADER = '#define SCALE_BY(x) ((x) * FACTOR)\nint helper(int);\n'
MAIN_C = r'''
#include <mpi.h>
#include <stdio.h>
#include "helper.h"
int main(int argc, char **argv) {
    int rank, size, local, total = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 3; i++) {
        local = SCALE_BY(helper(rank + i));
        int sum;
        MPI_Allreduce(&local, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        total += sum;
    }
    if (rank == 0) printf("%s size=%d total=%d\n", GREETING, size, total);
    MPI_Finalize();
    return 0;
}
'''
# helper calls MPI so that the graph keeps it at any -O (a plain sum loop may be folded away)
HELPER_C = ('#include <mpi.h>\n#include "helper.h"\nint helper(int x) { int s = 0; MPI_Barrier(MPI_COMM_WORLD);\n'
            'for (int i = 0; i <= x; i++) s += i * i; return s; }\n')


def write_project(d: Path) -> None:
    (d / "inc").mkdir()
    (d / "inc" / "helper.h").write_text(HEADER)
    (d / "main.c").write_text(MAIN_C)
    (d / "helper.c").write_text(HELPER_C)


def expected_total(size: int, factor: int) -> int:
    helper = lambda x: sum(i * i for i in range(x + 1))  # noqa: E731
    return sum(sum(helper(r + i) * factor for r in range(size)) for i in range(3))


def test_several_sources_in_one_call_with_I_D_O(tmp_path, mode):
    write_project(tmp_path)
    sg("sgcc", ["-O2", "-Iinc", "-DFACTOR=3", '-DGREETING="one-call"', "main.c", "helper.c", "-o", "app"],
       tmp_path, mode)
    out = mpirun(tmp_path / "app", 3, cwd=tmp_path)
    assert out == f"one-call size=3 total={expected_total(3, 3)}\n"
    assert not list(tmp_path.glob("*.o")), "a one-call build leaves no objects behind"
    if mode == "instrumented":
        assert (tmp_path / "app.psg.json").is_file()


def test_separate_compile_and_link_with_static_library(tmp_path, mode):
    write_project(tmp_path)
    sg("sgcc", ["-c", "-O1", "-g", "-I", "inc", "-D", "FACTOR=2", "-DGREETING=\"lib\"", "main.c"], tmp_path, mode)
    sg("sgcc", ["-c", "-Iinc", "helper.c", "-o", "helper_obj.o"], tmp_path, mode)
    assert (tmp_path / "main.o").is_file(), "-c without -o names the object after the source"
    (tmp_path / "lib").mkdir()
    subprocess.run([sys.executable, "-m", "ziglang", "ar", "rcs", "lib/libhelper.a", "helper_obj.o"],
                   cwd=tmp_path, check=True)
    sg("sgcc", ["main.o", "-Llib", "-lhelper", "-lm", "-Wl,-rpath,/nonexistent", "-o", "bin_app"],
       tmp_path, mode)
    out = mpirun(tmp_path / "bin_app", 2, cwd=tmp_path)
    assert out == f"lib size=2 total={expected_total(2, 2)}\n"
    if mode == "instrumented":
        import json
        psg = json.loads((tmp_path / "bin_app.psg.json").read_text())
        # the helper from the static library is part of the whole-program graph
        assert any(f.endswith("helper") for f in psg["functions"]), psg["functions"]


def test_objects_given_by_path_at_link_time(tmp_path, mode):
    write_project(tmp_path)
    sg("sgcc", ["-c", "-Iinc", "-DFACTOR=1", "-DGREETING=\"objs\"", "main.c", "helper.c"], tmp_path, mode)
    sg("sgcc", ["-o", "app", "helper.o", "main.o"], tmp_path, mode)
    assert mpirun(tmp_path / "app", 2, cwd=tmp_path) == f"objs size=2 total={expected_total(2, 1)}\n"


def test_cxx_with_virtual_functions_and_templates(tmp_path, mode):
    require_tool(MPICXX is not None, "no mpicxx")
    (tmp_path / "v.cpp").write_text(r'''
#include <mpi.h>
#include <cstdio>
#include <memory>
#include <vector>
struct Shape { virtual ~Shape() {} virtual double area() const = 0; };
struct Sq : Shape { double s; explicit Sq(double s) : s(s) {} double area() const override { return s * s; } };
template <typename T> T reduce_sum(T x) { T y{}; MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); return y; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::vector<std::unique_ptr<Shape>> v;
    for (int i = 0; i <= rank; i++) v.emplace_back(new Sq(i + 1));
    double a = 0; for (auto &s : v) a += s->area();
    double t = reduce_sum(a);
    if (rank == 0) std::printf("area=%.1f\n", t);
    MPI_Finalize();
}
''')
    sg("sgcxx", ["-O2", "-std=c++17", "v.cpp", "-o", "v"], tmp_path, mode)
    # ranks 0..2 sum squares 1; 1+4; 1+4+9 -> 20
    assert mpirun(tmp_path / "v", 3, cwd=tmp_path) == "area=20.0\n"


def test_preprocess_depend_and_version_pass_through(tmp_path, mode):
    write_project(tmp_path)
    r = sg("sgcc", ["-E", "-Iinc", "-DFACTOR=7", "-DGREETING=\"x\"", "main.c"], tmp_path, mode)
    assert "((helper(rank + i)) * 7)" in r.stdout and "MPI_Allreduce" in r.stdout
    r = sg("sgcc", ["-M", "-Iinc", "main.c"], tmp_path, mode)
    assert "main.o:" in r.stdout and "helper.h" in r.stdout and "mpi.h" in r.stdout
    r = sg("sgcc", ["--version"], tmp_path, mode)
    assert "clang version" in r.stdout
    r = sg("sgcc", ["-show", "-c", "main.c"], tmp_path, mode)
    assert "main.c" in r.stdout and "-lmpi" in r.stdout and not list(tmp_path.glob("*.o"))


def test_compile_error_shows_the_compilers_message_and_status(tmp_path, mode):
    (tmp_path / "bad.c").write_text("int main(void) { return undeclared_name; }\n")
    (tmp_path / "bad.o").write_bytes(b"previous object")
    (tmp_path / "direct.o").write_bytes(b"previous object")
    r = sg("sgcc", ["-c", "bad.c"], tmp_path, mode, check=False)
    from scalgraph.static.toolchain import find_compiler
    cc = find_compiler("c")                              # the compiler sgcc itself runs
    direct = subprocess.run([*cc.command, *cc.flags, "-c", "bad.c", "-o", "direct.o"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert r.returncode == direct.returncode != 0
    assert "use of undeclared identifier 'undeclared_name'" in r.stderr
    assert r.stderr.count("error:") == direct.stderr.count("error:")
    if mode == "plain":         # what the compiler does with its output on failure (clang removes it)
        assert (tmp_path / "bad.o").exists() == (tmp_path / "direct.o").exists()
    else:                       # the bitcode goes to a temporary file: the old object stays
        assert (tmp_path / "bad.o").read_bytes() == b"previous object", "nothing is overwritten on failure"


def test_link_error_keeps_the_previous_executable(tmp_path, mode):
    (tmp_path / "u.c").write_text("#include <mpi.h>\nint missing(void);\n"
                                  "int main(int c, char **v) { MPI_Init(&c, &v); missing(); MPI_Finalize(); }\n")
    (tmp_path / "u").write_bytes(b"old")
    r = sg("sgcc", ["u.c", "-o", "u"], tmp_path, mode, check=False)
    assert r.returncode != 0 and "missing" in r.stderr
    assert (tmp_path / "u").read_bytes() == b"old"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary file left"


def test_several_sources_with_c_and_o_is_refused(tmp_path, mode):
    write_project(tmp_path)
    r = sg("sgcc", ["-c", "main.c", "helper.c", "-o", "x.o"], tmp_path, mode, check=False)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "-o" in r.stderr


def test_missing_source_reports_like_the_compiler(tmp_path, mode):
    r = sg("sgcc", ["-c", "nosuch.c"], tmp_path, mode, check=False)
    assert r.returncode != 0 and "nosuch.c" in r.stderr


def test_unknown_compiler_is_one_clear_line(tmp_path, mode):
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    r = sg("sgcc", ["-c", "a.c"], tmp_path, mode, env={"SCALGRAPH_CC": "/nonexistent/clang"}, check=False)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "/nonexistent/clang" in r.stderr


SAMPLE_ARGS = {"fig3": [], "alltoall": ["2"], "balanced": ["2"], "cg": ["3"], "masterworker": ["8"],
               "zeusmp": ["2"], "stencil2d": ["2"]}


def sample_programs(samples_dir: Path) -> dict[str, list[Path]]:
    """Each C/C++ source with a main is a program, linked with the files of its directory that have
    no main and share its name's prefix (psgcases/multi_main.c + multi_lib.c)."""
    programs = {}
    for d in sorted(p for p in samples_dir.iterdir() if p.is_dir()):
        sources = sorted(p for p in d.iterdir() if p.suffix in (".c", ".cpp"))
        mains = [p for p in sources if "main(" in p.read_text()]
        for m in mains:
            prefix = m.stem.split("_")[0]
            programs[f"{d.name}/{m.name}"] = [m] + [p for p in sources if p not in mains and p.suffix == m.suffix
                                                   and p.stem.split("_")[0] == prefix]
    return programs


PROGRAMS_IN_SAMPLES = sample_programs(ROOT / "samples") if (ROOT / "samples").is_dir() else {}


@pytest.mark.parametrize("name", sorted(PROGRAMS_IN_SAMPLES) or ["fig3/fig3.c"])
def test_sample_output_equals_the_mpicc_build(tmp_path, mode, name):
    sources = PROGRAMS_IN_SAMPLES.get(name)
    require_tool(bool(sources), f"sample {name} not in this tree")
    cxx = sources[0].suffix == ".cpp"
    wrapper = MPICXX if cxx else MPICC
    require_tool(wrapper is not None and shutil.which("cc") is not None, "plain mpicc needs a system cc")
    plain = subprocess.run([wrapper, "-O2", *map(str, sources), "-o", "plain", "-lm"], cwd=tmp_path,
                           capture_output=True, text=True)
    require_tool(plain.returncode == 0, f"plain {wrapper} cannot build {name}: {plain.stderr[:200]}")
    sg("sgcxx" if cxx else "sgcc", ["-O2", *map(str, sources), "-o", "wrapped", "-lm"], tmp_path, mode)
    args = SAMPLE_ARGS.get(name.split("/")[0], [])
    expected = mpirun(tmp_path / "plain", 4, *args, cwd=tmp_path)
    assert expected.strip(), "the sample prints something to compare"
    assert mpirun(tmp_path / "wrapped", 4, *args, cwd=tmp_path) == expected


def test_machine_without_cc_builds_the_shim_with_our_clang(tmp_path, samples_dir):
    """PyPI's mpicc runs `cc`; with no system C compiler on PATH (a slim image with only Python), the
    wrapper must still build the shim and the program, with zig's clang."""
    require_tool(MPICC is not None and MPIEXEC is not None and HAVE_ZIG, "no MPI/zig in the venv")
    require_tool(instrumentation_available(), "static pass or runtime shim not installed")
    mode = "instrumented"
    nocc = tmp_path / "bin"
    nocc.mkdir()
    hidden = ("cc", "gcc", "c89", "c99", "clang")
    for d in ("/usr/bin", "/bin"):
        for tool in Path(d).iterdir() if Path(d).is_dir() else ():
            if not tool.name.startswith(hidden) and "-gcc" not in tool.name and not (nocc / tool.name).exists():
                (nocc / tool.name).symlink_to(tool)
    env = {"PATH": str(nocc), "SCALGRAPH_CACHE": str(tmp_path / "cache")}
    sg("sgcc", ["-O1", str(samples_dir / "fig3" / "fig3.c"), "-o", "fig3"], tmp_path, mode, env=env)
    assert list((tmp_path / "cache").glob("shim-*/libscalgraph.*")), "the shim was built into the new cache"
    assert mpirun(tmp_path / "fig3", 4, cwd=tmp_path).startswith("sum=")


def test_dependency_files_name_the_object_like_a_plain_compile(tmp_path, mode):
    write_project(tmp_path)
    (tmp_path / "obj").mkdir()
    sg("sgcc", ["-MMD", "-Iinc", "-c", "helper.c", "-o", "obj/helper.o"], tmp_path, mode)
    deps = (tmp_path / "obj" / "helper.d").read_text()
    assert deps.startswith("obj/helper.o:") and "helper.h" in deps
    sg("sgcc", ["-MD", "-MT", "custom", "-MF", "dep.txt", "-Iinc", "-c", "helper.c"], tmp_path, mode)
    assert (tmp_path / "dep.txt").read_text().startswith("custom:")


def test_output_into_a_missing_directory_is_a_clear_error(tmp_path, mode):
    write_project(tmp_path)
    for args in (["-c", "-Iinc", "helper.c", "-o", "nodir/helper.o"],
                 ["-Iinc", "-DFACTOR=1", "-DGREETING=\"x\"", "main.c", "helper.c", "-o", "nodir/app"]):
        r = sg("sgcc", args, tmp_path, mode, check=False)
        assert r.returncode != 0 and "nodir" in r.stderr


def test_unusable_mpi_wrapper_is_one_clear_line(tmp_path, mode):
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    for wrapper in ("/nonexistent/mpicc", "false"):
        r = sg("sgcc", ["-c", "a.c"], tmp_path, mode, env={"MPICC": wrapper}, check=False)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert wrapper in r.stderr and "MPICC" in r.stderr
        assert not (tmp_path / "a.o").exists()


def fake_tool(d: Path, name: str, version_line: str) -> str:
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text(f"#!/bin/sh\necho '{version_line}'\n")
    p.chmod(0o755)
    return str(p)


def test_compiler_discovery_order(tmp_path, monkeypatch):
    require_tool(HAVE_ZIG, "no ziglang (pip install ziglang)")
    from llvmlite import binding
    from scalgraph.static.toolchain import find_compiler
    major = binding.llvm_version_info[0]
    for var in ("SCALGRAPH_CC", "MPICH_CC", "OMPI_CC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SCALGRAPH_CACHE", str(tmp_path / "cache"))
    same, newer, old, versioned = (tmp_path / d for d in ("same", "newer", "old", "versioned"))
    fake_tool(same, "clang", f"clang version {major}.1.0")
    fake_tool(newer, "clang", f"clang version {major + 1}.0.0")
    fake_tool(old, "clang", "Debian clang version 14.0.6")
    fake_tool(versioned, "clang", f"clang version {major + 1}.0.0")
    fake_tool(versioned, "clang-19", "Debian clang version 19.1.7 (3~deb12u1)")
    gcc = fake_tool(tmp_path / "gcc", "gcc", "gcc (Debian 12.2.0-14) 12.2.0")
    monkeypatch.setenv("PATH", str(same))               # only the fakes: the machine's own clangs stay out
    assert find_compiler("c").command == (str(same / "clang"),)
    assert find_compiler("c").command == (str(same / "clang"),)   # again, from the remembered answer
    assert (tmp_path / "cache" / "toolchain-facts.json").is_file()
    monkeypatch.setenv("PATH", str(newer))
    assert find_compiler("c").origin == "ziglang"            # newer bitcode would not parse
    monkeypatch.setenv("PATH", str(old))
    assert find_compiler("c").origin == "ziglang"            # older than opaque pointers: not unasked
    monkeypatch.setenv("PATH", str(versioned))
    assert find_compiler("c").command == (str(versioned / "clang-19"),)   # Debian's clang-N, old enough
    monkeypatch.setenv("PATH", str(newer))
    monkeypatch.setenv("MPICH_CC", gcc)
    assert find_compiler("c").origin == "ziglang"            # mpicc's gcc emits no bitcode
    monkeypatch.setenv("MPICH_CC", str(newer / "clang"))
    assert find_compiler("c").origin == "MPICH_CC"           # the user's choice for mpicc, a clang
    monkeypatch.setenv("SCALGRAPH_CC", "'/opt/my clang/bin/clang' -fsomething")
    assert find_compiler("c").command == ("/opt/my clang/bin/clang", "-fsomething")


def test_mpi_wrapper_discovery_order(monkeypatch):
    from scalgraph.static.toolchain import find_mpi_wrapper, shim_mpicc_for
    for var in ("SCALGRAPH_MPICC", "MPICC"):
        monkeypatch.delenv(var, raising=False)
    if (BIN / "mpicc").is_file():
        assert find_mpi_wrapper("c") == str(BIN / "mpicc")     # the venv's before PATH's
    monkeypatch.setenv("MPICC", "/usr/bin/mpicc.mpich")
    assert find_mpi_wrapper("c") == "/usr/bin/mpicc.mpich"
    monkeypatch.setenv("SCALGRAPH_MPICC", "/opt/mpi/bin/mpicc")
    assert find_mpi_wrapper("c") == "/opt/mpi/bin/mpicc"
    if shutil.which("mpif90.mpich") and shutil.which("mpicc.mpich"):
        # the shim of a Fortran program is built by the C wrapper of the same MPI
        assert shim_mpicc_for("fortran", "mpif90.mpich") == shutil.which("mpicc.mpich")


def test_link_through_a_response_file(tmp_path, mode):
    write_project(tmp_path)
    sg("sgcc", ["-c", "-Iinc", "-DFACTOR=5", "-DGREETING=\"rsp\"", "main.c", "helper.c"], tmp_path, mode)
    (tmp_path / "objs.rsp").write_text("main.o\nhelper.o\n")
    sg("sgcc", ["@objs.rsp", "-o", "app"], tmp_path, mode)
    assert mpirun(tmp_path / "app", 2, cwd=tmp_path) == f"rsp size=2 total={expected_total(2, 5)}\n"


def test_cmake_ninja_project_with_a_static_library(tmp_path, mode):
    """A real build system drives the wrapper: compiler detection, -MD/-MT/-MF dependency files, ar, link."""
    cmake, ninja = shutil.which("cmake"), shutil.which("ninja")
    require_tool(cmake is not None and ninja is not None, "no cmake/ninja")
    write_project(tmp_path)
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(demo C)\n"
        "add_library(helper STATIC helper.c)\ntarget_include_directories(helper PUBLIC inc)\n"
        "add_executable(app main.c)\ntarget_compile_definitions(app PRIVATE FACTOR=4 GREETING=\"cmake\")\n"
        "target_link_libraries(app helper m)\n")
    launcher = tmp_path / "sgcc-for-cmake"
    env_line = "export SCALGRAPH_NO_INSTRUMENT=1\n" if mode == "plain" else "unset SCALGRAPH_NO_INSTRUMENT\n"
    launcher.write_text(f"#!/bin/sh\n{env_line}exec {sys.executable} -c 'import sys; from scalgraph.static.driver "
                        "import main; sys.exit(main(\"c\", sys.argv[1:]))' \"$@\"\n")
    launcher.chmod(0o755)
    build = tmp_path / "build"
    r = subprocess.run([cmake, "-G", "Ninja", f"-DCMAKE_C_COMPILER={launcher}", "-DCMAKE_BUILD_TYPE=Release",
                        "-S", str(tmp_path), "-B", str(build)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([ninja, "-C", str(build)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stdout, r.stdout + r.stderr
    assert mpirun(build / "app", 3, cwd=tmp_path) == f"cmake size=3 total={expected_total(3, 4)}\n"
    deps = subprocess.run([ninja, "-C", str(build), "-t", "deps"], capture_output=True, text=True).stdout
    assert "helper.h" in deps and "mpi.h" in deps          # ninja read our -MD dependency files
    if mode == "instrumented":
        import json
        assert "helper" in json.loads((build / "app.psg.json").read_text())["functions"]


@pytest.mark.parametrize("level", ["-O0", "-O3"])
def test_fig3_at_other_optimisation_levels(tmp_path, mode, samples_dir, level):
    src = samples_dir / "fig3" / "fig3.c"
    require_tool(src.is_file() and shutil.which("cc") is not None, "fig3 sample or system cc missing")
    subprocess.run([MPICC, level, str(src), "-o", "plain"], cwd=tmp_path, check=True)
    sg("sgcc", [level, str(src), "-o", "wrapped"], tmp_path, mode)
    expected = mpirun(tmp_path / "plain", 4, cwd=tmp_path)
    assert expected.strip() and mpirun(tmp_path / "wrapped", 4, cwd=tmp_path) == expected


@pytest.mark.parametrize("script", ["sgcc", "sgcxx", "sgfort"])
def test_console_scripts_are_installed(script):
    exe = BIN / script
    require_tool(exe.is_file(), f"{script} not installed in this environment (pip install -e .)")
    if script == "sgfort":
        require_tool(shutil.which("flang-new-19") is not None and shutil.which("mpif90") is not None,
                     "no flang-new-19 / MPI Fortran wrapper")
    else:
        require_tool(HAVE_ZIG, "no ziglang")
    r = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "version" in r.stdout.lower(), r.stderr


def test_instrumented_objects_linked_with_instrumentation_off(tmp_path, mode):
    """Objects compiled with probes still link (tables and shim) when SCALGRAPH_NO_INSTRUMENT=1 is set
    only for the link step; plain objects linked in instrumented mode just get a warning."""
    write_project(tmp_path)
    other = "plain" if mode == "instrumented" else "instrumented"
    require_tool(instrumentation_available(), "static pass or runtime shim not installed")
    sg("sgcc", ["-c", "-Iinc", "-DFACTOR=1", "-DGREETING=\"mixed\"", "main.c", "helper.c"], tmp_path, mode)
    r = sg("sgcc", ["main.o", "helper.o", "-o", "app"], tmp_path, other)
    assert mpirun(tmp_path / "app", 2, cwd=tmp_path) == f"mixed size=2 total={expected_total(2, 1)}\n"
    assert (tmp_path / "app.psg.json").is_file() == (mode == "instrumented")
    if other == "instrumented":
        assert "no object carries a scalgraph PSG part" in r.stderr


def test_a_static_pass_failure_falls_back_to_a_plain_object(tmp_path, monkeypatch, capsys):
    """A bug in the static pass on one file must not break the user's build (the failure is injected)."""
    require_tool(MPICC is not None and MPIEXEC is not None and HAVE_ZIG, "no MPI/zig in the venv")
    require_tool(instrumentation_available(), "static pass or runtime shim not installed")
    import scalgraph.static
    from scalgraph.static.driver import main

    def broken(*args, **kwargs):
        raise IndexError("injected")
    write_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCALGRAPH_NO_INSTRUMENT", raising=False)
    monkeypatch.delenv("SCALGRAPH_DEBUG", raising=False)
    assert main("c", ["-c", "-Iinc", "-DFACTOR=2", "-DGREETING=\"fallback\"", "main.c"]) == 0
    monkeypatch.setattr(scalgraph.static, "instrument_bitcode", broken)      # either path (bitcode, IR text)
    monkeypatch.setattr(scalgraph.static, "instrument_ir_text", broken)
    assert main("c", ["-c", "-Iinc", "helper.c"]) == 0
    err = capsys.readouterr().err
    assert "helper.c: the static pass failed (IndexError: injected); compiled without probes" in err
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    sg("sgcc", ["main.o", "helper.o", "-o", "app"], tmp_path, "instrumented")
    assert mpirun(tmp_path / "app", 2, cwd=tmp_path) == f"fallback size=2 total={expected_total(2, 2)}\n"
