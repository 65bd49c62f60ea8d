"""Trace throttling (instrument/sg_trace.c, as TAU_THROTTLE): a function called over 10000 times for
under 10 us each is traced only until then; functions above the threshold, the MPI events and the
program's output are unchanged; SCALGRAPH_TRACE_THROTTLE=0 traces every call."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from scalgraph.model import trace as tm
from conftest import sgcc_build
from test_e2e_samples import require_parts
from test_trace_record import run_traced

PROGRAM = pathlib.Path(__file__).resolve().parent.parent / "instrument" / "testprogs" / "tiny_calls.c"
CALLS = 30_000


@pytest.fixture(scope="module")
def tiny_calls(tmp_path_factory):
    require_parts("cg")
    out = tmp_path_factory.mktemp("throttle")
    exe = out / "tiny_calls"
    sgcc_build(PROGRAM, exe)
    return exe


def function_enters(exe, out) -> list[dict[str, int]]:
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.static import read_psg_from_executable
    trace = read_shim_trace(out, read_psg_from_executable(str(exe)))
    per_rank = []
    for ev in trace.events:
        regions = ev["region"][ev["kind"] == tm.ENTER]
        names, counts = np.unique(regions, return_counts=True)
        by_name: dict[str, int] = {}
        for r, c in zip(names, counts):     # a function's instances are regions "work [v12]", "work [v14]"...
            name = trace.regions[r].name.split(" [")[0]
            by_name[name] = by_name.get(name, 0) + int(c)
        per_rank.append(by_name)
    return per_rank


def test_a_tiny_function_called_often_is_throttled(tiny_calls, tmp_path):
    res = run_traced(tiny_calls, tmp_path / "out", str(CALLS))
    enters = function_enters(tiny_calls, tmp_path / "out")
    for rank in enters:
        assert 10_000 <= rank["tiny"] <= 10_001, rank         # traced until the 10000th call
        assert rank["work"] == 20 and rank["MPI_Allreduce"] == 1, rank
    assert "1 functions called over 10000 times for under 10 us each" in res.stderr
    assert f"tiny {CALLS} work 20" in res.stdout


def test_throttling_off_traces_every_call(tiny_calls, tmp_path):
    res = run_traced(tiny_calls, tmp_path / "out", str(CALLS), env_extra={"SCALGRAPH_TRACE_THROTTLE": "0"})
    enters = function_enters(tiny_calls, tmp_path / "out")
    assert all(rank["tiny"] == CALLS and rank["work"] == 20 for rank in enters), enters
    assert "throttle" not in res.stderr.lower()
