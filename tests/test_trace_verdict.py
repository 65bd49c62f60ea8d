"""The verdict of `scalgraph trace` (scalgraph/trace/verdict.py): which delay costs are root causes
that name lines -- computation only, at least --min-share of the total time, and, with the run's
thread-CPU profile, only as far as the delay was extra work rather than a descheduled rank.  The
delay table underneath keeps Scalasca's numbers."""
from __future__ import annotations

import json

import numpy as np
import pytest

from scalgraph import cli
from scalgraph.commands.trace import analyse
from scalgraph.io.trace_read import write_trace
from scalgraph.trace import verdict as V
from test_trace_delay import figure3
from tracebuild import Builder


def where(*places):
    return [{"file": f, "line": ln, "vertex": v} for f, ln, v in places]


def test_extra_work_is_the_cpu_excess_over_the_median_rank_stretched_like_the_rank():
    # one vertex, 4 ranks.  Rank 0 runs a loop nobody else runs, holding a quarter of a core: wall 4,
    # CPU 1 -> 4 s of extra work.  In a balanced kernel, rank 1 was descheduled (wall 3, CPU as
    # everybody's) -> none; rank 2 did 0.1 s more CPU at full speed -> 0.1 s.
    assert V.extra_work(np.array([[4.0, 0, 0, 0]]), np.array([[1.0, 0, 0, 0]])).tolist() == [[4.0, 0, 0, 0]]
    kernel = V.extra_work(np.array([[2.0, 3.0, 1.1, 2.0]]), np.array([[1.0, 1.0, 1.1, 1.0]]))
    assert kernel.tolist() == [[0.0, 0.0, pytest.approx(0.1), 0.0]]
    # sampled CPU above the trace's wall-clock time is never a stretch below 1; no CPU, no extra work
    got = V.extra_work(np.array([[0.5, 0.5, 0.0]]), np.array([[1.0, 0.4, 0.0]]))
    assert got.tolist() == [[pytest.approx(0.6), 0, 0]]


def test_floor_is_a_share_of_the_total_time_summed_over_ranks():
    # 8 ranks x 3 s = 24 s total time.  The loop's 0.4 s on rank 3 made 7 ranks wait: 2.8 s of
    # delay cost, 11.7 %; a kernel's 1.0 s of scattered cost is 4.2 % and no cause at 5 %.
    cost = np.zeros((2, 8))
    cost[0, 3] = 2.8
    cost[1] = 1.0 / 8
    got = V.verdict(cost, np.ones((2, 8)), np.array([False, False]), where(("a.c", 10, 1), ("a.c", 20, 2)),
                    ["main/loop", "main/kernel"], total_time=24.0)
    assert [(e["line"], e["rank"], round(e["share"], 6)) for e in got] == [(10, 3, round(2.8 / 24, 6))]
    assert got[0]["seconds"] == pytest.approx(2.8) and got[0]["delay_seconds"] == pytest.approx(2.8)
    lower = V.verdict(cost, np.ones((2, 8)), np.array([False, False]), where(("a.c", 10, 1), ("a.c", 20, 2)),
                      ["main/loop", "main/kernel"], total_time=24.0, min_share=0.04)
    assert [e["line"] for e in lower] == [10, 20]


def test_communication_is_never_a_verdict_cause():
    cost = np.array([[5.0, 0.0], [0.5, 0.0]])
    got = V.verdict(cost, np.ones((2, 2)), np.array([True, False]), where(("a.c", 5, 3), ("a.c", 9, 4)),
                    ["main/MPI_Recv", "main/f"], total_time=10.0)
    assert [e["callpaths"] for e in got] == [["main/f"]]


def test_cpu_cap_drops_a_descheduled_rank_and_keeps_a_loaded_one():
    """Three ranks, two computation call paths.  The kernel (vertex 0) is balanced in thread-CPU, but
    rank 1 was descheduled in it (wall 3 vs 2) and its delay cost is large; the loop (vertex 1) runs
    only on rank 2, stretched by time-sharing to 4x its CPU time: E = 4, cap (3 - 1) * 4 = 8 > 4.
    With the profile the kernel goes and the loop stays whole; without it both are causes."""
    cost = np.array([[0.0, 6.0, 0.0], [0.0, 0.0, 4.0]])
    wall = np.array([[2.0, 3.0, 2.0], [0.0, 0.0, 4.0]])
    cpu = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0]])          # [rank, vertex]
    args = (cost, wall, np.array([False, False]), where(("k.c", 7, 0), ("k.c", 30, 1)), ["main/kernel", "main/loop"])
    plain = V.verdict(*args, total_time=30.0)
    assert [e["line"] for e in plain] == [7, 30]
    checked = V.verdict(*args, total_time=30.0, cpu=V.CpuEvidence(cpu))
    assert [(e["line"], e["seconds"], e["real_work"]) for e in checked] == [(30, 4.0, 1.0)]


def test_with_a_profile_the_floor_is_on_the_extra_work_not_on_the_waiting_it_caused():
    """8 ranks x 6.6 s = 52.8 s total.  A 0.4 s loop on rank 1 (cores time-shared: the others computed
    meanwhile) caused only 1.86 s of waiting, 3.5 % of the total; its thread-CPU excess, 0.4 s, is
    6 % of the 6.6 s run time: a cause.  A balanced kernel whose rank 5 needed 0.03 s more thread-CPU
    (cache and core sharing) caused 4 s of waiting, capped at 7 x 0.03 x stretch: no cause, since its
    extra work is 0.5 % of the run time."""
    cost = np.zeros((2, 8))
    cost[0, 1] = 1.86
    cost[1, 5] = 4.0
    wall = np.array([[0.0, 1.6, 0, 0, 0, 0, 0, 0], [0.8] * 5 + [0.95, 0.8, 0.8]])
    cpu = np.zeros((8, 2))
    cpu[1, 0] = 0.4
    cpu[:, 1] = 0.2
    cpu[5, 1] = 0.23
    args = (cost, wall, np.array([False, False]), where(("p.c", 339, 0), ("p.c", 411, 1)), ["main/plant", "main/kernel"])
    assert [e["line"] for e in V.verdict(*args, total_time=52.8)] == [411]          # waiting alone: wrong
    checked = V.verdict(*args, total_time=52.8, cpu=V.CpuEvidence(cpu))
    assert [(e["line"], e["rank"]) for e in checked] == [(339, 1)]


def test_cpu_cap_is_p_minus_1_times_the_extra_work_shared_by_the_call_paths_of_a_vertex():
    """Per-iteration ups and downs of a balanced kernel add up to a large delay cost though the rank
    did only 0.1 s more work over the run: 4 ranks can wait at most 3 x 0.1 s for it.  Two call paths
    at one vertex share the cap in proportion to their costs."""
    cost = np.array([[0.0, 0.9, 0.0, 0.0], [0.0, 0.3, 0.0, 0.0]])
    wall = np.array([[1.0, 1.1, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    cpu = np.array([[1.0], [1.1], [1.0], [1.0]])
    out = V.capped_costs(cost, wall, np.array([0, 0]), cpu)
    assert out[:, 1] == pytest.approx([0.3 * 0.75, 0.3 * 0.25]) and not out[:, [0, 2, 3]].any()


def test_call_paths_of_one_place_add_up():
    # one line reached over two call paths, each 3 % of the total time: 6 % together
    cost = np.array([[0.3, 0.0], [0.0, 0.3], [0.2, 0.0]])
    got = V.verdict(cost, np.ones((3, 2)), np.zeros(3, bool), where(("s.c", 4, 9), ("s.c", 4, 9), ("s.c", 8, 2)),
                    ["main/a/f", "main/b/f", "main/g"], total_time=10.0)
    assert [(e["callpaths"], round(e["seconds"], 9)) for e in got] == [(["main/a/f", "main/b/f"], 0.6)]
    assert got[0]["ranks"] == {"0": 0.3, "1": 0.3}


def test_capped_costs_leave_call_paths_without_a_vertex_alone():
    cost = np.array([[1.0, 2.0]])
    out = V.capped_costs(cost, np.array([[1.0, 3.0]]), np.array([-1]), np.zeros((2, 4)))
    assert out.tolist() == [[1.0, 2.0]]


def test_figure3_report_keeps_scalasca_numbers_and_names_the_computation():
    """The report through the command's analyse(): the table is seed 000's Figure 3 exactly (with the
    MPI_Recv communication delay), the verdict is its computation; with a CPU profile in which A
    (rank 0) did 1 s more g than the median rank but no more f, g keeps (3 - 1) * E of its cost and f
    goes."""
    tr = figure3().build()
    rep = analyse(tr, clock_correction=False)
    table = {c["callpath"]: (c["kind"], round(c["seconds"], 9)) for c in rep["delay"]["root_causes"]}
    assert table == {"main/g": ("computation", 3.375), "main/f": ("computation", 1.125),
                     "main/MPI_Recv": ("communication", 0.5)}
    assert rep["delay"]["classification"]["short_term"] == pytest.approx(3.5)
    assert rep["delay"]["classification"]["long_term"] == pytest.approx(1.5)
    assert [c["callpaths"] for c in rep["root_causes"]] == [["main/g"], ["main/f"]] and rep["problem_found"]
    # vertices: f -> 0, g -> 1.  Wall: f 2/1/2 (median 2, rank 0 no excess), g 3/0/0.5.
    for r in tr.regions:
        r.vertex = {"f": 0, "g": 1}.get(r.name, -1)
    cpu = np.array([[2.0, 1.5], [1.0, 0.0], [2.0, 0.5]])
    # tighter: CPU excess 0.5 -> E = 0.5 * 3 / 1.0 = 1.5, cap 3 -> g keeps 3 of 3.375
    tight = analyse(tr, clock_correction=False, cpu=V.CpuEvidence(np.array([[2.0, 1.0], [1.0, 0.0], [2.0, 0.5]])))
    assert [(c['callpaths'], round(c['seconds'], 9)) for c in tight['root_causes']] == [(['main/g'], 3.0)]
    rep = analyse(tr, clock_correction=False, cpu=V.CpuEvidence(cpu, "cpu from a test"))
    got = {tuple(c["callpaths"]): round(c["seconds"], 9) for c in rep["root_causes"]}
    # g on rank 0: CPU excess 1.5 - 0.5 = 1, stretched by wall/CPU = 3/1.5 -> E = 2, cap 2 * 2 = 4 >
    # 3.375: whole.  f: no CPU excess over the median (2) -> dropped
    assert got == {("main/g",): 3.375}
    assert rep["cpu_checked"] and "cpu from a test" in rep["notes"]
    assert {c["callpath"]: round(c["seconds"], 9) for c in rep["delay"]["root_causes"]} == {
        "main/g": 3.375, "main/f": 1.125, "main/MPI_Recv": 0.5}          # the table is never capped


def test_balanced_program_with_jitter_has_no_verdict(tmp_path, capsys):
    """Four ranks, the same work each step but a little jitter, an allreduce after each of 10 steps:
    every rank waits a bit, so the delay table is not empty, yet nothing reaches 5 % of the time."""
    rng = np.random.default_rng(3)
    b = Builder(4)
    clock = [0.0] * 4
    for r in range(4):
        b.enter(r, 0, "main")
    for _ in range(10):
        for r in range(4):
            d = 1.0 + float(rng.uniform(0, 0.03))
            b.work(r, clock[r], clock[r] + d, "kernel")
            clock[r] += d
        end = max(clock) + 0.01
        for r in range(4):
            b.coll(r, clock[r], end, "MPI_Allreduce")
        clock = [end] * 4
    for r in range(4):
        b.exit(r, end + 0.1, "main")
    path = tmp_path / "jitter.json"
    write_trace(b.build(), path, "json")
    assert cli.main(["trace", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["delay"]["root_causes"] and rep["delay"]["classification"]["waiting_time"] > 0
    assert rep["root_causes"] == [] and rep["problem_found"] is False
    assert cli.main(["trace", str(path)]) == 0
    assert "No root cause: no computation delay reaches 5 % of the total time" in capsys.readouterr().out


def late_before_a_broadcast(iterations: int = 3) -> Builder:
    """Three ranks.  Each iteration: Allreduce (ranks 0 and 2 wait there 1 s for rank 1 from the
    second iteration on); rank 1 alone runs `extra` (1 s); Bcast from root 0; every rank runs
    `kernel` (1 s).  The Bcast orders rank 1 after root 0 only, so the work that made rank 1 late is
    `extra`."""
    b = Builder(3)
    clk = [0.0, 0.0, 0.0]

    def allreduce():
        end = max(clk) + 0.01
        for r in range(3):
            b.coll(r, clk[r], end, "MPI_Allreduce")
            clk[r] = end

    for _ in range(iterations):
        allreduce()
        b.work(1, clk[1], clk[1] + 1.0, "extra")
        clk[1] += 1.0
        root_enter = clk[0]
        for r in range(3):
            leave = max(clk[r], root_enter) + 0.01
            b.coll(r, clk[r], leave, "MPI_Bcast", root=0, sent=8 if r == 0 else 0, recvd=0 if r == 0 else 8)
            clk[r] = leave
        for r in range(3):
            b.work(r, clk[r], clk[r] + 1.0, "kernel")
            clk[r] += 1.0
    allreduce()
    return b


def test_a_rooted_collective_does_not_hide_the_work_that_made_a_non_root_late():
    """Scalasca's intervals start every member's interval at the Bcast, so rank 1's interval before
    the Allreduce holds only the balanced kernel and the delay table has nothing for `extra`; the
    verdict reads intervals in which a rooted collective synchronises its root only, and names it."""
    from scalgraph.commands.trace import analyse
    tr = late_before_a_broadcast().build()
    rep = analyse(tr, clock_correction=False, complete=True)
    table = {c["callpath"]: c["seconds"] for c in rep["delay"]["root_causes"]}
    assert table.get("extra", 0.0) == pytest.approx(0.0, abs=1e-9)
    assert [c["callpaths"] for c in rep["root_causes"]][:1] == [["extra"]]
    assert rep["root_causes"][0]["rank"] == 1
    assert rep["root_causes"][0]["seconds"] == pytest.approx(2.0 * 3, rel=0.02)   # 2 ranks x 1 s x 3


def _loop_and_kernel(loop: tuple, kernel: tuple, lines: tuple = ("a.c", 10, 20)):
    """8 ranks, two call paths: a loop only rank 1 runs (delay cost, wall, thread-CPU) and a kernel
    every rank runs (delay cost caused by rank k, wall and thread-CPU of every rank, and of rank k).
    Returns cost, wall, cpu [rank, vertex] and the verdict's (is_mpi, where, names) arguments."""
    (l_cost, l_wall, l_cpu), (k, k_cost, k_wall, k_wall_k, k_cpu, k_cpu_k) = loop, kernel
    cost, wall, cpu = np.zeros((2, 8)), np.zeros((2, 8)), np.zeros((8, 2))
    cost[0, 1], wall[0, 1], cpu[1, 0] = l_cost, l_wall, l_cpu
    cost[1, k], wall[1], cpu[:, 1] = k_cost, k_wall, k_cpu
    wall[1, k], cpu[k, 1] = k_wall_k, k_cpu_k
    file, loop_line, kernel_line = lines
    args = (np.array([False, False]), where((file, loop_line, 0), (file, kernel_line, 1)), ["main/loop", "main/kernel"])
    return cost, wall, cpu, args


def test_a_busy_machine_stretches_the_cause_and_the_run_alike():
    """8 ranks on 2 cores, a run slowed to 16 s (128 rank-seconds), a rank's computation taking 2.5x
    its thread-CPU in wall time.  Rank 1's 0.4 s loop (vertex 0): as thread-CPU it is below 5 % of the
    run (0.8 s), scaled by the stretch 1.0 s, and the others waited 31.5 s for it.  The balanced kernel
    (vertex 1) has a rank with 15 % more thread-CPU (0.3 s, 0.75 s scaled) and 5 s of delay cost: below
    the 1.3x ratio, no cause.  On an idle machine (no load stretch) the loop is below the floor."""
    cost, wall, cpu, args = _loop_and_kernel((31.5, 5.0, 0.4), (3, 5.0, 8.0, 9.2, 2.0, 2.3))
    got = V.verdict(cost, wall, *args, total_time=128.0, cpu=V.CpuEvidence(cpu, stretch=2.5))
    assert [(e["line"], e["rank"]) for e in got] == [(10, 1)]
    assert got[0]["seconds"] == pytest.approx(31.5)
    assert V.verdict(cost, wall, *args, total_time=128.0, cpu=V.CpuEvidence(cpu)) == []
    # the same loop that made nobody wait (its waiting below 5 % of one rank's run) is no cause
    quiet = cost.copy()
    quiet[0, 1] = 0.5
    assert V.verdict(quiet, wall, *args, total_time=128.0, cpu=V.CpuEvidence(cpu, stretch=2.5)) == []


def test_a_long_loop_is_stretched_as_its_own_rank_was():
    """Measured on CloverLeaf at 8 ranks on 2 cores (load 12): the median rank's computation was short
    segments that kept their core (1.0x wall per thread-CPU second), rank 1's planted loop took 0.28 s
    of thread-CPU in segments stretched 6.5x while the others waited in MPI.  A 7.9 s run, 63.2
    rank-seconds: 5 % of one rank's run is 0.395 s.  At the median's stretch the loop (0.28 s) is below
    it; stretched as its own rank's segments were (1.83 s) it is the cause.  The stretch is the
    profile's (CpuEvidence.stretch_of), not the trace's exclusive time: in Quicksilver, a polling
    program, that time holds the unrecorded MPI_Test calls, and a rank at 1.6x the median's thread-CPU
    in its tracking loop became a cause in 3 of 3 controls."""
    cost, wall, cpu, args = _loop_and_kernel((9.5, 1.83, 0.28), (2, 3.0, 0.03, 0.105, 0.03, 0.035), ("clover.f90", 58, 90))
    own = {0: np.where(np.arange(8) == 1, 6.5, 1.0), 1: np.where(np.arange(8) == 2, 3.0, 1.0)}
    evidence = V.CpuEvidence(cpu, stretch=1.0, ratio=1.6, stretch_of=lambda vs: own[vs[0]])
    got = V.verdict(cost, wall, *args, total_time=63.2, cpu=evidence)
    assert [(e["line"], e["rank"]) for e in got] == [(58, 1)]
    assert V.abnormal_cpu_excess([0], cpu, 1.6, own[0], 1.0) == pytest.approx(0.28 * 6.5)
    assert V.abnormal_cpu_excess([0], cpu, 1.6) == pytest.approx(0.28)      # the median's stretch only
    assert V.verdict(cost, wall, *args, total_time=63.2, cpu=V.CpuEvidence(cpu, stretch=1.0, ratio=1.6)) == []
    # polling: the trace's time at the loop is 20x its thread-CPU (MPI_Test calls between the events),
    # the profile's segments are not stretched: no cause
    polled = wall.copy()
    polled[0, 1] = 20 * 0.28
    flat = V.CpuEvidence(cpu, stretch=1.0, ratio=1.6, stretch_of=lambda vs: np.ones(8))
    assert V.verdict(cost, polled, *args, total_time=63.2, cpu=flat) == []


def test_a_constructs_instances_are_judged_together():
    """Measured on HPCG: the planted loop sits in CG, which runs from three call sites, so the loop is
    three PSG vertices with 0.8 s of rank 1's extra thread-CPU each.  8 ranks, a 44.8 s run: each third
    (0.8 x stretch 1.7 = 1.36 s) is below 5 % of a rank's run (2.24 s), the construct (4.1 s) is not.
    One cause, at the instance with the largest cost, naming all three."""
    cost, wall = np.zeros((3, 8)), np.full((3, 8), 0.5)
    cost[:, 1] = (40.7, 37.6, 34.9)
    wall[:, 1] = 1.4
    cpu = np.zeros((8, 3))
    cpu[1, :] = 0.8
    places = where(("CG.cpp", 103, 0), ("CG.cpp", 103, 1), ("CG.cpp", 103, 2))
    got = V.verdict(cost, wall, np.zeros(3, bool), places, ["main/CG/loop", "main/TestCG/CG/loop", "main/x/CG/loop"],
                    total_time=8 * 44.8, cpu=V.CpuEvidence(cpu, stretch=1.7))
    assert [(e["line"], e["rank"], e["vertex"], e["vertices"]) for e in got] == [(103, 1, 0, [0, 1, 2])]
    assert len(got[0]["callpaths"]) == 3
    one = V.verdict(cost[:1], wall[:1], np.zeros(1, bool), places[:1], ["main/CG/loop"],
                    total_time=8 * 44.8, cpu=V.CpuEvidence(cpu[:, :1], stretch=1.7))
    assert one == []


def test_ranks_time_sharing_cores_need_the_higher_ratio():
    """A balanced kernel (vertex 1) on which rank 3 took 1.5x the median rank's thread-CPU (0.75 s more,
    and the others waited 20 s): on one rank per core a cause; where ranks outnumber cores identical
    work differs that much (CpuEvidence.ratio 1.6, as detect), no cause.  A loop only rank 1 runs
    (vertex 0) stays a cause either way."""
    cost, wall = np.zeros((2, 8)), np.zeros((2, 8))
    cost[0, 1], wall[0, 1] = 20.0, 2.0
    cost[1, 3], wall[1] = 20.0, 1.5
    wall[1, 3] = 2.25
    cpu = np.zeros((8, 2))
    cpu[1, 0] = 0.8
    cpu[:, 1] = 1.5
    cpu[3, 1] = 2.25
    args = (np.array([False, False]), where(("a.c", 10, 0), ("a.c", 20, 1)), ["main/loop", "main/kernel"])
    alone = V.verdict(cost, wall, *args, total_time=64.0, cpu=V.CpuEvidence(cpu))
    assert sorted(e["line"] for e in alone) == [10, 20]
    shared = V.verdict(cost, wall, *args, total_time=64.0, cpu=V.CpuEvidence(cpu, ratio=1.6))
    assert [e["line"] for e in shared] == [10]
