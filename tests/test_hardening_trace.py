"""A generated corpus of bad trace inputs (issue 15): corrupt, truncated and forged JSON, binary and
OTF2 traces, hostile names with terminal escape codes, absurd times, counts that wrap past 2**64,
special files.  Each goes through `scalgraph trace` in-process (a few through `export --perfetto`
and `report`) and must get: a non-zero exit, exactly one stderr line naming the problem, no
traceback, no hang (an alarm), and every file that existed before byte-identical afterwards.
The harness is tests/test_hardening_corpus.py's."""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

from scalgraph.io import trace_binary as tb
from scalgraph.io.trace_binary import write_binary
from scalgraph.io.trace_json import write_json
from test_hardening_corpus import assert_refused, run_cli, snapshot
from tracebuild import Builder

ESC = "\x1b]0;pwned\x07\x1b[2J"      # sets the terminal title, clears the screen


def small_trace(comp_name: str = "comp"):
    """R0 computes 10 s then sends; R1 computes 4 s and waits in MPI_Recv (a 6 s Late Sender)."""
    b = Builder(2)
    b.enter(0, 0, "main").enter(1, 0, "main")
    b.work(0, 0, 10, comp_name).send(0, 10, 11, 1)
    b.work(1, 0, 4, comp_name).recv(1, 4, 12, 0)
    b.exit(0, 12, "main").exit(1, 12, "main")
    return b.build()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace-corpus")
    t = small_trace()
    write_json(t, d / "ok.json")
    write_binary(t, d / "ok.sgt")
    write_binary(t, d / "okz.sgt", compress=True)
    return d


@pytest.fixture
def work(tmp_path, base):
    import shutil
    w = tmp_path / "w"
    shutil.copytree(base, w)
    (w / "keep.txt").write_text("someone else's file\n")
    return w


# ---- forging helpers ---------------------------------------------------------------------------

def _doc(w) -> dict:
    return json.loads((w / "ok.json").read_text())


def _json_times(w, name, f) -> str:
    d = _doc(w)
    for rank in d["events"]:
        for e in rank:
            e["t"] = f(e["t"])
    (w / name).write_text(json.dumps(d))
    return name


def _json(w, name, doc=None, raw: str | bytes | None = None) -> str:
    data = raw if raw is not None else json.dumps(doc)
    (w / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return name


def _parts(w, name="ok.sgt"):
    """(header fields, definitions dict, counts, event blocks bytes) of a binary trace."""
    data = (w / name).read_bytes()
    magic, version, nranks, defs_len = tb._HEAD.unpack_from(data)
    pos = tb._HEAD.size
    defs = json.loads(data[pos:pos + defs_len])
    counts = np.frombuffer(data, "<u8", nranks, pos + defs_len).copy()
    return version, nranks, defs, counts, data[pos + defs_len + 8 * nranks:-32]


def _forge_binary(w, name, version=None, nranks=None, defs=None, defs_bytes=None, counts=None, blocks=None,
                  events=None) -> str:
    """A binary trace with some parts replaced and a correct checksum, as a forger would write it."""
    v0, n0, d0, c0, b0 = _parts(w)
    if events is not None:
        blocks = b"".join(np.ascontiguousarray(e, tb.EVENT_DTYPE).tobytes() for e in events)
    if defs_bytes is None:
        defs_bytes = json.dumps(d0 if defs is None else defs).encode()
    body = (tb._HEAD.pack(tb.MAGIC, v0 if version is None else version, n0 if nranks is None else nranks,
                          len(defs_bytes)) + defs_bytes
            + np.asarray(c0 if counts is None else counts, "<u8").tobytes() + (b0 if blocks is None else blocks))
    (w / name).write_bytes(body + hashlib.sha256(body).digest())
    return name


def _binary_events(w, f):
    t = small_trace()
    for ev in t.events:
        f(ev)
    return t.events


def _set_time(i, value):
    def f(ev):
        ev["time"][i] = value
    return f


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _fifo(w, name) -> str:
    os.mkfifo(w / name)
    return name


def _otf2_available() -> bool:
    try:
        import otf2  # noqa: F401
        return True
    except ImportError:
        return False


def _otf2(w, meta=None) -> str:
    from conftest import require_tool
    require_tool(_otf2_available(), "the otf2 Python module (pip extra)")
    from scalgraph.io.trace_otf2 import write_otf2
    t = small_trace()
    if meta is not None:
        t.meta.update(meta)
    (w / "arch").mkdir()
    write_otf2(t, w / "arch" / "traces.otf2")
    return "arch/traces.otf2"


def _otf2_without_defs(w) -> str:
    anchor = _otf2(w)
    for f in (w / "arch").rglob("*.def"):
        f.unlink()
    return anchor


def _otf2_forged_anchor(w) -> str:
    (w / "fake.otf2").write_bytes(b"OTF2\x00" + os.urandom(200))
    return "fake.otf2"


def _zlib_corrupt(w) -> str:
    v, n, defs, counts, blocks = _parts(w, "okz.sgt")
    bad = bytearray(blocks)
    bad[5] ^= 0xFF
    defs_bytes = json.dumps(defs).encode()
    body = tb._HEAD.pack(tb.MAGIC, v, n, len(defs_bytes)) + defs_bytes + counts.astype("<u8").tobytes() + bytes(bad)
    (w / "z.sgt").write_bytes(body + hashlib.sha256(body).digest())
    return "z.sgt"


def _zlib_negative_sizes(w) -> str:
    v, n, defs, counts, blocks = _parts(w, "okz.sgt")
    s = defs["block_sizes"]
    defs["block_sizes"] = [s[0] + 1000, s[1] - 1000]
    defs_bytes = json.dumps(defs).encode()
    body = tb._HEAD.pack(tb.MAGIC, v, n, len(defs_bytes)) + defs_bytes + counts.astype("<u8").tobytes() + blocks
    (w / "zn.sgt").write_bytes(body + hashlib.sha256(body).digest())
    return "zn.sgt"


# ---- the corpus: (id, make(work) -> trace argument, fragment the message must contain) -------------

def _c(counts_fn):
    return lambda w: _forge_binary(w, "f.sgt", counts=counts_fn(_parts(w)[3]))


CASES = [
    # JSON traces
    ("json-not-json", lambda w: _json(w, "t.json", raw="{not json"), "invalid JSON"),
    ("json-truncated", lambda w: _json(w, "t.json", raw=(w / "ok.json").read_text()[:300]), "invalid JSON"),
    ("json-deep", lambda w: _json(w, "t.json", raw='{"events":' + _deep(50000) + "}"), "nests"),
    ("json-deep-in-event", lambda w: _json(w, "t.json", raw=(w / "ok.json").read_text().replace(
        '"t":0.0', '"x":' + _deep(5000) + ',"t":0.0', 1)), "nests"),
    ("json-nan-time", lambda w: _json(w, "t.json", raw=(w / "ok.json").read_text().replace('"t":12.0', '"t":NaN')),
     "NaN"),
    ("json-infinity-time", lambda w: _json(w, "t.json", raw=(w / "ok.json").read_text().replace(
        '"t":12.0', '"t":-Infinity')), "Infinity"),
    ("json-1e400-time", lambda w: _json(w, "t.json", raw=(w / "ok.json").read_text().replace(
        '"t":12.0', '"t":1e400')), "finite"),
    ("json-1e300-times", lambda w: _json_times(w, "t.json", lambda t: 1e300 + t * 1e290), "beyond"),
    ("json-max-double-end", lambda w: _json_times(w, "t.json", lambda t: 1.7e308 if t > 11 else t), "beyond"),
    ("json-minus-1e300", lambda w: _json_times(w, "t.json", lambda t: -1e300 + t * 1e290), "beyond"),
    ("json-negative-duration", lambda w: _json_times(w, "t.json", lambda t: -t), "backwards"),
    ("json-wrong-format", lambda w: _json(w, "t.json", {**_doc(w), "format": "other"}), "unsupported"),
    ("json-string-version", lambda w: _json(w, "t.json", {**_doc(w), "version": "1"}), "version"),
    ("json-events-not-list", lambda w: _json(w, "t.json", {**_doc(w), "events": {"0": []}}), "events"),
    ("json-rank-not-list", lambda w: _json(w, "t.json", {**_doc(w), "events": [_doc(w)["events"][0], 5]}),
     "rank 1"),
    ("json-unknown-kind", lambda w: _json(w, "t.json", raw=(w / "ok.json").read_text().replace(
        '"kind":"SEND"', '"kind":"TELEPORT"')), "unknown kind"),
    ("json-peer-2-pow-70", lambda w: _json(w, "t.json", raw=(w / "ok.json").read_text().replace(
        '"peer":1', '"peer":' + str(2 ** 70))), "out of range"),
    ("json-not-utf8", lambda w: _json(w, "t.json", raw=b'{"events": "\xff\xfe\xfd"}'), "UTF-8"),
    ("json-empty-file", lambda w: _json(w, "t.json", raw=b""), "not a trace"),
    ("json-hostile-region-undefined", lambda w: _json(w, "t.json", raw=(w / "ok.json").read_text().replace(
        '"region":1', json.dumps({"region": ESC})[1:-1], 1)), "is not in"),
    ("json-hostile-file-name", lambda w: _json(w, f"t{ESC}.json", raw="{broken"), "invalid JSON"),
    ("json-unmatched-message", lambda w: _json(w, "t.json", {**_doc(w), "events": [_doc(w)["events"][0], []]}),
     "unmatched"),
    # own binary format
    ("bin-truncated", lambda w: _json(w, "t.sgt", raw=(w / "ok.sgt").read_bytes()[:600]), "truncated"),
    ("bin-magic-only", lambda w: _json(w, "t.sgt", raw=tb.MAGIC), "truncated"),
    ("bin-bit-flip", lambda w: _json(w, "t.sgt", raw=(lambda b: b[:700] + bytes([b[700] ^ 1]) + b[701:])(
        (w / "ok.sgt").read_bytes())), "checksum"),
    ("bin-version-99", lambda w: _forge_binary(w, "f.sgt", version=99), "version 99"),
    ("bin-counts-wrap-2-pow-64", _c(lambda c: c + np.uint64(2 ** 63)), "claims"),
    ("bin-count-plus-2-pow-60", _c(lambda c: c + np.array([2 ** 60, 0], np.uint64)), "claims"),
    ("bin-counts-shifted", _c(lambda c: c + np.array([1, -1 & 0xFFFFFFFFFFFFFFFF], np.uint64)), "backwards"),
    ("bin-nranks-huge", lambda w: _forge_binary(w, "f.sgt", nranks=2 ** 31), "truncated"),
    ("bin-defs-deep", lambda w: _forge_binary(w, "f.sgt", defs_bytes=_deep(10000).encode()), "nests"),
    ("bin-defs-not-json", lambda w: _forge_binary(w, "f.sgt", defs_bytes=b"\x00garbage\xff"), "corrupt binary"),
    ("bin-defs-nan", lambda w: _forge_binary(w, "f.sgt", defs_bytes=json.dumps(_parts(w)[2]).replace(
        '"nregions"', '"x":NaN,"nregions"').encode() if '"nregions"' in json.dumps(_parts(w)[2]) else
        json.dumps(_parts(w)[2])[:-1].encode() + b',"x":NaN}'), "corrupt binary"),
    ("bin-time-1e300", lambda w: _forge_binary(w, "f.sgt", events=_binary_events(w, _set_time(-1, 1e300))),
     "beyond"),
    ("bin-time-max-double", lambda w: _forge_binary(w, "f.sgt", events=_binary_events(w, _set_time(-1, 1.7976e308))),
     "beyond"),
    ("bin-time-nan", lambda w: _forge_binary(w, "f.sgt", events=_binary_events(w, _set_time(3, float("nan")))),
     "finite"),
    ("bin-time-inf", lambda w: _forge_binary(w, "f.sgt", events=_binary_events(w, _set_time(0, float("-inf")))),
     "finite"),
    ("bin-negative-duration", lambda w: _forge_binary(w, "f.sgt", events=_binary_events(w, _set_time(2, -5.0))),
     "backwards"),
    ("bin-zlib-corrupt", _zlib_corrupt, "corrupt"),
    ("bin-zlib-negative-sizes", _zlib_negative_sizes, "block sizes"),
    # OTF2
    ("otf2-forged-anchor", _otf2_forged_anchor, "fake.otf2"),
    ("otf2-no-definitions", _otf2_without_defs, "otf2"),
    ("otf2-deep-meta", lambda w: _otf2(w, meta={"x": json.loads(_deep(200))}), "nests"),
    # special files and paths
    ("fifo", lambda w: _fifo(w, "t.json"), "not a regular file"),
    ("character-device", lambda w: os.devnull, "not a regular file"),
    ("missing", lambda w: "nothing-here.sgt", "no such file"),
    ("directory-without-anchor", lambda w: (w / "d").mkdir() or "d", "no OTF2 anchor"),
]


@pytest.mark.parametrize("make,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_trace_refuses_bad_input(work, capsys, make, fragment):
    arg = make(work)
    before = snapshot(work)
    code, out, err = run_cli(["trace", arg], capsys, work)
    assert_refused(code, err, fragment, before, snapshot(work))
    assert "nan" not in out.lower() and "inf " not in out.lower()


EXPORT_CASES = ["json-deep", "json-1e300-times", "bin-counts-wrap-2-pow-64", "bin-time-nan", "fifo"]


@pytest.mark.parametrize("command", ["export", "report"])
@pytest.mark.parametrize("case", EXPORT_CASES)
def test_export_and_report_refuse_bad_traces(work, capsys, command, case):
    make, fragment = {c[0]: c[1:] for c in CASES}[case]
    arg = make(work)
    (work / "out.json").write_text("an earlier export\n")
    before = snapshot(work)
    argv = ["export", arg, "--perfetto", "out.json", "--force"] if command == "export" else \
        ["report", arg, "-o", "out.html"]
    code, out, err = run_cli(argv, capsys, work)
    assert_refused(code, err, fragment, before, snapshot(work))


def test_hostile_names_reach_the_terminal_escaped(work, capsys):
    """A valid trace whose region names carry escape codes: analysed, every name shown escaped."""
    t = small_trace(comp_name=f"co{ESC}mp\nfake line")
    write_json(t, work / "hostile.json")
    code, out, err = run_cli(["trace", "hostile.json"], capsys, work)
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "co\\x1b]0;pwned\\x07\\x1b[2Jmp\\nfake line" in out
    assert not any(line.startswith("fake line") for line in out.splitlines())


def test_epoch_based_times_are_still_analysed(work, capsys):
    """The time bound refuses absurd times only: seconds since 1970 (1.8e9) are a real trace's."""
    name = _json_times(work, "epoch.json", lambda t: 1.764e9 + t)
    code, out, err = run_cli(["trace", name, "--json"], capsys, work)
    assert code == 0, err
    rep = json.loads(out)
    assert rep["total_time"] == pytest.approx(24.0, abs=1e-5)
    assert rep["delay"]["classification"]["waiting_time"] == pytest.approx(6.0, abs=1e-5)


def test_writers_leave_no_temporary_and_follow_no_planted_symlink(work):
    """Binary and JSON writers: a symlink planted at the old predictable temporary name is never
    followed, and nothing but the trace itself is left behind."""
    t = small_trace()
    victim = work / "keep.txt"
    for name, write in (("n.sgt", write_binary), ("n.json", write_json)):
        (work / f"{name}.tmp{os.getpid()}").symlink_to(victim)
        write(t, work / name)
        assert victim.read_text() == "someone else's file\n"
        (work / f"{name}.tmp{os.getpid()}").unlink()
    left = sorted(p.name for p in work.iterdir())
    assert left == sorted(["ok.json", "ok.sgt", "okz.sgt", "keep.txt", "n.sgt", "n.json"])
    from scalgraph.io.trace_read import read_trace
    assert read_trace(work / "n.sgt").events[1]["time"].tolist() == t.events[1]["time"].tolist()
    assert read_trace(work / "n.json").events[0]["time"].tolist() == t.events[0]["time"].tolist()


def test_parallel_block_reader_refuses_wrapped_counts(work):
    """The parallel replay reads its block with read_binary_ranks: forged counts stop it too."""
    from scalgraph.errors import UserError
    name = _c(lambda c: c + np.uint64(2 ** 63))(work)
    with pytest.raises(UserError, match="claims"):
        tb.read_binary_ranks(work / name, 0, 1)


@pytest.mark.parametrize("reader", ["raw rank file", "trace filter"])
def test_fifo_given_to_the_run_side_trace_readers_is_refused_not_opened(work, reader):
    """`scalgraph run --trace` reads the shim's rank-R.sgt files and --trace-filter's file: a FIFO
    planted there is refused at once (opening it would block for ever)."""
    import signal
    from scalgraph.errors import UserError
    from scalgraph.io.trace_filter import resolve_filter
    from scalgraph.io.trace_shim import read_raw_rank
    from test_hardening_corpus import Hang, _alarm
    fifo = work / "rank-0.sgt"
    os.mkfifo(fifo)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        with pytest.raises(UserError, match="FIFO"):
            read_raw_rank(fifo) if reader == "raw rank file" else resolve_filter(fifo, None)
    except Hang:
        pytest.fail(f"the {reader} reader blocked on a FIFO")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_parallel_replay_refuses_a_bad_block_in_one_line(work):
    """--parallel 2: the absurd time lies in rank 1, which only the second analysis process reads
    (its block checks, validate.check_ranks); every process stops, one line reaches the user."""
    import subprocess
    import sys
    from conftest import require_tool
    from test_trace_parallel import have_mpi
    require_tool(have_mpi(), "mpi4py and mpiexec are not installed")
    events = _binary_events(work, lambda ev: None)
    events[1]["time"][-1] = 1.7e308
    name = _forge_binary(work, "f.sgt", events=events)
    before = snapshot(work)
    p = subprocess.run([sys.executable, "-m", "scalgraph.cli", "trace", "--parallel", "2", name], cwd=work,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert "rank 1" in p.stderr and "beyond" in p.stderr, p.stderr
    assert snapshot(work) == before
