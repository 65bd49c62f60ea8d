"""Scalasca 2.6's definitions, pinned with hand-derived scenarios (issue 11; docs/trace-analysis.md).

Every expected number below is derived by hand in the test's docstring or comments from the
formulas of shared/notes/trace-analysis-reference.md (§3 patterns, §4 delay costs, §5 critical path),
in abstract time units.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from scalgraph.model import trace as tm
from scalgraph.trace import critical_path, delay, forward, patterns
from scalgraph.trace.matching import callpath_names
from tracebuild import Builder


def replay(b: Builder, options: delay.DelayOptions = delay.DelayOptions()):
    fwd = forward.forward_replay(forward.build_context(b.build()))
    return fwd, delay.delay_analysis(fwd, options), critical_path.critical_path(fwd)


def by_name(fwd, values: np.ndarray) -> dict[str, float]:
    """[call path, ...] -> {name: sum} for the non-zero entries."""
    names = callpath_names(fwd.ctx.nest, fwd.ctx.trace.regions)
    per = values.reshape(len(names), -1).sum(axis=1)
    return {n: round(float(v), 9) for n, v in zip(names, per) if abs(v) > 1e-12}


def pattern_total(fwd, key: str) -> dict[int, float]:
    rows = fwd.waits[fwd.waits["pattern"] == patterns.PATTERN_INDEX[key]]
    return {int(r["rank"]): round(float(r["wait"]), 9) for r in rows}


# --- item 1: MPI_Finalize is no activity; inter-partition imbalance in [0, impact] ----------------

def finalize_scenario() -> Builder:
    """R0: comp [0,10], MPI_Send [10,11], MPI_Finalize [11,12]; R1: comp [0,4], MPI_Recv [4,12],
    MPI_Finalize [12,12] (the issue's scenario)."""
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 10, "comp").send(0, 10, 11, 1).work(0, 11, 12, "MPI_Finalize").exit(0, 12, "main")
    b.enter(1, 0, "main").work(1, 0, 4, "comp").recv(1, 4, 12, 0).work(1, 12, 12, "MPI_Finalize").exit(1, 12, "main")
    return b


def test_finalize_is_no_activity_so_recv_keeps_its_imbalance_impact():
    """Late Sender at R1: ω = 10 - 4 = 6.  The path ends where R1 enters MPI_Finalize (12): R1 [10,12]
    (Recv's non-waiting 2), then R0 [0,10] (comp 10); T = 12.  t_l without Finalize: R0 comp 10, Send 1;
    R1 comp 4, Recv 2.  W_0 = 12 - 11 = 1, W_1 = 12 - 6 = 6.  E_0 = {Recv: 2}, E_1 = {comp: 6}, so
    G[Recv] = 2·1/2 = 1, G[comp] = 6·6/6 = 6.  Inter-partition: R0 never runs Recv, L_0 = 10 + 1 = 11,
    h_0 = (12 - 11)/2 = 0.5, HR[Recv] = 0.5·2 = 1; R1 runs every path call path (h = 0)."""
    fwd, _, cp = replay(finalize_scenario())
    assert cp.length == pytest.approx(12.0)
    assert [(int(r), a, b) for r, a, b in zip(cp.seg_rank, cp.seg_start, cp.seg_end)] == [(1, 10.0, 12.0), (0, 0.0, 10.0)]
    assert by_name(fwd, cp.profile) == {"main/comp": 10.0, "main/MPI_Recv": 2.0}
    assert by_name(fwd, cp.imbalance_impact) == {"main/comp": 6.0, "main/MPI_Recv": 1.0}
    assert by_name(fwd, cp.inter_partition) == {"main/MPI_Recv": 1.0}
    assert "main/MPI_Finalize" not in by_name(fwd, cp.time)          # no activity in Finalize
    assert by_name(fwd, cp.time) == {"main/comp": 14.0, "main/MPI_Send": 1.0, "main/MPI_Recv": 2.0}


def test_path_ends_at_the_last_finalize_enter_not_at_its_exit():
    """R0 enters Finalize at 11, R1 at 12, both leave at 13: the path is 12 long, Finalize not on it."""
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 11, "f").work(0, 11, 13, "MPI_Finalize").exit(0, 13, "main")
    b.enter(1, 0, "main").work(1, 0, 12, "g").work(1, 12, 13, "MPI_Finalize").exit(1, 13, "main")
    fwd, _, cp = replay(b)
    assert cp.length == pytest.approx(12.0) and int(cp.seg_rank[0]) == 1
    assert by_name(fwd, cp.profile) == {"main/g": 12.0}


def _random_trace(seed: int) -> Builder:
    rnd = random.Random(seed)
    nr = rnd.randint(2, 4)
    b = Builder(nr)
    t = [0.0] * nr
    for r in range(nr):
        b.enter(r, 0.0, "main")
    for _ in range(rnd.randint(1, 8)):
        if rnd.random() < 0.5:
            r = rnd.randrange(nr)
            d = rnd.choice([0.0, 0.5, 1.0, 3.0])
            b.work(r, t[r], t[r] + d, rnd.choice("fgh"))
            t[r] += d
        else:
            s, d = rnd.sample(range(nr), 2)
            b.send(s, t[s], t[s] + 0.1, d, name=rnd.choice(["MPI_Send", "MPI_Ssend"]))
            post = t[d]
            end = max(post, t[s]) + rnd.choice([0.0, 0.2])
            b.recv(d, post, end, s)
            t[s], t[d] = t[s] + 0.1, end
    for r in range(nr):
        b.work(r, t[r], t[r], "MPI_Finalize").exit(r, t[r], "main")
    return b


def test_inter_partition_imbalance_is_never_negative_nor_above_the_impact():
    checked = 0
    for seed in range(60):
        _, _, cp = replay(_random_trace(seed))
        assert np.all(cp.inter_partition >= -1e-12), seed
        assert np.all(cp.inter_partition <= cp.imbalance_impact + 1e-9), seed
        assert np.all(cp.intra_partition >= -1e-9), seed
        checked += int(np.any(cp.imbalance_impact > 0))
    assert checked > 10                       # the property was tested on real imbalance


# --- item 7: patterns as scout ---------------------------------------------------------------------

def test_init_completion_and_wait_at_finalize():
    """MPI_Init entered at 0 by all, left at 1, 2, 3: completion = Ex - max(min Ex = 1, min(max En = 0,
    Ex)) = 0, 1, 2.  MPI_Finalize entered at 5, 7, 9, left at 10: wait = min(9, 10) - En = 4, 2, 0."""
    b = Builder(3)
    for r in range(3):
        b.enter(r, 0, "main").work(r, 0, 1 + r, "MPI_Init").work(r, 1 + r, 5 + 2 * r, "f")
        b.work(r, 5 + 2 * r, 10, "MPI_Finalize").exit(r, 10, "main")
    fwd, dl, _ = replay(b)
    assert pattern_total(fwd, "init_completion") == {1: 1.0, 2: 2.0}
    assert pattern_total(fwd, "wait_finalize") == {0: 4.0, 1: 2.0}
    init_exit = fwd.cube[patterns.PATTERN_INDEX["init_exit"]].sum()
    assert init_exit == pytest.approx((1 + 2 + 3) + (5 + 3 + 1))      # time in the calls
    assert len(dl.waits) == 0                 # neither has a causer: no delay costs


def test_collective_ends_at_its_collective_end_record():
    """Barrier: R0 enters at 0, R1 at 2; the collective-end records are at 3, the region exits at
    4 (R0) and 3.5 (R1).  Wait at Barrier R0 = 2; Barrier Completion uses the records: Ex - max(min Ex,
    max En) = 3 - 3 = 0 (with the region exits it would be 4 - 3.5 = 0.5 on R0)."""
    b = Builder(2)
    for r, (en, ex) in enumerate(((0.0, 4.0), (2.0, 3.5))):
        b.enter(r, en, "MPI_Barrier").ev(r, en, tm.COLL_BEGIN, comm=0)
        b.ev(r, 3.0, tm.COLL_END, comm=0).exit(r, ex, "MPI_Barrier")
    fwd, _, _ = replay(b)
    assert pattern_total(fwd, "wait_barrier") == {0: 2.0}
    assert pattern_total(fwd, "barrier_completion") == {}


def test_early_reduce_costs_go_to_the_latest_sender():
    """Reduce to root 0: R0 enters at 0, R1 (f [0,2]) at 2, R2 (g [0,3]) at 3, all leave at 4.  The root
    waits for the latest sender: ω = 3, causer R2.  R2's interval [0,3] has g 3, the root's is empty:
    ΣΔ = 3, s = 1/3, short-term cost of g = 3·(1/3)·3 = 3."""
    b = Builder(3)
    b.enter(0, 0, "main").coll(0, 0, 4, "MPI_Reduce", root=0, sent=8, recvd=8).exit(0, 4, "main")
    b.enter(1, 0, "main").work(1, 0, 2, "f").coll(1, 2, 4, "MPI_Reduce", root=0, sent=8, recvd=0).exit(1, 4, "main")
    b.enter(2, 0, "main").work(2, 0, 3, "g").coll(2, 3, 4, "MPI_Reduce", root=0, sent=8, recvd=0).exit(2, 4, "main")
    fwd, dl, cp = replay(b)
    assert pattern_total(fwd, "early_reduce") == {0: 3.0}
    assert by_name(fwd, dl.short_term) == {"main/g": 3.0}
    assert 2 in cp.seg_rank.tolist() and 1 not in cp.seg_rank.tolist()   # the path continues on R2


def test_only_real_mpi_function_names_are_mpi():
    """The APART suite's user function mpi_commpattern_sendrecv is computation, not MPI time."""
    b = Builder(2)
    for r in range(2):
        b.enter(r, 0, "main").work(r, 0, 2 + r, "mpi_commpattern_sendrecv").coll(r, 2 + r, 4, "MPI_Barrier")
        b.exit(r, 4, "main")
    fwd, dl, _ = replay(b)
    mpi = fwd.cube[patterns.PATTERN_INDEX["mpi"]].sum()
    assert mpi == pytest.approx(2.0 + 1.0)                     # the barriers only
    assert patterns.region_class("mpi_commpattern_sendrecv") == "user"
    assert patterns.region_class("mpi_allreduce_") == "collective"   # a Fortran spelling is MPI
    assert not delay.mpi_callpaths(fwd.ctx)[fwd.ctx.nest.cp_region == 1].any()


# --- item 7: delay costs as scout ------------------------------------------------------------------

def chain_scenario() -> Builder:
    """A (rank 0): f [0,3], MPI_Send [3,3.1] to B.  B (rank 1): MPI_Recv [0,3.1], then MPI_Allreduce on
    {B, C} [3.1,3.2].  C (rank 2): g [0,1], MPI_Allreduce [1,3.2]."""
    b = Builder(3, comms={0: [0, 1, 2], 1: [1, 2]})
    b.enter(0, 0, "main").work(0, 0, 3, "f").send(0, 3, 3.1, 1).exit(0, 3.2, "main")
    b.enter(1, 0, "main").recv(1, 0, 3.1, 0).coll(1, 3.1, 3.2, "MPI_Allreduce", comm=1).exit(1, 3.2, "main")
    b.enter(2, 0, "main").work(2, 0, 1, "g").coll(2, 1, 3.2, "MPI_Allreduce", comm=1).exit(2, 3.2, "main")
    return b


def test_long_term_costs_are_filed_under_the_wait_at_the_end_of_the_chain():
    """Late Sender at B: ω = 3, causer A, Δ = {f: 3}, s = 1/3: short-term f 3 (Late Sender).
    Wait at N x N at C: ω = min(3.1, 3.2) - 1 = 2.1, causer B; B's interval [0, 3.1] holds Recv's
    non-waiting 0.1 and the wait 3, C's holds g 1: Δ = {Recv: 0.1}, s = 1/3.1: short-term Recv
    2.1·0.1/3.1, Γ(Late Sender at B) = 2.1·3/3.1 (of family N x N).  Back at the Late Sender: long-term
    f = Γ·(1/3)·3 = 2.1·3/3.1, filed under Wait at N x N (scout) -- or under Late Sender ("direct")."""
    ls, nxn = patterns.PATTERN_INDEX["late_sender"], patterns.PATTERN_INDEX["wait_nxn"]
    gamma = 2.1 * 3 / 3.1
    fwd, dl, _ = replay(chain_scenario())
    assert by_name(fwd, dl.short_by_pattern[ls]) == {"main/f": 3.0}
    assert by_name(fwd, dl.short_by_pattern[nxn]) == {"main/MPI_Recv": round(2.1 * 0.1 / 3.1, 9)}
    assert by_name(fwd, dl.long_by_pattern[nxn]) == {"main/f": round(gamma, 9)}
    assert by_name(fwd, dl.long_by_pattern[ls]) == {}
    assert dl.total + dl.unexplained == pytest.approx(3 + 2.1)          # conservation
    _, direct, _ = replay(chain_scenario(), delay.DelayOptions(family="direct"))
    assert by_name(fwd, direct.long_by_pattern[ls]) == {"main/f": round(gamma, 9)}
    assert by_name(fwd, direct.long_by_pattern[nxn]) == {}
    assert direct.total == pytest.approx(dl.total)


def test_point_to_point_short_term_scale_is_clipped_at_one():
    """A: f [0,1], then 2 units outside every region, MPI_Send at 3; B: MPI_Recv [0,3.5]: ω = 3, but
    A's interval holds only f 1 (time outside every call path is no delay), ΣΔ + W = 1.  Scout: the
    wait distributes min(ω, ΣΔ + W) = 1, f costs 1 and 2 stay unexplained; the seed's s = 1/1 makes the
    1-unit delay cost 3."""
    b = Builder(2)
    b.work(0, 0, 1, "f").send(0, 3, 3.5, 1)
    b.recv(1, 0, 3.5, 0)
    fwd, dl, _ = replay(b)
    assert by_name(fwd, dl.short_term) == {"f": 1.0}
    assert dl.unexplained == pytest.approx(2.0) and dl.scale.tolist() == [1.0]
    assert dl.distributed.tolist() == [1.0] and dl.direct.tolist() == [1.0]
    _, seed, _ = replay(b, delay.DelayOptions(scale="seed"))
    assert by_name(fwd, seed.short_term) == {"f": 3.0} and seed.unexplained == pytest.approx(0.0)


def test_a_collective_wait_is_not_clipped():
    """Barrier: R0 idles outside every region [0,3) after f [0,1]... the same 1-unit delay: scout's
    collective delay scale is ω/(ΣΔ + W) unclipped, so f costs the whole wait of 3."""
    b = Builder(2)
    b.work(0, 0, 1, "f").coll(0, 3, 3.5, "MPI_Barrier")
    b.coll(1, 0, 3.5, "MPI_Barrier")
    fwd, dl, _ = replay(b)
    assert pattern_total(fwd, "wait_barrier") == {1: 3.0}
    assert by_name(fwd, dl.short_term) == {"f": 3.0}


def test_only_messages_with_a_wait_state_start_a_delay_interval():
    """A -> B twice.  First message: B arrives late (B's h [0,2], A sent at 1): no wait, and as scout
    it synchronises nothing.  Second: A's f [1.5,4], send at 4; B's recv from 2.5 waits 1.5.  Scout: A's
    interval starts at the trace start, A's p = {f 2.5, first Send's 0.5 (non-waiting), g 1} against
    B's {h 2, k 0.5}: ΣΔ = 2.5 + 0.5 + 1 = 4, s = 1/4; ω = 1.5 distributed min(1.5, 4): f 1.5·2.5/4.
    Every message ("messages"): the interval starts at the first message (A 1, B 2): A {Send 0.5,
    f 2.5} vs B {k 0.5}: ΣΔ = 3, f 1.5·2.5/3."""
    b = Builder(2)
    b.work(0, 0, 1, "g").send(0, 1, 1.5, 1).work(0, 1.5, 4, "f").send(0, 4, 4.1, 1)
    b.work(1, 0, 2, "h").recv(1, 2, 2, 0).work(1, 2, 2.5, "k").recv(1, 2.5, 4.1, 0)
    fwd, dl, _ = replay(b)
    assert pattern_total(fwd, "late_sender") == {1: 1.5}
    assert by_name(fwd, dl.short_term)["f"] == pytest.approx(1.5 * 2.5 / 4)
    _, every, _ = replay(b, delay.DelayOptions(sync_points="messages"))
    assert by_name(fwd, every.short_term)["f"] == pytest.approx(1.5 * 2.5 / 3)


def test_total_time_includes_program_begin_and_end():
    """OTF2 ProgramBegin at -1 on both ranks, ProgramEnd at 5 on rank 0 and 4.5 on rank 1; events span
    [0, 4]: the total time is 2·4 (call paths) + (1 + 1) + (1 + 0.5) = 11.5, as scout counts it."""
    from scalgraph.commands.trace import analyse
    b = Builder(2)
    for r in range(2):
        b.enter(r, 0, "main").work(r, 0, 4, "f").exit(r, 4, "main")
    tr = b.build()
    tr.program_begin, tr.program_end = {0: -1.0, 1: -1.0}, {0: 5.0, 1: 4.5}
    rep = analyse(tr, clock_correction=True)
    assert rep["program_time"] == pytest.approx(3.5) and rep["total_time"] == pytest.approx(11.5)
    tr.program_begin, tr.program_end = {}, {}
    assert analyse(tr, clock_correction=False)["total_time"] == pytest.approx(8.0)
