"""`use mpi` for flang: the mpi.mod that MPI distributions ship is gfortran's and flang cannot read it,
so we compile the one-line module that includes mpif.h with flang, once per flang + MPI, into a cache
directory (shared/notes/toolchain.md).  The directory goes first on the include path."""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from scalgraph.errors import UserError

MODULE_SOURCE = "module mpi\n  implicit none\n  include 'mpif.h'\nend module mpi\n"


def cache_root() -> Path:
    """The same cache as the runtime shim's (scalgraph/runtime/shim.py)."""
    return Path(os.environ.get("SCALGRAPH_CACHE") or Path.home() / ".cache" / "scalgraph")


def mpi_module(compiler, mpi) -> tuple[str, str]:
    """(directory holding mpi.mod, its object file) for this flang and this MPI; built on first use."""
    key = hashlib.sha256(repr((compiler.command, compiler.flags, mpi.compile)).encode()).hexdigest()[:16]
    target = cache_root() / f"fortran-mpi-{key}"
    obj = target / "mpi_module.o"
    if obj.is_file() and (target / "mpi.mod").is_file():
        return str(target), str(obj)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        src = Path(tmp) / "mpi_module.f90"
        src.write_text(MODULE_SOURCE)
        cmd = [*compiler.command, *compiler.flags, "-c", *mpi.compile, "-module-dir", tmp, str(src),
               "-o", str(Path(tmp) / "mpi_module.o")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            first = (r.stderr.strip().splitlines() or ["(no message)"])[0]
            raise UserError(f"cannot build the Fortran `mpi` module from the mpif.h of {mpi.wrapper} "
                            f"({first}); use an MPI with Fortran support, e.g. Debian's mpich + "
                            "libmpich-dev with MPIFC=mpif90.mpich")
        try:
            os.rename(tmp, target)     # atomic: a concurrent build that won keeps its copy
        except OSError:
            if not obj.is_file():
                raise
        else:
            os.makedirs(tmp)           # TemporaryDirectory wants to remove something
    return str(target), str(obj)
