"""`--json`'s record lines (scalgraph/trace/json_rows.py): with orjson the same values as the json
module's text (json.loads gives equal reports), without it the json module's text byte for byte; and
the cases orjson would spell differently in value or character set go the json module's way."""
from __future__ import annotations

import io
import json

import pytest

from scalgraph.commands.trace import analyse
from scalgraph.trace import json_rows, report
from test_trace_native import random_program, skewed_cases


def old_lines(rows, pad):
    """The writer before json_rows: the C encoder, row by row."""
    return ",\n".join(pad + json_rows.ENCODE(r) for r in rows)


def written(rep) -> str:
    out = io.StringIO()
    report.write_json(rep, out)
    return out.getvalue()


@pytest.fixture(scope="module")
def sample():
    """The complete reports of a randomised program and of a skewed one (clock correction on):
    hundreds of wait states and instances each."""
    skewed = next(iter(skewed_cases()))
    return [analyse(random_program(nranks=6, iters=300, seed=4).build(), complete=True),
            analyse(skewed, complete=True)]


def test_the_json_reads_back_as_the_former_writers(sample, monkeypatch):
    monkeypatch.setattr(report, "_ROWS_PER_WRITE", 64)     # many chunks, and their joints
    for rep in sample:
        assert len(rep["delay"]["waits"]) > 200 and len(rep["instances"]) > 200
        new = written(rep)
        with monkeypatch.context() as m:
            m.setattr(report, "encode_lines", old_lines)
            old = written(rep)
        assert json.loads(new) == json.loads(old) == rep
        assert new.count("\n") == old.count("\n")          # still one record per line
        with monkeypatch.context() as m:                    # without orjson: the same bytes
            m.setattr(json_rows, "orjson", None)
            assert written(rep) == old
        if json_rows.orjson is not None:                    # orjson really wrote it (its spelling)
            assert new != old


ODD_ROWS = [
    [{"a": float("nan"), "b": 1}, {"a": 2.5, "b": 2}],                  # NaN: json writes NaN, orjson null
    [{"a": float("inf")}, {"a": -float("inf")}],
    [{"a": None}, {"a": 1}],
    [{"s": "caf\u00e9 \x1b[2J"}, {"s": "x"}],                            # non-ASCII and escapes
    [{"s": "},{"}, {"s": "a},{b"}, {"s": ""}],                          # the cut inside a string
    [{"l": [{"x": 1}, {"y": 2}]}, {"l": []}],                           # nested records
    [{"a%d": 1, "b%%": 2.0}, {"a%d": 3, "b%%": 4.0}],                   # % in keys (the template)
    [{1: 2}, {1: 3}],                                                   # non-str keys
    [[1, 2.5, "x"], [3, 4.5, "y"]], [[1], [1, 2]], [1e-06, 2.0], [],
    [{"a": 1, "b": 2}, {"b": 2, "a": 1}],                               # keys in another order
    [{"i": 2**70}, {"i": True}, {"i": 1.0}],                            # big int, bool, mixed column
    [{"w": {"file": "a.c", "line": 3}}] * 3,
]


@pytest.mark.parametrize("rows", ODD_ROWS)
def test_odd_rows_read_back_the_same_and_keep_json_spellings(rows, monkeypatch):
    expect = old_lines(rows, "  ")
    got = json_rows.encode_lines(rows, "  ")
    assert got.count("\n") == expect.count("\n")
    assert json.dumps(json.loads(f"[{got}]")) == json.dumps(json.loads(f"[{expect}]"))   # NaN compares as text
    if any(t in expect for t in ("NaN", "Infinity", "null", "\\u")):
        assert got == expect                 # orjson would write null or raw UTF-8: the json module's text
    monkeypatch.setattr(json_rows, "orjson", None)
    assert json_rows.encode_lines(rows, "  ") == expect
