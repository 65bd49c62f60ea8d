"""One entry point for every trace format: the format is detected from the content, never the name.

    read_trace(path) -> Trace        own binary, JSON, OTF2 anchor file, or a directory holding one
    read_trace(path, ranks=range(lo, hi))   only these world ranks' events (others empty): the
                                     parallel replay's block; binary and OTF2 read nothing else
    trace_event_counts(path)         events per world rank, without reading the events (binary, OTF2)
    write_trace(trace, path, fmt)    fmt in FORMATS; nothing existing is overwritten

Every problem with the input ends as one UserError line (no traceback), and reading never blocks:
files are read whole, no locks, no network.
"""
from __future__ import annotations

import os
import pathlib

from scalgraph.errors import UserError
from scalgraph.io import trace_binary, trace_json, trace_otf2
from scalgraph.model.trace import Trace

FORMATS = ("binary", "json", "otf2")
_HEAD_BYTES = 64


def read_trace(path: str | os.PathLike, validate: bool = True, ranks=None) -> Trace:
    """Read a trace in any supported format; with `validate`, run the structural checks as well.
    `ranks` (an iterable of world ranks): read only their events, the other ranks' arrays are
    empty; the structural checks need the whole trace, so they are skipped then."""
    p, fmt = _locate(path)
    wanted = None if ranks is None else sorted(set(int(r) for r in ranks))
    try:
        if fmt == "binary":
            if wanted is None:
                trace = trace_binary.read_binary(p)
            else:
                trace = _binary_ranks(p, wanted)
        elif fmt == "otf2":
            trace = trace_otf2.read_otf2(p, wanted)
        else:
            trace = trace_json.read_json(p)
            if wanted is not None:
                keep = set(wanted)
                for r in range(trace.nranks):
                    if r not in keep:
                        trace.events[r] = trace.events[r][:0]
    except OSError as e:
        raise UserError(f"{p}: cannot read ({e.strerror or e})") from None
    except MemoryError:
        raise UserError(f"{p}: the trace does not fit in memory") from None
    if validate and wanted is None:
        from scalgraph.trace.validate import check_trace
        check_trace(trace, where=str(p))
    from scalgraph.trace.heap import trim
    trim()                      # the reader's and the checks' temporaries: freed, handed back
    return trace


def trace_event_counts(path: str | os.PathLike):
    """Events per world rank (numpy int64), from the binary header or the OTF2 location definitions
    (no event is read); a JSON trace is read whole."""
    import numpy as np
    p, fmt = _locate(path)
    try:
        if fmt == "binary":
            return trace_binary.read_binary_ranks(p, 0, 0)[1]
        if fmt == "otf2":
            return trace_otf2.otf2_event_counts(p)
        return np.array([len(e) for e in trace_json.read_json(p).events], np.int64)
    except OSError as e:
        raise UserError(f"{p}: cannot read ({e.strerror or e})") from None


def _binary_ranks(p: pathlib.Path, wanted: list[int]) -> Trace:
    """The binary format stores ranks one after another: read the span lo..hi, empty the rest."""
    if not wanted:
        return trace_binary.read_binary_ranks(p, 0, 0)[0]
    trace, _ = trace_binary.read_binary_ranks(p, wanted[0], wanted[-1] + 1)
    keep = set(wanted)
    for r in range(trace.nranks):
        if r not in keep:
            trace.events[r] = trace.events[r][:0]
    return trace


def _locate(path) -> tuple[pathlib.Path, str]:
    """The trace file behind `path` and its format, detected from the content."""
    p = pathlib.Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file or directory")
    if p.is_dir():
        p = _anchor_in_directory(p)
    if not p.is_file():      # a FIFO or device would block or never end
        raise UserError(f"{p}: not a regular file; pass a trace file or an OTF2 archive directory")
    try:
        with open(p, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError as e:
        raise UserError(f"{p}: cannot read ({e.strerror})") from None
    if trace_binary.is_binary_trace(head):
        return p, "binary"
    if trace_otf2.is_otf2_anchor(head):
        return p, "otf2"
    if trace_json.looks_like_json_trace(head):
        return p, "json"
    raise UserError(f"{p}: not a trace scalgraph can read (expected a scalgraph binary trace, a JSON "
                    f"trace or an OTF2 anchor file such as traces.otf2)")


def write_trace(trace: Trace, path: str | os.PathLike, fmt: str = "binary", compress: bool = False) -> None:
    """Write after the structural checks; refuses to overwrite an existing file or archive.
    `compress` applies to the binary format (zlib per rank)."""
    from scalgraph.trace.validate import check_trace
    if fmt not in FORMATS:
        raise UserError(f"unknown trace format {fmt!r}; use one of {', '.join(FORMATS)}")
    p = pathlib.Path(path)
    if fmt != "otf2" and p.exists():
        raise UserError(f"{p}: already exists; choose another name or remove it")
    check_trace(trace, where="trace to write")
    try:
        if fmt == "binary":
            trace_binary.write_binary(trace, p, compress=compress)
        elif fmt == "json":
            trace_json.write_json(trace, p)
        else:
            trace_otf2.write_otf2(trace, p)
    except OSError as e:
        raise UserError(f"{p}: cannot write ({e.strerror or e})") from None


def _anchor_in_directory(d: pathlib.Path) -> pathlib.Path:
    """A Score-P experiment directory holds traces.otf2; accept any single *.otf2 anchor."""
    anchors = sorted(d.glob("*.otf2"))
    if len(anchors) == 1:
        return anchors[0]
    if not anchors:
        raise UserError(f"{d}: directory holds no OTF2 anchor file (*.otf2); pass the trace file itself")
    raise UserError(f"{d}: directory holds several OTF2 anchors ({', '.join(a.name for a in anchors[:4])}); pass one")
