"""One-sided (RMA) wait states on tiny hand-made traces.  Every expected value is derived by hand
from seed 002's definitions (shared/notes/trace-analysis-reference.md §3.4) in the test's comment;
the event sequences are the ones docs/rma-patterns.md defines."""
from __future__ import annotations

import json

import numpy as np
import pytest

from scalgraph import cli
from scalgraph.io.trace_read import write_trace
from scalgraph.model import trace as tm
from scalgraph.trace import forward, patterns, rma
from tracebuild import Builder

WIN = 7     # window id (deliberately not the communicator id)


def call(b, rank, t0, t1, name, peers=(-1,), kind=tm.RMA_SYNC, tag=0, nbytes=0):
    """ENTER(name) · one RMA event per peer · EXIT, the RMA events on window WIN."""
    b.enter(rank, t0, name)
    for p in peers:
        b.ev(rank, t0, kind, peer=p, comm=WIN, tag=tag, nbytes=nbytes)
    return b.exit(rank, t1, name)


def put(b, rank, t0, t1, target):
    return call(b, rank, t0, t1, "MPI_Put", (target,), tm.RMA_PUT, nbytes=64)


def build(b) -> tm.Trace:
    tr = b.build()
    tr.windows = {WIN: 0}
    return tr


def replay(tr):
    return forward.forward_replay(forward.build_context(tr))


def rows(fwd, key):
    w = fwd.waits if patterns.PATTERNS[patterns.PATTERN_INDEX[key]].unit == "sec" else None
    if w is None:       # counts are not wait states: read them from the cube
        return fwd.cube[patterns.PATTERN_INDEX[key]]
    return w[w["pattern"] == patterns.PATTERN_INDEX[key]]


def total(fwd, key) -> float:
    return float(fwd.cube[patterns.PATTERN_INDEX[key]].sum())


def per_rank(fwd, key) -> np.ndarray:
    return fwd.cube[patterns.PATTERN_INDEX[key]].sum(axis=0)


def test_late_post_at_start():
    # target 1 posts at En(post) = 5; origin 0's MPI_Win_start spans [1, 5.5] so P* = 5 lies inside it:
    # start is taken as blocking, ω = P* - En(start) = 5 - 1 = 4 on rank 0, causer rank 1.
    # The put [6, 7] starts after the post: no Early Transfer.  Wait enters at 10 after the complete
    # (En 8): no Early Wait.  One pair (0 -> 1) that carried a put: 1 pairwise sync, 0 unneeded.
    b = Builder(2)
    call(b, 1, 5, 6, "MPI_Win_post", (0,))
    call(b, 1, 10, 12, "MPI_Win_wait")
    call(b, 0, 1, 5.5, "MPI_Win_start", (1,))
    put(b, 0, 6, 7, 1)
    call(b, 0, 8, 8.5, "MPI_Win_complete")
    fwd = replay(build(b))
    lp = rows(fwd, "rma_late_post")
    assert len(lp) == 1 and lp["wait"][0] == pytest.approx(4.0)
    assert lp["rank"][0] == 0 and lp["causer"][0] == 1
    assert fwd.ctx.trace.regions[fwd.ctx.ev["region"][lp["op"][0]]].name == "MPI_Win_start"
    assert total(fwd, "rma_late_post_start") == pytest.approx(4.0)
    assert total(fwd, "rma_late_post_complete") == 0.0
    assert total(fwd, "rma_early_transfer") == 0.0 and total(fwd, "rma_early_wait") == 0.0
    assert total(fwd, "rma_pairwise_sync") == 1 and total(fwd, "rma_unneeded_sync") == 0


def test_late_post_at_complete():
    # post enters at 3; origin's start [1, 1.1] returns before it (non-blocking start), the put
    # [1.5, 1.6] is over before 3 (no Early Transfer), MPI_Win_complete spans [2, 4] which holds P* = 3:
    # complete variant, ω = P* - En(complete) = 3 - 2 = 1.  Target's wait enters at 3.5 after the
    # complete entered (2): no Early Wait.
    b = Builder(2)
    call(b, 1, 3, 3.2, "MPI_Win_post", (0,))
    call(b, 1, 3.5, 4.2, "MPI_Win_wait")
    call(b, 0, 1, 1.1, "MPI_Win_start", (1,))
    put(b, 0, 1.5, 1.6, 1)
    call(b, 0, 2, 4, "MPI_Win_complete")
    fwd = replay(build(b))
    lp = rows(fwd, "rma_late_post")
    assert len(lp) == 1 and lp["wait"][0] == pytest.approx(1.0) and lp["causer"][0] == 1
    assert total(fwd, "rma_late_post_complete") == pytest.approx(1.0)
    assert total(fwd, "rma_late_post_start") == 0.0
    assert total(fwd, "rma_early_transfer") == 0.0 and total(fwd, "rma_early_wait") == 0.0


def test_early_transfer():
    # post enters at 3, inside the put [2, 3.5] of origin 0: the put is taken as blocking,
    # ω = En(post) - En(put) = 3 - 2 = 1, charged to MPI_Put (communication subtree).  P* = 3 is in
    # neither start [1, 1.1] nor complete [4, 4.1]: no Late Post.
    b = Builder(2)
    call(b, 1, 3, 3.1, "MPI_Win_post", (0,))
    call(b, 1, 5, 5.5, "MPI_Win_wait")
    call(b, 0, 1, 1.1, "MPI_Win_start", (1,))
    put(b, 0, 2, 3.5, 1)
    call(b, 0, 4, 4.1, "MPI_Win_complete")
    fwd = replay(build(b))
    et = rows(fwd, "rma_early_transfer")
    assert len(et) == 1 and et["wait"][0] == pytest.approx(1.0)
    assert et["rank"][0] == 0 and et["causer"][0] == 1
    assert total(fwd, "rma_late_post") == 0.0
    assert total(fwd, "rma_comm") == pytest.approx(1.5)          # the put's whole time
    assert total(fwd, "rma_early_transfer") <= total(fwd, "rma_comm")


def test_early_wait_and_late_complete():
    # target 2 posts for origins {0, 1}, enters MPI_Win_wait at 1 and leaves at 6.
    # origin 0: put -> 2 [1, 2], complete entered at 5;  origin 1: put -> 2 [1, 3], complete at 3.5.
    # Early Wait: ω = max En(complete) - En(wait) = max(5, 3.5) - 1 = 4, causer rank 0.
    # Late Complete: L_0 = 2, L_1 = 3 (last op exits), ω' = min(5, 6) - max(1, max(2, 3)) = 2.
    b = Builder(3)
    call(b, 2, 0, 0.5, "MPI_Win_post", (0, 1))
    call(b, 2, 1, 6, "MPI_Win_wait")
    for r, (op_end, c0, c1) in {0: (2, 5, 5.5), 1: (3, 3.5, 4)}.items():
        call(b, r, 0.6, 0.7, "MPI_Win_start", (2,))
        put(b, r, 1, op_end, 2)
        call(b, r, c0, c1, "MPI_Win_complete")
    fwd = replay(build(b))
    ew = rows(fwd, "rma_early_wait")
    assert len(ew) == 1 and ew["wait"][0] == pytest.approx(4.0)
    assert ew["rank"][0] == 2 and ew["causer"][0] == 0
    assert fwd.ctx.flat.rank[ew["causer_op"][0]] == 0
    assert total(fwd, "rma_late_complete") == pytest.approx(2.0)
    assert total(fwd, "rma_pairwise_sync") == 2 and total(fwd, "rma_unneeded_sync") == 0


def test_late_complete_uses_start_exit_without_ops_and_counts_unneeded():
    # As above, but origin 1 issues no op: L_1 = Ex(start_1) = 0.7, so L* = L_0 = 2 and
    # Late Complete = min(5, 6) - max(1, 2) = 3.  The pair (1 -> 2) carried nothing: unneeded 1 of 2.
    b = Builder(3)
    call(b, 2, 0, 0.5, "MPI_Win_post", (0, 1))
    call(b, 2, 1, 6, "MPI_Win_wait")
    call(b, 0, 0.6, 0.7, "MPI_Win_start", (2,))
    put(b, 0, 1, 2, 2)
    call(b, 0, 5, 5.5, "MPI_Win_complete")
    call(b, 1, 0.6, 0.7, "MPI_Win_start", (2,))
    call(b, 1, 3.5, 4, "MPI_Win_complete")
    fwd = replay(build(b))
    assert total(fwd, "rma_early_wait") == pytest.approx(4.0)
    assert total(fwd, "rma_late_complete") == pytest.approx(3.0)
    assert total(fwd, "rma_pairwise_sync") == 2 and total(fwd, "rma_unneeded_sync") == 1


def test_wait_at_fence_early_fence_and_fence_pairs():
    # Window over 3 ranks.  Fence 1 opens the epoch (all [0, 1]).  Rank 0 puts to rank 1 [1.5, 4].
    # Fence 2: rank 0 [4.5, 7], rank 1 [2, 7], rank 2 [6, 7]: max En 6 < min Ex 7, synchronising:
    #   Wait at Fence ω = 6 - En: rank 0 1.5, rank 1 4, rank 2 0 (causer rank 2).
    #   Early Fence on rank 1 (the target): latest op exit 4 - En 2 = 2 (<= its Wait at Fence 4).
    # Fence 3: rank 0 [8, 8.1], rank 1 [9, 9.1], rank 2 [8.5, 8.6]: max En 9 > min Ex 8.1, not
    #   synchronising (an implementation that did not synchronise): no wait at all.
    # Pairwise: fences 2 and 3 close epochs, each counts size-1 = 2 pairs per rank: 12.  Only (0 -> 1)
    #   in epoch 2 carried an op: 11 unneeded.
    b = Builder(3)
    for r in range(3):
        call(b, r, 0, 1, "MPI_Win_fence")
    put(b, 0, 1.5, 4, 1)
    for r, (en, ex) in enumerate([(4.5, 7), (2, 7), (6, 7)]):
        call(b, r, en, ex, "MPI_Win_fence")
    for r, (en, ex) in enumerate([(8, 8.1), (9, 9.1), (8.5, 8.6)]):
        call(b, r, en, ex, "MPI_Win_fence")
    fwd = replay(build(b))
    assert per_rank(fwd, "rma_wait_at_fence") == pytest.approx([1.5, 4.0, 0.0])
    waf = rows(fwd, "rma_wait_at_fence")
    assert set(waf["causer"].tolist()) == {2}
    assert per_rank(fwd, "rma_early_fence") == pytest.approx([0.0, 2.0, 0.0])
    assert total(fwd, "rma_pairwise_sync") == 12 and total(fwd, "rma_unneeded_sync") == 11


def test_wait_at_create_and_free():
    # Create: rank 0 [0, 2], rank 1 [1.5, 2]: max En 1.5 < min Ex 2, ω_0 = 1.5 (causer rank 1).
    # Free: rank 0 [5, 5.1], rank 1 [6, 6.1]: max En 6 > min Ex 5.1, not synchronising: 0.
    b = Builder(2)
    call(b, 0, 0, 2, "MPI_Win_create")
    call(b, 1, 1.5, 2, "MPI_Win_create")
    call(b, 0, 5, 5.1, "MPI_Win_free")
    call(b, 1, 6, 6.1, "MPI_Win_free")
    fwd = replay(build(b))
    wc = rows(fwd, "rma_wait_at_create")
    assert len(wc) == 1 and wc["wait"][0] == pytest.approx(1.5) and wc["causer"][0] == 1
    assert total(fwd, "rma_wait_at_free") == 0.0
    assert total(fwd, "rma_window") == pytest.approx(2 + 0.5 + 0.1 + 0.1)


def lock_trace(second_tag=rma.LOCK_EXCLUSIVE):
    # Target 2 computes and calls into MPI only at [3.5, 3.6] (an MPI_Iprobe).
    # Origin 0: lock(2) [1, 1.1], put [1.2, 1.3], unlock [1.4, 3]   (releases at Ex = 3)
    # Origin 1: lock(2) [2, 2.1] (lazy: returns), put [2.2, 2.3], unlock [2.4, 4]
    b = Builder(3)
    b.work(2, 3.5, 3.6, "MPI_Iprobe")
    for r, (t0, tag) in {0: (1.0, rma.LOCK_EXCLUSIVE), 1: (2.0, second_tag)}.items():
        call(b, r, t0, t0 + 0.1, "MPI_Win_lock", (2,), tag=tag)
        put(b, r, t0 + 0.2, t0 + 0.3, 2)
        call(b, r, t0 + 0.4, 3.0 if r == 0 else 4.0, "MPI_Win_unlock", (2,))
    return build(b)


def test_lock_contention_exclusive():
    # Origin 1's epoch follows origin 0's in release order (3 < 4), both exclusive: r_prev = 3.
    # Each call of origin 1's epoch waits until 3: lock min(3, 2.1) - 2 = 0.1, put 2.3 - 2.2 = 0.1
    # (communication subtree), unlock min(3, 4) - 2.4 = 0.6.  Sync part 0.7, comm part 0.1, causer 0.
    fwd = replay(lock_trace())
    lc = rows(fwd, "rma_lock_contention")
    assert per_rank(fwd, "rma_lock_contention") == pytest.approx([0.0, 0.7, 0.0])
    assert set(lc["causer"].tolist()) == {0}
    assert per_rank(fwd, "rma_comm_lock_contention") == pytest.approx([0.0, 0.1, 0.0])


def test_shared_locks_do_not_contend():
    # Origin 0 exclusive, origin 1 shared: a shared lock conflicts with the previous *exclusive*
    # holder only, which is origin 0 again: same 0.7.  Both shared: nobody contends.
    fwd = replay(lock_trace(rma.LOCK_SHARED))
    assert total(fwd, "rma_lock_contention") == pytest.approx(0.7)
    tr = lock_trace(rma.LOCK_SHARED)
    ev = tr.events[0]
    ev["tag"][(ev["kind"] == tm.RMA_SYNC) & (ev["peer"] == 2) & (ev["tag"] == rma.LOCK_EXCLUSIVE)] = rma.LOCK_SHARED
    fwd = replay(tr)
    assert total(fwd, "rma_lock_contention") == 0.0 and total(fwd, "rma_comm_lock_contention") == 0.0


def test_wait_for_progress():
    # Target 2 is inside MPI only during [3.5, 3.6].  s = max(En, min(r_prev, Ex)):
    #   origin 0 (r_prev none): lock s=1 -> min(3.5, 1.1) - 1 = 0.1; put s=1.2 -> 0.1;
    #            unlock s=1.4 -> min(3.5, 3) - 1.4 = 1.6                      -> sync 1.7, comm 0.1
    #   origin 1 (r_prev 3): lock s=2.1 -> 0; put s=2.3 -> 0; unlock s=3 -> min(3.5, 4) - 3 = 0.5
    fwd = replay(lock_trace())
    assert per_rank(fwd, "rma_wait_for_progress") == pytest.approx([1.7, 0.5, 0.0])
    assert per_rank(fwd, "rma_comm_wait_for_progress") == pytest.approx([0.1, 0.0, 0.0])


def test_unpaired_epoch_is_one_clear_error():
    b = Builder(2)
    call(b, 0, 1, 2, "MPI_Win_start", (1,))
    call(b, 1, 0, 1, "MPI_Win_post", (0,))
    call(b, 1, 3, 4, "MPI_Win_wait")
    from scalgraph.errors import UserError
    with pytest.raises(UserError, match="MPI_Win_start .* has no matching MPI_Win_complete"):
        replay(build(b))


def test_region_classes_put_rma_under_mpi():
    assert patterns.region_class("MPI_Win_start") == "rma_active"
    assert patterns.region_class("MPI_Win_lock") == "rma_passive"
    assert patterns.region_class("MPI_Put") == "rma_comm"
    assert patterns.region_class("MPI_Win_free") == "rma_window"
    keys = {p.key: p for p in patterns.PATTERNS}
    assert keys["rma_late_complete"].parent == "rma_early_wait"
    assert keys["rma_early_fence"].parent == "rma_wait_at_fence"
    assert keys["rma_early_transfer"].parent == "rma_comm"


def test_trace_command_reports_rma_part(tmp_path, capsys):
    b = Builder(2)
    call(b, 1, 5, 6, "MPI_Win_post", (0,))
    call(b, 1, 10, 12, "MPI_Win_wait")
    call(b, 0, 1, 5.5, "MPI_Win_start", (1,))
    put(b, 0, 6, 7, 1)
    call(b, 0, 8, 8.5, "MPI_Win_complete")
    path = tmp_path / "gats.json"
    write_trace(build(b), str(path), "json")
    assert cli.main(["trace", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    tree = {p["key"]: p for p in rep["patterns"]}
    assert tree["rma_late_post"]["seconds"] == pytest.approx(4.0)
    assert tree["rma"]["seconds"] == pytest.approx(4.5 + 1 + 1 + 0.5 + 2)
    assert tree["rma_pairwise_sync"]["unit"] == "occ" and tree["rma_pairwise_sync"]["seconds"] == 1
    assert any(i["pattern"] == "Late Post" and i["rank"] == 0 for i in rep["instances"])
    assert cli.main(["trace", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Late Post" in text and "Pairwise Synchronizations for RMA" in text and "1 occ" in text


def test_the_documented_json_example(tmp_path, capsys):
    # docs/rma-patterns.md shows the Late Post trace of test_late_post_at_start in JSON: 4 s on rank 0
    import pathlib
    import re
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "rma-patterns.md").read_text()
    path = tmp_path / "doc.json"
    path.write_text(re.search(r"```json\n(.*?)```", doc, re.S).group(1))
    assert cli.main(["trace", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    late = [i for i in rep["instances"] if i["pattern"] == "Late Post"]
    assert len(late) == 1 and late[0]["rank"] == 0 and late[0]["seconds"] == pytest.approx(4.0)


def test_late_post_delay_is_charged_to_the_late_posters_work():
    # rank 0: f [0, 1], then MPI_Win_start [1, 5.2] waits for rank 1's post (En 5): Late Post 4.
    # rank 1: f [0, 5], post [5, 5.1]; the wait enters at 7.5, after rank 0's complete (6.5): no Early Wait.
    # Delay (seed 000): both intervals start at the trace start; p_0 = {f: 1}, p_1 = {f: 5}, so
    # Δ = {f: 4}, W_1 = 0, s = 1/4 and rank 1's f carries the short-term cost 4 · 1/4 · 4 = 4.
    from scalgraph.commands.trace import analyse
    b = Builder(2)
    b.work(0, 0, 1, "f")
    call(b, 0, 1, 5.2, "MPI_Win_start", (1,))
    put(b, 0, 5.5, 6, 1)
    call(b, 0, 6.5, 7, "MPI_Win_complete")
    b.work(1, 0, 5, "f")
    call(b, 1, 5, 5.1, "MPI_Win_post", (0,))
    call(b, 1, 7.5, 8, "MPI_Win_wait")
    rep = analyse(build(b), clock_correction=False)
    causes = rep["delay"]["root_causes"]
    assert len(causes) == 1 and causes[0]["callpath"] == "f" and causes[0]["ranks"]["max_rank"] == 1
    assert causes[0]["short_term"] == pytest.approx(4.0) and causes[0]["long_term"] == 0.0
    assert causes[0]["by_pattern"] == {"Late Post": pytest.approx(4.0)}
