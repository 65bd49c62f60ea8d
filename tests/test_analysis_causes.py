"""Root causes are source constructs costed by the waiting they explain (scalgraph.analysis.causes,
constructs, mpi_cost, segments, evidence_notes), on literal profiles whose answer is known."""
from __future__ import annotations

import io

import numpy as np

from scalgraph.analysis import synthetic as syn
from scalgraph.analysis.constructs import constructs
from scalgraph.analysis.detect import analyse
from scalgraph.analysis.segments import ending_mpi
from scalgraph.io.report import write_text
from scalgraph.model.profile import DEP_COLL

COPIES = 11


def _late_rank(psg, p: int, plant, waits_at, extra: float, waited: float | None = None, slow: int = 1):
    """Times and waits of one scale of the shape 'a loop, work planted on one rank, the others wait
    for it in a collective': rank `slow` runs `extra` s in `plant` and everybody else waits `waited`
    (default `extra`) in each collective of `waits_at`, which also costs every rank 0.1 ms of its own.
    The caller adds the rest of the work to the times."""
    t = np.zeros((p, len(psg)))
    t[slow, plant] = extra
    w = np.zeros_like(t)
    w[:, waits_at] = extra if waited is None else waited
    w[slow, waits_at] = 0.0
    t[:, waits_at] = 1e-4 + w[:, waits_at]
    return t, w


def _collective_profile(psg, p: int, t, w, collectives: dict, calls: int = 10):
    """The profile of times `t` and waits `w`, each rank's wait in a collective (vertex -> bytes per
    call) recorded as a dependence on the whole world."""
    rows = [(r, v, DEP_COLL, -1, -1, syn.WORLD, calls, nbytes, w[r, v])
            for v, nbytes in collectives.items() for r in range(p)]
    return syn._profile(psg, p, t, w, rows)


def _unrolled(scales=(2, 4, 8, 16), work: float = 8.0, planted: float = 0.04, slow: int = 1):
    """A 10-iteration main loop the compiler turned into 11 calls of `step`: 11 instances of each
    statement of step.  Rank `slow` runs `planted` seconds more in line 13 of every copy; the others
    wait for it in each copy's Allreduce."""
    step = ("FUNCTION", "step", 10, [("COMP", "comp", 12), ("COMP", "comp", 13), ("MPI", "MPI_Allreduce", 14)])
    tree = ("FUNCTION", "main", 1, [("COMP", "comp", 3), ("LOOP", "loop", 5,
                                                         [("CALL", "step", 6, [step])] * COPIES)])
    psg = syn.psg_from_tree(tree, "is.c")
    work_v = [v for v in range(len(psg)) if psg.line_first[v] == 12]
    plant_v = [v for v in range(len(psg)) if psg.line_first[v] == 13]
    allr_v = [v for v in range(len(psg)) if psg.line_first[v] == 14]
    rng = np.random.default_rng(9)
    runs = {}
    for p in scales:
        t, w = _late_rank(psg, p, plant_v, allr_v, planted, slow=slow)
        t[:, syn.vertex_at(psg, 3)] = 0.02
        t[:, work_v] = work / p / COPIES * (1 + 0.01 * rng.standard_normal((p, COPIES)))
        runs[p] = _collective_profile(psg, p, t, w, dict.fromkeys(allr_v, 8), calls=1)
    return psg, runs, plant_v


def test_unrolled_copies_under_the_floor_each_are_one_cause_above_it_together():
    psg, runs, plant_v = _unrolled()
    result = analyse(psg, runs)
    floor = result["thresholds"]["min_seconds"]
    assert 0.04 < floor < 0.04 * COPIES                  # each copy alone is below the reporting floor
    top = result["root_causes"][0]
    assert (top["line"], top["function"], top["rank"]) == (13, "step", 1)
    assert abs(top["cost"] - 0.04 * COPIES) < 0.03
    assert len(top["contexts"]) == COPIES and top["vertex"] in plant_v
    assert len({c["call_path"] for c in top["contexts"]}) == COPIES          # the copies told apart
    assert [c["dominant"] for c in top["contexts"]].count(True) == 1
    # the waiting Allreduce is one symptom with its 11 contexts, not 11 lines alike
    allr = [n for n in result["non_scalable"] if n["name"] == "MPI_Allreduce"]
    assert len(allr) == 1 and allr[0]["instances"] == COPIES


def test_constructs_sum_instances_per_rank():
    psg, runs, plant_v = _unrolled(scales=(4,))
    cons = constructs(psg)
    c = int(cons.cid[plant_v[0]])
    assert sorted(cons.instances[c]) == sorted(plant_v) and len(set(cons.cid[plant_v])) == 1
    summed = cons.sum_columns(runs[4].time)
    assert summed.shape == (4, len(cons))
    assert np.isclose(summed[1, c], 0.04 * COPIES) and np.isclose(summed[0, c], 0.0)
    assert np.allclose(summed.sum(axis=1), runs[4].time.sum(axis=1))


def test_report_lines_of_constructs_sharing_a_location_are_told_apart():
    """Two functions with an MPI_Allreduce on the same line (a macro in a shared header): two
    constructs, and their report lines differ."""
    tree = ("FUNCTION", "main", 1, [("LOOP", "loop", 2, [
        ("CALL", "a", 3, [("FUNCTION", "a", 20, [("COMP", "comp", 21), ("MPI", "MPI_Allreduce", 5)])]),
        ("CALL", "b", 4, [("FUNCTION", "b", 30, [("COMP", "comp", 31), ("MPI", "MPI_Allreduce", 5)])])])])
    psg = syn.psg_from_tree(tree, "x.h")
    allr = [v for v in range(len(psg)) if psg.line_first[v] == 5]
    runs = {}
    for p in (2, 4, 8):
        t = np.zeros((p, len(psg)))
        t[:, [syn.vertex_at(psg, 21), syn.vertex_at(psg, 31)]] = 2.0 / p
        t[:, allr] = 0.1 + 0.05 * p                     # both lose time (waiting on noise, say)
        w = np.zeros_like(t)
        w[:, allr] = t[:, allr] - 1e-4
        rows = [(r, v, DEP_COLL, -1, -1, syn.WORLD, 10, 8, w[r, v]) for r in range(p) for v in allr]
        runs[p] = syn._profile(psg, p, t, w, rows)
    result = analyse(psg, runs)
    lines = [n for n in result["non_scalable"] if n["name"] == "MPI_Allreduce"]
    assert len(lines) == 2 and {n["function"] for n in lines} == {"a", "b"}
    out = io.StringIO()
    write_text(result, out)
    shown = [ln for ln in out.getvalue().splitlines() if "MPI_Allreduce]" in ln]
    assert len(shown) == 2 and len(set(shown)) == 2


def _oversubscribed(runs, cores: int = 2):
    for p, prof in runs.items():
        prof.meta.update(cores=[cores] * p, ranks_on_host=[p] * p)


def test_a_collective_with_a_large_scaling_loss_on_the_path_does_not_swallow_the_compute_cause():
    """Rank 1's extra work makes everybody wait; under oversubscription every rank also sits ever
    longer in the fixed-size Allreduce itself.  The loop is the cause, the Allreduce is not."""
    psg, runs, comp = syn.cg_like(slow=1)
    allr = syn.vertex_at(psg, 20)
    for p, prof in runs.items():
        prof.time[:, allr] += 0.6 * p / 16            # own time in the call, grows with p
    _oversubscribed(runs)
    result = analyse(psg, runs)
    ns = {n["vertex"]: n["scaling_loss"] for n in result["non_scalable"]}
    assert ns[allr] > 0.4 + 0.1                        # its loss is larger than the cause's cost
    assert [c["vertex"] for c in result["root_causes"]] == [comp]
    top = result["root_causes"][0]
    assert top["rank"] == 1 and abs(top["cost"] - 0.4) < 0.05
    assert top["explains"]["what"] == "waiting" and top["explains"]["waiting"] >= top["cost"]


def test_the_cost_of_planted_work_is_capped_by_the_waiting_it_explains():
    """Rank 1 does 0.4 s more (1.8x the median rank), but the others waited only 0.06 s for it: the
    cause costs 0.06 s, not its excess."""
    psg, runs, comp = syn.cg_like(slow=1, extra=0.4)
    recv, allr = syn.vertex_at(psg, 16), syn.vertex_at(psg, 20)
    for p, prof in runs.items():
        for v in (recv, allr):
            w = np.where(prof.wait[:, v] > 0.01, 0.06, prof.wait[:, v])
            prof.time[:, v] += w - prof.wait[:, v]
            prof.wait[:, v] = w
            rows = prof.deps["vertex"] == v
            prof.deps["wait"][rows] = w[prof.deps["rank"][rows]]
        prof.meta["hz"] = 10_000                       # fine sampling: 0.12 s is well resolved
        prof.samples[:] = np.rint(prof.time * 10_000).astype(np.int64)
    result = analyse(psg, runs)
    top = result["root_causes"][0]
    assert (top["vertex"], top["rank"]) == (comp, 1)
    assert abs(top["cost"] - 0.06) < 0.01
    assert abs(top["explains"]["waiting"] - 0.06) < 1e-9


def _collective_runs(grows: bool):
    psg, runs, a2a = syn.bad_collective()
    if not grows:
        for prof in runs.values():
            prof.deps["bytes"][:] = 1024
    _oversubscribed(runs)
    return psg, runs, a2a


def test_collective_moving_more_per_rank_as_p_grows_is_its_own_cause_even_oversubscribed():
    psg, runs, a2a = _collective_runs(grows=True)
    result = analyse(psg, runs)
    assert [c["vertex"] for c in result["root_causes"]] == [a2a]
    explains = result["root_causes"][0]["explains"]
    assert explains["what"] == "own scaling" and explains["rule"] == "bytes per rank"
    assert explains["per_rank"]["bytes"]["16"] == 8 * explains["per_rank"]["bytes"]["2"]
    assert result["oversubscribed"]["16"]


def test_the_same_time_growth_with_a_fixed_volume_is_no_cause_when_oversubscribed():
    psg, runs, a2a = _collective_runs(grows=False)
    result = analyse(psg, runs)
    assert result["root_causes"] == []
    assert any(n["vertex"] == a2a for n in result["non_scalable"])


def test_p2p_halo_whose_neighbour_count_saturates_is_not_growing_volume():
    from scalgraph.analysis.mpi_cost import volume_grows
    scales = [2, 4, 8, 16]
    halo = np.array([[8.0, 12.0, 14.0, 15.0]])           # edge ranks have one neighbour
    a2a = np.array([[2.0, 4.0, 8.0, 16.0]])
    fixed = np.ones((1, 4))
    assert not volume_grows(scales, halo, fixed)[0]
    assert volume_grows(scales, a2a, fixed)[0] and volume_grows(scales, fixed, a2a)[0]


def test_ending_mpi_calls_of_a_computation_follow_execution_order():
    psg = syn.psg_from_tree(syn.CG_TREE)
    at = lambda line: syn.vertex_at(psg, line)  # noqa: E731
    assert ending_mpi(psg, at(12)) == {at(15)}
    assert ending_mpi(psg, at(10)) == {at(15)}            # the loop header runs before its body's first call
    assert ending_mpi(psg, at(5)) == {at(15)}             # the loop may not run, but nothing follows it
    assert ending_mpi(psg, at(40)) == set()


def _with_exact_segments(supports: bool):
    psg, runs, comp = syn.cg_like(slow=1)
    send = syn.vertex_at(psg, 15)
    for prof in runs.values():
        cpu = prof.time[:, comp].copy()
        if not supports:
            cpu[:] = np.median(cpu)                     # the exact segment shows no extra work on rank 1
        prof.comp_cpu[:, send] = cpu
        prof.comp_wall[:, send] = cpu
    return psg, runs, comp


def test_sampled_excess_that_the_exact_segment_does_not_support_is_noise():
    psg, runs, comp = _with_exact_segments(supports=False)
    result = analyse(psg, runs)
    assert all(c["vertex"] != comp for c in result["root_causes"])
    psg, runs, comp = _with_exact_segments(supports=True)
    top = analyse(psg, runs)["root_causes"][0]
    assert top["vertex"] == comp and abs(top["cost"] - 0.4) < 0.05


def test_thin_evidence_is_said_and_not_reported_as_a_clean_bill():
    psg, runs, _ = syn.balanced(work=0.3)                # ~4 samples per rank and vertex at p=16
    result = analyse(psg, runs)
    assert result["sampling"]["thin"] and not result["problem_found"]
    note = next(n for n in result["notes"] if n.startswith("thin evidence"))
    assert "median of" in note and "--hz" in note and "run longer" in note and "--repeat" in note
    out = io.StringIO()
    write_text(result, out)
    assert "No scaling problem found above the sampling noise" in out.getvalue()
    psg, runs, _ = syn.balanced(work=8.0)
    for prof in runs.values():                          # 0.5 s per rank at 10 kHz: 5000 samples
        prof.meta["hz"] = 10_000
        prof.samples[:] = np.rint(prof.time * 10_000).astype(np.int64)
    long = analyse(psg, runs)
    assert not long["sampling"]["thin"] and not any(n.startswith("thin evidence") for n in long["notes"])


def test_exact_segments_are_matched_by_construct_when_samples_land_in_another_copy():
    """Measured on samples/cg with its main loop fully unrolled: the PSG had the planted loop in the
    first copy only, so all its samples went there, while each iteration's exact computation was
    charged to that iteration's copy of the next MPI call.  The check compares constructs (all
    copies of the ending call), so the cause stands."""
    with_plant = ("FUNCTION", "step", 10, [("COMP", "comp", 12), ("COMP", "comp", 13), ("MPI", "MPI_Allreduce", 14)])
    without = ("FUNCTION", "step", 10, [("COMP", "comp", 12), ("MPI", "MPI_Allreduce", 14)])
    copies = [("CALL", "step", 6, [with_plant])] + [("CALL", "step", 6, [without])] * (COPIES - 1)
    psg = syn.psg_from_tree(("FUNCTION", "main", 1, [("LOOP", "loop", 5, copies)]), "is.c")
    plant = syn.vertex_at(psg, 13)
    work_v = [v for v in range(len(psg)) if psg.line_first[v] == 12]
    allr_v = [v for v in range(len(psg)) if psg.line_first[v] == 14]
    runs = {}
    for p in (2, 4, 8, 16):
        # sampled: every iteration's audit in copy 1; the others wait for each in its copy's Allreduce
        t, w = _late_rank(psg, p, plant, allr_v, 0.04 * COPIES, waited=0.04)
        t[:, work_v] = 8.0 / p / COPIES
        prof = _collective_profile(psg, p, t, w, dict.fromkeys(allr_v, 8), calls=1)
        prof.comp_cpu[:, allr_v] = t[:, work_v]          # exact: each copy's own iteration
        prof.comp_cpu[1, allr_v] += 0.04
        runs[p] = prof
    top = analyse(psg, runs)["root_causes"][0]
    assert (top["vertex"], top["rank"]) == (plant, 1) and abs(top["cost"] - 0.04 * COPIES) < 0.03


def test_a_late_rank_is_judged_by_its_computation_not_by_others_time_inside_mpi():
    """Nobody's waiting is recorded (the shim counted the others' time in the Allreduce as the call's
    own, as descheduling under oversubscription looks): rank 15's planted work still costs its excess."""
    psg, runs, _ = syn.balanced()
    comp, allr = syn.vertex_at(psg, 12), syn.vertex_at(psg, 20)
    for p, prof in runs.items():
        prof.time[p - 1, comp] += 0.4
        prof.time[:p - 1, allr] += 0.5                  # the others sit in the call, unclassified
        prof.samples[:] = np.rint(prof.time * 200).astype(np.int64)
    top = analyse(psg, runs)["root_causes"][0]
    assert (top["vertex"], top["rank"]) == (comp, 15) and abs(top["cost"] - 0.4) < 0.05
    assert top["explains"]["what"] == "run time"


def test_calls_that_end_no_segment_are_walked_past():
    """Measured on HPCCG: the planted loop was followed by MPI_Wtime, which the shim does not end a
    computation segment at; the loop's exact time was charged to the Allreduce after it."""
    tree = ("FUNCTION", "main", 1, [("LOOP", "loop", 2, [
        ("COMP", "comp", 3), ("MPI", "MPI_Wtime", 4), ("COMP", "comp", 5), ("MPI", "MPI_Allreduce", 6)])])
    psg = syn.psg_from_tree(tree, "hpccg.cpp")
    plant, wtime, work, allr = (syn.vertex_at(psg, n) for n in (3, 4, 5, 6))
    runs = {}
    for p in (2, 4, 8):
        t, w = _late_rank(psg, p, plant, [allr], 0.5)
        t[:, work] = 4.0 / p
        t[:, wtime] = 1e-6
        prof = _collective_profile(psg, p, t, w, {allr: 8})
        prof.calls[:, wtime] = 10
        prof.comp_cpu[:, allr] = prof.comp_wall[:, allr] = t[:, plant] + t[:, work]
        runs[p] = prof
    assert ending_mpi(psg, plant) == {wtime}
    top = analyse(psg, runs)["root_causes"][0]
    assert (top["vertex"], top["rank"]) == (plant, 1) and abs(top["cost"] - 0.5) < 0.05


def test_a_call_through_a_function_pointer_may_end_the_segment():
    """Measured on LLNL AMG: hypre's PCG loop reaches its mat-vecs and inner products, and so every
    MPI call of an iteration, through function pointers (INDIRECT vertices without known targets).
    The walk for the planted loop passed them as calls that make no MPI call and took the Barrier
    after the solve, a segment without the loop's time, as the only one: the 0.44 s abnormal loop was
    capped to nothing.  An unresolved indirect call can end the segment: the cap is then the rank's
    whole exact computation."""
    inner = ("FUNCTION", "inner_prod", 20, [("COMP", "comp", 21), ("MPI", "MPI_Allreduce", 22)])
    tree = ("FUNCTION", "main", 1, [
        ("LOOP", "loop", 2, [("COMP", "comp", 3), ("INDIRECT", "indirect", 4), ("COMP", "comp", 5)]),
        ("MPI", "MPI_Barrier", 8),
        ("CALL", "inner_prod", 10, [inner])])             # the pointer's target, as instanced elsewhere
    psg = syn.psg_from_tree(tree, "pcg.c")
    plant, indirect, work, barrier, allr = (syn.vertex_at(psg, n) for n in (3, 4, 5, 8, 22))
    runs = {}
    for p in (2, 4, 8):
        t, w = _late_rank(psg, p, plant, [allr], 0.5)
        t[:, work] = 4.0
        t[:, barrier] = 1e-4
        prof = _collective_profile(psg, p, t, w, {allr: 8})
        prof.comp_cpu[:, allr] = prof.comp_wall[:, allr] = t[:, plant] + t[:, work]   # charged at run time
        prof.comp_cpu[:, barrier] = prof.comp_wall[:, barrier] = 1e-3
        runs[p] = prof
    assert indirect in psg.children[psg.parent[plant]] and barrier in ending_mpi(psg, plant)
    top = analyse(psg, runs, weak=True)["root_causes"][0]
    assert (top["vertex"], top["rank"]) == (plant, 1) and abs(top["cost"] - 0.5) < 0.05


def test_a_rank_lighter_elsewhere_is_still_late_where_its_extra_loop_runs():
    """Measured on miniAMR: rank 1's other code was lighter, so over the whole run it was late by less
    than the planted loop (0.23 of 0.41 s) and the loop's cost was cut to that.  With the computation
    between MPI calls measured, the loop's rank is late by the whole loop at the Allreduce after it
    (everybody else waits there); it waits at the Barrier after the lighter code instead."""
    tree = ("FUNCTION", "main", 1, [("LOOP", "loop", 2, [
        ("COMP", "comp", 3), ("MPI", "MPI_Allreduce", 4), ("COMP", "comp", 5), ("MPI", "MPI_Barrier", 6)])])
    psg = syn.psg_from_tree(tree, "amr.c")
    plant, allr, other, barrier = (syn.vertex_at(psg, n) for n in (3, 4, 5, 6))
    runs = {}
    for p in (8,):                             # one scale: no scaling loss leads to the Allreduce
        t, w = _late_rank(psg, p, plant, [allr], 0.5)   # everybody but rank 1 waits for its loop
        t[:, other] = 1.0
        t[1, other] = 0.55                     # rank 1's other work is lighter
        w[1, barrier] = 0.45                   # and rank 1 waits for the others after its lighter work
        t[:, barrier] = 1e-4 + w[:, barrier]
        prof = _collective_profile(psg, p, t, w, {allr: 8, barrier: 0})
        prof.comp_cpu[:, allr] = prof.comp_wall[:, allr] = t[:, plant]
        prof.comp_cpu[:, barrier] = prof.comp_wall[:, barrier] = t[:, other]
        runs[p] = prof
    found = analyse(psg, runs)["root_causes"]
    assert [(c["vertex"], c["rank"]) for c in found][:1] == [(plant, 1)]
    assert abs(found[0]["cost"] - 0.5) < 0.05


def test_a_rank_lighter_before_another_call_is_not_less_late_at_this_one():
    """Measured on miniAMR: rank 1's planted loop ran before the halo exchange's Irecv, and rank 1
    unpacked fewer faces before the Waitany.  The walk cannot tell which call ends the loop's segment
    (the Irecvs sit in a loop that may not run), so both segments count; summed, the lighter unpacking
    cancelled most of the loop's excess.  The others wait at each call for the rank's lateness there:
    the excess is taken per ending call."""
    tree = ("FUNCTION", "main", 1, [("LOOP", "loop", 2, [
        ("COMP", "comp", 3), ("LOOP", "loop", 4, [("MPI", "MPI_Irecv", 5)]),
        ("COMP", "comp", 7), ("MPI", "MPI_Allreduce", 8)])])
    psg = syn.psg_from_tree(tree, "comm.c")
    plant, irecv, unpack, allr = (syn.vertex_at(psg, n) for n in (3, 5, 7, 8))
    runs = {}
    for p in (2, 4, 8):
        t, w = _late_rank(psg, p, plant, [allr], 0.5)    # waiting for rank 1's sends, which follow its loop
        t[:, plant] += 2.0 / p
        t[:, unpack] = 2.0 / p
        t[1, unpack] -= 0.2                              # fewer neighbours: lighter unpacking
        prof = _collective_profile(psg, p, t, w, {allr: 8})
        prof.calls[:, irecv] = 10
        prof.comp_cpu[:, irecv] = prof.comp_wall[:, irecv] = t[:, plant]
        prof.comp_cpu[:, allr] = prof.comp_wall[:, allr] = t[:, unpack]
        runs[p] = prof
    assert ending_mpi(psg, plant) == {irecv, allr}
    top = analyse(psg, runs, weak=True)["root_causes"][0]
    assert (top["vertex"], top["rank"]) == (plant, 1) and abs(top["cost"] - 0.5) < 0.05
