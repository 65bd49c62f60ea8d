"""mpiexec discovery: the launcher must belong to the MPI library the program loads, and get the flags and
environment its implementation needs (Open MPI as root, oversubscribed runs)."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import require_tool
from scalgraph.errors import UserError
from scalgraph.runtime import launch
from scalgraph.runtime.launch import MPICH, OPENMPI, UNKNOWN, Launcher, find_launcher, linked_mpi_library

VENV_BIN = pathlib.Path(sys.executable).parent
PIP_MPICC = VENV_BIN / "mpicc"


def _build(tmp_path, mpicc: str, name: str = "hello") -> pathlib.Path:
    src = tmp_path / f"{name}.c"
    src.write_text('#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { int r, n; MPI_Init(&c, &v);'
                   ' MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);'
                   ' printf("%d/%d\\n", r, n); MPI_Finalize(); return 0; }\n')
    exe = tmp_path / name
    subprocess.run([mpicc, "-o", str(exe), str(src)], check=True)
    return exe


def test_a_program_built_with_the_bundled_mpich_gets_the_bundled_mpiexec(tmp_path):
    require_tool(PIP_MPICC.exists(), "no bundled MPICH (pip install mpich)")
    exe = _build(tmp_path, str(PIP_MPICC))
    library, flavour = linked_mpi_library(str(exe))
    assert flavour == MPICH and pathlib.Path(library).name.startswith("libmpi")
    L = find_launcher(str(exe))
    assert L.flavour == MPICH and pathlib.Path(L.mpiexec).parent == VENV_BIN
    assert "MPICH" in L.version
    # and it really starts the program as one job of 3 ranks, not 3 singletons
    out = subprocess.run(L.command(3, [str(exe)]), env=L.environment(3), capture_output=True, text=True, timeout=120)
    assert sorted(out.stdout.split()) == ["0/3", "1/3", "2/3"]


def test_a_program_built_with_the_system_mpich_gets_the_system_mpiexec(tmp_path):
    mpicc = shutil.which("mpicc.mpich")
    require_tool(mpicc is not None, "no system MPICH (apt-get install mpich libmpich-dev)")
    exe = _build(tmp_path, mpicc)
    library, flavour = linked_mpi_library(str(exe))
    assert flavour == MPICH and "libmpich" in library
    L = find_launcher(str(exe))
    assert L.flavour == MPICH and pathlib.Path(L.mpiexec).parent != VENV_BIN
    out = subprocess.run(L.command(2, [str(exe)]), env=L.environment(2), capture_output=True, text=True, timeout=120)
    assert sorted(out.stdout.split()) == ["0/2", "1/2"]


def test_a_script_or_a_program_without_mpi_falls_back_to_the_active_environment(tmp_path):
    script = tmp_path / "app.sh"
    script.write_text("#!/bin/sh\n")
    assert linked_mpi_library(str(script)) == ("", UNKNOWN)
    assert linked_mpi_library("/bin/ls") == ("", UNKNOWN)
    require_tool((VENV_BIN / "mpiexec").exists() or shutil.which("mpiexec") is not None, "no mpiexec")
    assert os.path.isabs(find_launcher(str(script)).mpiexec)


def test_an_explicit_mpiexec_wins_and_a_missing_one_is_one_clear_error(tmp_path, monkeypatch):
    fake = tmp_path / "my-mpiexec"
    fake.write_text("#!/bin/sh\necho 'HYDRA build details:'\necho '    Version:  9.9'\n")
    fake.chmod(0o755)
    L = find_launcher("/bin/ls", override=str(fake))
    assert L.mpiexec == str(fake) and L.flavour == MPICH and "9.9" in L.version
    monkeypatch.setenv("SCALGRAPH_MPIEXEC", str(fake))
    assert find_launcher("/bin/ls").mpiexec == str(fake)
    with pytest.raises(UserError, match="not found"):
        find_launcher("/bin/ls", override=str(tmp_path / "nope"))


def test_open_mpi_gets_oversubscribe_and_root_flags(monkeypatch):
    L = Launcher("/opt/ompi/bin/mpiexec", OPENMPI, "mpiexec (Open MPI) 4.1.4")
    monkeypatch.setattr(launch, "_is_root", lambda: True)
    assert L.command(4, ["./a", "x"]) == ["/opt/ompi/bin/mpiexec", "-n", "4", "--oversubscribe",
                                          "--allow-run-as-root", "./a", "x"]
    env = L.environment(4, base={})
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    monkeypatch.setattr(launch, "_is_root", lambda: False)
    assert "--allow-run-as-root" not in L.command(4, ["./a"])
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in L.environment(4, base={})
    assert Launcher("/usr/bin/mpiexec", MPICH, "").command(2, ["./a"]) == ["/usr/bin/mpiexec", "-n", "2", "./a"]


def test_oversubscribed_runs_ask_waiting_ranks_to_yield_unless_the_user_decided(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    mpich = Launcher("/x/mpiexec", MPICH, "")
    assert "MPIR_CVAR_CH4_PROGRESS_THROTTLE" not in mpich.environment(2, base={})
    assert mpich.environment(8, base={})["MPIR_CVAR_CH4_PROGRESS_THROTTLE"] == "1"
    assert mpich.environment(8, base={"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "0"})["MPIR_CVAR_CH4_PROGRESS_THROTTLE"] == "0"
    ompi = Launcher("/x/mpiexec", OPENMPI, "")
    assert ompi.environment(8, base={})["OMPI_MCA_mpi_yield_when_idle"] == "1"


def test_version_output_identifies_the_implementation(tmp_path):
    def fake(text):
        p = tmp_path / f"m{abs(hash(text))}"
        p.write_text("#!/bin/sh\ncat <<'E'\n" + text + "\nE\n")
        p.chmod(0o755)
        return launch._identify(str(p))
    assert fake("mpiexec (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/")[1] == OPENMPI
    assert fake("prterun (Open MPI) 5.0.3")[1] == OPENMPI
    name, flavour = fake("HYDRA build details:\n    Version:                                 4.0.2\n")
    assert flavour == MPICH and name == "MPICH (Hydra) 4.0.2"
    assert fake("something else 1.0")[1] == UNKNOWN
