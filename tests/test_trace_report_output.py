"""The trace report's tables and writers against per-row references (issue 11 item 8: the report of a
10^6-event trace was built, escaped and encoded one Python object at a time).  The references are
the earlier code, kept here: the faster report must say exactly what it said."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from scalgraph.errors import printable
from scalgraph.commands.trace import analyse
from scalgraph.trace import patterns, report
from scalgraph.trace import verdict as verdicts
from tracebuild import Builder

ESC = "\x1b]0;pwned\x07\x1b[2J"


def hostile_trace(nranks: int = 4, iters: int = 6, seed: int = 3):
    """A ring of blocking sends and receives, then a barrier, with random work per rank and
    iteration (late senders, late receivers, barrier waits); region and file names carry escapes."""
    rng = np.random.default_rng(seed)
    b = Builder(nranks)
    clock = np.zeros(nranks)
    comp = f"comp{ESC}ute\nfake line"
    for _ in range(iters):
        work = rng.uniform(1.0, 3.0, nranks)
        for r in range(nranks):
            b.work(r, clock[r], clock[r] + work[r], comp)
        start = clock + work
        send_end = np.empty(nranks)
        for r in range(nranks):             # even ranks send first, odd ranks receive first
            dst, src = (r + 1) % nranks, (r - 1) % nranks
            if r % 2 == 0:
                b.send(r, start[r], start[r] + 0.1, dst)
                send_end[r] = start[r] + 0.1
            else:
                arrive = start[src] if src % 2 == 0 else start[r]
                b.recv(r, start[r], max(start[r], arrive) + 0.2, src)
                send_end[r] = max(start[r], arrive) + 0.2
        after = send_end.copy()
        for r in range(nranks):
            dst, src = (r + 1) % nranks, (r - 1) % nranks
            if r % 2 == 1:
                b.send(r, send_end[r], send_end[r] + 0.1, dst)
                after[r] = send_end[r] + 0.1
            else:
                b.recv(r, send_end[r], max(send_end[r], send_end[src]) + 0.2, src)
                after[r] = max(send_end[r], send_end[src]) + 0.2
        end = after.max() + 0.05
        for r in range(nranks):
            b.coll(r, after[r], end, "MPI_Barrier")
        clock = np.full(nranks, end + 0.01)
    trace = b.build()
    trace.regions[b.region(comp)].file = f"app{ESC}.c"
    return trace


@pytest.fixture(scope="module")
def complete():
    return analyse(hostile_trace(), source=f"trace{ESC}.json", notes=[f"a note{ESC}"], complete=True)


def escape_whole(value):
    """The earlier write_text's first step: every string of the whole report escaped."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {escape_whole(k): escape_whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape_whole(v) for v in value]
    return value


def text(rep: dict, top: int = 10) -> str:
    out = io.StringIO()
    report.write_text(rep, out, top=top)
    return out.getvalue()


@pytest.mark.parametrize("top", [1, 3, 10])
def test_text_escapes_what_it_prints_as_escaping_the_whole_report_did(complete, top):
    assert len(complete["instances"]) > 5 and complete["delay"]["waits"]
    got = text(complete, top)
    assert got == text(escape_whole(complete), top)      # escaping is idempotent: the earlier output
    assert not any(ch in got for ch in "\x1b\x07")
    assert "comp\\x1b]0;pwned\\x07\\x1b[2Jute\\nfake line" in got and "trace\\x1b]0;pwned" in got
    assert not any(line.startswith("fake line") for line in got.splitlines())


@pytest.mark.parametrize("top", [1, 3, 10])
def test_a_report_built_limited_is_the_complete_one_cut(complete, top):
    """The text command builds only what it prints: the same report as limited() cuts from the
    complete one, the same text."""
    lim = analyse(hostile_trace(), source=f"trace{ESC}.json", notes=[f"a note{ESC}"], top=top)
    assert lim == report.limited(complete, top)
    assert text(lim, top) == text(complete, top)
    assert lim["delay"]["waits"] == [] and len(lim["instances"]) < len(complete["instances"])
    per_pattern = {}
    for i in lim["instances"]:
        per_pattern[i["pattern"]] = per_pattern.get(i["pattern"], 0) + 1
    assert max(per_pattern.values()) == min(top, 5)


def test_instances_are_the_per_row_loops(complete):
    """Every wait state by pattern (tree order), most severe first, ties in replay order."""
    trace = hostile_trace()
    from scalgraph.trace import forward
    from scalgraph.trace.clock import correct_clocks
    from scalgraph.trace.matching import callpath_names
    fwd = forward.forward_replay(forward.build_context(correct_clocks(trace)[0]))
    ctx = fwd.ctx
    names, where = callpath_names(ctx.nest, ctx.trace.regions), report._where(fwd)
    expect = []
    for i, pat in enumerate(patterns.PATTERNS):
        rows = fwd.waits[fwd.waits["pattern"] == i]
        for w in rows[np.argsort(-rows["wait"], kind="stable")]:
            c = int(ctx.nest.callpath[w["op"]])
            expect.append({"pattern": pat.name, "seconds": float(w["wait"]), "rank": int(w["rank"]),
                           "enter_time": float(ctx.time[w["op"]]), "callpath": names[c],
                           "where": verdicts._loc(where[c]), "causer": int(w["causer"])})
    assert len({e["pattern"] for e in expect}) >= 3        # late sender, late receiver, barrier
    assert complete["instances"] == expect
    assert [list(e) for e in complete["instances"]] == [list(e) for e in expect]     # key order too


def test_wait_table_is_the_per_row_loop(complete):
    trace = hostile_trace()
    from scalgraph.trace import delay, forward
    from scalgraph.trace.clock import correct_clocks
    fwd = forward.forward_replay(forward.build_context(correct_clocks(trace)[0]))
    dl = delay.delay_analysis(fwd, delay.DelayOptions())
    w = dl.waits
    order = np.lexsort((-w["wait"], w["causer"], fwd.ctx.time[w["op"]], w["rank"], w["pattern"]))
    cols = {"seconds": w["wait"], "distributed": dl.distributed, "sum_delta": dl.sum_delta,
            "wait_in_interval": dl.wait_in_interval, "scale": dl.scale, "gamma": dl.gamma, "direct": dl.direct,
            "indirect": dl.indirect}
    expect = [{"pattern": patterns.PATTERNS[int(w["pattern"][i])].name, "rank": int(w["rank"][i]),
               "enter_time": float(fwd.ctx.time[w["op"][i]]), "causer": int(w["causer"][i]),
               **{k: float(v[i]) for k, v in cols.items()}, "propagating": bool(dl.propagating[i])}
              for i in order]
    got = report.wait_table(fwd.ctx, dl)
    assert got == expect and [list(e) for e in got] == [list(e) for e in expect]
    assert complete["delay"]["waits"] == expect


def test_json_is_the_whole_report_one_record_per_line(complete):
    out = io.StringIO()
    report.write_json(complete, out)
    body = out.getvalue()
    assert json.loads(body) == complete
    assert json.loads(body) == json.loads(json.dumps(complete, indent=1))
    lines = body.splitlines()
    rows = len(complete["instances"]) + len(complete["delay"]["waits"])
    assert len(lines) > rows
    assert sum(1 for ln in lines if ln.lstrip().startswith('{"pattern":')) == rows


@pytest.mark.parametrize("value", [
    {}, [], {"a": []}, {"a": {}}, [[1, 2], [3]], {3: 1, None: 2, True: 3, False: 4, 1.5: 5, "x": [{"y": 1}]},
    {"n": float("nan"), "i": float("inf"), "s": "t\x1b\u00e9", "l": [{"a": [1, {"b": None}]}, [], {}]},
    [(1, 2), {"t": (3, 4)}],
])
def test_json_writer_reads_back_as_json_dump(value):
    out = io.StringIO()
    report.write_json(value, out)
    assert out.getvalue().endswith("\n")
    assert json.dumps(json.loads(out.getvalue()), sort_keys=True) == json.dumps(json.loads(json.dumps(value)),
                                                                                  sort_keys=True)


def test_json_writer_refuses_what_json_refuses():
    with pytest.raises(TypeError):
        report.write_json({(1, 2): 3}, io.StringIO())
    with pytest.raises(TypeError):
        report.write_json({"a": [{"b": object()}]}, io.StringIO())
