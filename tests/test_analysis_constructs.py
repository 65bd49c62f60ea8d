"""Construct ids depend on the PSG given and nothing else: no state kept between calls (the loop-nest
spans were once cached in a module-level dict keyed by id(psg), which kept the last PSG alive)."""
from __future__ import annotations

import gc
import weakref

from scalgraph.analysis import synthetic as syn
from scalgraph.analysis.constructs import constructs, nest_key, nest_spans


def _nest(body_line: int):
    """A loop at line 19 (to 24) whose body vertex is at `body_line` (to `body_line` + 1)."""
    psg = syn.psg_from_tree(("FUNCTION", "main", 1, [("LOOP", "loop", 19, [("COMP", "comp", body_line)]),
                                                     ("COMP", "comp", 70)]), "nest.c")
    psg.line_last[syn.vertex_at(psg, 19)] = 24
    psg.line_last[syn.vertex_at(psg, body_line)] = body_line + 1
    return psg


def _merged(psg, body_line: int) -> bool:
    cid = constructs(psg).cid
    return cid[syn.vertex_at(psg, 19)] == cid[syn.vertex_at(psg, body_line)]


def test_construct_ids_come_from_the_psg_given_alone():
    merged, apart = _nest(20), _nest(22)       # body on the loop's next line: one construct; further down: two
    for _ in range(2):                          # alternately, each its own answer
        assert _merged(merged, 20) and not _merged(apart, 22)
    spans = nest_spans(apart)
    assert all(nest_key(apart, v, spans) == nest_key(apart, v) for v in range(len(apart)))


def test_constructs_keep_no_reference_to_the_psg():
    psg = _nest(20)
    constructs(psg)
    gone = weakref.ref(psg)
    del psg
    gc.collect()
    assert gone() is None
