"""The paper's Figure 3 program (samples/fig3/fig3.c): its PSG has Figure 4(b)'s structure, and
with MaxLoopDepth=1 Figure 4(c)'s; the probes compiled into it point at the right vertices when it
runs; the same source gives the same graph."""
from __future__ import annotations

import json
import subprocess

import pytest
from test_static_support import MPI_INCLUDE, SAMPLES, VENV_BIN, ZIG, build_psg, line_of, need_clang, shape

from conftest import require_tool

FIG3 = SAMPLES / "fig3" / "fig3.c"

# Figure 4 draws main{Loop1{...}, foo{Branch{MPI_Send, MPI_Recv}}, MPI_Bcast}; the runnable sample
# also has MPI_Init/Comm_rank/Comm_size/Finalize and a printf under `if (myRank == 0)`.
FOO = ("CALL", "foo", [("FUNCTION", "foo", [("COMP", "comp", []),
                                            ("BRANCH", "branch", [("MPI", "MPI_Send", []),
                                                                  ("MPI", "MPI_Recv", [])])])])
HEAD = [("MPI", "MPI_Init", []), ("MPI", "MPI_Comm_rank", []), ("MPI", "MPI_Comm_size", [])]
TAIL = [FOO, ("MPI", "MPI_Bcast", []), ("COMP", "comp", []), ("MPI", "MPI_Finalize", [])]
LOOP1_FULL = ("LOOP", "loop", [("COMP", "comp", []),
                               ("LOOP", "loop", [("COMP", "comp", [])]),      # Loop 1.1
                               ("LOOP", "loop", [("COMP", "comp", [])])])     # Loop 1.2
LOOP1_DEPTH1 = ("LOOP", "loop", [("COMP", "comp", [])])                     # 1.1 and 1.2 merged


@pytest.fixture(scope="module")
def fig3_full(tmp_path_factory):
    need_clang()
    return build_psg([FIG3], tmp_path_factory.mktemp("fig3full"), max_loop_depth=10)


def test_figure_4b_structure(fig3_full):
    psg = fig3_full[0]
    assert shape(psg) == ("FUNCTION", "main", HEAD + [LOOP1_FULL] + TAIL)
    # no loop, branch or call vertex beyond the figure's
    assert sorted(psg.kind_name(v) for v in range(len(psg)) if psg.kind_name(v) in ("LOOP", "BRANCH", "CALL")) \
        == ["BRANCH", "CALL", "LOOP", "LOOP", "LOOP"]


def test_figure_4c_structure_with_max_loop_depth_1(tmp_path):
    need_clang()
    psg = build_psg([FIG3], tmp_path, max_loop_depth=1)[0]
    assert shape(psg) == ("FUNCTION", "main", HEAD + [LOOP1_DEPTH1] + TAIL)
    loop1 = psg.children[0][3]
    comp = psg.children[loop1][0]
    # the merged COMP covers the inner loops' lines
    assert psg.line_last[comp] >= line_of(FIG3, "Loop 1.2") + 1
    assert psg.meta["max_loop_depth"] == 1
    assert psg.meta["counts_after"]["LOOP"] == 1 and psg.meta["counts_before"]["LOOP"] == 3


def test_fig3_lines_and_nesting(fig3_full):
    psg = fig3_full[0]
    by_name = {psg.name[v]: v for v in range(len(psg)) if psg.kind_name(v) == "MPI"}
    for name in ("MPI_Send", "MPI_Recv", "MPI_Bcast", "MPI_Init"):
        v = by_name[name]
        assert psg.file[v].endswith("samples/fig3/fig3.c")
        assert psg.line_first[v] == line_of(FIG3, name + "(")
    loops = [v for v in range(len(psg)) if psg.kind_name(v) == "LOOP"]
    assert [psg.line_first[v] for v in loops] == [line_of(FIG3, "Loop 1 "), line_of(FIG3, "Loop 1.1"),
                                                  line_of(FIG3, "Loop 1.2")]
    assert [psg.loop_depth[v] for v in loops] == [1, 2, 2]
    send = by_name["MPI_Send"]
    branch = psg.parent[send]
    assert psg.kind_name(branch) == "BRANCH" and psg.function[branch] == "foo"
    assert psg.line_first[branch] == line_of(FIG3, "if (myRank % 2 == 0)")
    # Table II columns: before >= after for every kind, totals consistent
    before, after = psg.meta["counts_before"], psg.meta["counts_after"]
    assert sum(after.values()) == len(psg) == psg.meta["vertices_after"]
    assert all(before[k] >= after[k] for k in after)
    assert before["BRANCH"] > after["BRANCH"]          # the printf branch and the ternary went


def test_instance_tables_are_dense_preorder(fig3_full):
    psg = fig3_full[0]
    n = len(psg)
    assert psg.parent[0] == -1
    order, stack = [], [0]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(psg.children[v]))
    assert order == list(range(n))                      # ids are the pre-order
    for inst, vids in enumerate(psg.inst_vid):
        assert all(0 <= v < n for v in vids)
        assert psg.instance[vids[0]] == inst and psg.local[vids[0]] == 0
    assert psg.functions == ["main", "foo"]
    assert [psg.inst_func[i] for i in psg.func_default_inst] == [0, 1]


def test_same_source_same_graph(tmp_path, fig3_full):
    again = build_psg([FIG3], tmp_path, max_loop_depth=10)
    assert again[0].to_dict() == fig3_full[0].to_dict()
    assert again[0].hash() == fig3_full[0].hash()
    assert again[1] == fig3_full[1]                     # tables C source too


# A minimal shim that resolves the probes exactly as docs/runtime-abi.md says and records, at each
# wrapped MPI call, the vertex the probes point at (the real shim lives in instrument/).
PROBE_SHIM = r"""
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
struct sg_psg_tables {
    const char *psg_hash; uint32_t nvertices, nfunctions, ninstances;
    const uint32_t *inst_base; const uint32_t *inst_func; const uint32_t *inst_vid;
    const int32_t *inst_callee; const uint32_t *func_default_inst;
    uint32_t * const *fid_slots; const uint8_t *vertex_kind;
};
__thread uint32_t sg_cur;
static const struct sg_psg_tables *T;
static int cur = -1, sp, stack_c[100000];
static uint32_t stack_k[100000];
void sg_register_psg(const struct sg_psg_tables *t) {
    T = t;
    for (uint32_t i = 0; i < t->nfunctions; i++) if (t->fid_slots[i]) *t->fid_slots[i] = i;
}
void sg_fn_enter(uint32_t fid) {
    int c = cur, cand = -1; uint32_t k = sg_cur;
    if (T && fid != 0xFFFFFFFFu) {
        if (c >= 0) cand = T->inst_callee[T->inst_base[c] + k];
        if (!(cand >= 0 && T->inst_func[cand] == fid)) cand = (int)T->func_default_inst[fid];
    }
    stack_c[sp] = c; stack_k[sp] = k; sp++; cur = cand; sg_cur = 0;
}
void sg_fn_exit(void) { sp--; cur = stack_c[sp]; sg_cur = stack_k[sp]; }
static FILE *out;
static void rec(const char *name) {
    if (!out) {
        char fn[1024]; int r; PMPI_Comm_rank(MPI_COMM_WORLD, &r);
        snprintf(fn, sizeof fn, "%s.%d", getenv("SG_TEST_OUT"), r); out = fopen(fn, "w");
    }
    fprintf(out, "%s %d %d\n", name, cur < 0 ? -1 : (int)T->inst_vid[T->inst_base[cur] + sg_cur], sp);
    fflush(out);
}
int MPI_Send(const void *b, int c, MPI_Datatype d, int p, int t, MPI_Comm m) { rec("MPI_Send"); return PMPI_Send(b, c, d, p, t, m); }
int MPI_Recv(void *b, int c, MPI_Datatype d, int p, int t, MPI_Comm m, MPI_Status *s) { rec("MPI_Recv"); return PMPI_Recv(b, c, d, p, t, m, s); }
int MPI_Bcast(void *b, int c, MPI_Datatype d, int r, MPI_Comm m) { rec("MPI_Bcast"); return PMPI_Bcast(b, c, d, r, m); }
int MPI_Allreduce(const void *s, void *r, int c, MPI_Datatype d, MPI_Op o, MPI_Comm m) { rec("MPI_Allreduce"); return PMPI_Allreduce(s, r, c, d, o, m); }
int MPI_Barrier(MPI_Comm m) { rec("MPI_Barrier"); return PMPI_Barrier(m); }
"""


def run_with_probe_shim(psg, tables: str, objs: list[str], tmp, nranks: int = 2) -> list[list[tuple[str, int, int]]]:
    """Link the instrumented objects with the tables and the probe shim, run, return per-rank records."""
    mpiexec = VENV_BIN / "mpiexec"
    require_tool(mpiexec.exists(), "mpiexec (PyPI mpich) in the venv")
    (tmp / "tables.c").write_text(tables)
    (tmp / "shim.c").write_text(PROBE_SHIM)
    exe = tmp / "app"
    lib = MPI_INCLUDE.parent / "lib"
    cxx = any(o.endswith((".cpp.o", ".cc.o")) for o in objs)
    subprocess.run([str(ZIG), "c++" if cxx else "cc", f"-I{MPI_INCLUDE}", *objs, str(tmp / "tables.c"),
                    str(tmp / "shim.c"), f"-L{lib}", "-lmpi", f"-Wl,-rpath,{lib}", "-o", str(exe)],
                   check=True, capture_output=True)
    env = {"SG_TEST_OUT": str(tmp / "rec"), "PATH": str(VENV_BIN)}
    subprocess.run([str(mpiexec), "-n", str(nranks), str(exe)], check=True, capture_output=True,
                   timeout=120, env={**__import__("os").environ, **env})
    out = []
    for r in range(nranks):
        rows = (tmp / f"rec.{r}").read_text().split()
        out.append([(rows[i], int(rows[i + 1]), int(rows[i + 2])) for i in range(0, len(rows), 3)])
    return out


def test_probes_attribute_mpi_calls_to_their_vertices(tmp_path):
    need_clang()
    psg, tables, objs = build_psg([FIG3], tmp_path, max_loop_depth=10)
    recs = run_with_probe_shim(psg, tables, objs, tmp_path)
    for rank_recs in recs:
        assert rank_recs, "no MPI call was recorded"
        for name, vid, _depth in rank_recs:
            assert psg.kind_name(vid) == "MPI" and psg.name[vid] == name
    assert [r[0] for r in recs[0]] == ["MPI_Send", "MPI_Bcast"]
    assert [r[0] for r in recs[1]] == ["MPI_Recv", "MPI_Bcast"]
    # inside foo the shim stack holds main's and foo's frames
    assert recs[0][0][2] == 2 and recs[0][1][2] == 1


def test_part_embedded_in_object_and_full_psg_in_tables(fig3_full):
    from scalgraph.static import read_parts_from_files
    psg, tables, objs = fig3_full
    parts = read_parts_from_files(objs)
    assert [f["name"] for p in parts for f in p["functions"]] == ["main", "foo"]
    assert ".scalgraph.psgfull" in tables and psg.hash() in tables
    assert json.loads(json.dumps(psg.to_dict()))["hash"] == psg.hash()


def test_optimised_build_keeps_execution_order(tmp_path):
    """At -O2 clang lays blocks out out of source order and inlines foo; vertices still follow
    execution order (reverse post-order of the CFG) and every MPI call keeps its line."""
    need_clang()
    psg = build_psg([FIG3], tmp_path, opt="-O2")[0]
    top = [psg.name[c] for c in psg.children[0]]
    assert top.index("loop") < top.index("MPI_Bcast") < top.index("MPI_Finalize")
    # the vectoriser's copies of Loop 1.1 / 1.2 (vector body + remainder) are one vertex each
    loops = [v for v in range(len(psg)) if psg.kind_name(v) == "LOOP"]
    assert [psg.loop_depth[v] for v in loops] == [1, 2, 2]
    for name in ("MPI_Send", "MPI_Recv", "MPI_Bcast"):
        lines = {psg.line_first[v] for v in range(len(psg)) if psg.name[v] == name}
        assert lines == {line_of(FIG3, name + "(")}
    # ranges stay at their own inlining level: main's vertices span main's lines, the branch
    # inlined from foo spans foo's lines
    main_lines = range(line_of(FIG3, "int main("), line_of(FIG3, "void foo(void) {"))
    foo_lines = range(line_of(FIG3, "void foo(void) {"), line_of(FIG3, "MPI_Recv(") + 2)
    assert psg.line_first[0] in main_lines and psg.line_last[0] in main_lines
    for v in loops:
        assert psg.line_first[v] in main_lines and psg.line_last[v] in main_lines
    send = next(v for v in range(len(psg)) if psg.name[v] == "MPI_Send")
    branch = psg.parent[send]
    assert psg.line_first[branch] in foo_lines and psg.line_last[branch] in foo_lines
    # inlined code says where it comes from
    assert psg.function[branch] == psg.function[send] == "foo" and psg.function[psg.parent[branch]] == "main"
