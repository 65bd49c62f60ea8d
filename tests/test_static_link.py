"""link_psg on literal parts (no compiler): context-sensitive expansion, mutual recursion, calls the
link step merges, pointer-only functions, the loop depth counted through calls, the tables."""
from __future__ import annotations

import re

import pytest

from scalgraph.errors import UserError
from scalgraph.model.psg import KINDS
from scalgraph.static.link import link_psg


def fn(name, vertices, *, instrumented=True):
    """A part function from (kind, parent, depth, callee, line) rows."""
    verts = [{"kind": k, "name": callee or k.lower(), "parent": p, "depth": d, "callee": callee,
              "file": "/src/app.c", "first": line, "last": line} for k, p, d, callee, line in vertices]
    counts = {k: sum(v["kind"] == k for v in verts) for k in KINDS}
    return {"key": name, "name": name, "display": name, "internal": False, "file": "/src/app.c",
            "line": vertices[0][4], "fid_symbol": f"__sg_fid_g_{name}", "vertices": verts,
            "full_counts": counts, "full_calls": [v["callee"] for v in verts if v["kind"] == "CALL"],
            "instrumented": instrumented}


def part(*functions):
    return {"format": "scalgraph-psg-part", "version": 1, "source": "app.c", "modhash": "m",
            "max_loop_depth": 10, "functions": list(functions)}


MAIN = fn("main", [("FUNCTION", -1, 0, None, 1), ("LOOP", 0, 1, None, 2), ("CALL", 1, 1, "ping", 3),
                   ("CALL", 0, 0, "ping", 5), ("CALL", 0, 0, "tiny", 6), ("CALL", 0, 0, "extern_lib", 7)])
PING = fn("ping", [("FUNCTION", -1, 0, None, 10), ("MPI", 0, 0, None, 11), ("CALL", 0, 0, "pong", 12)])
PONG = fn("pong", [("FUNCTION", -1, 0, None, 20), ("BRANCH", 0, 0, None, 21), ("CALL", 1, 0, "ping", 22),
                   ("COMP", 0, 0, None, 23)])
TINY = fn("tiny", [("FUNCTION", -1, 0, None, 30), ("COMP", 0, 0, None, 31), ("CALL", 0, 0, "helper", 32)])
HELPER = fn("helper", [("FUNCTION", -1, 0, None, 40), ("COMP", 0, 0, None, 41)])
DEEP = fn("deep", [("FUNCTION", -1, 0, None, 50), ("LOOP", 0, 1, None, 51), ("COMP", 1, 1, None, 52)])
HANDLER = fn("handler", [("FUNCTION", -1, 0, None, 60), ("MPI", 0, 0, None, 61)])


def build(max_loop_depth=10):
    return link_psg([part(MAIN, PING, PONG), part(TINY, HELPER, DEEP, HANDLER)], max_loop_depth=max_loop_depth)


def test_context_sensitive_instances_and_mutual_recursion():
    psg, _ = build()
    calls = [v for v in range(len(psg)) if psg.kind_name(v) == "CALL"]
    from_main = [v for v in calls if psg.name[v] == "ping" and psg.function[v] == "main"]
    # ping is expanded at both call sites of main (in the loop and after it) ...
    assert [psg.kind_name(psg.parent[v]) for v in from_main] == ["LOOP", "FUNCTION"]
    assert len({psg.instance[psg.children[v][0]] for v in from_main}) == 2
    # ... and pong -> ping closes the cycle back to the call that entered ping, no third copy
    back = [v for v in calls if psg.name[v] == "ping" and psg.function[v] == "pong"]
    assert [psg.recursion_target[v] for v in back] == from_main
    assert all(psg.children[v] == [] for v in back)
    assert len([v for v in range(len(psg)) if psg.kind_name(v) == "FUNCTION" and psg.name[v] == "ping"]) == 2
    assert psg.loop_depth[psg.children[from_main[0]][0]] == 1


def test_merged_calls_and_pointer_only_functions():
    psg, tables = build()
    names = [psg.name[c] for c in psg.children[0]]
    # tiny (only computation) and the unknown library call fold into one COMP after the ping call;
    # deep (a loop) and handler (MPI) are reachable only through pointers: default instances
    assert names == ["loop", "ping", "comp", "deep", "handler"]
    comp = psg.children[0][2]
    assert (psg.line_first[comp], psg.line_last[comp]) == (6, 7)
    tiny = psg.functions.index("tiny")
    inst = psg.func_default_inst[tiny]
    assert psg.inst_func[inst] == tiny and set(psg.inst_vid[inst]) == {comp}   # merged where it is called
    helper = psg.functions.index("helper")                  # and what tiny calls, too
    assert set(psg.inst_vid[psg.func_default_inst[helper]]) == {comp}
    assert psg.meta["default_instances"] == ["deep", "handler"]
    # tables: every fid slot, one base per instance, inst_callee of main's loop call = ping's instance
    assert all(f"&__sg_fid_g_{n}" in tables for n in psg.functions)
    base = [int(x) for x in re.search(r"sg_inst_base\[\] = \{\s*([^}]*)\}", tables).group(1).split(",")]
    assert len(base) == len(psg.inst_func)
    callee = [int(x) for x in re.search(r"sg_inst_callee\[\] = \{\s*([^}]*)\}", tables).group(1).split(",")]
    loop_call = psg.children[psg.children[0][0]][0]
    assert callee[base[0] + psg.local[loop_call]] == psg.instance[psg.children[loop_call][0]]


def test_loop_depth_counts_through_calls():
    deep_in_loop = fn("main", [("FUNCTION", -1, 0, None, 1), ("LOOP", 0, 1, None, 2), ("CALL", 1, 1, "deep", 3)])
    psg, _ = link_psg([part(deep_in_loop, DEEP)], max_loop_depth=1)
    # deep's loop would be at depth 2: the call folds into the loop's COMP
    assert [psg.kind_name(v) for v in range(len(psg))] == ["FUNCTION", "LOOP", "COMP"]
    psg2, _ = link_psg([part(deep_in_loop, DEEP)], max_loop_depth=2)
    assert [psg2.loop_depth[v] for v in range(len(psg2)) if psg2.kind_name(v) == "LOOP"] == [1, 2]


def test_counts_before_and_after():
    psg, _ = build()
    before, after = psg.meta["counts_before"], psg.meta["counts_after"]
    assert sum(after.values()) == len(psg)
    assert before["CALL"] > after["CALL"] and before["FUNCTION"] >= after["FUNCTION"]


def test_deep_call_chain():
    """A call chain deeper than Python's recursion limit links (the walks use no recursion)."""
    n = 1500
    chain = [fn(f"f{i}", [("FUNCTION", -1, 0, None, i), ("MPI", 0, 0, None, i)]
                + ([("CALL", 0, 0, f"f{i + 1}", i)] if i + 1 < n else [])) for i in range(n)]
    main_fn = fn("main", [("FUNCTION", -1, 0, None, 1), ("CALL", 0, 0, "f0", 2)])
    psg, _ = link_psg([part(main_fn, *chain)])
    assert len(psg) == 2 + 3 * n - 1
    deepest = len(psg) - 1
    depth, v = 0, deepest
    while psg.parent[v] >= 0:
        v, depth = psg.parent[v], depth + 1
    assert psg.name[deepest] == "mpi" and depth == 2 * n + 1
    assert psg.meta["counts_before"]["MPI"] == n


def test_foreign_or_damaged_parts_are_one_line_errors():
    for bad in ({"format": "other"}, {**part(MAIN), "version": 99},
                {**part(MAIN), "functions": [{"key": "main"}]}):
        with pytest.raises(UserError) as e:
            link_psg([bad])
        assert "\n" not in str(e.value) and "sgcc" in str(e.value)


def test_the_json_text_is_the_embedded_psg():
    """link_psg_json's text (the driver writes it to <exe>.psg.json) is the PSG the tables embed,
    whose hash they register, serialised once for both."""
    import json

    from scalgraph.model.psg import psg_from_dict
    from scalgraph.static.link import _c_string, link_psg_json
    psg, source, text = link_psg_json([part(MAIN, PING, PONG), part(TINY, HELPER, DEEP, HANDLER)])
    assert psg_from_dict(json.loads(text)).to_dict() == psg.to_dict()
    assert _c_string(text) in source
    assert f'sg_psg_hash[] = "{psg.hash()}";' in source
    assert source == build()[1]
