"""Detection on synthetic runs whose root cause is known (scalgraph.analysis.synthetic)."""
from __future__ import annotations

import numpy as np

from scalgraph.analysis import synthetic as syn
from scalgraph.analysis.abnormal import find_abnormal
from scalgraph.analysis.backtrack import backtrack
from scalgraph.analysis.detect import analyse
from scalgraph.analysis.ppg import build_ppg, intra_process_dependences
from scalgraph.model.profile import DEP_RECV, DEP_SEND


def test_intra_process_edges_follow_execution_order_and_loop_ends():
    psg = syn.psg_from_tree(syn.CG_TREE)
    data, control = intra_process_dependences(psg)
    at = lambda line: syn.vertex_at(psg, line)  # noqa: E731
    assert data[at(5)] == 0                         # first child -> its parent
    assert data[at(10)] == at(5)                    # loop after the set-up
    assert data[at(12)] == at(10)                   # first statement of the body -> the loop header
    assert data[at(20)] == at(16)
    assert control[at(10)] == at(20)                # loop -> the end of its body
    assert control[at(12)] == -1 and data[0] == -1


def test_ppg_matches_sends_with_receives():
    psg, runs, _ = syn.cg_like(scales=(4,))
    ppg = build_ppg(psg, runs[4])
    send, recv = syn.vertex_at(psg, 15), syn.vertex_at(psg, 16)
    # rank 2 receives from rank 1 (the slow one) and waited for it
    assert ppg.comm_edges(recv, 2) == [(send, 1, 0.4)]
    assert ppg.comm_edges(recv, 0) == [(send, 3, 0.0)]
    assert ppg.comm_edges(send, 0) == []            # sends that did not wait have no backward edge
    allr = syn.vertex_at(psg, 20)
    assert ppg.collective_partners(allr, 0) == [(allr, r) for r in range(4)]


def test_tag_mismatch_falls_back_to_any_tag_of_the_same_pair_and_synchronous_send_edge():
    psg, runs, _ = syn.cg_like(scales=(2,))
    prof = runs[2]
    send, recv = syn.vertex_at(psg, 15), syn.vertex_at(psg, 16)
    prof.deps["tag"][prof.deps["kind"] == DEP_RECV] = 99          # e.g. received with MPI_ANY_TAG remapped
    prof.deps["wait"][(prof.deps["kind"] == DEP_SEND) & (prof.deps["rank"] == 0)] = 0.25
    ppg = build_ppg(psg, prof)
    assert ppg.comm_edges(recv, 0)[0][:2] == (send, 1)
    assert ppg.comm_edges(send, 0) == [(recv, 1, 0.25)]           # blocked sender -> late receiver


def test_backtracking_jumps_to_the_last_arriving_participant_of_a_collective():
    psg, runs, comp = syn.cg_like(scales=(8,), slow=5)
    ppg = build_ppg(psg, runs[8])
    allr = syn.vertex_at(psg, 20)
    steps = backtrack(ppg, allr, 0)
    assert (steps[1].vertex, steps[1].rank, steps[1].via) == (allr, 5, "collective")
    assert (comp, 5) in [(s.vertex, s.rank) for s in steps]
    assert steps[-1].vertex == 0                    # walks on to the root


def test_backtracking_follows_the_waiting_p2p_edge():
    psg, runs, comp = syn.cg_like(scales=(8,), slow=5)
    ppg = build_ppg(psg, runs[8])
    recv, send = syn.vertex_at(psg, 16), syn.vertex_at(psg, 15)
    steps = [(s.vertex, s.rank, s.via) for s in backtrack(ppg, recv, 6)]
    assert steps[:3] == [(recv, 6, "start"), (send, 5, "comm"), (comp, 5, "data")]


def test_backtracking_enters_a_loop_at_its_end_once_and_terminates():
    psg, runs, _ = syn.cg_like(scales=(4,))
    ppg = build_ppg(psg, runs[4])
    final = syn.vertex_at(psg, 40)
    walk = backtrack(ppg, final, 0)
    steps = [(s.vertex, s.via) for s in walk]
    at = lambda line: syn.vertex_at(psg, line)  # noqa: E731
    assert steps[:3] == [(final, "start"), (at(10), "data"), (at(20), "control")]
    assert steps[-1] == (0, "data")
    assert len({(s.vertex, s.rank) for s in walk}) == len(walk)


def test_cg_like_extra_computation_on_one_rank_is_the_top_root_cause():
    psg, runs, comp = syn.cg_like(slow=1)
    result = analyse(psg, runs)
    assert result["problem_found"]
    top = result["root_causes"][0]
    assert (top["vertex"], top["rank"], top["line"]) == (comp, 1, 12)
    assert abs(top["cost"] - 0.4) < 0.05
    ranks = {r["rank"] for a in top["abnormal"] for r in a["ranks"]}
    assert ranks == {1}
    # it was reached from the Allreduce (non-scalable because of the waiting) through rank 1
    assert top["found_from"]["name"] == "MPI_Allreduce"
    assert [s["via"] for s in top["path"]][:2] == ["start", "collective"]
    assert any(n["name"] == "MPI_Allreduce" for n in result["non_scalable"])


def test_imbalanced_stencil_names_the_update_and_the_heavy_ranks():
    psg, runs, upd = syn.imbalanced_stencil()
    result = analyse(psg, runs)
    top = result["root_causes"][0]
    assert top["vertex"] == upd and top["rank"] in range(4)
    abn = [a for a in top["abnormal"] if a["metric"] == "time"][0]
    assert {r["rank"] for r in abn["ranks"]} == {0, 1, 2, 3}
    assert all(1.5 < r["ratio"] < 1.7 for r in abn["ranks"])
    # the neighbours' unusual waiting in the Waitall leads to the same line
    waitall = syn.vertex_at(psg, 15)
    assert any(a["vertex"] == waitall and a["metric"] == "wait" for a in result["abnormal"])
    assert len(result["root_causes"]) == 1


def test_badly_scaling_collective_is_its_own_root_cause_with_a_linear_model():
    psg, runs, a2a = syn.bad_collective()
    result = analyse(psg, runs)
    # with noisy computation before it, the walk finds small excesses; they must not hide the collective
    noisy = analyse(*syn.bad_collective(noise=0.05)[:2])
    assert noisy["root_causes"][0]["vertex"] == a2a and len(noisy["root_causes"]) == 1
    top = result["root_causes"][0]
    assert top["vertex"] == a2a and top["name"] == "MPI_Alltoall"
    assert top["model"].endswith("* p")
    assert np.isclose(top["predicted"]["32"], 0.32) and np.isclose(top["predicted"]["64"], 0.64)
    assert np.isclose(top["scaling_loss"], 0.16 - 0.02 * 2 / 16)
    assert top["abnormal"] == []


def test_balanced_control_reports_no_problem():
    psg, runs, _ = syn.balanced()
    result = analyse(psg, runs)
    assert not result["problem_found"] and result["root_causes"] == []
    assert result["abnormal"] == []


def test_balanced_control_with_a_planted_slow_rank_is_found():
    """The control is not quiet by construction: the same program with one slow rank is reported."""
    psg, runs, _ = syn.balanced()
    comp = syn.vertex_at(psg, 12)
    for p, prof in runs.items():
        prof.time[p - 1, comp] *= 1.8
    result = analyse(psg, runs)
    assert result["root_causes"][0]["vertex"] == comp and result["root_causes"][0]["rank"] == 15


def test_one_scale_still_finds_abnormal_ranks():
    psg, runs, comp = syn.imbalanced_stencil(scales=(8,))
    result = analyse(psg, runs)
    assert result["notes"] and result["root_causes"][0]["vertex"] == comp
    assert result["root_causes"][0]["model"] is None and result["non_scalable"] == []


def test_abnormal_threshold_is_relative_to_the_median():
    psg, runs, comp = syn.imbalanced_stencil(scales=(8,))
    found = {a.vertex for a in find_abnormal(psg, runs[8], thd=1.3) if a.metric == "time"}
    assert comp in found
    assert comp not in {a.vertex for a in find_abnormal(psg, runs[8], thd=1.7) if a.metric == "time"}


def test_clustering_option_models_the_slowest_group():
    psg, runs, comp = syn.cg_like(slow=1)
    result = analyse(psg, runs, clusters=3)
    assert result["root_causes"][0]["vertex"] == comp
    # three groups: the slow rank, its waiting neighbour, the rest; the slow rank alone does not scale
    assert result["root_causes"][0]["scaling_loss"] > 0.3


def test_small_waiting_does_not_lead_the_walk_away_from_a_late_rank():
    """Summed over iterations, the slow rank itself waits a little at its receive; the walk crosses
    only towards a rank that waited less in total, so it stays on the slow rank and reaches its work."""
    psg, runs, comp = syn.cg_like(scales=(8,), slow=5)
    prof = runs[8]
    recv = syn.vertex_at(psg, 16)
    prof.wait[5, recv] = prof.deps["wait"][(prof.deps["rank"] == 5) & (prof.deps["vertex"] == recv)] = 0.01
    prof.time[5, recv] += 0.01
    ppg = build_ppg(psg, prof)
    crossing = [(s.vertex, s.rank) for s in backtrack(ppg, recv, 5)]
    assert crossing[1][1] == 4                        # the paper's rule: any waiting crosses
    staying = [(s.vertex, s.rank) for s in backtrack(ppg, recv, 5, prof.wait.sum(axis=1))]
    assert staying[:3] == [(recv, 5), (syn.vertex_at(psg, 15), 5), (comp, 5)]


def test_mpi_start_up_is_not_ranked_but_noted():
    psg, runs, comp = syn.balanced()
    tree = ("FUNCTION", "main", 1, [("MPI", "MPI_Init", 2)] + list(syn.CG_TREE[3]))
    psg2 = syn.psg_from_tree(tree, "balanced.c")
    init = syn.vertex_at(psg2, 2)
    for p, prof in runs.items():
        t = np.insert(prof.time, init, 0.05 * p, axis=1)      # start-up grows with the rank count
        w = np.insert(prof.wait, init, 0.0, axis=1)
        prof.time, prof.wait, prof.nvertices = t, w, len(psg2)
        prof.samples = np.insert(prof.samples, init, 0, axis=1)
        prof.calls = np.insert(prof.calls, init, 1, axis=1)
        prof.deps["vertex"] += prof.deps["vertex"] >= init
    result = analyse(psg2, runs)
    assert not result["problem_found"]
    assert any("MPI_Init" in n for n in result["notes"])


def test_report_text_condenses_long_paths():
    from scalgraph.io.report import _path_text
    steps = [{"vertex": i, "rank": 0, "via": v, "location": f"a.c:{i}", "kind": k, "name": n}
             for i, (v, k, n) in enumerate([("start", "MPI", "MPI_Allreduce"), ("data", "LOOP", "loop"),
                                            ("control", "COMP", "comp"), ("data", "COMP", "comp"),
                                            ("data", "MPI", "MPI_Recv"), ("data", "COMP", "comp")])]
    assert _path_text(steps) == ("MPI_Allreduce@0 (a.c:0) -[4 steps back in rank 0]-> MPI_Recv@0 (a.c:4) "
                                 "-[data]-> comp@0 (a.c:5)")


def _allreduce_growing(per_rank_at_16: float, cores: int):
    """balanced(), but every rank sits longer in the fixed-size Allreduce at larger scales; each run
    records `cores` cores per rank and all ranks on one host."""
    psg, runs, _ = syn.balanced()
    allr = syn.vertex_at(psg, 20)
    for p, prof in runs.items():
        prof.time[:, allr] = prof.wait[:, allr] = 0.005 + per_rank_at_16 * p / 16
        prof.deps["wait"][prof.deps["vertex"] == allr] = 0.005 + per_rank_at_16 * p / 16
        prof.meta.update(cores=[cores] * p, ranks_on_host=[p] * p)
    return psg, analyse(psg, runs), allr


def test_fixed_size_collective_under_oversubscription_is_no_cause():
    """More ranks than cores: every blocking call gathers scheduler delays; a fixed-size Allreduce
    moves the same bytes per rank at every scale, so even a large time growth is not its own cost."""
    _, quiet, allr = _allreduce_growing(0.035, cores=2)
    assert not quiet["problem_found"]
    _, loud, _ = _allreduce_growing(0.3, cores=2)
    assert loud["root_causes"] == []
    assert any(n["vertex"] == allr for n in loud["non_scalable"])      # a symptom, still listed
    assert loud["oversubscribed"]["16"] and not loud["oversubscribed"]["2"]


def test_collective_time_beyond_the_latency_model_counts_when_ranks_have_their_cores():
    _, loud, allr = _allreduce_growing(0.3, cores=16)
    assert [c["vertex"] for c in loud["root_causes"]] == [allr]
    assert loud["root_causes"][0]["explains"]["what"] == "own scaling"
    assert loud["root_causes"][0]["explains"]["rule"] == "time beyond log2(p) latency"
    _, quiet, _ = _allreduce_growing(0.035, cores=16)              # within log2(p) latency + floor
    assert not quiet["problem_found"]


def test_row_keys_are_equal_exactly_for_equal_rows():
    from scalgraph.analysis.ppg import _row_keys
    rng = np.random.default_rng(7)
    rows = np.stack([rng.integers(-1, 6, 400), rng.integers(0, 6, 400),
                     rng.choice([0, 91, 2 ** 30], 400), rng.choice([-1, 7, 2 ** 31 - 1], 400)], axis=1)
    keys = _row_keys(rows)
    same_row = (rows[:, None, :] == rows[None, :, :]).all(axis=2)
    assert np.array_equal(keys[:, None] == keys[None, :], same_row)


def test_replicated_computation_that_does_not_shrink_is_found_with_a_constant_model():
    """Every rank repeats the same set-up work: no rank is abnormal, the vertex simply does not scale."""
    tree = ("FUNCTION", "main", 1, [("COMP", "comp", 3), ("LOOP", "loop", 5, [
        ("COMP", "comp", 6), ("MPI", "MPI_Allreduce", 7)])])
    psg = syn.psg_from_tree(tree, "rep.c")
    setup, work, allr = (syn.vertex_at(psg, n) for n in (3, 6, 7))
    runs = {}
    for p in (2, 4, 8, 16, 32):
        t = np.zeros((p, len(psg)))
        t[:, setup] = 0.3
        t[:, work] = 8.0 / p
        t[:, allr] = 1e-4
        runs[p] = syn._profile(psg, p, t, np.zeros_like(t), [(r, allr, syn.DEP_COLL, -1, -1, 0, 1, 8, 0.0)
                                                            for r in range(p)])
    result = analyse(psg, runs)
    assert [c["vertex"] for c in result["root_causes"]] == [setup]
    top = result["root_causes"][0]
    assert top["abnormal"] == [] and top["model"] == "0.3"
    assert np.isclose(top["scaling_loss"], 0.3 - 0.3 * 2 / 32)


def test_weak_scaling_ideal_is_constant_time():
    psg, runs, _ = syn.balanced()
    for p, prof in runs.items():          # the same work per rank at every scale: perfect weak scaling
        prof.time *= p / 2
        prof.wait *= p / 2
    assert not analyse(psg, runs, weak=True)["problem_found"]
    strong = analyse(psg, runs)
    assert strong["root_causes"][0]["vertex"] == syn.vertex_at(psg, 12)      # judged as strong scaling


def test_weak_or_strong_is_judged_from_the_computation_summed_over_the_ranks():
    """Not told (the CLI's default, weak=None): a program whose per-rank computation stays constant
    as p grows is a weak-scaling one (HPCCG and AMG take a per-rank size) and is judged by the
    constant ideal, with a note; the same shape of data with the work split over the ranks is judged
    strong; a replicated set-up that does not shrink is still found under the inferred strong ideal."""
    psg, runs, _ = syn.balanced()
    for p, prof in runs.items():
        prof.time *= p / 2
        prof.wait *= p / 2
    weak = analyse(psg, runs, weak=None)
    assert not weak["problem_found"] and weak["thresholds"]["ideal"] == "weak"
    assert any(n.startswith("scaling judged weak") for n in weak["notes"])
    psg, runs, _ = syn.balanced()
    strong = analyse(psg, runs, weak=None)
    assert strong["thresholds"]["ideal"] == "strong" and not strong["problem_found"]
    assert any(n.startswith("scaling judged strong") for n in strong["notes"])
