"""The static pass's own dominator computation (scalgraph/static/cfg.py) against networkx's, the
library it replaced for start-up speed: the dominator tree is unique, so both must agree exactly."""
from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from scalgraph.static.cfg import immediate_dominators


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 40))
    succs = [sorted(set(draw(st.lists(st.integers(0, n - 1), max_size=3)))) for _ in range(n)]
    return succs


def reference(succs: list[list[int]], start: int) -> dict[int, int]:
    g = nx.DiGraph()
    g.add_nodes_from(range(len(succs)))
    g.add_edges_from((u, v) for u, ss in enumerate(succs) for v in ss)
    idom = nx.immediate_dominators(g, start)
    idom.pop(start, None)              # networkx versions differ on whether the start is listed
    return idom


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_same_dominator_tree_as_networkx(succs):
    assert immediate_dominators(succs, 0) == reference(succs, 0)


def test_loop_with_two_exits_and_an_unreachable_block():
    # 0 -> 1 -> 2 -> 1 (loop), 2 -> 3, 1 -> 3, 4 unreachable
    succs = [[1], [2, 3], [1, 3], [], [3]]
    assert immediate_dominators(succs, 0) == {1: 0, 2: 1, 3: 1}


def test_deep_chain_needs_no_recursion():
    n = 20_000
    succs = [[i + 1] for i in range(n - 1)] + [[]]
    idom = immediate_dominators(succs, 0)
    assert len(idom) == n - 1 and idom[n - 1] == n - 2
