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

from scalgraph.errors import UserError, os_failure


def temporary_beside(path) -> tuple[int, str]:
    """(descriptor, name) of a new file with an unpredictable name in `path`'s directory, created
    exclusively (mkstemp: O_CREAT|O_EXCL, mode 0600), to be renamed over `path` once complete."""
    path = pathlib.Path(path)
    directory = path.parent if str(path.parent) else pathlib.Path(".")
    try:
        return tempfile.mkstemp(dir=directory, prefix=f".{path.name[:64]}.", suffix=".tmp")
    except OSError as e:
        raise os_failure(e, f"cannot write {path}", reasons={
            FileNotFoundError: f"the directory {directory} does not exist"}) from None


def write_atomic(path, data: bytes | str, mode: int = 0o644, replace: bool = True) -> None:
    """Replace `path` with `data` all at once (see the module doc).  With replace=False an existing
    `path` is never overwritten, not even one that appears meanwhile: the last step is a hard link,
    which fails if the name exists."""
    path = pathlib.Path(path)
    if isinstance(data, str):
        data = data.encode()
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a directory; give a file name")
    fd, tmp = temporary_beside(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode & ~current_umask())
        if replace:
            os.replace(tmp, path)
        else:
            _publish_new(tmp, path)
    except OSError as e:
        raise os_failure(e, f"cannot write {path}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _publish_new(tmp: str, path: pathlib.Path) -> None:
    try:
        os.link(tmp, path)          # fails if path exists: never a silent overwrite
    except FileExistsError:
        raise UserError(f"{path}: appeared while it was being written; nothing was overwritten") from None
    except OSError:                 # file systems without hard links: rename after a last check
        if os.path.lexists(path):
            raise UserError(f"{path}: appeared while it was being written; nothing was overwritten") from None
        os.rename(tmp, path)


def write_json_atomic(path, data, indent: int | None = 1) -> None:
    write_atomic(path, json.dumps(data, indent=indent))


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


SYSTEM_DIRS = ("/dev/", "/proc/")     # names there are written through, never renamed over


def output_destination(target) -> tuple[str, bool]:
    """(the file to write, whether to write through it) for an output the user named.  A regular
    file, or a new one, is replaced atomically; so is a symbolic link at that name (the link itself,
    as the compilers do: a link planted in a shared directory never leads the output elsewhere).  An
    existing pipe or device (a FIFO someone reads, /dev/null) and any name under /dev or /proc
    (/dev/stdout, a link to the shell's redirection) are written through: a rename there would
    replace the device or the link itself."""
    target = os.fspath(target)
    try:
        st = os.stat(target)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UserError(f"cannot write {target}: it is a directory; give a file name")
    if (st is not None and not stat.S_ISREG(st.st_mode)) or os.path.abspath(target).startswith(SYSTEM_DIRS):
        return target, True
    return target, False


def write_through(target, data: bytes | str) -> None:
    """Write into an existing device, pipe or file as it is (see output_destination)."""
    try:
        with open(target, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
    except OSError as e:
        raise os_failure(e, f"cannot write {target}") from None


def write_output(target, data: bytes | str) -> None:
    """An output file the user named, written where output_destination says."""
    dest, through = output_destination(target)
    if through:
        write_through(dest, data)
    else:
        write_atomic(dest, data)
