"""`--parallel` on traces with OpenMP threads as locations: the parallel replay (scalgraph/trace/parallel.py)
gives the serial report.  A team's threads are locations like ranks; the blocks of locations the analysis
processes hold may split a team, and its forks, barriers and lock hand-overs travel in the communication
skeleton like any collective or message on a communicator (the team communicator)."""
from __future__ import annotations

import pytest
from test_trace_openmp_patterns import random_hybrid
from test_trace_parallel import assert_same, parallel_reports, serial_report

from conftest import require_tool
from scalgraph.io.trace_read import write_trace


@pytest.fixture(scope="module")
def hybrid_traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("omp-par")
    named = {f"hybrid{seed}": random_hybrid(seed)[0] for seed in range(8)}
    paths = {}
    for i, (name, tr) in enumerate(named.items()):
        paths[name] = d / f"{name}.sgt"
        write_trace(tr, paths[name], "binary", compress=(i % 2 == 1))
    return named, paths


@pytest.mark.parametrize("nprocs", [2, 3])
def test_parallel_report_of_threaded_traces_equals_serial(hybrid_traces, nprocs):
    """Random MPI + OpenMP traces (1-2 ranks x 2-3 threads, barriers, idle workers, an allreduce):
    every pattern, delay cost, critical-path figure and verdict cause as the serial replay's, with
    the locations listed; 3 processes split a team of 3 threads."""
    named, paths = hybrid_traces
    reports = parallel_reports(paths, nprocs)
    waits = 0.0
    for name, tr in named.items():
        par = reports[name]
        ser = serial_report(tr)
        par.pop("clock"), ser.pop("clock")
        assert par["locations"] == [list(x) for x in tr.locations]
        assert_same(ser, par, f"{name}@{nprocs}")
        waits += sum(p["seconds"] for p in ser["patterns"] if p["name"] in ("Wait at OpenMP Barrier", "Idle Threads"))
    assert waits > 0                        # the traces do have OpenMP waits to compare


def test_parallel_on_an_otf2_archive_with_threads_is_one_clear_line(tmp_path):
    """OTF2 archives with OpenMP threads are read whole only: --parallel says so instead of dropping them."""
    import importlib.util
    require_tool(importlib.util.find_spec("otf2") is not None, "no otf2 (pip install otf2)")
    from test_trace_otf2_openmp import write_hybrid_archive
    from scalgraph.errors import UserError
    from scalgraph.io.trace_read import read_trace
    write_hybrid_archive(tmp_path)
    with pytest.raises(UserError, match="OpenMP threads.*without --parallel"):
        read_trace(tmp_path / "traces.otf2", ranks=range(0, 1))
