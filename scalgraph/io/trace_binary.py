"""The project's own trace format: compact, versioned, checksummed; no pickle.

Layout (all integers little-endian):
    magic      8 bytes   b"SGTRACE\\0"
    version    u32       FORMAT_VERSION
    nranks     u32
    defs_len   u64       length of the definitions JSON
    defs       defs_len bytes of UTF-8 JSON: regions, comms, windows, meta, the event dtype
    counts     nranks x u64: events per location
    events     per location, the raw bytes of an EVENT_DTYPE array (packed, 49 bytes per event), or
               with defs["compression"] == "zlib" those bytes zlib-compressed (sizes in defs["block_sizes"])
    checksum   32 bytes  SHA-256 of everything before it
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib

import numpy as np

from scalgraph.errors import UserError
from scalgraph.io.safe_read import MAX_JSON_BYTES, parse_json
from scalgraph.io.safe_write import write_atomic
from scalgraph.model.trace import EVENT_DTYPE, Region, Trace

MAGIC = b"SGTRACE\x00"
FORMAT_VERSION = 1
_HEAD = struct.Struct("<8sIIQ")
_DIGEST = 32


def is_binary_trace(head: bytes) -> bool:
    return head.startswith(MAGIC)


def definitions_to_json(trace: Trace) -> dict:
    """The non-event part of a trace as plain JSON values (shared with the JSON form)."""
    return {
        "regions": [{"name": r.name, "file": r.file, "line": r.line, "vertex": r.vertex} for r in trace.regions],
        "comms": {str(c): [int(m) for m in members] for c, members in trace.comms.items()},
        "windows": {str(w): int(c) for w, c in trace.windows.items()},
        "meta": trace.meta,
        **({"program_begin": {str(r): float(t) for r, t in trace.program_begin.items()}}
           if trace.program_begin else {}),
        **({"program_end": {str(r): float(t) for r, t in trace.program_end.items()}} if trace.program_end else {}),
        **({"locations": [[int(r), int(th)] for r, th in trace.locations]} if trace.locations else {}),
    }


def program_span_from_json(defs: dict, where: str) -> dict:
    """{"program_begin": {rank: seconds}, "program_end": {...}} and the OpenMP threads' (rank, thread)
    per location, as Trace keyword arguments."""
    try:
        out = {k: {int(r): float(t) for r, t in defs.get(k, {}).items()} for k in ("program_begin", "program_end")}
    except (TypeError, ValueError, AttributeError) as e:
        raise UserError(f"{where}: malformed program begin/end times ({e}); re-export the trace") from None
    if "locations" in defs:
        try:
            out["locations"] = [(int(r), int(th)) for r, th in defs["locations"]]
        except (TypeError, ValueError) as e:
            raise UserError(f"{where}: malformed thread locations ({e}); re-export the trace") from None
    return out


def definitions_from_json(defs: dict, where: str) -> tuple[list[Region], dict, dict, dict]:
    """Checks types and rebuilds regions, comms, windows and meta; raises UserError naming `where`."""
    try:
        regions = [Region(name=str(r["name"]), file=str(r.get("file", "")), line=int(r.get("line", 0)),
                          vertex=int(r.get("vertex", -1))) if isinstance(r, dict) else Region(name=str(r))
                   for r in defs.get("regions", [])]
        comms = {int(c): [int(m) for m in members] for c, members in defs.get("comms", {}).items()}
        windows = {int(w): int(c) for w, c in defs.get("windows", {}).items()}
        meta = defs.get("meta", {})
        if not isinstance(meta, dict):
            raise TypeError("meta is not an object")
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UserError(f"{where}: malformed trace definitions ({e}); re-export the trace") from None
    return regions, comms, windows, meta


def write_binary(trace: Trace, path: str | os.PathLike, compress: bool = False) -> None:
    """`compress`: each rank's block is zlib-compressed (level 1; about 8 instead of 49 bytes per
    event on MPI traces, similar to OTF2), at the cost of slower writing and reading."""
    blocks = [np.ascontiguousarray(ev, dtype=EVENT_DTYPE).tobytes() for ev in trace.events]
    defs = definitions_to_json(trace)
    defs["dtype"] = _dtype_descr()
    if compress:
        blocks = [zlib.compress(b, 1) for b in blocks]
        defs["compression"] = "zlib"
        defs["block_sizes"] = [len(b) for b in blocks]
    try:
        defs_bytes = json.dumps(defs, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise UserError(f"cannot write {path}: trace meta is not plain JSON ({e})") from None
    h = hashlib.sha256()
    parts = [_HEAD.pack(MAGIC, FORMAT_VERSION, trace.nranks, len(defs_bytes)), defs_bytes,
             np.array([len(e) for e in trace.events], dtype="<u8").tobytes(), *blocks]
    for b in parts:
        h.update(b)
    # exclusive random temporary name + rename (scalgraph/io/safe_write.py): a crash never leaves half
    # a trace under the real name, and a symlink planted at a temporary name is never followed
    write_atomic(path, b"".join(parts) + h.digest())


def read_binary(path: str | os.PathLike) -> Trace:
    # One buffer, no copies: the per-rank arrays are writable views into it.
    with open(path, "rb") as f:
        data = bytearray(os.fstat(f.fileno()).st_size)
        got = f.readinto(data)
    return parse_binary(data[:got] if got < len(data) else data, str(path))


def parse_binary(data: bytes | bytearray, where: str) -> Trace:
    if len(data) < _HEAD.size + _DIGEST or not data.startswith(MAGIC):
        raise UserError(f"{where}: not a scalgraph binary trace or truncated (only {len(data)} bytes)")
    magic, version, nranks, defs_len = _HEAD.unpack_from(data)
    if version != FORMAT_VERSION:
        raise UserError(f"{where}: binary trace format version {version}, this scalgraph reads version "
                        f"{FORMAT_VERSION}; convert it with the scalgraph that wrote it")
    view = memoryview(data)
    body, digest = view[:-_DIGEST], bytes(view[-_DIGEST:])
    expected_len = _HEAD.size + defs_len + 8 * nranks
    if expected_len > len(body):
        raise UserError(f"{where}: truncated binary trace (header promises more than the file holds)")
    if hashlib.sha256(body).digest() != digest:
        raise UserError(f"{where}: checksum mismatch, the trace file is truncated or corrupt; copy or record it again")
    defs = _parse_definitions(bytes(view[_HEAD.size:_HEAD.size + defs_len]), where)
    if not isinstance(defs, dict) or defs.get("dtype") != _dtype_descr():
        raise UserError(f"{where}: event layout differs from this scalgraph's; convert the trace with the version that wrote it")
    regions, comms, windows, meta = definitions_from_json(defs, where)
    pos = _HEAD.size + defs_len
    counts = _checked_counts(np.frombuffer(body, dtype="<u8", count=nranks, offset=pos), len(body), where)
    pos += 8 * nranks
    size = EVENT_DTYPE.itemsize
    compression = defs.get("compression", "none")
    if compression == "zlib":
        events = _decompress_blocks(body, pos, counts.tolist(), defs.get("block_sizes"), where)
    elif compression == "none":
        if pos + sum(counts.tolist()) * size != len(body):     # Python ints: no wrap
            raise UserError(f"{where}: event counts do not match the file size; the trace is corrupt")
        events = []
        for n in counts.tolist():
            ev = np.frombuffer(body, dtype=EVENT_DTYPE, count=n, offset=pos)
            events.append(ev if ev.flags.writeable else ev.copy())
            pos += n * size
    else:
        raise UserError(f"{where}: unknown compression {compression!r}; convert it with the scalgraph that wrote it")
    return Trace(regions=regions, comms=comms, events=events, windows=windows, meta=meta,
                 **program_span_from_json(defs, where))


def _parse_definitions(data: bytes, where: str) -> dict:
    """The definitions block through the checked JSON layer (depth limit, no NaN): one clear line."""
    try:
        return parse_json(data, f"{where}: definitions block", "binary trace's definitions")
    except UserError as e:
        raise UserError(f"corrupt binary trace: {e}; record or convert it again") from None


def _checked_counts(counts: np.ndarray, file_size: int, where: str) -> np.ndarray:
    """Per-rank event counts as int64, refused when one promises more events than the file could
    hold even compressed (a forged count near 2**64 would wrap a sum back to the file size)."""
    limit = max(file_size, 1) * 1024       # zlib compresses a block at most ~1000:1
    if len(counts) and int(counts.max()) > limit:
        raise UserError(f"{where}: corrupt binary trace (rank {int(counts.argmax())} claims {int(counts.max())} "
                        f"events, more than a {file_size}-byte file can hold); record or convert it again")
    return counts.astype(np.int64)


def _sizes_ok(sizes, nranks: int) -> bool:
    return (isinstance(sizes, list) and len(sizes) == nranks
            and all(type(b) is int and 0 <= b <= MAX_JSON_BYTES * 32 for b in sizes))


def _decompress_blocks(body, pos: int, counts: list[int], block_sizes, where: str) -> list[np.ndarray]:
    if (not _sizes_ok(block_sizes, len(counts))
            or pos + sum(int(b) for b in block_sizes) != len(body)):
        raise UserError(f"{where}: compressed block sizes do not match the file size; the trace is corrupt")
    events = []
    for n, b in zip(counts, block_sizes):
        try:
            raw = zlib.decompress(body[pos:pos + b])
        except zlib.error:
            raise UserError(f"{where}: a compressed event block is corrupt") from None
        if len(raw) != n * EVENT_DTYPE.itemsize:
            raise UserError(f"{where}: a compressed event block holds the wrong number of events")
        events.append(np.frombuffer(bytearray(raw), dtype=EVENT_DTYPE))
        pos += b
    return events


def _dtype_descr() -> list:
    return [[name, EVENT_DTYPE.fields[name][0].str] for name in EVENT_DTYPE.names]


def read_binary_ranks(path: str | os.PathLike, lo: int, hi: int) -> tuple[Trace, np.ndarray]:
    """Only the events of ranks lo..hi-1 (other ranks get empty arrays), and every rank's event
    count.  For the parallel replay: each analysis process seeks to its own block and reads
    nothing else, so the SHA-256 checksum (which covers the whole file) is not verified here."""
    where = str(path)
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD.size)
            if len(head) < _HEAD.size or not head.startswith(MAGIC):
                raise UserError(f"{where}: not a scalgraph binary trace or truncated")
            _, version, nranks, defs_len = _HEAD.unpack(head)
            if version != FORMAT_VERSION:
                raise UserError(f"{where}: binary trace format version {version}, this scalgraph reads version "
                                f"{FORMAT_VERSION}; convert it with the scalgraph that wrote it")
            size = os.fstat(f.fileno()).st_size
            if _HEAD.size + defs_len + 8 * nranks + _DIGEST > size:
                raise UserError(f"{where}: truncated binary trace (header promises more than the file holds)")
            if defs_len > MAX_JSON_BYTES:
                raise UserError(f"{where}: corrupt binary trace (a definitions block of {defs_len} bytes)")
            defs = _parse_definitions(f.read(defs_len), where)
            if not isinstance(defs, dict) or defs.get("dtype") != _dtype_descr():
                raise UserError(f"{where}: event layout differs from this scalgraph's; convert the trace with "
                                f"the version that wrote it")
            regions, comms, windows, meta = definitions_from_json(defs, where)
            counts = _checked_counts(np.frombuffer(f.read(8 * nranks), dtype="<u8"), size, where)
            start = _HEAD.size + defs_len + 8 * nranks
            compression = defs.get("compression", "none")
            if compression == "zlib":
                sizes = defs.get("block_sizes")
                if (not _sizes_ok(sizes, nranks)
                        or start + sum(int(b) for b in sizes) + _DIGEST != size):
                    raise UserError(f"{where}: compressed block sizes do not match the file size; the trace is corrupt")
                sizes = np.array(sizes, np.int64)
            elif compression == "none":
                sizes = counts * EVENT_DTYPE.itemsize
                if start + sum(sizes.tolist()) + _DIGEST != size:
                    raise UserError(f"{where}: event counts do not match the file size; the trace is corrupt")
            else:
                raise UserError(f"{where}: unknown compression {compression!r}; convert it with the scalgraph "
                                f"that wrote it")
            lo, hi = max(lo, 0), min(hi, nranks)
            block_start = start + int(sizes[:lo].sum())
            f.seek(block_start)
            raw = bytearray(int(sizes[lo:hi].sum()))
            if f.readinto(raw) != len(raw):
                raise UserError(f"{where}: truncated binary trace")
    except OSError as e:
        raise UserError(f"{where}: cannot read ({e.strerror or e})") from None
    events = [np.zeros(0, EVENT_DTYPE) for _ in range(nranks)]
    if compression == "zlib":
        block = _decompress_blocks(memoryview(raw), 0, counts[lo:hi].tolist(), sizes[lo:hi].tolist(), where)
        events[lo:hi] = block
    else:
        pos = 0
        for r in range(lo, hi):
            events[r] = np.frombuffer(raw, dtype=EVENT_DTYPE, count=int(counts[r]), offset=pos)
            pos += int(sizes[r])
    return Trace(regions=regions, comms=comms, events=events, windows=windows, meta=meta,
                 **program_span_from_json(defs, where)), counts
