"""Checks that keep the compiler wrappers from destroying inputs or starting themselves.

* `check_outputs`: `sgcc -o prog.c prog.c` would replace the source with the executable (mpicc and
  gcc refuse it); an output that is one of the inputs, or that is named like a source file, is refused,
  and so is one that exists and is neither a regular file nor a character device (-o /dev/null, as
  build-system probes use it, is written through).
* `is_ourselves`: `make MPICC=sgcc` (make exports its variables) or `export MPICC=sgcc` makes the MPI
  wrapper we look for be sgcc itself; asking it for `-show` would start sgcc again, recursively.
  Every wrapper found is checked not to be one of our entry points before it is used.
* `wrapper_guard`: a guard variable in the environment of everything a wrapper starts, so that if a
  wrapper call still reaches us (a shell script around sgcc, say) the chain stops at once.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import sys

from scalgraph.errors import UserError
from scalgraph.io.safe_read import file_kind

OUR_NAMES = ("sgcc", "sgcxx", "sgfort")
GUARD = "SCALGRAPH_WRAPPER_ACTIVE"          # set by a running sgcc/sgcxx/sgfort for its children
_MARKERS = (b"scalgraph.static.driver", b"from scalgraph")   # what our console scripts contain
HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".h++", ".H", ".inc", ".mod")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(output: str | None, inputs: list[str], prog: str, given: bool = True) -> None:
    """Refuse an output that would overwrite one of the inputs or a source file, or that cannot be
    written without harm (before anything runs).  `given`: named by -o, not implied (a.out, x.o)."""
    if not output or output == "-":
        return
    from scalgraph.static.args import language_of
    what = f"-o {output}" if given else f"the output {output}"
    try:
        st = os.stat(output)
    except OSError:
        st = None
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        # a character device (/dev/null of configure probes) is written through; a directory cannot be,
        # a FIFO would block the build until someone reads it, a block device would be overwritten
        raise UserError(f"{what} is {file_kind(st.st_mode)}, not a regular file; give a file name with -o "
                        "(or -o /dev/null to discard the output)")
    for path in inputs:
        if _same_file(output, path):
            raise UserError(f"{what} is also an input file: the build would replace it; give another -o "
                            "(mpicc refuses this too)")
    if language_of(output) in ("c", "c++", "fortran") or output.endswith(HEADER_SUFFIXES):
        raise UserError(f"{what} names a source file: the build would overwrite it with compiled code; "
                        "give the output another name (e.g. -o app)")


def our_entry_points() -> set[str]:
    """Resolved paths of the programs that are us: this process's script and sgcc/sgcxx/sgfort beside
    this Python or on PATH."""
    found = set()
    if sys.argv and sys.argv[0]:
        found.add(os.path.realpath(sys.argv[0]))
    bindir = os.path.dirname(sys.executable)
    for name in OUR_NAMES:
        for cand in (os.path.join(bindir, name), shutil.which(name)):
            if cand and os.path.exists(cand):
                found.add(os.path.realpath(cand))
    return found


def is_ourselves(command: str) -> bool:
    """Whether a wrapper command (as MPICC holds it: a program and maybe arguments) runs one of our
    wrappers: the same file as an entry point, a file named sgcc/sgcxx/sgfort, or a console script
    of some scalgraph installation."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if not words:
        return False
    path = shutil.which(words[0]) or (words[0] if os.path.isfile(words[0]) else None)
    if not path:
        return os.path.basename(words[0]) in OUR_NAMES
    real = os.path.realpath(path)
    if real in our_entry_points() or os.path.basename(real) in OUR_NAMES or os.path.basename(path) in OUR_NAMES:
        return True
    try:
        with open(real, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.startswith(b"#!") and any(m in head for m in _MARKERS)


@contextlib.contextmanager
def wrapper_guard(prog: str):
    """Refuse to run inside another of our wrapper calls; mark our children while we run."""
    outer = os.environ.get(GUARD)
    if outer:
        raise UserError(f"{prog} was started by {outer}: an MPI wrapper or compiler variable (MPICC, MPICXX, "
                        "MPIFC, SCALGRAPH_MPICC, SCALGRAPH_CC, MPICH_CC, ...) or a script points back at sgcc; set "
                        "it to the real MPI wrapper or compiler, e.g. MPICC=mpicc")
    os.environ[GUARD] = f"{prog} (pid {os.getpid()})"
    try:
        yield
    finally:
        os.environ.pop(GUARD, None)
