"""PSG of the C, C++ and Fortran samples in samples/psgcases: vertex kinds, nesting, recursion,
indirect calls, calls across translation units, and the file:line of every MPI call."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from test_static_fig3 import run_with_probe_shim
from test_static_support import SAMPLES, build_psg, find, kinds_of_children, line_of, need_clang, need_flang

from conftest import require_tool

CASES = SAMPLES / "psgcases"


def assert_mpi_lines(psg, source):
    """Every MPI vertex sits on a line of `source` that calls that routine, and every MPI call in
    the source has a vertex."""
    text = source.read_text().splitlines()
    seen = set()
    for v in find(psg, "MPI"):
        assert psg.file[v].endswith(str(source.relative_to(SAMPLES.parent))), psg.file[v]
        line = text[psg.line_first[v] - 1].lower()
        assert psg.name[v].lower() + "(" in line or psg.name[v].lower() + " (" in line, (psg.name[v], line)
        seen.add(psg.line_first[v])
    calls = {i + 1 for i, t in enumerate(text) if "mpi_" in t.lower() and "(" in t
             and not t.strip().startswith(("!", "//", "/*", "*", "include", "#"))
             and "mpi_type" not in t.lower() and "MPI_Datatype" not in t}
    assert calls <= seen, f"MPI calls without a vertex at lines {sorted(calls - seen)}"


@pytest.fixture(scope="module")
def c_cases(tmp_path_factory):
    need_clang()
    return build_psg([CASES / "cases.c"], tmp_path_factory.mktemp("cases_c"))


def test_c_structure(c_cases):
    psg = c_cases[0]
    src = CASES / "cases.c"
    assert psg.name[0] == "main"
    (loop,) = [c for c in psg.children[0] if psg.kind_name(c) == "LOOP"]
    assert psg.line_first[loop] == line_of(src, "for (int step")
    assert kinds_of_children(psg, loop) == ["CALL", "BRANCH", "COMP", "INDIRECT"]
    call_smooth, branch, _, indirect = psg.children[loop]
    # the 3-deep loop nest of smooth(), expanded at its call site: global depths 2, 3, 4
    fn = psg.children[call_smooth][0]
    assert psg.kind_name(fn) == "FUNCTION" and psg.name[fn] == "smooth"
    depths, v = [], fn
    while psg.children[v] and psg.kind_name(psg.children[v][0]) == "LOOP":
        v = psg.children[v][0]
        depths.append(psg.loop_depth[v])
    assert depths == [2, 3, 4]
    # if (rank % 2 == 0) { if (...) MPI_Send } else MPI_Recv
    assert psg.line_first[branch] == line_of(src, "if (rank % 2 == 0)")
    names = [psg.name[c] for c in psg.children[branch]]
    assert names[-1] == "MPI_Recv" and "branch" in names
    inner = psg.children[branch][names.index("branch")]
    assert [psg.name[c] for c in psg.children[inner]] == ["MPI_Send"]
    assert psg.line_first[indirect] == line_of(src, "ops[step % 2](&v)")
    assert_mpi_lines(psg, src)


def test_c_recursion_is_a_cycle_to_the_enclosing_call(c_cases):
    psg = c_cases[0]
    outer, inner = find(psg, "CALL", "tree_sum")
    assert psg.parent[outer] == 0
    assert psg.recursion_target[inner] == outer
    assert psg.recursion_target[outer] == -1
    assert psg.children[inner] == []                    # not expanded again
    assert len(find(psg, "FUNCTION", "tree_sum")) == 1


def test_c_pointer_targets_get_default_instances(c_cases):
    psg = c_cases[0]
    top = {psg.name[c]: c for c in psg.children[0] if psg.kind_name(c) == "FUNCTION"}
    assert set(top) == {"op_reduce", "op_local"}
    assert kinds_of_children(psg, top["op_reduce"]) == ["MPI"]
    assert kinds_of_children(psg, top["op_local"]) == ["LOOP"]
    # scale() has no loop and no MPI: it is merged, never a vertex
    assert not find(psg, "FUNCTION", "scale") and not find(psg, "CALL", "scale")
    assert "op_local" in psg.meta["default_instances"]


def test_c_max_loop_depth_folds_calls_and_loops(tmp_path):
    need_clang()
    psg = build_psg([CASES / "cases.c"], tmp_path, max_loop_depth=1)[0]
    (loop,) = [c for c in psg.children[0] if psg.kind_name(c) == "LOOP"]
    # smooth()'s loops would be at depth 2..4: the call is merged into a COMP
    assert kinds_of_children(psg, loop)[0] == "COMP"
    assert not find(psg, "CALL", "smooth")
    assert max(psg.loop_depth[v] for v in find(psg, "LOOP")) == 1
    assert len(find(psg, "MPI")) == 9                   # every MPI call kept


def test_c_probes_at_runtime(c_cases, tmp_path):
    psg, tables, objs = c_cases
    recs = run_with_probe_shim(psg, tables, objs, tmp_path)
    for rank_recs in recs:
        for name, vid, _ in rank_recs:
            assert psg.kind_name(vid) == "MPI" and psg.name[vid] == name, (name, vid)
        funcs = [psg.function[vid] for name, vid, _ in rank_recs if name == "MPI_Allreduce"]
        assert funcs.count("op_reduce") == 2 and funcs.count("tree_sum") == 1
        depth = [d for name, vid, d in rank_recs if psg.function[vid] == "tree_sum"]
        assert depth == [4]                             # main, tree_sum x3 (recursion folds)


def test_calls_across_translation_units(tmp_path):
    need_clang()
    psg, tables, objs = build_psg([CASES / "multi_main.c", CASES / "multi_lib.c"], tmp_path)
    (loop,) = find(psg, "LOOP")
    assert kinds_of_children(psg, loop) == ["COMP", "CALL", "COMP"]
    call = psg.children[loop][1]
    assert psg.name[call] == "exchange"
    fn = psg.children[call][0]
    assert psg.file[fn].endswith("multi_lib.c")
    assert not find(psg, "CALL", "helper")           # kept by the compile step, merged at link
    (mpi,) = find(psg, "MPI", "MPI_Allreduce")
    assert psg.line_first[mpi] == line_of(CASES / "multi_lib.c", "MPI_Allreduce(")
    recs = run_with_probe_shim(psg, tables, objs, tmp_path)
    assert [(n, v) for n, v, _ in recs[0]] == [("MPI_Allreduce", mpi)] * 3


def test_cpp_virtual_functions_and_templates(tmp_path):
    need_clang()
    src = CASES / "cases.cpp"
    psg, tables, objs = build_psg([src], tmp_path)
    (loop,) = [c for c in psg.children[0] if psg.kind_name(c) == "LOOP"]
    assert "INDIRECT" in kinds_of_children(psg, loop)              # solvers[i]->step(x)
    top = {psg.name[c] for c in psg.children[0] if psg.kind_name(c) == "FUNCTION"}
    assert {"LocalSolver::step", "GlobalSolver::step"} <= top
    calls = [psg.name[c] for c in psg.children[0] if psg.kind_name(c) == "CALL"]
    assert calls == ["ring_sum<double>", "ring_sum<int>", "depth_barrier"]   # one instance per instantiation
    outer, inner = find(psg, "CALL", "depth_barrier")
    assert psg.recursion_target[inner] == outer
    for v in find(psg, "MPI", "MPI_Sendrecv"):
        assert psg.kind_name(psg.parent[v]) == "LOOP" and psg.loop_depth[v] == 1
    assert_mpi_lines(psg, src)
    recs = run_with_probe_shim(psg, tables, objs, tmp_path)
    for name, vid, _ in recs[0]:
        assert psg.name[vid] == name
    assert [psg.function[v] for n, v, _ in recs[0] if n == "MPI_Allreduce"] == ["GlobalSolver::step"] * 2
    assert [d for n, v, d in recs[0] if n == "MPI_Barrier"] == [4]     # main + depth_barrier x3


def test_fortran_program(tmp_path):
    need_clang()
    need_flang()
    src = CASES / "cases.f90"
    psg = build_psg([src], tmp_path)[0]
    assert psg.name[0] == psg.function[0] == "cases" and psg.functions[0] == "_QQmain"
    (loop,) = [c for c in psg.children[0] if psg.kind_name(c) == "LOOP"]
    assert psg.line_first[loop] == line_of(src, "do i = 1, 10")
    kids = kinds_of_children(psg, loop)
    assert kids[0] == "LOOP" and "BRANCH" in kids
    branch = psg.children[loop][kids.index("BRANCH")]
    (call,) = psg.children[branch]
    assert psg.name[call] == "reduce_all"
    assert [psg.name[c] for c in psg.children[psg.children[call][0]] if psg.kind_name(c) == "MPI"] \
        == ["MPI_Allreduce"]
    outer, inner = find(psg, "CALL", "countdown")
    assert psg.recursion_target[inner] == outer
    (indirect,) = find(psg, "INDIRECT")                 # call op(s) through a procedure pointer
    assert psg.parent[indirect] == 0 and psg.line_first[indirect] == line_of(src, "call op(s)")
    halve = [c for c in psg.children[0] if psg.name[c] == "halve"]
    assert halve and kinds_of_children(psg, halve[0]) == ["LOOP"]   # pointer target: default instance
    assert_mpi_lines(psg, src)


def test_optimised_build_keeps_every_mpi_call(tmp_path):
    need_clang()
    src = CASES / "cases.c"
    psg = build_psg([src], tmp_path, opt="-O2")[0]
    assert_mpi_lines(psg, src)
    assert find(psg, "INDIRECT")


def test_parts_read_from_a_static_archive(tmp_path):
    """The link step finds the parts of objects inside .a archives (GNU ar, long member names)."""
    need_clang()
    from scalgraph.static import link_psg, read_parts_from_files
    ar = shutil.which("ar")
    require_tool(ar is not None, "ar (binutils)")
    _psg, _tables, objs = build_psg([CASES / "multi_main.c", CASES / "multi_lib.c"], tmp_path)
    member = tmp_path / "a_rather_long_member_name_for_the_gnu_table.o"
    shutil.copy(objs[1], member)
    lib = tmp_path / "libx.a"
    subprocess.run([ar, "rcs", str(lib), str(member)], check=True)
    parts = read_parts_from_files([objs[0], str(lib)])
    assert [f["name"] for p in parts for f in p["functions"]] == ["main", "helper", "exchange"]
    psg, _ = link_psg(parts)
    assert find(psg, "CALL", "exchange") and find(psg, "MPI", "MPI_Allreduce")
    thin = tmp_path / "libthin.a"                       # GNU thin archive: members stay outside
    subprocess.run([ar, "rcsT", str(thin), str(member)], check=True)
    assert thin.read_bytes().startswith(b"!<thin>")
    assert [f["name"] for p in read_parts_from_files([str(thin)]) for f in p["functions"]] == ["helper", "exchange"]


def test_unused_archive_member_is_not_pulled_in(tmp_path):
    """The tables reference fid slots weakly: a PSG part read from an archive member the program
    does not use neither drags that member into the link nor breaks the run."""
    need_clang()
    from scalgraph.static import link_psg, read_parts_from_files
    ar = shutil.which("ar")
    nm = shutil.which("nm")
    require_tool(ar is not None and nm is not None, "ar and nm (binutils)")
    _, _, objs = build_psg([SAMPLES / "fig3" / "fig3.c", CASES / "multi_lib.c"], tmp_path)
    lib = tmp_path / "libunused.a"
    subprocess.run([ar, "rcs", str(lib), objs[1]], check=True)
    psg, tables = link_psg(read_parts_from_files([objs[0], str(lib)]))
    assert "exchange" in psg.functions                  # known to the PSG (a default instance) ...
    recs = run_with_probe_shim(psg, tables, [objs[0], str(lib)], tmp_path)
    symbols = subprocess.run([nm, str(tmp_path / "app")], capture_output=True, text=True, check=True).stdout
    assert " exchange" not in symbols                   # ... but not linked in
    assert [n for n, v, _ in recs[0]] == ["MPI_Send", "MPI_Bcast"]
    assert all(psg.name[v] == n for n, v, _ in recs[0] + recs[1])
