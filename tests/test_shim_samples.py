"""The shim in a real sample built with sgcc (probes and PSG tables from the compile wrapper):
samples/masterworker at 2 and 4 ranks.  MPI calls land on MPI vertices of the PSG with the routine's
name, wildcard receives are resolved to the real workers, and at 4 ranks rank 0's samples point at
the planted serial bottleneck (samples/masterworker/expected.json)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import MPIEXEC, require_tool, venv_tool
from scalgraph.io.profile_file import read_run
from scalgraph.model.profile import DEP_RECV, DEP_SEND
from scalgraph.model.psg import KINDS, MPI

SGCC = venv_tool("sgcc")
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "masterworker"
TAG_TASK, TAG_STOP, TAG_RESULT, TASKS = 1, 2, 3, 40


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    require_tool(SGCC is not None and MPIEXEC is not None, "no sgcc/mpiexec")
    d = tmp_path_factory.mktemp("mw")
    subprocess.run([SGCC, "-O2", str(SAMPLE / "masterworker.c"), "-o", str(d / "mw")], check=True,
                   timeout=300)
    return d / "mw", json.loads((d / "mw.psg.json").read_text())


@pytest.mark.parametrize("ranks", [2, 4])
def test_masterworker_profile_matches_its_psg_and_pattern(built, tmp_path, ranks):
    exe, psg = built
    subprocess.run([MPIEXEC, "-n", str(ranks), str(exe), str(TASKS)], check=True, capture_output=True,
                   timeout=120, env=dict(os.environ, SCALGRAPH_OUT=str(tmp_path / "prof")))
    prof = read_run(tmp_path / "prof")
    assert prof.psg_hash == psg["hash"] and prof.nvertices == len(psg["kind"])
    called = np.nonzero(prof.calls.sum(axis=0))[0]
    assert all(KINDS[psg["kind"][v]] == KINDS[MPI] and psg["name"][v].startswith("MPI_") for v in called)

    def calls_of(rank, routine):
        return sum(int(prof.calls[rank, v]) for v in called if psg["name"][v] == routine)

    workers = range(1, ranks)
    assert calls_of(0, "MPI_Recv") == TASKS and calls_of(0, "MPI_Send") == TASKS + len(workers)
    assert sum(calls_of(w, "MPI_Send") for w in workers) == TASKS
    assert all(calls_of(w, "MPI_Recv") == calls_of(w, "MPI_Send") + 1 for w in workers)

    deps = prof.deps
    master_recv = deps[(deps["rank"] == 0) & (deps["kind"] == DEP_RECV)]
    assert set(master_recv["peer"].tolist()) == set(workers)          # MPI_ANY_SOURCE resolved
    assert set(master_recv["tag"].tolist()) == {TAG_RESULT}
    assert master_recv["count"].sum() == TASKS and master_recv["bytes"].sum() == 8 * TASKS
    for w in workers:
        got = deps[(deps["rank"] == w) & (deps["kind"] == DEP_RECV)]
        assert set(got["peer"].tolist()) == {0}
        per_tag = {int(t): int(got["count"][got["tag"] == t].sum()) for t in set(got["tag"].tolist())}
        assert per_tag == {TAG_TASK: calls_of(w, "MPI_Send"), TAG_STOP: 1}   # MPI_ANY_TAG resolved
        sent = deps[(deps["rank"] == w) & (deps["kind"] == DEP_SEND)]
        assert set(sent[["peer", "tag"]].tolist()) == {(0, TAG_RESULT)}
    if ranks == 4:
        root = json.loads((SAMPLE / "expected.json").read_text())["root_cause"]
        top = int(prof.samples[0].argmax())
        assert psg["function"][top] == root["function"], (psg["name"][top], psg["function"][top])
