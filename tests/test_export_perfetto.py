"""`scalgraph export TRACE --perfetto`: Chrome trace-event JSON, checked against the format's rules (the
fields each phase needs, slices nested per track, every flow's start and finish paired and bound to a
slice) and against what the trace holds (one track per rank, the messages, the wait states)."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from scalgraph import cli
from scalgraph.io.trace_read import write_trace
from tracebuild import Builder

REQUIRED = {"X": {"name", "ph", "ts", "dur", "pid", "tid"}, "B": {"name", "ph", "ts", "pid", "tid"},
            "E": {"ph", "ts", "pid", "tid"}, "M": {"name", "ph", "pid", "args"},
            "s": {"name", "ph", "ts", "pid", "tid", "id", "cat"}, "f": {"name", "ph", "ts", "pid", "tid", "id", "cat"},
            "i": {"name", "ph", "ts", "pid", "tid"}}


def late_sender_trace():
    """Rank 0 computes 4 units longer, so rank 1 waits in MPI_Recv (Late Sender) and ranks 1, 2 wait
    in the Allreduce (Wait at N x N) for rank 0."""
    b = Builder(3)
    for r in range(3):
        b.enter(r, 0, "main")
    b.work(0, 0, 5, "solve").send(0, 5, 5.5, dst=1)
    b.work(1, 0, 1, "solve").recv(1, 1, 5.5, src=0)
    b.work(2, 0, 1, "solve")
    b.coll(0, 5.5, 6, "MPI_Allreduce").coll(1, 5.5, 6, "MPI_Allreduce").coll(2, 1, 6, "MPI_Allreduce")
    for r in range(3):
        b.exit(r, 7, "main")
    return b.build()


def validate(doc: dict) -> dict:
    """The trace-event rules Chrome and Perfetto rely on; returns the events by phase."""
    assert isinstance(doc["traceEvents"], list)
    by = defaultdict(list)
    for e in doc["traceEvents"]:
        missing = REQUIRED[e["ph"]] - e.keys()
        assert not missing, f"{e} lacks {missing}"
        if "ts" in e:
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
        by[e["ph"]].append(e)
    # B/E balance per track (none are written, but a B without its E would break the track)
    depth = defaultdict(int)
    for e in doc["traceEvents"]:
        if e["ph"] in "BE":
            depth[e["pid"], e["tid"]] += 1 if e["ph"] == "B" else -1
            assert depth[e["pid"], e["tid"]] >= 0
    assert all(d == 0 for d in depth.values())
    # X slices on one track nest properly (no partial overlap)
    tracks = defaultdict(list)
    for e in by["X"]:
        tracks[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    eps = 1e-3
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for a, b in spans:
            while stack and stack[-1] <= a + eps:
                stack.pop()
            assert not stack or b <= stack[-1] + eps, f"slice {a}-{b} overlaps its parent ending {stack[-1]}"
            stack.append(b)
    # flows: every id has one start and one finish, each inside a slice of its track
    starts = {(e["cat"], e["id"]): e for e in by["s"]}
    finishes = {(e["cat"], e["id"]): e for e in by["f"]}
    assert len(starts) == len(by["s"]) and len(finishes) == len(by["f"])
    assert starts.keys() == finishes.keys()
    for e in [*by["s"], *by["f"]]:
        assert any(a - eps <= e["ts"] <= b + eps for a, b in tracks[e["pid"], e["tid"]]), f"unbound flow {e}"
    return by


def test_late_sender_trace_exports_tracks_messages_and_wait_states(tmp_path, capsys):
    src = tmp_path / "t.sgtrace"
    write_trace(late_sender_trace(), src)
    out = tmp_path / "t.json"
    assert cli.main(["export", str(src), "--perfetto", str(out), "--no-clock-correction"]) == 0
    by = validate(json.loads(out.read_text()))
    names = {e["tid"]: e["args"]["name"] for e in by["M"] if e["name"] == "thread_name"}
    assert names == {0: "rank 0", 1: "rank 1", 2: "rank 2"}
    mpi = [e for e in by["X"] if e["cat"] == "mpi"]
    assert sorted({(e["tid"], e["name"]) for e in mpi}) == [
        (0, "MPI_Allreduce"), (0, "MPI_Send"), (1, "MPI_Allreduce"), (1, "MPI_Recv"), (2, "MPI_Allreduce")]
    assert {e["name"] for e in by["X"] if e["cat"] == "region"} == {"main", "solve"}
    msg = [(s["tid"], f["tid"]) for s in by["s"] for f in by["f"]
           if s["cat"] == f["cat"] == "message" and s["id"] == f["id"]]
    assert msg == [(0, 1)]
    waits = {(e["tid"], e["name"]): e for e in by["X"] if e["cat"] == "wait_state"}
    ls = waits[1, "Late Sender"]
    assert ls["args"]["causer rank"] == 0
    assert ls["dur"] == pytest.approx(4e6) and ls["ts"] == pytest.approx(1e6)   # recv entered at 1, send at 5
    assert waits[2, "Wait at N x N"]["dur"] == pytest.approx(4.5e6)
    assert waits[2, "Wait at N x N"]["args"]["causer rank"] == 0
    causes = [(s["tid"], f["tid"]) for s in by["s"] for f in by["f"]
              if s["cat"] == f["cat"] == "wait_cause" and s["id"] == f["id"]]
    assert (0, 1) in causes and (0, 2) in causes


def test_existing_output_is_kept_without_force(tmp_path, capsys):
    src = tmp_path / "t.sgtrace"
    write_trace(late_sender_trace(), src)
    out = tmp_path / "t.json"
    out.write_text("keep me")
    assert cli.main(["export", str(src), "--perfetto", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == "keep me"
    assert cli.main(["export", str(src), "--perfetto", str(out), "--force"]) == 0
    validate(json.loads(out.read_text()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json", "t.sgtrace"]    # no temporary left


def test_not_a_trace_is_one_line(tmp_path, capsys):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    assert cli.main(["export", str(bad), "--perfetto", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a trace" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


def test_unwritable_destination_is_one_line(tmp_path, capsys):
    src = tmp_path / "t.sgtrace"
    write_trace(late_sender_trace(), src)
    assert cli.main(["export", str(src), "--perfetto", str(tmp_path / "no" / "o.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not exist" in err and len(err.splitlines()) == 1
