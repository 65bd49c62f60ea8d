"""The one way scalgraph writes a file: into a new temporary file with an unpredictable name in the
destination's directory (created exclusively, so a symlink planted there is never followed), then
renamed over the destination.  A reader sees the old file or the complete new one, never half a file;
a failure leaves the old file as it was.  (The C side does the same in instrument/sg_writer.c.)
"""
from __future__ import annotations

import json
import os
import pathlib
import stat
import tempfile

from scalgraph.errors import UserError


def write_atomic(path, data: bytes | str, mode: int = 0o644) -> None:
    """Replace `path` with `data` all at once (see the module doc)."""
    path = pathlib.Path(path)
    if isinstance(data, str):
        data = data.encode()
    directory = path.parent if str(path.parent) else pathlib.Path(".")
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a directory; give a file name")
    try:
        # mkstemp: O_CREAT|O_EXCL with a random name, mode 0600 until complete
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name[:64]}.", suffix=".tmp")
    except FileNotFoundError:
        raise UserError(f"cannot write {path}: the directory {directory} does not exist") from None
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror} (in {directory})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_json_atomic(path, data, indent: int | None = 1) -> None:
    write_atomic(path, json.dumps(data, indent=indent))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_output(target, data: bytes | str) -> None:
    """An output file the user named: a regular file (or a new one) is replaced atomically; an
    existing pipe or device (/dev/stdout, a FIFO someone reads) is written as it is, never replaced."""
    try:
        st = os.stat(target)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        try:
            with open(target, "wb" if isinstance(data, bytes) else "w") as fh:
                fh.write(data)
        except OSError as e:
            raise UserError(f"cannot write {target}: {e.strerror}") from None
        return
    write_atomic(target, data)
