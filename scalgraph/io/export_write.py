"""Where every export lands: checked before the expensive work, then written by safe_write (a temporary
file in the destination's directory, then one rename, so a reader never sees half a file and a failed
export leaves nothing behind).  An existing destination is never replaced unless the caller says `force`;
an OTF2 archive, a directory, is built beside its destination and renamed likewise."""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import tempfile

from scalgraph.errors import UserError, os_failure
from scalgraph.io.safe_write import current_umask, output_destination, write_atomic, write_through


OTF2_ENTRIES = {"traces.otf2", "traces.def", "traces"}


def check_destination(path, force: bool, what: str = "file") -> pathlib.Path:
    """Fail early (before any expensive work) when `path` cannot be written.  With `force`, a directory
    is replaced only when it holds an OTF2 archive and nothing else (never an experiment or a home)."""
    p = pathlib.Path(path)
    parent = p.parent if str(p.parent) else pathlib.Path(".")
    if what == "file" and not p.is_dir() and output_destination(p)[1]:
        return p                 # /dev/stdout, a FIFO someone reads: written through, nothing replaced
    if p.exists() and not force:
        raise UserError(f"{p}: already exists; choose another name or pass --force to replace it")
    if p.is_dir() and what == "file":
        raise UserError(f"{p}: is a directory; give a file name")
    if p.exists() and what == "directory" and not p.is_dir():
        raise UserError(f"{p}: is a file; give a directory name for the archive")
    if p.is_dir() and what == "directory" and force:
        try:
            extra = sorted({e.name for e in p.iterdir()} - OTF2_ENTRIES)
        except OSError as e:
            raise os_failure(e, f"cannot replace {p}") from None
        if extra:
            raise UserError(f"{p}: holds more than an OTF2 archive ({', '.join(extra[:3])}); refusing to replace it, "
                            "give a new directory name")
    if not parent.is_dir():
        raise UserError(f"cannot write {p}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {p}: no write permission in {parent}")
    return p


def write_new(path, data: bytes | str, force: bool = False) -> None:
    p = check_destination(path, force)
    if output_destination(p)[1]:
        write_through(p, data)
    else:
        write_atomic(p, data, replace=force)


@contextlib.contextmanager
def new_directory(path, force: bool = False):
    """Yields a temporary directory beside `path`; on success it is renamed to `path` (an existing
    directory is replaced only with `force`)."""
    p = check_destination(path, force, what="directory")
    try:
        tmp = pathlib.Path(tempfile.mkdtemp(dir=p.parent, prefix=f".{p.name[:64]}.", suffix=".tmp"))
    except OSError as e:
        raise os_failure(e, f"cannot write {p}") from None
    try:
        yield tmp
        os.chmod(tmp, 0o755 & ~current_umask())
        old = None
        if p.exists() and force:
            old = p.with_name(f".{p.name}.old-{os.getpid()}")
            os.rename(p, old)
        try:
            os.rename(tmp, p)
        except OSError:
            if old is not None:
                os.rename(old, p)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as e:
        raise os_failure(e, f"cannot write {p}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
