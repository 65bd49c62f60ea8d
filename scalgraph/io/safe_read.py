"""The one input-validation layer every reader goes through: what a file is (a regular file, never a
FIFO or device that would block or never end), how big it may be, how deeply its JSON may nest, and
what types and lengths the PSG's columns must have.  Every failure is a UserError naming the file
and the problem; nothing here raises anything else.

Limits are generous for real inputs (a PSG of 2 million vertices, traces of gigabytes) and exist so
that a hostile or broken file costs a clear message, not memory, a RecursionError or a hang.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import pathlib
import re
import stat

from scalgraph.errors import UserError, os_failure

MAX_JSON_BYTES = 2 << 30          # a JSON description (PSG, experiment, JSON trace)
MAX_BINARY_BYTES = 64 << 30       # a profile or binary trace
MAX_JSON_DEPTH = 64               # our formats nest 4 deep at most
_KIND_OF = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words ("a FIFO (named pipe)")."""
    return next((name for test, name in _KIND_OF if test(mode)), "not a regular file")


def _unreadable(e: OSError, path, what: str) -> UserError:
    """The one line for a file that cannot be opened or read."""
    if isinstance(e, FileNotFoundError):
        return UserError(f"{path}: no such {what}")
    if isinstance(e, IsADirectoryError):
        return UserError(f"{path} is a directory, not a {what}")
    return os_failure(e, f"cannot read {what} {path}")


def check_regular(path, what: str = "file") -> os.stat_result:
    """stat() of `path` if it is a regular file (following symlinks); never opens it, so a FIFO
    cannot block us."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise _unreadable(e, path, what) from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path} is {file_kind(st.st_mode)}, not a regular {what}; give the file itself")
    return st


def read_regular(path, what: str = "file", limit: int = MAX_BINARY_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes.  Opened non-blocking and checked on the
    open descriptor (no window for a swap between check and read)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise _unreadable(e, path, what) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{path} is {file_kind(st.st_mode)}, not a regular {what}; give the file itself")
        if st.st_size > limit:
            raise UserError(f"{path} is {st.st_size} bytes, more than a {what} can be ({limit} bytes); "
                            "is it the right file?")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(min(st.st_size, limit) + 1)   # +1: a file still growing is noticed
    except OSError as e:
        raise _unreadable(e, path, what) from None
    finally:
        os.close(fd)
    if len(data) > st.st_size:
        raise UserError(f"{path} grew while being read; is something still writing it? Read it when it is complete")
    return data


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(data: bytes) -> int:
    """How deeply arrays and objects nest in a JSON text (strings skipped); a few passes over its
    bytes, never recursion."""
    # bytes.translate keeps only the brackets at C speed; no numpy: sgcc reads PSG parts with this
    # at every link, and importing numpy cost more CPU than the link itself
    brackets = _STRING.sub(b'""', data).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets), initial=0))


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(data: bytes, where, what: str = "JSON file", max_depth: int = MAX_JSON_DEPTH):
    """Decoded JSON, after checking the nesting depth; NaN and Infinity are refused."""
    depth = json_depth(data)
    if depth > max_depth:
        raise UserError(f"{where} nests {depth} levels deep, more than a {what} ever does ({max_depth}); "
                        "the file is damaged or not one scalgraph wrote")
    try:
        text = data.decode("utf-8-sig")
        return json.loads(text, parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise UserError(f"{where} is not UTF-8 text, so not a {what}; is it the right file?") from None
    except RecursionError:
        raise UserError(f"{where} nests too deeply to be a {what}") from None
    except ValueError as e:
        raise UserError(f"{where} is not valid JSON ({str(e)[:120]}): the {what} is damaged") from None


def load_json_file(path, what: str = "JSON file", limit: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH):
    """read_regular + parse_json: the one way a JSON file of ours is read."""
    return parse_json(read_regular(path, what, limit), path, what, max_depth)


def check_json_file(path, what: str = "JSON file", limit: int = MAX_JSON_BYTES) -> None:
    """For readers that parse a JSON file themselves: refuse special files, huge files and nesting
    the decoder would overflow on, before they open it."""
    load_depth = json_depth(read_regular(path, what, limit))
    if load_depth > MAX_JSON_DEPTH:
        raise UserError(f"{path} nests {load_depth} levels deep, more than a {what} ever does "
                        f"({MAX_JSON_DEPTH}); the file is damaged or not one scalgraph wrote")


def finite(value: float, option: str) -> float:
    """An option's number, refused when NaN or infinite (every comparison with NaN is False, so a
    range check alone lets it through)."""
    if not math.isfinite(value):
        raise UserError(f"{option} must be a finite number (got {value})")
    return value


# ---- the PSG's columns -------------------------------------------------------------------------

_VERTEX_INT = ("kind", "line_first", "line_last", "parent", "instance", "local", "loop_depth",
               "recursion_target")
_VERTEX_STR = ("name", "function", "file")


def _ints(col, name: str, where, lo: int, hi: int) -> None:
    if not isinstance(col, list) or not all(type(x) is int for x in col):
        raise UserError(f"{where}: PSG column {name!r} must be a list of whole numbers; rebuild with sgcc")
    if col and (min(col) < lo or max(col) > hi):
        raise UserError(f"{where}: PSG column {name!r} has a value outside {lo}..{hi}; rebuild with sgcc")


def check_psg_dict(d, where) -> None:
    """The PSG dict's columns have the right types, equal lengths, references in range and a hash
    that matches its content; UserError naming the first thing wrong."""
    from scalgraph.model.psg import FORMAT, KINDS, VERSION, _COLUMNS
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise UserError(f"{where} is not a scalgraph PSG (missing format tag); rebuild the program with sgcc")
    if type(d.get("version")) is not int or d["version"] != VERSION:
        raise UserError(f"{where} has PSG version {d.get('version')!r}; this scalgraph reads version {VERSION}: "
                        "rebuild the program with this sgcc")
    missing = [k for k in _COLUMNS if k not in d]
    if missing:
        raise UserError(f"{where}: PSG is missing the column {missing[0]!r}; rebuild the program with sgcc")
    n = len(d["kind"]) if isinstance(d["kind"], list) else -1
    if n < 1:
        raise UserError(f"{where}: PSG column 'kind' must be a non-empty list; rebuild the program with sgcc")
    for name in _VERTEX_INT + _VERTEX_STR + ("children",):
        if not isinstance(d[name], list) or len(d[name]) != n:
            raise UserError(f"{where}: PSG column {name!r} has {len(d[name]) if isinstance(d[name], list) else 'no'} "
                            f"entries for {n} vertices; rebuild the program with sgcc")
    big = 2 ** 31 - 1
    _ints(d["kind"], "kind", where, 0, len(KINDS) - 1)
    for name in ("parent", "recursion_target"):
        _ints(d[name], name, where, -1, n - 1)
    for name in ("line_first", "line_last", "instance", "local", "loop_depth"):
        _ints(d[name], name, where, 0, big)
    for name in _VERTEX_STR:
        if not all(isinstance(x, str) for x in d[name]):
            raise UserError(f"{where}: PSG column {name!r} must be a list of strings; rebuild with sgcc")
    if not all(isinstance(c, list) for c in d["children"]):
        raise UserError(f"{where}: PSG column 'children' must be a list of lists; rebuild with sgcc")
    _ints([x for c in d["children"] for x in c], "children", where, 0, n - 1)
    if not isinstance(d["functions"], list) or not all(isinstance(x, str) for x in d["functions"]):
        raise UserError(f"{where}: PSG column 'functions' must be a list of strings; rebuild with sgcc")
    if not isinstance(d["inst_vid"], list) or not all(isinstance(c, list) for c in d["inst_vid"]):
        raise UserError(f"{where}: PSG column 'inst_vid' must be a list of lists; rebuild with sgcc")
    ninst = len(d["inst_vid"])
    _ints(d["inst_func"], "inst_func", where, 0, max(len(d["functions"]) - 1, 0))
    if len(d["inst_func"]) != ninst:
        raise UserError(f"{where}: PSG column 'inst_func' has {len(d['inst_func'])} entries for {ninst} "
                        "instances; rebuild with sgcc")
    _ints(d["func_default_inst"], "func_default_inst", where, -1, max(ninst - 1, 0))
    _ints([x for c in d["inst_vid"] for x in c], "inst_vid", where, -1, n - 1)
    if not isinstance(d["meta"], dict):
        raise UserError(f"{where}: PSG column 'meta' must be an object; rebuild with sgcc")
    if d["parent"][0] != -1 or any(p >= v for v, p in enumerate(d["parent"]) if v):
        raise UserError(f"{where}: PSG vertices are not in pre-order (a parent after its child); rebuild with sgcc")
    parent = d["parent"]
    if any(parent[c] != v for v, cs in enumerate(d["children"]) for c in cs):
        raise UserError(f"{where}: PSG columns 'children' and 'parent' disagree (a child whose parent is another "
                        "vertex: the tree would loop); rebuild with sgcc")
    from scalgraph.model.psg import psg_from_dict
    claimed, actual = d.get("hash"), psg_from_dict(d).hash()
    if claimed is not None and claimed != actual:
        raise UserError(f"{where} names PSG {str(claimed)[:40]} but its columns hash to {actual}: the file was edited "
                        "or damaged, or its parts come from different builds; rebuild the program with sgcc")


def psg_checked(d, where):
    """check_psg_dict, then the PSG."""
    from scalgraph.model.psg import psg_from_dict
    check_psg_dict(d, where)
    return psg_from_dict(d)


# ---- paths read from inputs --------------------------------------------------------------------

def inside(path, root) -> bool:
    """Whether `path`, symlinks resolved, lies under `root` (resolved too)."""
    try:
        return pathlib.Path(path).resolve().is_relative_to(pathlib.Path(root).resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def contained(root, rel, where: str) -> pathlib.Path:
    """root/rel resolved, refused (UserError) when `rel`, taken from an input, leads outside root."""
    if not isinstance(rel, str) or not rel or "\0" in rel or os.path.isabs(rel):
        raise UserError(f"{where} names a run directory {rel!r} that is not a relative path; refusing to use it")
    full = (pathlib.Path(root) / rel).resolve()
    if not full.is_relative_to(pathlib.Path(root).resolve()) or full == pathlib.Path(root).resolve():
        raise UserError(f"{where} names a run directory {rel!r} outside the experiment; refusing to use it")
    return full


def source_allowed(path, roots) -> bool:
    """Whether a source file named by an input (a PSG's file column) may be shown: a regular file
    under one of the source roots the user gave (or the experiment's build directory).  A forged
    PSG naming /etc/shadow or ~/.ssh/id_rsa gets nothing printed."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
    except (OSError, ValueError):
        return False
    return any(inside(path, r) for r in roots)
