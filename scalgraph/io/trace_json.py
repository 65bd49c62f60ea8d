"""A small JSON form of a trace for hand-written tests and bug reports (documented in docs/trace-json.md).

    {"format": "scalgraph-trace", "version": 1,
     "regions": ["main", {"name": "MPI_Send", "file": "MPI"}],
     "comms": {"0": [0, 1]},
     "events": [[{"t": 0.0, "kind": "ENTER", "region": "main"}, ...],   <- rank 0
                [...]]}                                                   <- rank 1

Event fields other than t and kind are optional (defaults: region/peer/comm/request -1, tag/bytes 0);
`region` may be a name or an index.  Without "comms", communicator 0 is MPI_COMM_WORLD.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from scalgraph.errors import UserError
from scalgraph.io.safe_read import check_json_file
from scalgraph.io.safe_write import write_atomic
from scalgraph.io.trace_binary import definitions_from_json, definitions_to_json, program_span_from_json
from scalgraph.model.trace import EVENT_KINDS, Trace, make_events

FORMAT_NAME = "scalgraph-trace"
FORMAT_VERSION = 1
_INT_FIELDS = ("region", "peer", "tag", "comm", "bytes", "bytes_recv", "request")
_DEFAULTS = {"region": -1, "peer": -1, "tag": 0, "comm": -1, "bytes": 0, "bytes_recv": 0, "request": -1}
_KIND_INDEX = {k: i for i, k in enumerate(EVENT_KINDS)}


def looks_like_json_trace(head: bytes) -> bool:
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"{"     # tolerate a UTF-8 byte-order mark


def write_json(trace: Trace, path: str | os.PathLike) -> None:
    doc = {"format": FORMAT_NAME, "version": FORMAT_VERSION, **definitions_to_json(trace),
           "events": [[_event_to_json(e) for e in ev] for ev in trace.events]}
    try:
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise UserError(f"cannot write {path}: trace meta is not plain JSON ({e})") from None
    write_atomic(path, text)     # exclusive random temporary name + rename (scalgraph/io/safe_write.py)


def read_json(path: str | os.PathLike) -> Trace:
    check_json_file(path, "JSON trace")    # special files, size and nesting depth (scalgraph/io/safe_read.py)
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8-sig"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text, so not a JSON trace") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    return trace_from_json(doc, str(path))


def _no_constant(name: str):
    raise json.JSONDecodeError(f"{name} is not a number (a trace time must be finite)", name, 0)


def trace_from_json(doc, where: str = "<json>") -> Trace:
    if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
        raise UserError(f"{where}: a JSON trace is an object with an \"events\" list per rank (see docs/trace-json.md)")
    version = doc.get("version", FORMAT_VERSION)
    if doc.get("format", FORMAT_NAME) != FORMAT_NAME or version != FORMAT_VERSION:
        raise UserError(f"{where}: unsupported JSON trace format {doc.get('format')!r} version {version!r}; "
                        f"this scalgraph reads {FORMAT_NAME!r} version {FORMAT_VERSION}")
    regions, comms, windows, meta = definitions_from_json(doc, where)
    nranks = len(doc["events"])
    if "comms" not in doc:
        comms = {0: list(range(nranks))}
    region_index = {r.name: i for i, r in enumerate(regions)}
    events = [_rank_events(rank_events, rank, region_index, where)
              for rank, rank_events in enumerate(doc["events"])]
    return Trace(regions=regions, comms=comms, events=events, windows=windows, meta=meta,
                 **program_span_from_json(doc, where))


def _rank_events(items, rank: int, region_index: dict[str, int], where: str) -> np.ndarray:
    if not isinstance(items, list):
        raise UserError(f"{where}: events of rank {rank} must be a list of event objects")
    ev = make_events(len(items))
    for i, item in enumerate(items):
        at = f"{where}: rank {rank} event {i}"
        if not isinstance(item, dict):
            raise UserError(f"{at}: an event is an object like {{\"t\": 0.5, \"kind\": \"ENTER\", \"region\": \"main\"}}")
        kind = item.get("kind")
        if kind not in _KIND_INDEX:
            raise UserError(f"{at}: unknown kind {kind!r}; use one of {', '.join(EVENT_KINDS)}")
        t = item.get("t", item.get("time"))
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
            raise UserError(f"{at}: \"t\" must be a finite number of seconds")
        ev["time"][i] = t
        ev["kind"][i] = _KIND_INDEX[kind]
        for name in _INT_FIELDS:
            value = item.get(name, _DEFAULTS[name])
            if name == "region" and isinstance(value, str):
                if value not in region_index:
                    raise UserError(f"{at}: region {value!r} is not in \"regions\"; add it there")
                value = region_index[value]
            if not isinstance(value, int) or isinstance(value, bool):
                raise UserError(f"{at}: \"{name}\" must be an integer")
            try:
                ev[name][i] = value
            except OverflowError:
                raise UserError(f"{at}: \"{name}\" = {value} is out of range") from None
    return ev


def _event_to_json(e) -> dict:
    out = {"t": float(e["time"]), "kind": EVENT_KINDS[int(e["kind"])]}
    for name in _INT_FIELDS:
        value = int(e[name])
        if value != _DEFAULTS[name]:
            out[name] = value
    return out
