"""Checks of the profile's thread dimension on a real hybrid run (called by tests/test_openmp_e2e.py on the
experiment it ran, so no extra build or run): the planted work's CPU is on the planted thread, the other
thread of that rank waited for it at a barrier, the other ranks' workers idled longer (their masters
waited in MPI for the late rank), and the barrier backtracking names the planted lines and thread."""
from __future__ import annotations

import pathlib

import numpy as np

from scalgraph.analysis.constructs import constructs
from scalgraph.analysis.threads import regions, thread_causes
from scalgraph.io.experiment import read_experiment
from scalgraph.model.threads import ROLE_MASTER, ROLE_WORKER

# which thread runs the planted work (samples/*/*.c): the master's `omp master` bookkeeping in
# hybrid_master, the last thread's static block in hybrid_imbalance
PLANTED_THREAD = {"hybrid_master": 0, "hybrid_imbalance": 1}
ROLE = {0: "master", 1: "worker"}


def check_threads(name: str, exp_dir: pathlib.Path, detect: dict, root_cause: dict, scale: int) -> None:
    exp = read_experiment(exp_dir)
    psg, prof = exp.psg, exp.profile(scale)
    th = prof.threads
    assert th is not None, f"{name}: the profile has no thread dimension (format {prof.meta['format_version']})"
    assert prof.meta["format_version"] == 3
    rank, planted = scale // 2, PLANTED_THREAD[name]
    nv = prof.nvertices
    for r in range(scale):
        team = th.threads[th.of_rank(r)]
        assert list(team["team_index"]) == [0, 1] and list(team["role"]) == [ROLE_MASTER, ROLE_WORKER], team
        assert (team["tasks"] > 0).all()
    lines = root_cause["lines"]
    at_cause = np.array([pathlib.Path(psg.file[v]).name == root_cause["file"]
                         and lines[0] <= psg.line_first[v] <= lines[1] for v in range(nv)])
    cpu = th.dense("cpu", rank, nv)[:, at_cause].sum(axis=1)
    share = cpu[planted] / cpu.sum()
    assert share > 0.9, f"{name}: rank {rank}'s planted work per thread {cpu}, thread {planted} has {share:.0%}"
    # the other thread waited for it at the region's barriers; the planted thread hardly did
    in_region = regions(psg).region >= 0
    barrier = th.dense("barrier", rank, nv)[:, in_region].sum(axis=1)
    other = 1 - planted
    assert barrier[other] > barrier[planted] + 0.5 * cpu[planted], (
        f"{name}: barrier waits on rank {rank} {barrier}, planted thread {planted} ran {cpu[planted]:.3f} s")
    # the late rank's worker idled least: elsewhere the master waited in MPI for it meanwhile
    idle = {r: float(th.threads["idle"][th.of_rank(r)][1]) for r in range(scale)}
    others = np.median([idle[r] for r in idle if r != rank])
    assert others > idle[rank], f"{name}: workers' idle seconds per rank {idle}"
    # backtracking across the barrier: the last thread in and its excess are the planted lines and thread
    causes = [c for c in thread_causes(psg, constructs(psg), prof, 0.01) if c.rank == rank]
    assert causes, f"{name}: no barrier wait on rank {rank} leads anywhere"
    top = max(causes, key=lambda c: c.cost)
    assert at_cause[top.vertex] and top.explains["thread"] == planted and top.explains["role"] == ROLE[planted], (
        f"{name}: thread verdict {psg.location(top.vertex)} thread {top.explains['thread']}")
    # detect's thread-imbalance list, where its floor lets anything through, names only the planted work there
    for a in detect.get("thread_abnormal", []):
        if a["rank"] == rank:
            assert at_cause[a["vertex"]] and a["thread"] == planted, a
