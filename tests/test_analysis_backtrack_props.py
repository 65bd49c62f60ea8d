"""Property tests: backtracking terminates on any PSG and any dependence rows, never enters a
(vertex, rank) twice, and every step follows an edge of the PPG."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalgraph.analysis import synthetic as syn
from scalgraph.analysis.backtrack import backtrack
from scalgraph.analysis.ppg import build_ppg
from scalgraph.model.profile import DEP_COLL, DEP_RECV, DEP_SEND, empty_profile
from scalgraph.model.psg import KINDS

KIND_CHOICES = ["LOOP", "BRANCH", "CALL", "MPI", "COMP", "MPI"]


@st.composite
def programs(draw):
    n = draw(st.integers(2, 25))
    parents = [draw(st.integers(0, i - 1)) for i in range(1, n)]
    kinds = ["FUNCTION"] + [draw(st.sampled_from(KIND_CHOICES)) for _ in range(1, n)]
    nodes = [[k, f"v{i}", i + 1, []] for i, k in enumerate(kinds)]
    for i, par in enumerate(parents, start=1):
        nodes[par][3].append(nodes[i])
    freeze = lambda node: (node[0], node[1], node[2], [freeze(c) for c in node[3]])  # noqa: E731
    psg = syn.psg_from_tree(freeze(nodes[0]))
    nranks = draw(st.integers(1, 4))
    mpi = [v for v in range(len(psg)) if KINDS[psg.kind[v]] == "MPI"]
    rows = []
    for _ in range(draw(st.integers(0, 30)) if mpi else 0):
        kind = draw(st.sampled_from([DEP_SEND, DEP_RECV, DEP_COLL]))
        rows.append((draw(st.integers(0, nranks - 1)), draw(st.sampled_from(mpi)), kind,
                     -1 if kind == DEP_COLL else draw(st.integers(-1, nranks - 1)), draw(st.integers(0, 2)),
                     0, draw(st.integers(1, 5)), 8, draw(st.sampled_from([0.0, 0.1, 0.5]))))
    prof = empty_profile(nranks, len(psg), psg.hash())
    prof.deps = syn._deps(rows)
    prof.comm_members = {0: list(range(nranks))}
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    prof.wait[:] = rng.uniform(0, 1, prof.wait.shape)
    return psg, prof


@settings(max_examples=200, deadline=None)
@given(programs(), st.booleans())
def test_backtracking_terminates_without_repeats_along_real_edges(program, with_rank_wait):
    psg, prof = program
    ppg = build_ppg(psg, prof)
    rank_wait = prof.wait.sum(axis=1) if with_rank_wait else None
    for r in range(prof.nranks):
        for v in range(len(psg)):
            steps = backtrack(ppg, v, r, rank_wait)
            pairs = [(s.vertex, s.rank) for s in steps]
            assert len(pairs) == len(set(pairs)) and pairs[0] == (v, r)
            for i, (prev, s) in enumerate(zip(steps, steps[1:])):
                if s.via == "comm":
                    assert (s.vertex, s.rank) in [(e[0], e[1]) for e in ppg.comm_edges(prev.vertex, prev.rank)]
                elif s.via == "collective":
                    assert (s.vertex, s.rank) in ppg.collective_partners(prev.vertex, prev.rank)
                elif s.via == "control":
                    assert s.rank == prev.rank and s.vertex == ppg.control_dep[prev.vertex]
                else:
                    # the data edge, possibly through loops already entered on this path (passed again
                    # on the way out, without a new step)
                    assert s.rank == prev.rank
                    x = int(ppg.data_dep[prev.vertex])
                    while x != s.vertex and (x, s.rank) in pairs[:i + 1]:
                        x = int(ppg.data_dep[x])
                    assert x == s.vertex
