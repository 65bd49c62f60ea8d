"""The static pass on hand-written IR text (no compiler needed): IR reading, loops from dominators,
branch regions, switch, contraction and probe placement."""
from __future__ import annotations

import pytest

from scalgraph.static import cfg
from scalgraph.static.ir import DebugInfo, parse_module_text
from scalgraph.static.link import link_psg
from scalgraph.static.probes import instrument_text

# main: a loop (1) whose body holds a nested loop (2, no MPI) and an if/else around MPI_Send /
# MPI_Recv, then a switch with an MPI_Barrier in one case; work() is called through a pointer.
IR = r"""source_filename = "t.c"
target triple = "x86_64-unknown-linux-gnu"

@fp = global ptr @work

define i32 @main() !dbg !10 {
  %r = call i32 @rank(), !dbg !20
  br label %head, !dbg !20
head:
  %i = phi i32 [ 0, %0 ], [ %i1, %latch ]
  %c = icmp slt i32 %i, 10, !dbg !21
  br i1 %c, label %body, label %after, !dbg !21
body:
  %x = mul i32 %i, 3, !dbg !22
  %y = add i32 %x, 7, !dbg !22
  %z = mul i32 %y, %y, !dbg !22
  %w = add i32 %z, 1, !dbg !22
  br label %ihead, !dbg !22
ihead:
  %j = phi i32 [ 0, %body ], [ %j1, %ihead ]
  %j1 = add i32 %j, 1, !dbg !23
  %jc = icmp slt i32 %j1, 5, !dbg !23
  br i1 %jc, label %ihead, label %iexit, !dbg !23
iexit:
  %odd = and i32 %r, 1, !dbg !24
  %e = icmp eq i32 %odd, 0, !dbg !24
  br i1 %e, label %send, label %recv, !dbg !24
send:
  %s = call i32 @MPI_Send(ptr null, i32 0, i32 0, i32 1, i32 0, i32 0), !dbg !25
  br label %latch, !dbg !25
recv:
  %v = call i32 @MPI_Recv(ptr null, i32 0, i32 0, i32 0, i32 0, i32 0, ptr null), !dbg !26
  br label %latch, !dbg !26
latch:
  %i1 = add i32 %i, 1, !dbg !21
  br label %head, !dbg !21
after:
  %f = load ptr, ptr @fp, align 8, !dbg !27
  call void %f(), !dbg !27
  switch i32 %r, label %done [
    i32 0, label %zero
    i32 1, label %one
  ], !dbg !28
zero:
  %b = call i32 @MPI_Barrier(i32 0), !dbg !29
  br label %done, !dbg !29
one:
  %q = mul i32 %r, %r, !dbg !30
  br label %done, !dbg !30
done:
  ret i32 0, !dbg !31
}

define void @work() !dbg !40 {
  br label %h
h:
  %k = phi i32 [ 0, %0 ], [ %k1, %h ]
  %k1 = add i32 %k, 1, !dbg !41
  %kc = icmp slt i32 %k1, 100, !dbg !41
  br i1 %kc, label %h, label %x, !dbg !41
x:
  ret void, !dbg !42
}

declare i32 @rank()
declare i32 @MPI_Send(ptr, i32, i32, i32, i32, i32)
declare i32 @MPI_Recv(ptr, i32, i32, i32, i32, i32, ptr)
declare i32 @MPI_Barrier(i32)

!llvm.dbg.cu = !{!1}
!llvm.module.flags = !{!2}
!1 = distinct !DICompileUnit(language: DW_LANG_C11, file: !3, producer: "hand", isOptimized: false, runtimeVersion: 0, emissionKind: FullDebug)
!2 = !{i32 2, !"Debug Info Version", i32 3}
!3 = !DIFile(filename: "t.c", directory: "/src")
!4 = !DISubroutineType(types: !{})
!10 = distinct !DISubprogram(name: "main", scope: !3, file: !3, line: 1, type: !4, spFlags: DISPFlagDefinition, unit: !1)
!11 = distinct !DILexicalBlock(scope: !10, file: !3, line: 3, column: 3)
!20 = !DILocation(line: 2, column: 3, scope: !10)
!21 = !DILocation(line: 3, column: 3, scope: !11)
!22 = !DILocation(line: 4, column: 5, scope: !11)
!23 = !DILocation(line: 5, column: 5, scope: !11)
!24 = !DILocation(line: 6, column: 5, scope: !11)
!25 = !DILocation(line: 7, column: 7, scope: !11)
!26 = !DILocation(line: 9, column: 7, scope: !11)
!27 = !DILocation(line: 11, column: 3, scope: !10)
!28 = !DILocation(line: 12, column: 3, scope: !10)
!29 = !DILocation(line: 13, column: 5, scope: !10)
!30 = !DILocation(line: 14, column: 5, scope: !10)
!31 = !DILocation(line: 15, column: 3, scope: !10)
!40 = distinct !DISubprogram(name: "work", scope: !3, file: !3, line: 20, type: !4, spFlags: DISPFlagDefinition, unit: !1)
!41 = !DILocation(line: 21, column: 3, scope: !40)
!42 = !DILocation(line: 22, column: 1, scope: !40)
"""


def main_fn():
    mod = parse_module_text(IR)
    return mod, next(f for f in mod.functions if f.name == "main")


def test_reading_blocks_calls_and_debug_lines():
    mod, fn = main_fn()
    assert [b.label for b in fn.blocks][:3] == ["%entry", "head", "body"]
    assert mod.declared >= {"MPI_Send", "MPI_Recv", "MPI_Barrier", "rank"}
    calls = [(i.callee, i.indirect) for b in fn.blocks for i in b.instrs if i.is_call]
    assert calls == [("rank", False), ("MPI_Send", False), ("MPI_Recv", False), (None, True),
                     ("MPI_Barrier", False)]
    switch = next(i for b in fn.blocks for i in b.instrs if i.opcode == "switch")
    assert "label %one" in switch.text                   # continuation lines belong to it
    dbg = DebugInfo(mod.metadata)
    send = next(i for b in fn.blocks for i in b.instrs if i.callee == "MPI_Send")
    assert dbg.location(send.dbg) == ("/src/t.c", 7)
    assert dbg.subprogram(fn.dbg) == ("main", "/src/t.c", 1)


def test_loops_and_branches():
    _, fn = main_fn()
    flow = cfg.analyse(fn)
    label = {i: b.label for i, b in enumerate(fn.blocks)}
    loops = {label[r.head]: (r.depth, {label[b] for b in r.blocks}) for r in flow.regions if r.kind == cfg.LOOP}
    assert loops == {"head": (1, {"head", "body", "ihead", "iexit", "send", "recv", "latch"}),
                     "ihead": (2, {"ihead"})}
    branches = {label[r.head]: {label[b] for b in r.blocks} for r in flow.regions if r.kind == cfg.BRANCH}
    # the loop tests are loop control, not branches; the if/else and the switch are
    assert branches == {"iexit": {"send", "recv"}, "after": {"zero", "one"}}


def test_part_contraction_and_link():
    part, text = instrument_text(IR, "t.c", max_loop_depth=1)
    main = next(f for f in part["functions"] if f["name"] == "main")
    shape = [(v["kind"], v["parent"]) for v in main["vertices"]]
    # main{ CALL rank (unknown external: kept until link), LOOP{ COMP, BRANCH{MPI, MPI} },
    #       INDIRECT, BRANCH{MPI_Barrier} }; the depth-2 loop merged into the COMP, the one
    #       multiplication of `case 1` too small to be a vertex of its own
    assert [k for k, _ in shape] == ["FUNCTION", "CALL", "LOOP", "COMP", "BRANCH", "MPI", "MPI",
                                     "INDIRECT", "BRANCH", "MPI"]
    assert [p for _, p in shape] == [-1, 0, 0, 2, 2, 4, 4, 0, 0, 8]
    assert main["full_counts"]["LOOP"] == 2 and main["full_counts"]["BRANCH"] == 2
    psg, tables = link_psg([part], max_loop_depth=1)
    names = [psg.name[v] for v in psg.children[0]]
    assert names == ["comp", "loop", "indirect", "branch", "work"]   # rank() is no user code: merged
    assert psg.meta["default_instances"] == ["work"]
    assert "@sg_cur" in text and text.count("call void @sg_fn_exit()") == 2


def test_probes_verify_with_llvm():
    llvm = pytest.importorskip("llvmlite.binding")
    _, text = instrument_text(IR, "t.c", max_loop_depth=10)
    m = llvm.parse_assembly(text)
    m.verify()
    body = str(m.get_function("main"))
    assert "call void @sg_fn_enter" in body and "store i32" in body


def test_deep_else_if_chain():
    """An else-if chain nests branches deeper than Python's recursion limit."""
    n = 1200
    body = ["define i32 @main() {", "  %r = call i32 @MPI_Comm_size(i32 0, ptr null)", "  br label %c0"]
    for i in range(n):
        body += [f"c{i}:", f"  %t{i} = icmp eq i32 %r, {i}", f"  br i1 %t{i}, label %then{i}, label %c{i + 1}",
                 f"then{i}:", "  %b" + str(i) + " = call i32 @MPI_Barrier(i32 0)", "  br label %done"]
    body += [f"c{n}:", "  br label %done", "done:", "  ret i32 0", "}",
             "declare i32 @MPI_Barrier(i32)", "declare i32 @MPI_Comm_size(i32, ptr)"]
    part, text = instrument_text("\n".join(body) + "\n", "deep.c")
    psg, _ = link_psg([part])
    branches = [v for v in range(len(psg)) if psg.kind_name(v) == "BRANCH"]
    assert len(branches) == n
    assert all(psg.children[b] for b in branches)
    assert sum(psg.kind_name(v) == "MPI" for v in range(len(psg))) == n + 1
    assert text.count("@sg_cur") >= n


def test_musttail_call_leaves_before_the_call():
    llvm = pytest.importorskip("llvmlite.binding")
    ir = """define i32 @g(i32 %x) {
  %c = call i32 @MPI_Barrier(i32 %x)
  ret i32 %c
}
define i32 @f(i32 %x) {
  %r = musttail call i32 @g(i32 %x)
  ret i32 %r
}
declare i32 @MPI_Barrier(i32)
"""
    _, text = instrument_text(ir, "tail.c")
    f_body = text[text.index("define i32 @f"):]
    f_body = f_body[:f_body.index("}")]
    assert f_body.count("sg_fn_exit") == 1
    assert f_body.index("sg_fn_exit") < f_body.index("musttail call")
    llvm.parse_assembly(text).verify()
