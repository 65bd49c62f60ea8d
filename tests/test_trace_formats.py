"""Trace formats: own binary and JSON round trips, format detection, and bad input (one clear
UserError line naming the file; nothing overwritten).  OTF2 is in test_trace_formats_otf2.py."""
from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

from conftest import require_tool
from scalgraph.errors import UserError
from scalgraph.io import trace_binary
from scalgraph.io.trace_read import read_trace, write_trace
from scalgraph.model import trace as tm
from tracebuild import Builder


def rich_trace() -> tm.Trace:
    """4 ranks: blocking p2p on world and on a reordered sub-communicator, non-blocking p2p on another
    sub-communicator, collectives on sub-communicators (rooted and rootless), RMA on a window,
    a cancelled request, MPI_Init/Finalize, PSG vertices and meta.  Times are whole nanoseconds
    (units of 1 ms written as k/1e9 s) so that OTF2's integer ticks hold them exactly."""
    b = Builder(4, comms={0: [0, 1, 2, 3], 5: [3, 1], 7: [0, 2]})
    for r in range(4):
        b.enter(r, 0, "main").work(r, 1, 2, "MPI_Init")
    b.send(0, 3, 4, dst=1, tag=11).recv(1, 3, 5, src=0, tag=11)
    b.send(3, 5, 6, dst=1, tag=2, comm=5).recv(1, 6, 7, src=3, tag=2, comm=5)
    # non-blocking on comm 7 = [0, 2]
    b.enter(0, 8, "MPI_Isend").ev(0, 8, tm.ISEND, peer=2, tag=4, comm=7, nbytes=64, request=17).exit(0, 9, "MPI_Isend")
    b.enter(2, 8, "MPI_Irecv").ev(2, 8, tm.IRECV_REQUEST, comm=7, request=3).exit(2, 8.5, "MPI_Irecv")
    b.enter(0, 10, "MPI_Wait").ev(0, 11, tm.ISEND_COMPLETE, request=17).exit(0, 11, "MPI_Wait")
    b.enter(2, 10, "MPI_Wait").ev(2, 12, tm.IRECV, peer=0, tag=4, comm=7, nbytes=64, request=3).exit(2, 12, "MPI_Wait")
    # a cancelled receive on rank 0
    b.enter(0, 12, "MPI_Irecv").ev(0, 12, tm.IRECV_REQUEST, request=99).exit(0, 12.5, "MPI_Irecv")
    b.enter(0, 13, "MPI_Cancel").ev(0, 13, tm.REQUEST_CANCELLED, request=99).exit(0, 13.5, "MPI_Cancel")
    # collectives on sub-communicators
    for r in (3, 1):
        b.coll(r, 14, 15, "MPI_Allreduce", comm=5, sent=8, recvd=8)
    for r in (0, 2):
        b.coll(r, 14 + r, 16, "MPI_Bcast", comm=7, root=2, sent=32 if r == 2 else 0, recvd=0 if r == 2 else 32)
    # RMA on window 2 (over comm 5): rank 3 puts to / gets from / accumulates to rank 1
    b.enter(3, 17, "MPI_Put").ev(3, 17, tm.RMA_PUT, peer=1, comm=2, nbytes=128, request=5).exit(3, 17.5, "MPI_Put")
    b.enter(3, 18, "MPI_Get").ev(3, 18, tm.RMA_GET, peer=1, comm=2, nbytes=16).exit(3, 18.5, "MPI_Get")
    b.enter(3, 19, "MPI_Accumulate").ev(3, 19, tm.RMA_ACC, peer=1, comm=2, nbytes=8, nrecv=0).exit(3, 19.5, "MPI_Accumulate")
    b.enter(1, 19, "MPI_Win_sync").ev(1, 19, tm.RMA_SYNC, peer=-1, comm=2).exit(1, 19.5, "MPI_Win_sync")
    for r in range(4):
        b.coll(r, 20, 21, "MPI_Barrier", comm=0, sent=0, recvd=0)
        b.work(r, 22, 23, "MPI_Finalize").exit(r, 24, "main")
    trace = b.build()
    trace.windows = {2: 5}
    for ev in trace.events:
        ev["time"] = np.rint(ev["time"] * 1e6) / 1e9
    trace.regions[0].vertex = 0
    trace.meta = {"program": "rich", "psg_hash": "abc123", "clock_offsets": {"1": [[0.0, 1e-6], [0.024, 3e-6]]}}
    return trace


def assert_same(a: tm.Trace, b: tm.Trace) -> None:
    assert a.regions == b.regions
    assert a.comms == b.comms
    assert a.windows == b.windows
    assert a.meta == b.meta
    assert a.nranks == b.nranks
    for x, y in zip(a.events, b.events):
        assert x.dtype == y.dtype
        assert np.array_equal(x, y)


@pytest.mark.parametrize("fmt", ["binary", "json"])
def test_round_trip_is_identical(tmp_path, fmt):
    trace = rich_trace()
    path = tmp_path / f"t.{fmt}"
    write_trace(trace, path, fmt)
    assert_same(read_trace(path), trace)


def test_compressed_binary_round_trip_is_identical_and_smaller(tmp_path):
    trace = rich_trace()
    write_trace(trace, tmp_path / "plain.sgt", "binary")
    write_trace(trace, tmp_path / "small.sgt", "binary", compress=True)
    assert_same(read_trace(tmp_path / "small.sgt"), trace)
    assert (tmp_path / "small.sgt").stat().st_size < (tmp_path / "plain.sgt").stat().st_size / 2


def test_round_trip_keeps_arbitrary_float_times_bit_exact(tmp_path):
    trace = rich_trace()
    rng = np.random.default_rng(1)
    for ev in trace.events:
        ev["time"] = np.sort(rng.random(len(ev)) * 1e4)   # no ns grid: binary and JSON must still be exact
    for fmt in ("binary", "json"):
        write_trace(trace, tmp_path / fmt, fmt)
        assert_same(read_trace(tmp_path / fmt), trace)


def test_binary_layout_is_header_json_arrays_checksum(tmp_path):
    trace = rich_trace()
    write_trace(trace, tmp_path / "t.sgt", "binary")
    data = (tmp_path / "t.sgt").read_bytes()
    nev = sum(len(e) for e in trace.events)
    magic, version, nranks, defs_len = trace_binary._HEAD.unpack_from(data)
    assert (magic, version, nranks) == (trace_binary.MAGIC, trace_binary.FORMAT_VERSION, 4)
    defs = json.loads(data[trace_binary._HEAD.size:trace_binary._HEAD.size + defs_len])
    assert defs["comms"]["5"] == [3, 1]
    assert len(data) == trace_binary._HEAD.size + defs_len + 8 * 4 + nev * tm.EVENT_DTYPE.itemsize + 32


def test_json_form_in_the_docs_reads(repo_root):
    """The example in docs/trace-json.md is a valid trace (keeps the documentation honest)."""
    text = (repo_root / "docs" / "trace-json.md").read_text()
    example = text.split("```json\n", 1)[1].split("```", 1)[0]
    path = repo_root / "docs" / "trace-json.md"
    from scalgraph.io.trace_json import trace_from_json
    from scalgraph.trace.validate import check_trace
    trace = trace_from_json(json.loads(example), str(path))
    check_trace(trace)
    assert trace.nranks == 2
    send = trace.events[0][trace.events[0]["kind"] == tm.SEND]
    assert send["peer"].tolist() == [1] and send["bytes"].tolist() == [800]


def test_json_with_byte_order_mark(tmp_path):
    doc = {"regions": ["main"], "events": [[{"t": 0, "kind": "ENTER", "region": "main"}, {"t": 1, "kind": "EXIT"}]]}
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(doc).encode())
    assert read_trace(tmp_path / "bom.json").events[0]["time"].tolist() == [0.0, 1.0]


def test_json_defaults_and_region_names(tmp_path):
    doc = {"regions": ["main", {"name": "MPI_Barrier", "file": "MPI"}],
           "events": [[{"t": 0, "kind": "ENTER", "region": "main"}, {"t": 1, "kind": "EXIT", "region": 0}]]}
    (tmp_path / "t.json").write_text(json.dumps(doc))
    trace = read_trace(tmp_path / "t.json")
    assert trace.comms == {0: [0]}
    ev = trace.events[0]
    assert ev["region"].tolist() == [0, 0] and ev["peer"].tolist() == [-1, -1] and ev["request"].tolist() == [-1, -1]
    assert trace.regions[1].is_mpi


# --------------------------------------------------------------------------------- bad input

def one_line_error(path, *, contains: str) -> str:
    with pytest.raises(UserError) as e:
        read_trace(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert contains in msg, msg
    return msg


@pytest.fixture
def binary_file(tmp_path):
    path = tmp_path / "t.sgt"
    write_trace(rich_trace(), path, "binary")
    return path


@pytest.mark.parametrize("keep", [0, 5, 20, 200, -40, -1])
def test_truncated_binary(binary_file, keep):
    data = binary_file.read_bytes()
    binary_file.write_bytes(data[:keep] if keep >= 0 else data[:len(data) + keep])
    msg = one_line_error(binary_file, contains=str(binary_file))
    assert "truncated" in msg or "corrupt" in msg or "not a trace" in msg


def test_corrupt_compressed_binary(tmp_path):
    path = tmp_path / "t.sgt"
    write_trace(rich_trace(), path, "binary", compress=True)
    data = bytearray(path.read_bytes())
    data[-60] ^= 0x10
    path.write_bytes(bytes(data))
    one_line_error(path, contains="corrupt")
    path.write_bytes(bytes(data[:-100]))
    one_line_error(path, contains=str(path))
    # with a recomputed checksum the damage reaches zlib, which is caught too
    import hashlib
    body = bytes(data[:-32])
    path.write_bytes(body + hashlib.sha256(body).digest())
    one_line_error(path, contains="compressed event block")


@pytest.mark.parametrize("where", [30, 400, -100])
def test_corrupt_binary_byte_is_caught_by_checksum(binary_file, where):
    data = bytearray(binary_file.read_bytes())
    data[where] ^= 0x40
    binary_file.write_bytes(bytes(data))
    one_line_error(binary_file, contains="corrupt")


def test_binary_from_a_newer_version(binary_file):
    data = bytearray(binary_file.read_bytes())
    data[8] = 9
    binary_file.write_bytes(bytes(data))
    one_line_error(binary_file, contains="version 9")


@pytest.mark.parametrize("text, contains", [
    ("{not json", "invalid JSON"),
    ('{"events": 3}', "events"),
    ('{"events": [[{"t": 0, "kind": "JUMP"}]]}', "unknown kind 'JUMP'"),
    ('{"events": [[{"t": "soon", "kind": "ENTER", "region": 0}]]}', "finite number"),
    ('{"regions": ["main"], "events": [[{"t": 0, "kind": "ENTER", "region": "solve"}]]}', "region 'solve'"),
    ('{"regions": ["main"], "events": [[{"t": 0, "kind": "ENTER", "region": 0, "tag": 1.5}]]}', '"tag" must be an integer'),
    ('{"format": "otf3", "events": []}', "unsupported JSON trace format"),
])
def test_bad_json(tmp_path, text, contains):
    path = tmp_path / "bad.json"
    path.write_text(text)
    one_line_error(path, contains=contains)


def _json_trace(tmp_path, rank_events, comms=None):
    doc = {"regions": ["main", {"name": "MPI_Send", "file": "MPI"}, {"name": "MPI_Recv", "file": "MPI"}],
           "events": rank_events}
    if comms is not None:
        doc["comms"] = comms
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


def _send(t, peer, comm=0, tag=0):
    return [{"t": t, "kind": "ENTER", "region": "MPI_Send"},
            {"t": t, "kind": "SEND", "peer": peer, "tag": tag, "comm": comm, "bytes": 8},
            {"t": t + 1, "kind": "EXIT", "region": "MPI_Send"}]


def _recv(t, peer, comm=0, tag=0):
    return [{"t": t, "kind": "ENTER", "region": "MPI_Recv"},
            {"t": t + 1, "kind": "RECV", "peer": peer, "tag": tag, "comm": comm, "bytes": 8},
            {"t": t + 1, "kind": "EXIT", "region": "MPI_Recv"}]


def test_unmatched_message(tmp_path):
    path = _json_trace(tmp_path, [_send(0, 1, tag=3) + _send(5, 1, tag=3), _recv(0, 0, tag=3)])
    one_line_error(path, contains="unmatched messages from rank 0 to rank 1 (tag 3, communicator 0): 2 sent, 1 received")


def test_unknown_communicator(tmp_path):
    path = _json_trace(tmp_path, [_send(0, 1, comm=4), _recv(0, 0, comm=4)])
    one_line_error(path, contains="unknown communicator 4")


def test_peer_outside_communicator(tmp_path):
    path = _json_trace(tmp_path, [_send(0, 1, comm=1), _recv(0, 0, comm=1)], comms={"0": [0, 1], "1": [0]})
    one_line_error(path, contains="peer 1 is not a member of communicator 1")


def _coll(t, comm, root=-1):
    return [{"t": t, "kind": "ENTER", "region": "main"}, {"t": t, "kind": "COLL_BEGIN", "comm": comm},
            {"t": t + 1, "kind": "COLL_END", "comm": comm, "peer": root}, {"t": t + 1, "kind": "EXIT", "region": "main"}]


def test_rank_outside_its_communicator(tmp_path):
    path = _json_trace(tmp_path, [[], _coll(0, comm=1)], comms={"0": [0, 1], "1": [0]})
    one_line_error(path, contains="rank 1 uses communicator 1 but is not one of its members")


def test_collective_root_outside_communicator(tmp_path):
    path = _json_trace(tmp_path, [_coll(0, comm=0, root=5), _coll(0, comm=0, root=5)])
    one_line_error(path, contains="collective root 5 is not a member of communicator 0")


def test_exit_without_enter(tmp_path):
    path = _json_trace(tmp_path, [[{"t": 0, "kind": "EXIT", "region": "main"}]])
    one_line_error(path, contains="EXIT without a matching ENTER")


def test_misnested_exit(tmp_path):
    path = _json_trace(tmp_path, [[{"t": 0, "kind": "ENTER", "region": "main"},
                                   {"t": 1, "kind": "ENTER", "region": "MPI_Send"},
                                   {"t": 2, "kind": "EXIT", "region": "main"},
                                   {"t": 3, "kind": "EXIT", "region": "MPI_Send"}]])
    one_line_error(path, contains="not properly nested")


def test_unclosed_region(tmp_path):
    path = _json_trace(tmp_path, [[{"t": 0, "kind": "ENTER", "region": "main"}]])
    one_line_error(path, contains="never exited")


def test_time_going_backwards(tmp_path):
    path = _json_trace(tmp_path, [[{"t": 5, "kind": "ENTER", "region": "main"}, {"t": 4, "kind": "EXIT", "region": "main"}]])
    one_line_error(path, contains="time goes backwards")


def test_completion_of_unknown_request(tmp_path):
    path = _json_trace(tmp_path, [[{"t": 0, "kind": "ISEND_COMPLETE", "request": 7}]])
    one_line_error(path, contains="request 7")


def test_collective_missing_on_one_member(tmp_path):
    coll = [{"t": 0, "kind": "ENTER", "region": "main"}, {"t": 0, "kind": "COLL_BEGIN"},
            {"t": 1, "kind": "COLL_END", "comm": 0}, {"t": 1, "kind": "EXIT", "region": "main"}]
    path = _json_trace(tmp_path, [coll, []])
    one_line_error(path, contains="unmatched collective on communicator 0")


def test_garbage_and_missing_files(tmp_path):
    (tmp_path / "noise.bin").write_bytes(os.urandom(300))
    one_line_error(tmp_path / "noise.bin", contains="not a trace scalgraph can read")
    (tmp_path / "empty").write_bytes(b"")
    one_line_error(tmp_path / "empty", contains="not a trace scalgraph can read")
    one_line_error(tmp_path / "absent.sgt", contains="no such file")


def test_fifo_and_device_are_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    one_line_error(tmp_path / "pipe", contains="not a regular file")
    one_line_error("/dev/zero", contains="not a regular file")


def test_directory_with_garbage(tmp_path):
    d = tmp_path / "experiment"
    d.mkdir()
    (d / "profile.0").write_bytes(os.urandom(100))
    (d / "notes.txt").write_text("hello")
    one_line_error(d, contains="no OTF2 anchor file")


def test_write_refuses_to_overwrite_and_to_write_invalid(tmp_path):
    path = tmp_path / "t.sgt"
    path.write_bytes(b"precious")
    with pytest.raises(UserError, match="already exists"):
        write_trace(rich_trace(), path, "binary")
    assert path.read_bytes() == b"precious"
    bad = rich_trace()
    bad.events[0] = bad.events[0][1:]            # drops ENTER main: EXIT without ENTER at the end
    with pytest.raises(UserError, match="trace to write"):
        write_trace(bad, tmp_path / "new.sgt", "binary")
    assert not (tmp_path / "new.sgt").exists()
    with pytest.raises(UserError, match="unknown trace format"):
        write_trace(rich_trace(), tmp_path / "x", "csv")


# ------------------------------------------------------------------- through the command line

def _bad_inputs(tmp_path):
    """name -> path of a bad input, each a different failure."""
    out = {}
    good = tmp_path / "good.sgt"
    write_trace(rich_trace(), good, "binary")
    data = good.read_bytes()
    (tmp_path / "truncated.sgt").write_bytes(data[:len(data) // 2])
    out["truncated binary"] = tmp_path / "truncated.sgt"
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 1
    (tmp_path / "corrupt.sgt").write_bytes(bytes(flipped))
    out["corrupt binary"] = tmp_path / "corrupt.sgt"
    (tmp_path / "garbage.json").write_text('{"events": [[{"t": 0, "kind": ')
    out["garbage json"] = tmp_path / "garbage.json"
    for d in ("u", "c"):
        (tmp_path / d).mkdir()
    out["unmatched messages"] = _json_trace(tmp_path / "u", [_send(0, 1), _recv(0, 0) + _recv(3, 0)])
    out["unknown communicator"] = _json_trace(tmp_path / "c", [_send(0, 1, comm=9), _recv(0, 0, comm=9)])
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "traces.otf2").write_bytes(b"\x03BOTF2" + os.urandom(40))
    out["fake otf2 anchor"] = tmp_path / "fake" / "traces.otf2"
    (tmp_path / "junkdir").mkdir()
    (tmp_path / "junkdir" / "a.dat").write_bytes(os.urandom(64))
    out["directory with garbage"] = tmp_path / "junkdir"
    out["missing file"] = tmp_path / "nothing-here.otf2"
    return out


def test_command_line_reports_bad_input_in_one_line(tmp_path):
    import subprocess
    import sys
    for name, path in _bad_inputs(tmp_path).items():
        proc = subprocess.run([sys.executable, "-m", "scalgraph.cli", "trace", str(path)],
                              capture_output=True, text=True, timeout=60)
        err = proc.stderr.strip()
        assert proc.returncode != 0, name
        assert "Traceback" not in proc.stderr, (name, proc.stderr)
        assert len(err.splitlines()) == 1, (name, proc.stderr)
        assert err.startswith("scalgraph trace: ") and str(path) in err, (name, err)
        assert proc.stdout == "", name


@pytest.mark.parametrize("fmt, name", [("binary", "t.sgt"), ("json", "t.json"), ("otf2", "traces.otf2")])
def test_meta_that_is_not_json_is_refused_cleanly(tmp_path, fmt, name):
    if fmt == "otf2":
        require_tool(importlib.util.find_spec("otf2") is not None, "Python package otf2 not installed")
    trace = rich_trace()
    trace.meta["when"] = object()
    with pytest.raises(UserError, match="not plain JSON"):
        write_trace(trace, tmp_path / name, fmt)
    assert list(tmp_path.iterdir()) == []
