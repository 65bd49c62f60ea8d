"""Finding the mpiexec that belongs to a program's MPI, and the command line and environment to start it.

mpicc, mpiexec and libmpi must come from one MPI (see shared/notes/toolchain.md): Debian's mpirun
starting a PyPI-MPICH program aborts, PyPI's mpiexec starting an Open MPI program gives N singletons.
So the launcher is chosen from the library the executable actually loads (`ldd`), not from PATH.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field

from scalgraph.errors import UserError

MPICH, OPENMPI, UNKNOWN = "mpich", "openmpi", "unknown"

# Library names that identify the MPI a program is linked with, and the implementation they belong to.
_MPI_LIBS = (
    (re.compile(r"^libmpich(fort|cxx)?\.so"), MPICH),
    (re.compile(r"^libmpi\.so\.12\b"), MPICH),            # MPICH ABI (PyPI mpich, Intel MPI, Cray)
    (re.compile(r"^libmpi\.so\.4\d\b"), OPENMPI),         # Open MPI 4.x / 5.x
    (re.compile(r"^libmpi(_mpifh|_usempif08)?\.so"), UNKNOWN),
    (re.compile(r"^libopen-(rte|pal)\.so"), OPENMPI),
)

# Distribution-suffixed names (Debian/Ubuntu alternatives) tried before the plain ones.
_NAMES = {MPICH: ("mpiexec.hydra", "mpiexec.mpich", "mpirun.mpich", "mpiexec", "mpirun"),
          OPENMPI: ("mpiexec.openmpi", "mpirun.openmpi", "mpiexec", "mpirun"),
          UNKNOWN: ("mpiexec", "mpirun")}


@dataclass
class Launcher:
    mpiexec: str                  # absolute path
    flavour: str                  # MPICH, OPENMPI or UNKNOWN
    version: str                  # first informative line of `mpiexec --version`
    library: str = ""             # the libmpi the program loads ("" for a script)
    extra_env: dict = field(default_factory=dict)
    extra_args: list = field(default_factory=list)   # the user's own launcher options (hostfile, binding...)

    def command(self, nprocs: int, argv: list[str]) -> list[str]:
        cmd = [self.mpiexec, "-n", str(nprocs)]
        if self.flavour == OPENMPI:
            cmd.append("--oversubscribe")
            if _is_root():
                cmd.append("--allow-run-as-root")
        return cmd + list(self.extra_args) + list(argv)

    def environment(self, nprocs: int, base: dict | None = None) -> dict:
        """The launch environment: the caller's, plus what makes oversubscribed runs measurable.
        Settings the user made in the environment always win."""
        env = dict(os.environ if base is None else base)
        wanted = dict(self.extra_env)
        if self.flavour == OPENMPI:
            wanted.update(OMPI_MCA_rmaps_base_oversubscribe="1", PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe")
            if _is_root():
                wanted.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if nprocs > (os.cpu_count() or 1):
            wanted.update(oversubscription_env(self.flavour))
        for k, v in wanted.items():
            env.setdefault(k, v)
        return env


def oversubscription_env(flavour: str) -> dict:
    """More ranks than cores: MPICH's waiting ranks busy-poll and take the cores from the ranks that
    compute (toolchain.md), which buries the cause under scheduling noise.  Throttled polling
    (usleep between idle polls) ran 8 ranks of samples/cg on 2 cores in 1.28 s instead of 2.00 s
    (docs/user-guide/run.md).  The variable exists in MPICH's ch4 device (PyPI's MPICH 4.1+);
    the ch3 device (Debian's MPICH 4.0) ignores it and already sched_yield()s every
    MPIR_CVAR_POLLS_BEFORE_YIELD polls.  Open MPI yields when asked to."""
    if flavour == OPENMPI:
        return {"OMPI_MCA_mpi_yield_when_idle": "1"}
    if flavour == MPICH:
        return {"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1", "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "256"}
    return {}


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def linked_mpi_library(program: str) -> tuple[str, str]:
    """(resolved path of the MPI library the program loads, flavour), or ("", UNKNOWN) for a script or a
    program without MPI.  Uses ldd, which prints what the dynamic loader would load."""
    try:
        if not stat.S_ISREG(os.stat(program).st_mode):   # a FIFO would block the open below
            return "", UNKNOWN
        with open(program, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return "", UNKNOWN
        out = subprocess.run(["ldd", program], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "", UNKNOWN
    found: list[tuple[str, str]] = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+)", line)
        if not m:
            continue
        for pattern, flavour in _MPI_LIBS:
            if pattern.match(m.group(1)):
                found.append((m.group(2), flavour))
                break
    if not found:
        return "", UNKNOWN
    known = [f for f in found if f[1] != UNKNOWN]
    return (known or found)[0]


def _candidates_near(library: str, flavour: str) -> list[pathlib.Path]:
    """mpiexec beside the library's installation prefix: <prefix>/lib/libmpi.so -> <prefix>/bin/mpiexec.
    Checked for the path as linked and as resolved (Debian symlinks into /usr/lib/<arch>/<mpi>/lib)."""
    out = []
    for lib in dict.fromkeys([pathlib.Path(library), pathlib.Path(library).resolve()]):
        for up in (lib.parent.parent, lib.parent.parent.parent):
            # not "/": /bin is /usr/bin on merged-/usr Debian, but Open MPI's mpiexec started as
            # /bin/mpiexec takes "/" as its prefix and refuses to run ("a prefix ... only slashes")
            if up != up.parent:
                out += [up / "bin" / name for name in _NAMES[flavour]]
    return out


def find_launcher(program: str, override: str | None = None) -> Launcher:
    """The mpiexec for `program`: --mpiexec / $SCALGRAPH_MPIEXEC if given, otherwise the one installed
    with the MPI library the program loads, otherwise the one of the active environment."""
    library, flavour = linked_mpi_library(program)
    override = override or os.environ.get("SCALGRAPH_MPIEXEC")
    if override:
        path = shutil.which(override)
        if not path:
            raise UserError(f"mpiexec {override!r} (from --mpiexec or SCALGRAPH_MPIEXEC) was not found or is not executable")
        candidates = [pathlib.Path(path)]
    else:
        candidates = _candidates_near(library, flavour) if library else []
        # The active environment: a venv's mpiexec next to its python, then PATH (suffixed names first).
        candidates.append(pathlib.Path(sys.prefix) / "bin" / "mpiexec")
        candidates += [pathlib.Path(p) for p in (shutil.which(n) for n in _NAMES[flavour]) if p]
    for cand in candidates:
        if cand.is_file() and os.access(cand, os.X_OK):
            version, actual = _identify(str(cand))
            if flavour != UNKNOWN and actual != UNKNOWN and actual != flavour and not override:
                continue   # an mpiexec of the other implementation: it would start N singletons
            return Launcher(str(cand.absolute()), actual if actual != UNKNOWN else flavour, version, library)
    what = f"the {flavour} library {library}" if library else "this program"
    raise UserError(f"no mpiexec found for {what}; put the matching MPI's bin directory on PATH or pass --mpiexec PATH")


def _identify(mpiexec: str) -> tuple[str, str]:
    """(version line, flavour) from `mpiexec --version`; Hydra (MPICH) and ORTE/PRRTE (Open MPI) both answer it."""
    try:
        res = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
        text = res.stdout + res.stderr
    except (OSError, subprocess.SubprocessError):
        return "", UNKNOWN
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if re.search(r"open\s*mpi|openrte|prte", text, re.I):
        return next((ln for ln in lines if re.search(r"open\s*mpi|prte", ln, re.I)), lines[0] if lines else ""), OPENMPI
    if re.search(r"hydra|mpich", text, re.I):
        version = next((ln for ln in lines if ln.lower().startswith("version")), "")
        name = "MPICH (Hydra)" + (f" {version.split(':', 1)[-1].strip()}" if version else "")
        return name, MPICH
    return (lines[0] if lines else ""), UNKNOWN
