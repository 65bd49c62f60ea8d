"""matching.depth_after / exit_of / owner_of (the few-events nesting queries the clock correction
uses) agree with match_regions' partner and owner on random nestings: events outside all regions,
regions left open at the end, deep and long calls, ranks without events."""
from __future__ import annotations

import numpy as np
import pytest

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import matching


def random_trace(seed: int) -> tm.Trace:
    rng = np.random.default_rng(seed)
    events = []
    for _ in range(int(rng.integers(1, 5))):
        n = int(rng.integers(0, 400))
        kinds, depth = [], 0
        for _ in range(n):
            x = rng.random()
            if x < 0.4 or depth == 0 and x < 0.7:
                kinds.append(tm.ENTER)
                depth += 1
            elif x < 0.75 and depth > 0:
                kinds.append(tm.EXIT)
                depth -= 1
            else:
                kinds.append(tm.COLL_END)
        ev = tm.make_events(len(kinds))
        ev["kind"] = kinds
        ev["time"] = np.arange(len(kinds), dtype=float)
        ev["region"] = np.where(ev["kind"] == tm.COLL_END, -1, 0)
        events.append(ev)
    return tm.Trace(regions=[tm.Region("f")], comms={0: list(range(len(events)))}, events=events)


@pytest.mark.parametrize("seed", range(40))
def test_light_queries_equal_match_regions(seed):
    flat = matching.flatten(random_trace(seed))
    nest = matching.match_regions(flat)
    depth = matching.depth_after(flat)
    kind = flat.ev["kind"]
    enters = np.flatnonzero(kind == tm.ENTER)
    others = np.flatnonzero((kind != tm.ENTER) & (kind != tm.EXIT))
    assert np.array_equal(matching.exit_of(flat, depth, enters), nest.partner[enters])
    assert np.array_equal(matching.owner_of(flat, depth, others), nest.owner[others])


def test_the_random_nestings_are_not_trivial():
    open_at_end = outside = long_calls = 0
    for seed in range(40):
        flat = matching.flatten(random_trace(seed))
        nest = matching.match_regions(flat)
        enters = np.flatnonzero(flat.ev["kind"] == tm.ENTER)
        open_at_end += int(np.sum(nest.partner[enters] < 0))
        long_calls += int(np.sum(nest.partner[enters] - enters > 64))
        outside += int(np.sum((flat.ev["kind"] == tm.COLL_END) & (nest.owner < 0)))
    assert open_at_end > 10 and outside > 10 and long_calls > 10


def test_depth_refuses_a_stray_exit_like_match_regions():
    ev = tm.make_events(3)
    ev["kind"] = [tm.ENTER, tm.EXIT, tm.EXIT]
    ev["region"] = 0
    flat = matching.flatten(tm.Trace(regions=[tm.Region("f")], comms={0: [0, 1]}, events=[tm.make_events(0), ev]))
    with pytest.raises(UserError, match="rank 1: EXIT without a matching ENTER at event 2"):
        matching.depth_after(flat)
