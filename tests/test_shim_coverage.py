"""The shim across the MPI interface (instrument/testprogs/coverage.c, 4 ranks, one vertex per call):
collectives and their I-forms, Wait/Test variants, Request_free, Probe, Cartesian and duplicated
communicators, one-sided operations.  Counts and dependences per vertex, and unchanged output."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import MPICC, MPIEXEC, build_probed, require_tool
from scalgraph.io.profile_file import read_run
from scalgraph.model.profile import DEP_COLL, DEP_RECV, DEP_RMA, DEP_SEND

PROGRAM = Path(__file__).resolve().parent.parent / "instrument" / "testprogs" / "coverage.c"

SPINNING = {32, 34, 36, 38, 41}     # Test*/Waitsome loops: at least one call, how many is up to timing
CALLS = {**{v: 1 for v in range(1, 59)}, 27: 2, 31: 2, 33: 2, 35: 2, 37: 2, 39: 2, 49: 3}
COLL_BYTES = {2: 16, 3: 8, 4: 8, 5: 8, 6: 8, 7: 8, 8: 8, 9: 8, 10: 32, 11: 32, 12: 32, 13: 32, 14: 32,
              15: 8, 16: 8, 18: 0, 20: 8, 57: 0}


def expected_rows(r: int, row_comm: int, dup_comm: int) -> set:
    right, left = (r + 1) % 4, (r - 1) % 4
    rows = {(v, DEP_COLL, -1, -1, 0, 1, b) for v, b in COLL_BYTES.items()}
    rows.add((23, DEP_COLL, -1, -1, 0, 2, 16 + 32))          # Ibcast + Ialltoall completed together
    for v, tag in ((24, 5), (27, 6), (32, 8), (34, 9), (36, 10), (38, 11)):
        rows |= {(v, DEP_SEND, right, tag, 0, 1, 8), (v, DEP_RECV, left, tag, 0, 1, 8)}
    rows |= {(28, DEP_SEND, right, 7, 0, 1, 8), (30, DEP_RECV, left, 7, 0, 1, 8),
             (40, DEP_SEND, right, 12, 0, 1, 8), (41, DEP_RECV, left, 12, 0, 1, 8),
             (44, DEP_COLL, -1, -1, row_comm, 1, 8), (46, DEP_COLL, -1, -1, dup_comm, 1, 0),
             (50, DEP_RMA, right, -1, 0, 1, 8), (51, DEP_RMA, left, -1, 0, 1, 8),
             (52, DEP_RMA, left, -1, 0, 1, 8), (54, DEP_RMA, right, -1, 0, 1, 16)}
    return rows


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (mpicc/mpiexec)")
    d = tmp_path_factory.mktemp("coverage")
    build_probed(PROGRAM, d)
    return d


def run(exe: Path, out: Path) -> str:
    res = subprocess.run([MPIEXEC, "-n", "4", str(exe)], env=dict(os.environ, SCALGRAPH_OUT=str(out)),
                         capture_output=True, text=True, timeout=120, check=True)
    return res.stdout


def test_every_wrapped_call_is_counted_at_its_vertex_with_its_dependences(builds, tmp_path):
    plain = run(builds / "plain", tmp_path / "plain")
    shim = run(builds / "with_shim", tmp_path / "prof")
    assert sorted(plain.splitlines()) == sorted(shim.splitlines()) and len(shim.splitlines()) == 4
    prof = read_run(tmp_path / "prof")
    assert prof.nvertices == 64 and prof.meta["written_by"] == ["finalize"] * 4
    by_members = {}
    for cid, members in prof.comm_members.items():
        by_members.setdefault(tuple(members), []).append(cid)
    assert len(by_members[(0, 1, 2, 3)]) == 2            # world and the Cartesian communicator
    for r in range(4):
        calls = prof.calls[r]
        for v, n in CALLS.items():
            if v in SPINNING:
                assert calls[v] >= 1, v
            else:
                assert calls[v] == n, (v, calls[v], n)
        assert calls.sum() - sum(calls[v] for v in SPINNING) == sum(n for v, n in CALLS.items()
                                                                    if v not in SPINNING)
        row_members = (0, 1) if r < 2 else (2, 3)
        row_comm, dup_comm = sorted(by_members[row_members])  # creation order is not the id order
        rows = {tuple(int(d[k]) for k in ("vertex", "kind", "peer", "tag", "comm", "count", "bytes"))
                for d in prof.deps[prof.deps["rank"] == r]}
        comm_of_44 = next(row[4] for row in rows if row[0] == 44)
        if comm_of_44 != row_comm:
            row_comm, dup_comm = dup_comm, row_comm
        assert rows == expected_rows(r, row_comm, dup_comm)
    # blocking collectives wait, one-sided transfers do not
    assert (prof.wait[:, 2:17] > 0).all() and (prof.wait[:, [50, 51, 52, 54]] == 0).all()
