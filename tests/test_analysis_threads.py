"""The profile's thread dimension (format 3) and OpenMP thread imbalance as an abnormality
(scalgraph.analysis.threads), on hand-made profiles whose numbers are worked out in the comments."""
from __future__ import annotations

import io

import numpy as np
import pytest

from scalgraph.analysis import synthetic as syn
from scalgraph.analysis.constructs import constructs
from scalgraph.analysis.detect import analyse
from scalgraph.analysis.threads import regions, thread_abnormal, thread_causes
from scalgraph.errors import UserError
from scalgraph.io.html_report.experiment_page import experiment_page
from scalgraph.io.profile_file import read_run, write_rank_file
from scalgraph.io.report import write_text
from scalgraph.model.profile import DEP_COLL
from scalgraph.model.threads import (ROLE_MASTER, ROLE_WORKER, ROW_DTYPE, THREAD_DTYPE, ThreadProfile,
                                     concatenate)

HZ = 1000.0
# main: a time-step loop; in it a halo exchange, a parallel region (fork CALL of main.omp_outlined) whose
# `parallel for` has a balanced statement (21) and a hot one (22), a master-only section (24, under a
# branch) before an explicit barrier (the COMP at 25), then an Allreduce; serial set-up (30) before it.
TREE = ("FUNCTION", "main", 1, [
    ("COMP", "comp", 30),
    ("LOOP", "loop", 10, [
        ("MPI", "MPI_Sendrecv", 11),
        ("CALL", "main.omp_outlined", 12, [("FUNCTION", "main.omp_outlined", 12, [
            ("LOOP", "loop", 20, [("COMP", "comp", 21), ("COMP", "comp", 22)]),
            ("BRANCH", "branch", 23, [("COMP", "comp", 24)]),
            ("COMP", "comp", 25)])]),
        ("MPI", "MPI_Allreduce", 40)])])


def _psg():
    return syn.psg_from_tree(TREE, "hy.c")


def _threads(rank: int, cells: dict, idle=(0.0, 0.0)) -> ThreadProfile:
    """Two threads of `rank` (master, worker); cells: (thread, vertex) -> (cpu, barrier)."""
    th = np.zeros(2, THREAD_DTYPE)
    th["rank"], th["slot"], th["team_index"], th["tasks"] = rank, [0, 1], [0, 1], 10
    th["role"], th["idle"] = [ROLE_MASTER, ROLE_WORKER], idle
    rows = np.zeros(len(cells), ROW_DTYPE)
    for i, ((t, v), (cpu, barrier)) in enumerate(cells.items()):
        rows[i] = (t, v, round(cpu * HZ), cpu, 0.0, barrier)
    return ThreadProfile(th, rows)


def _run(psg, p: int, per_rank: dict[int, dict], idle=(0.0, 0.0), wait_rank: int | None = None):
    """A p-rank profile whose rank arrays are the threads' sums; every rank's threads from `per_rank`
    (rank -> cells), ranks not given get rank 0's cells."""
    at = lambda line: syn.vertex_at(psg, line)  # noqa: E731
    t = np.zeros((p, len(psg)))
    parts = []
    for r in range(p):
        cells = per_rank.get(r, per_rank[0])
        for (_, v), (cpu, _) in cells.items():
            t[r, v] += cpu
        parts.append(_threads(r, cells, idle))
    w = np.zeros_like(t)
    allr = at(40)
    t[:, allr] = 1e-3
    rows = [(r, allr, DEP_COLL, -1, -1, syn.WORLD, 10, 80, 0.0) for r in range(p)]
    prof = syn._profile(psg, p, t, w, rows)
    prof.meta["hz"] = HZ
    prof.threads = concatenate(parts)
    return prof


def _imbalanced(psg, p: int, hot: float):
    """Every rank: balanced statement 21, 0.2 s per thread; the worker alone runs `hot` s at 22, so the
    master waits `hot` at the region's join (the fork CALL, where the region's closing barrier is)."""
    at = lambda line: syn.vertex_at(psg, line)  # noqa: E731
    fork = at(12)
    cells = {(0, at(21)): (0.2, 0.0), (1, at(21)): (0.2, 0.0), (1, at(22)): (hot, 0.0),
             (0, fork): (0.0, hot), (1, fork): (0.0, 0.001)}
    return _run(psg, p, {0: cells})


def test_regions_are_the_fork_calls_subtrees():
    psg = _psg()
    reg = regions(psg)
    fork = syn.vertex_at(psg, 12)
    assert reg.region[fork] == fork
    for line in (20, 21, 22, 23, 24, 25):
        assert reg.region[syn.vertex_at(psg, line)] == fork
    for line in (1, 30, 10, 11, 40):
        assert reg.region[syn.vertex_at(psg, line)] == -1
    assert reg.end[fork] == syn.vertex_at(psg, 40)      # the subtree ends where the Allreduce begins


def test_worker_with_the_hot_statement_is_thread_abnormal():
    # thread CPU at 22: master 0, worker 0.6 s; team median (0 + 0.6) / 2 = 0.3 s; 0.6 > 1.3 x 0.3 and
    # excess 0.6 - 0.3 = 0.3 s beyond the floor (0.05 s) and the sampling error (3 sqrt(300)/1000 = 0.052 s)
    psg = _psg()
    prof = _imbalanced(psg, 2, 0.6)
    found = thread_abnormal(psg, constructs(psg), prof, 1.3, 0.05)
    hot = syn.vertex_at(psg, 22)
    assert {(a.vertex, a.rank) for a in found} == {(hot, 0), (hot, 1)}
    a = found[0]
    assert (a.team_index, a.role) == (1, "worker")
    assert a.median == pytest.approx(0.3) and a.excess == pytest.approx(0.3)
    # statement 21 (0.2 s on each thread) is balanced
    assert all(x.vertex != syn.vertex_at(psg, 21) for x in found)


def test_barrier_wait_leads_to_the_last_thread_in_and_its_excess():
    # at the join (fork CALL) the master waited 0.6 s, the worker 0.001 s: the worker came last.  Its
    # excess in the region: 22 -> 0.3 s (above), 21 -> 0; cost min(0.3, 0.6 - 0.001) = 0.3 s per rank
    psg = _psg()
    prof = _imbalanced(psg, 2, 0.6)
    causes = thread_causes(psg, constructs(psg), prof, 0.05)
    hot, fork = syn.vertex_at(psg, 22), syn.vertex_at(psg, 12)
    assert sorted((c.vertex, c.rank) for c in causes) == [(hot, 0), (hot, 1)]
    c = causes[0]
    assert c.cost == pytest.approx(0.3)
    assert c.explains["what"] == "thread waiting" and c.explains["vertex"] == fork
    assert c.explains["thread"] == 1 and c.explains["role"] == "worker"
    assert c.explains["waiting"] == pytest.approx(0.599)
    assert [s.via for s in c.path.steps] == ["start", "barrier"]


def test_explicit_barrier_after_a_master_section_leads_to_the_master():
    # the master runs 0.5 s in the master-only section (24) and arrives last at the explicit barrier
    # (25), where the worker waited 0.5 s.  The loop (21) is balanced.  Excess of the master in the
    # region up to 25: 24 -> 0.5 - median(0.5, 0) = 0.25 s; cost min(0.25, 0.5) = 0.25 s.  The work the
    # worker does after the barrier (none here) could not have delayed it.
    psg = _psg()
    at = lambda line: syn.vertex_at(psg, line)  # noqa: E731
    cells = {(0, at(21)): (0.2, 0.0), (1, at(21)): (0.2, 0.0), (0, at(24)): (0.5, 0.0),
             (0, at(25)): (0.0, 0.0), (1, at(25)): (0.0, 0.5)}
    prof = _run(psg, 2, {0: cells})
    causes = thread_causes(psg, constructs(psg), prof, 0.05)
    assert {(c.vertex, c.explains["thread"], c.explains["role"]) for c in causes} == {(at(24), 0, "master")}
    assert all(c.cost == pytest.approx(0.25) for c in causes)


def test_idle_workers_lead_to_the_masters_serial_section():
    # serial set-up (30) runs 0.8 s on the master outside every region, while the worker idles; with 2
    # threads running it in parallel would save 0.8 x (2 - 1) / 2 = 0.4 s (Idle Threads: 0.8 x 1 = 0.8 s)
    psg = _psg()
    at = lambda line: syn.vertex_at(psg, line)  # noqa: E731
    cells = {(0, at(30)): (0.8, 0.0), (0, at(21)): (0.2, 0.0), (1, at(21)): (0.2, 0.0)}
    prof = _run(psg, 2, {0: cells}, idle=(0.0, 0.8))
    causes = thread_causes(psg, constructs(psg), prof, 0.05)
    assert {(c.vertex, c.explains["what"]) for c in causes} == {(at(30), "idle threads")}
    c = causes[0]
    assert c.cost == pytest.approx(0.4) and c.explains["idle_seconds"] == pytest.approx(0.8)
    assert c.explains["waiting"] == pytest.approx(0.8)       # the worker's measured idle time


def test_small_thread_differences_are_not_abnormal():
    # worker 0.21 s vs master 0.19 s at 21: excess 0.01 s, under the floor and the sampling error
    psg = _psg()
    at = lambda line: syn.vertex_at(psg, line)  # noqa: E731
    cells = {(0, at(21)): (0.19, 0.0), (1, at(21)): (0.21, 0.0), (0, at(12)): (0.0, 0.02)}
    prof = _run(psg, 2, {0: cells})
    assert thread_abnormal(psg, constructs(psg), prof, 1.3, 0.05) == []
    assert thread_causes(psg, constructs(psg), prof, 0.05) == []


def test_profiles_without_threads_give_nothing():
    psg = _psg()
    prof = _imbalanced(psg, 2, 0.6)
    prof.threads = None
    assert thread_abnormal(psg, constructs(psg), prof, 1.3, 0.05) == []
    assert thread_causes(psg, constructs(psg), prof, 0.05) == []


def test_detect_names_a_thread_imbalance_every_rank_has():
    # every rank has the same worker-only hot statement, so no rank is abnormal and the work shrinks
    # like 1/p (hot 1.2 s at p=2, 0.6 s at p=4): rank-level detection has nothing to report.  Inside each
    # rank the master waits for the worker: the thread verdict names 22 (cost 0.3 s at p=4, run ~1 s)
    psg = _psg()
    runs = {2: _imbalanced(psg, 2, 1.2), 4: _imbalanced(psg, 4, 0.6)}
    runs[2].time[:, syn.vertex_at(psg, 21)] = 0.8
    runs[2].threads.rows["cpu"][runs[2].threads.rows["vertex"] == syn.vertex_at(psg, 21)] = 0.4
    res = analyse(psg, runs)
    assert res["problem_found"], res
    top = res["root_causes"][0]
    assert top["line"] == 22 and top["explains"]["what"] == "thread waiting"
    assert top["cost"] == pytest.approx(0.3)
    assert top["explains"]["thread"] == 1 and top["explains"]["role"] == "worker"
    ta = res["thread_abnormal"]
    assert ta and {a["line"] for a in ta} == {22} and ta[0]["role"] == "worker"
    assert ta[0]["cpu"] == pytest.approx([0.0, 0.6])
    out = io.StringIO()
    write_text(res, out, "exp")
    text = out.getvalue()
    assert "#1 hy.c:22" in text and "OpenMP thread 1 (worker) of rank" in text and "arrives last" in text
    assert "OpenMP thread imbalance at p=4" in text and "rank 0 thread 1 (worker): threads' CPU" in text
    page = experiment_page(res, psg, {"experiment": "exp"}, [])
    assert 'id="thread-abn-table"' in page and "1 (worker)" in page and "arrives last at the barrier" in page
    # without the thread dimension the same run has no finding
    for prof in runs.values():
        prof.threads = None
    assert not analyse(psg, runs)["problem_found"]


def test_thread_section_round_trip_and_format_2_files_still_load(tmp_path):
    psg = _psg()
    prof = _imbalanced(psg, 2, 0.6)
    nv = len(psg)
    for r in range(2):
        mine = ThreadProfile(prof.threads.threads[prof.threads.threads["rank"] == r],
                             prof.threads.rows[np.isin(prof.threads.rows["thread"], [2 * r, 2 * r + 1])].copy())
        mine.rows["thread"] -= 2 * r
        write_rank_file(tmp_path / f"rank-{r}.sgp", nv, {"sample_ns": prof.time[r] * 1e9}, threads=mine, rank=r,
                        nranks=2, hz=HZ)
    back = read_run(tmp_path)
    assert back.meta["format_version"] == 3
    hot = syn.vertex_at(psg, 22)
    assert back.threads.dense("cpu", 1, nv)[:, hot] == pytest.approx([0.0, 0.6])
    assert back.threads.dense("barrier", 0, nv)[:, syn.vertex_at(psg, 12)] == pytest.approx([0.6, 0.001])
    assert list(back.threads.threads["role"]) == [ROLE_MASTER, ROLE_WORKER] * 2

    old = tmp_path / "v2"
    old.mkdir()
    for r in range(2):
        write_rank_file(old / f"rank-{r}.sgp", nv, {"sample_ns": prof.time[r] * 1e9}, version=2, rank=r, nranks=2)
    v2 = read_run(old)
    assert v2.threads is None and v2.meta["format_version"] == 2
    assert v2.time[1, hot] == pytest.approx(0.6)


def test_a_damaged_thread_section_is_one_clear_error(tmp_path):
    psg = _psg()
    prof = _imbalanced(psg, 2, 0.6)
    th = ThreadProfile(prof.threads.threads[:2], prof.threads.rows[prof.threads.rows["thread"] < 2].copy())
    th.rows["vertex"][0] = len(psg) + 5            # a vertex the file does not have
    write_rank_file(tmp_path / "rank-0.sgp", len(psg), {}, threads=th, rank=0, nranks=1)
    with pytest.raises(UserError, match="thread row names a thread or vertex"):
        read_run(tmp_path)


@pytest.mark.parametrize("ctype, dtype", [("struct sg_thread_section", "THREAD_SECTION_DTYPE"),
                                          ("struct sg_thread_info", "THREAD_INFO_DTYPE"),
                                          ("struct sg_thread_row", "THREAD_ROW_DTYPE")])
def test_thread_records_match_the_header(ctype, dtype):
    """The reader's dtypes of format 3's thread section are the C records of instrument/scalgraph.h."""
    cffi = pytest.importorskip("cffi")
    from scalgraph.io import profile_file
    from scalgraph.runtime.shim import header_cdef
    ffi = cffi.FFI()
    ffi.cdef(header_cdef())
    dt = getattr(profile_file, dtype)
    assert ffi.sizeof(ctype) == dt.itemsize
    assert {n: ffi.offsetof(ctype, n) for n in dt.names} == {n: dt.fields[n][1] for n in dt.names}
    assert set(dt.names) == {name for name, _ in ffi.typeof(ctype).fields}
