"""Trace filter files (`scalgraph run --trace --trace-filter FILE`), in the spirit of Score-P's
filter files: one entry per line, `#` starts a comment, an optional leading `EXCLUDE` is allowed.
An entry is
    a PSG vertex id                 42
    a function name                 audit_residual      (its FUNCTION vertices: ENTER/EXIT dropped)
    a vertex as traces name it      loop@cg.c:21        (kind@file:line; with the sampled vertices)
The shim takes vertex ids only (SCALGRAPH_TRACE_FILTER, one id per line), so names are resolved
against the program's PSG here.  MPI calls cannot be filtered: the replay needs every one.
"""
from __future__ import annotations

import pathlib

from scalgraph.errors import UserError
from scalgraph.model.psg import PSG


def resolve_filter(path: str | pathlib.Path, psg: PSG) -> list[int]:
    p = pathlib.Path(path)
    from scalgraph.io.safe_read import read_regular
    try:     # read_regular: a FIFO or device is refused, never opened to block
        lines = read_regular(p, "trace filter", 64 << 20).decode().splitlines()
    except UnicodeDecodeError:
        raise UserError(f"cannot read trace filter {p}: not UTF-8 text; give a text file of vertex ids, "
                        f"function names or kind@file:line entries") from None
    ids: set[int] = set()
    for number, raw in enumerate(lines, 1):
        entry = raw.split("#", 1)[0].strip()
        if entry.upper().startswith("EXCLUDE"):
            entry = entry[len("EXCLUDE"):].strip()
        if not entry:
            continue
        found = _vertices(entry, psg)
        if not found:
            raise UserError(f"{p}:{number}: {entry!r} is no vertex id, function or kind@file:line of this "
                            f"program's PSG (see `scalgraph psg` for the names)")
        ids.update(found)
    return sorted(ids)


def _vertices(entry: str, psg: PSG) -> list[int]:
    n = len(psg)
    if entry.isdigit():
        return [int(entry)] if int(entry) < n else []
    mpi = [v for v in range(n) if psg.kind_name(v) == "MPI"]
    if "@" in entry and ":" in entry:
        name, _, where = entry.partition("@")
        file, _, line = where.rpartition(":")
        if not line.isdigit():
            return []
        return [v for v in range(n) if v not in mpi and psg.name[v] == name and psg.line_first[v] == int(line)
                and pathlib.Path(psg.file[v]).name == pathlib.Path(file).name]
    return [v for v in range(n) if psg.kind_name(v) == "FUNCTION" and psg.function[v] == entry]


def write_id_file(ids: list[int], path: pathlib.Path) -> None:
    path.write_text("# vertex ids resolved by scalgraph run --trace-filter\n" + "".join(f"{v}\n" for v in ids))
