"""`scalgraph trace --parallel N`: the same text report as the serial command, one-line errors, and
the pieces that need no MPI (block reader, rank blocks)."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import require_tool
from scalgraph.errors import UserError
from scalgraph.io import trace_binary
from scalgraph.io.trace_read import write_trace
from scalgraph.trace.parallel_partial import rank_blocks
from test_trace_parallel import have_mpi, random_traces, wrong_order_and_waitall

SCALGRAPH = str(pathlib.Path(sys.executable).parent / "scalgraph")


def run(*args):
    return subprocess.run([SCALGRAPH, "trace", *args], capture_output=True, text=True, timeout=300)


def test_text_report_equals_serial(tmp_path):
    require_tool(have_mpi(), "mpi4py and mpiexec are not installed")
    path = tmp_path / "wo.sgt"
    write_trace(wrong_order_and_waitall().build(), path, "binary")
    serial = run(str(path), "--no-clock-correction", "--top", "3")
    par = run(str(path), "--parallel", "2", "--top", "3")
    assert serial.returncode == 0 and par.returncode == 0, par.stderr
    lines = [ln for ln in par.stdout.splitlines() if not ln.startswith("  clock:")]
    # the what-if re-timing of verdict causes runs in the serial command only (it needs the whole trace)
    assert lines == [ln for ln in serial.stdout.splitlines() if not ln.lstrip().startswith("what-if:")]
    assert "Late Sender / Wrong Order" in par.stdout and "  clock: no receive before its send" in par.stdout


def test_json_trace_in_parallel_equals_serial(tmp_path):
    """Formats other than the own binary one are read whole by every process and cut."""
    require_tool(have_mpi(), "mpi4py and mpiexec are not installed")
    import json
    from test_trace_parallel import assert_same, without_whatif
    path = tmp_path / "wo.json"
    write_trace(wrong_order_and_waitall().build(), path, "json")
    serial = without_whatif(json.loads(run(str(path), "--no-clock-correction", "--json").stdout))
    par = run(str(path), "--parallel", "2", "--json")
    assert par.returncode == 0, par.stderr
    par = json.loads(par.stdout)
    assert par.pop("clock") and serial.pop("clock") == ""
    assert_same(serial, par)


@pytest.mark.parametrize("content", [b"garbage", None])
def test_bad_trace_is_one_line_and_nonzero(tmp_path, content):
    require_tool(have_mpi(), "mpi4py and mpiexec are not installed")
    path = tmp_path / "bad.sgt"
    if content is None:                      # a real trace cut short
        write_trace(wrong_order_and_waitall().build(), tmp_path / "good.sgt", "binary")
        content = (tmp_path / "good.sgt").read_bytes()[:300]
    path.write_bytes(content)
    res = run(str(path), "--parallel", "2")
    assert res.returncode != 0
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scalgraph trace: ") and "Traceback" not in res.stderr
    assert path.read_bytes() == content


def test_parallel_needs_a_positive_count(tmp_path):
    res = run(str(tmp_path / "x.sgt"), "--parallel", "-1")
    assert res.returncode != 0 and "--parallel must be at least 1" in res.stderr


@pytest.mark.parametrize("compress", [False, True])
def test_block_reader_returns_exactly_the_block(tmp_path, compress):
    trace = random_traces(1, seed=3)[0]
    path = tmp_path / "t.sgt"
    write_trace(trace, path, "binary", compress=compress)
    n = trace.nranks
    for lo, hi in [(0, n), (0, 1), (1, n), (n - 1, n), (0, 0)]:
        part, counts = trace_binary.read_binary_ranks(path, lo, hi)
        assert counts.tolist() == [len(e) for e in trace.events]
        for r in range(n):
            want = trace.events[r] if lo <= r < hi else trace.events[r][:0]
            assert part.events[r].tobytes() == want.tobytes()
        assert [x.name for x in part.regions] == [x.name for x in trace.regions] and part.comms == trace.comms


def test_block_reader_rejects_a_cut_file(tmp_path):
    trace = random_traces(1, seed=4)[0]
    path = tmp_path / "t.sgt"
    write_trace(trace, path, "binary")
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(UserError, match="do not match the file size"):
        trace_binary.read_binary_ranks(path, 0, 1)


def test_rank_blocks_cover_all_ranks_in_order_and_balance_events():
    rng = np.random.default_rng(0)
    for _ in range(50):
        counts = rng.integers(0, 1000, int(rng.integers(1, 40)))
        for nprocs in (1, 2, 3, 4, 7):
            b = rank_blocks(counts, nprocs)
            assert len(b) == nprocs + 1 and b[0] == 0 and b[-1] == len(counts)
            assert np.all(np.diff(b) >= 0)
            if nprocs <= len(counts):
                assert np.all(np.diff(b) >= 1)
    b = rank_blocks(np.array([100] * 8), 4)
    assert b.tolist() == [0, 2, 4, 6, 8]


class FakeComm:
    """Just enough of an MPI communicator for read_block."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size


@pytest.mark.parametrize("compress", [False, True])
def test_each_process_holds_only_its_block(tmp_path, compress):
    from scalgraph.trace.parallel import read_block
    trace = next(t for t in random_traces(20, seed=5) if t.nranks >= 5)
    path = tmp_path / "t.sgt"
    write_trace(trace, path, "binary", compress=compress)
    seen = []
    for me in range(3):
        part, counts, bounds = read_block(str(path), FakeComm(me, 3))
        own = range(int(bounds[me]), int(bounds[me + 1]))
        assert len(own) >= 1
        for r in range(trace.nranks):
            assert part.events[r].tobytes() == (trace.events[r].tobytes() if r in own else b"")
        seen += list(own)
    assert seen == list(range(trace.nranks))
