"""What the serial analysis holds: `analyse(release=True)` (the command's path) drops the trace's
events once the corrected trace and then the replay context hold them, and the context drops the
fields only the matching reads; the result is bit for bit the one of the analysis that keeps all."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from scalgraph.commands.trace import analyse
from scalgraph.trace import forward, matching
from scalgraph.trace.clock import ClockParams, correct_clocks, correct_flat
from test_trace_clock_hybrid import skewed_hybrid
from test_trace_parallel import random_traces
from test_trace_report_output import hostile_trace


def skewed(trace, shift: float):
    """Rank 1's clock ahead by `shift`: receives before their sends, which the correction moves."""
    out = copy.deepcopy(trace)
    out.events[1]["time"] += shift
    return out


def with_offsets(trace):
    """Measured clock offsets that move rank 1 by 0.4 s to 0.9 s over the run (interpolated first)."""
    out = copy.deepcopy(trace)
    end = float(max(e["time"][-1] for e in out.events))
    out.meta["clock_offsets"] = {"1": [[0.0, 0.4], [end, 0.9]]}
    return out


CASES = ([hostile_trace(), skewed(hostile_trace(), 0.7), with_offsets(hostile_trace())]
         + [skewed(t, 0.3) for t in random_traces(6, seed=11)])


@pytest.mark.parametrize("i", range(len(CASES)))
@pytest.mark.parametrize("clock_correction", [True, False])
def test_release_gives_the_same_result_and_empties_the_trace(i, clock_correction):
    kept = copy.deepcopy(CASES[i])
    dropped = copy.deepcopy(CASES[i])
    n = [len(e) for e in dropped.events]
    want = analyse(kept, clock_correction=clock_correction, complete=True)
    got = analyse(dropped, clock_correction=clock_correction, complete=True, release=True)
    assert json.dumps(got, sort_keys=True, default=str) == json.dumps(want, sort_keys=True, default=str)
    assert [len(e) for e in kept.events] == n                     # the default keeps the caller's trace
    assert len(dropped.events) == len(n) and all(len(e) == 0 for e in dropped.events)
    assert all(e.dtype == kept.events[0].dtype for e in dropped.events)


def test_context_keeps_collective_bytes_and_drops_matching_only_fields():
    trace = CASES[0]
    ctx = forward.build_context(trace)
    assert not set(forward.MATCHING_ONLY) & set(ctx.flat.ev)
    for ci in ctx.colls:
        ends = ci.end_evt
        r = ctx.flat.rank[ends]
        local = ends - ctx.flat.offsets[r]
        for field, got in (("bytes", ci.bytes), ("bytes_recv", ci.bytes_recv)):
            want = np.array([[trace.events[a][field][b] for a, b in zip(ra, la)] for ra, la in zip(r, local)])
            assert np.array_equal(got, want.reshape(got.shape))


@pytest.mark.parametrize("trace", CASES + [skewed_hybrid(3), skewed_hybrid(5)], ids=lambda _: "")
@pytest.mark.parametrize("force", [False, True])
def test_correcting_the_flat_trace_in_place_gives_correct_clocks_times(trace, force):
    params = ClockParams(gamma=0.9)
    out, want = correct_clocks(trace, params, force=force)
    flat = matching.flatten(copy.deepcopy(trace))
    got = correct_flat(trace, flat, params, force=force)
    assert np.array_equal(flat.ev["time"], matching.flatten(out).ev["time"])      # bit for bit
    assert json.dumps(got.as_dict(), default=str) == json.dumps(want.as_dict(), default=str)
    assert got.summary() == want.summary()
