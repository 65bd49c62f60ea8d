"""What an MPI compiler wrapper prints for `-show` (or `--showme`), asked once per wrapper in a process.

A link by sgcc needs it twice (the program's MPI flags in static/toolchain.py, the shim's cache key in
runtime/shim.py), a Fortran link three times (mpifort, then its C sibling twice); each answer is a
shell script started anew.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess


def wrapper_show(command: tuple[str, ...], option: str = "-show") -> subprocess.CompletedProcess:
    """`command option` run once per process, keyed by the wrapper's path and the environment it reads
    (MPICH_CC, OMPI_CC...: sgcc may point them at its clang between two questions).  OSError and
    subprocess.TimeoutExpired reach the caller and are asked again next time."""
    resolved = (shutil.which(command[0]) or command[0], *command[1:])
    wrapper_env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(("MPICH_", "OMPI_"))))
    return _asked(resolved, option, wrapper_env)


@functools.lru_cache(maxsize=None)
def _asked(command: tuple[str, ...], option: str, wrapper_env: tuple) -> subprocess.CompletedProcess:
    return subprocess.run([*command, option], capture_output=True, text=True, timeout=60)
