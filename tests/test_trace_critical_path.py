"""Critical path (seed 001): hand-checked profile and imbalance, the serialised-function example of
the seed, and the property that the path's length equals the run's length."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from scalgraph.trace import critical_path, forward
from scalgraph.trace.matching import callpath_names
from test_trace_delay import build_random, random_programs
from tracebuild import Builder


def analyse(b: Builder):
    fwd = forward.forward_replay(forward.build_context(b.build()))
    return fwd, critical_path.critical_path(fwd)


def by_name(fwd, values):
    names = callpath_names(fwd.ctx.nest, fwd.ctx.trace.regions)
    return {names[c]: round(float(v), 9) for c, v in enumerate(values) if abs(v) > 1e-12}


def test_path_follows_the_late_sender():
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 4, "f").send(0, 4, 4, dst=1).exit(0, 5, "main")
    b.enter(1, 0, "main").work(1, 0, 1, "g").recv(1, 1, 4.5, src=0).work(1, 4.5, 6, "h").exit(1, 6, "main")
    fwd, cp = analyse(b)
    # ends on rank 1 at 6; its wait (1..4) ended when rank 0 entered the send at 4
    assert list(cp.seg_rank) == [1, 0]
    assert by_name(fwd, cp.per_callpath) == {"main/f": 4.0, "main/MPI_Recv": 0.5, "main/h": 1.5}
    assert cp.length == pytest.approx(6.0)
    # ι = cp - mean over ranks of non-waiting time: f 4 - 2, recv 0.5 - 0.25, h 1.5 - 0.75
    assert by_name(fwd, cp.imbalance) == {"main/f": 2.0, "main/MPI_Recv": 0.25, "main/h": 0.75}


def test_serialised_function_is_imbalanced_on_the_path_though_profiles_are_even():
    p = 4
    b = Builder(p)
    for r in range(p):
        b.enter(r, 0, "main")
        start = float(r)
        if r > 0:
            b.recv(r, 0, start, src=r - 1)
        b.work(r, start, start + 1, "f")
        if r < p - 1:
            b.send(r, start + 1, start + 1, dst=r + 1)
        b.exit(r, start + 1, "main")
    fwd, cp = analyse(b)
    t_f = by_name(fwd, cp.time.sum(axis=1))["main/f"]
    assert t_f == 4.0                                    # 1 per rank: no profile imbalance
    assert by_name(fwd, cp.per_callpath)["main/f"] == 4.0
    assert by_name(fwd, cp.imbalance)["main/f"] == 3.0   # 4 on the path - mean 1


def test_path_ends_on_the_rank_entering_finalize_last():
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 3, "f").enter(0, 3, "MPI_Finalize").exit(0, 4, "MPI_Finalize").exit(0, 4, "main")
    b.enter(1, 0, "main").work(1, 0, 1, "f").enter(1, 1, "MPI_Finalize").exit(1, 4, "MPI_Finalize").exit(1, 4, "main")
    fwd, cp = analyse(b)
    assert list(cp.seg_rank) == [0]


def test_performance_impact_identity():
    """Per rank, activity + non-critical + local imbalance cost = path length (reference §5, DER)."""
    cp_l = np.array([[4.0, 0.0], [0.0, 2.0]])          # call path 0 on rank 0, call path 1 on rank 1
    t_l = np.array([[4.0, 1.0], [1.0, 2.0]])
    out = critical_path.performance_impact(cp_l, t_l)
    total = cp_l.sum()
    e_l = np.maximum(cp_l.sum(axis=1)[:, None] - t_l, 0)
    w_l = total - t_l.sum(axis=0)
    local = e_l * (w_l / e_l.sum(axis=0))[None, :]
    assert np.allclose(out["activity"].sum(axis=0) + out["non_critical"].sum(axis=0) + local.sum(axis=0), total)
    assert out["imbalance_impact"].sum() == pytest.approx(local.sum())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_programs())
def test_critical_path_length_equals_run_length(prog):
    fwd, cp = analyse(build_random(*prog))
    t = fwd.ctx.time
    run = float(t.max() - t.min())
    assert cp.length == pytest.approx(run, abs=1e-9)
    assert float(cp.profile.sum()) == pytest.approx(run, abs=1e-9)
    # segments are contiguous in time and never overlap
    assert np.allclose(cp.seg_start[:-1], cp.seg_end[1:])


def test_figure3_path_runs_through_all_three_ranks():
    from test_trace_delay import figure3
    fwd, cp = analyse(figure3())
    # all ranks leave main at 7; C was busy last (its R4 ends at 6.5), so the path ends there:
    # C [6, 7], B [5, 6] (R3's processing), A [0, 5] (f and g)
    assert list(cp.seg_rank) == [2, 1, 0]
    assert by_name(fwd, cp.per_callpath) == {"main/f": 2.0, "main/g": 3.0, "main/MPI_Recv": 1.5, "main": 0.5}
