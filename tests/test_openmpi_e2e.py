"""End to end under Debian's Open MPI 4.1 (MPI-3.1 headers, no MPI_F_STATUS_SIZE), selected the way a
user does it (MPICC=mpicc.openmpi, MPIFC=mpifort.openmpi; docs/mpi-and-builds.md): the shim builds,
the program links Open MPI only, `scalgraph run` starts it with Open MPI's mpiexec (as root too),
`detect` and `trace` name the planted cause; the Fortran sample likewise.  Two samples at 2 ranks
(and 4 for detect's scaling), so the second MPI costs the suite a minute or two, not a second run."""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from conftest import OPENMPI_ENV, ROOT, require_tool
from test_e2e_samples import expected, sources, within

WRAPPER = {".c": "sgcc", ".cpp": "sgcxx", ".f90": "sgfort"}
BIN = pathlib.Path(sys.executable).parent


def openmpi_env(tmp: pathlib.Path) -> dict:
    env = dict(os.environ, **OPENMPI_ENV)
    env.pop("SCALGRAPH_NO_INSTRUMENT", None)
    return env


def need_openmpi(fortran: bool = False) -> None:
    require_tool(shutil.which("mpicc.openmpi") is not None, "no Open MPI (apt-get install openmpi-bin libopenmpi-dev)")
    if fortran:
        require_tool(shutil.which("mpifort.openmpi") is not None, "no Open MPI Fortran wrapper (libopenmpi-dev)")
        require_tool(shutil.which("flang-new-19") is not None or shutil.which("flang-new") is not None,
                     "no flang (apt-get install flang-19)")


def scalgraph(*args: str, cwd: pathlib.Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=900)


def build(name: str, out: pathlib.Path, env: dict) -> pathlib.Path:
    srcs = sources(name)
    exe = out / f"{name}-ompi"
    r = subprocess.run([str(BIN / WRAPPER[srcs[0].suffix]), "-O2", "-g", "-o", str(exe), *map(str, srcs)],
                       capture_output=True, text=True, timeout=600, env=env, cwd=out)
    assert r.returncode == 0, f"build of {name} with Open MPI failed:\n{r.stderr}"
    assert r.stderr == "", f"a clean build prints nothing more than the compiler would:\n{r.stderr}"
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"\[(lib[^\]]+)\]", needed)
    assert any(lib.startswith("libmpi.so.40") for lib in libs), libs          # Open MPI 4.x
    assert not any("mpich" in lib or lib == "libmpi.so.12" for lib in libs), f"two MPIs in one program: {libs}"
    return exe


def run_ok(args: list[str], out: pathlib.Path, env: dict) -> pathlib.Path:
    exp = out / "exp"
    r = scalgraph("run", "-o", str(exp), *args, cwd=out, env=env)
    assert r.returncode == 0, f"scalgraph run under Open MPI failed:\n{r.stderr}"
    return exp


def top_computation_delay(rep: dict) -> tuple[str, int]:
    """File and line of the computation that caused the most waiting (the replay's delay account;
    the verdict above it also weighs thread-CPU evidence, tested under MPICH at 4 ranks)."""
    comp = [c for c in rep["delay"]["root_causes"] if c["kind"] == "computation"]
    assert comp, rep["delay"]["root_causes"]
    file, _, line = comp[0]["where"].split(" [")[0].rpartition(":")
    return pathlib.Path(file).name, int(line)


def planted(name: str, where: tuple[str, int]) -> bool:
    rc = expected(name)["root_cause"]
    return where[0] == rc["file"] and rc["lines"][0] <= where[1] <= rc["lines"][-1]


@pytest.fixture(scope="module")
def ompi_cg(tmp_path_factory):
    need_openmpi()
    out = tmp_path_factory.mktemp("ompi-cg")
    env = openmpi_env(out)
    return out, env, build("cg", out, env)


def test_launcher_is_open_mpis_and_the_run_records_it(ompi_cg):
    from scalgraph.io.profile_file import read_run
    from scalgraph.runtime.launch import OPENMPI, find_launcher
    out, env, exe = ompi_cg
    launcher = find_launcher(str(exe))
    assert launcher.flavour == OPENMPI and "openmpi" in pathlib.Path(launcher.mpiexec).name
    exp = run_ok(["-n", "2,4", "--", str(exe)], out, env)
    assert "Open MPI" in read_run(exp / "scale-2" / "rep-0").meta["mpi_library"]
    # what the program prints under scalgraph is what a plain Open MPI build prints
    plain_exe = out / "cg-plain"
    subprocess.run(["mpicc.openmpi", "-O2", *map(str, sources("cg")), "-o", str(plain_exe), "-lm"], check=True)
    plain = subprocess.run(launcher.command(2, [str(plain_exe)]), env=launcher.environment(2),
                           capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    assert (exp / "scale-2" / "rep-0" / "stdout.txt").read_text() == plain.stdout

    det = scalgraph("detect", "--json", str(exp), cwd=out, env=env)
    assert det.returncode == 0, det.stderr
    report = json.loads(det.stdout)
    rc = expected("cg")["root_cause"]
    causes = report["root_causes"]
    assert causes, "detect found nothing under Open MPI"
    top = causes[0]
    assert pathlib.Path(top["file"]).name == rc["file"] and within(top, rc["lines"]), causes[:3]


def test_trace_names_the_planted_loop(ompi_cg):
    out, env, exe = ompi_cg
    trace_dir = out / "traced"
    trace_dir.mkdir()
    exp = run_ok(["--trace", "-n", "2", "--", str(exe)], trace_dir, env)
    r = scalgraph("trace", "--json", str(exp / "scale-2" / "rep-0"), cwd=trace_dir, env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert planted("cg", top_computation_delay(rep)), rep["delay"]["root_causes"][:3]
    # two bound ranks on two cores do not time-share: the shim records the host's cores, not one
    assert any("did not time-share cores" in n for n in rep["notes"]), rep["notes"]


def test_fortran_sample_builds_runs_and_traces(tmp_path):
    need_openmpi(fortran=True)
    env = openmpi_env(tmp_path)
    exe = build("sweep", tmp_path, env)
    exp = run_ok(["--trace", "-n", "2", "--", str(exe)], tmp_path, env)
    assert "sweep: ranks=2" in (exp / "scale-2" / "rep-0" / "stdout.txt").read_text()
    r = scalgraph("trace", "--json", str(exp / "scale-2" / "rep-0"), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    # Open MPI's Fortran bindings call PMPI directly: only the shim's Fortran wrappers see these calls
    assert planted("sweep", top_computation_delay(rep)), rep["delay"]["root_causes"][:3]


@pytest.mark.parametrize("mpicc", ["mpicc.openmpi", "mpicc.mpich", str(BIN / "mpicc")])
def test_shim_fortran_status_size_is_fortrans_mpi_status_size(mpicc, tmp_path):
    """The Fortran status the shim allocates has the size Fortran's MPI_STATUS_SIZE has in the MPI's
    own mpif.h (MPI-4 headers name it MPI_F_STATUS_SIZE; Open MPI 4.1's MPI-3.1 headers do not)."""
    require_tool(shutil.which(mpicc) is not None, f"no {mpicc}")
    show = subprocess.run([mpicc, "--showme:incdirs" if "openmpi" in mpicc else "-show"], capture_output=True,
                          text=True).stdout
    incdirs = re.findall(r"-I(\S+)", show) or show.split()
    size = None
    for d in incdirs:
        for name in ("mpif-config.h", "mpif.h"):
            f = pathlib.Path(d) / name
            if f.is_file():
                m = re.search(r"MPI_STATUS_SIZE\s*=\s*(\d+)", f.read_text(errors="replace"))
                size = size or (int(m.group(1)) if m else None)
    if size is None:                      # PyPI's MPICH ships no mpif.h: its C header says it
        m = re.search(r"#define MPI_F_STATUS_SIZE (\d+)", next(
            (pathlib.Path(d) / "mpi.h").read_text() for d in incdirs if (pathlib.Path(d) / "mpi.h").is_file()))
        size = int(m.group(1))
    check = tmp_path / "check.c"
    check.write_text(f'#include "{ROOT}/instrument/sg_mpi_fortran.c"\n'
                     f'_Static_assert(SG_F_STATUS_SIZE == {size}, "Fortran status size");\n')
    r = subprocess.run([mpicc, "-fsyntax-only", "-Wall", "-Werror", "-I", str(ROOT / "instrument"), str(check)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
