"""Parallel replay over MPI gives the serial engine's report, metric for metric, at 1, 2 and 4
analysis processes: hand-made traces (every pattern family, sub-communicators, non-blocking calls,
Waitall, wrong order, RMA locks) and random traces (SPMD-like from tests/test_trace_delay.build_random,
one-sided from tests/test_trace_rma_props)."""
from __future__ import annotations

import json
import math
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import require_tool
from scalgraph.io.trace_read import write_trace
from scalgraph.model import trace as tm
from test_trace_delay import build_random, figure3
from test_trace_rma import lock_trace
from test_trace_rma_props import random_rma_trace
from tracebuild import Builder

MPIEXEC = pathlib.Path(sys.executable).parent / "mpiexec"

# One mpiexec run replays many traces (starting Python N times per trace would dominate the test).
DRIVER = """
import json, sys
from mpi4py import MPI
from scalgraph.trace.parallel import replay
comm = MPI.COMM_WORLD
for path in sys.argv[1:]:
    try:
        rep = replay(comm, path, top=10, source="t")
    except Exception:
        import traceback
        traceback.print_exc()
        comm.Abort(1)
    if comm.Get_rank() == 0:
        with open(path + ".par.json", "w") as f:
            json.dump(rep, f)
"""


def have_mpi() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return MPIEXEC.exists() or shutil.which("mpiexec") is not None


def mpiexec() -> str:
    return str(MPIEXEC) if MPIEXEC.exists() else shutil.which("mpiexec")


def serial_report(trace: tm.Trace) -> dict:
    from scalgraph.commands.trace import analyse
    return without_whatif(json.loads(json.dumps(analyse(trace, clock_correction=False, top=10, source="t",
                                                        complete=True))))


def without_whatif(report: dict) -> dict:
    """The what-if re-timing of each verdict cause (scalgraph/trace/retime.py) runs in the serial
    command only: it re-times the whole trace, which no process of the parallel replay holds."""
    for cause in report["root_causes"]:
        cause.pop("whatif", None)
    return report


def assert_same(a, b, where="report"):
    """Every metric equal to ~1e-9 relative; lists in the same order; names identical."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {len(a)} vs {len(b) if isinstance(b, list) else b}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{where}: {a} vs {b}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


# --- hand-made traces ------------------------------------------------------------------------------

def wrong_order_and_waitall() -> Builder:
    """Rank 2 receives from 0 then 1 but 1 sent first; rank 3 completes two Irecvs with one Waitall;
    a blocking send to a late receiver; an Isend completed by MPI_Wait."""
    b = Builder(4)
    for r in range(4):
        b.enter(r, 0, "main")
    b.work(0, 0, 3, "f").send(0, 3, 3.1, dst=2, tag=0)
    b.send(1, 1, 1.1, dst=2, tag=0)
    b.recv(2, 0.5, 3.2, src=0).recv(2, 3.3, 3.4, src=1)
    b.irecv(3, 0.1, 0.2, req=5).irecv(3, 0.2, 0.3, req=6)
    b.isend(1, 1.2, 1.3, dst=3, req=9).wait(1, 1.3, 1.4, [("send", 9)], name="MPI_Wait")
    b.work(0, 3.1, 4.0, "g").send(0, 4.0, 4.2, dst=3, tag=1)
    b.wait(3, 0.3, 4.2, [("recv", 5, 1, 0), ("recv", 6, 0, 1)])
    b.send(3, 4.3, 6.0, dst=1, tag=2)                          # rank 1 posts late: Late Receiver
    b.work(1, 1.4, 5.9, "h").recv(1, 5.9, 6.0, src=3, tag=2)
    for r in range(4):
        b.exit(r, 7, "main")
    return b


def collectives_on_subcommunicators() -> Builder:
    """Scan, Bcast with a non-zero root, Gather, Allreduce and a Barrier on overlapping
    communicators, and MPI_Finalize (the critical path ends on the rank entering it last)."""
    b = Builder(5, comms={0: [0, 1, 2, 3, 4], 3: [4, 2, 0], 7: [1, 3]})
    clock = [1.0 + 0.3 * r for r in range(5)]
    for r in range(5):
        b.enter(r, 0, "main").work(r, 0, clock[r], "compute")
    scan_end = max(clock[4], clock[2], clock[0]) + 0.2                 # scan on comm 3: 4, 2, 0
    for r in (4, 2, 0):
        b.coll(r, clock[r], scan_end, "MPI_Scan", comm=3)
        clock[r] = scan_end
    b.coll(1, clock[1], clock[3] + 0.6, "MPI_Bcast", comm=7, root=3, recvd=8)   # root 3 enters later
    b.work(3, clock[3], clock[3] + 0.5, "prep").coll(3, clock[3] + 0.5, clock[3] + 0.6, "MPI_Bcast", comm=7,
                                                      root=3, recvd=0)
    clock[1] = clock[3] = clock[3] + 0.6
    first = min(clock[r] for r in range(5) if r != 2)
    for r in range(5):                                                   # gather to root 2
        end = max(clock[2], first) + 0.1 if r == 2 else clock[r] + 0.05
        b.coll(r, clock[r], end, "MPI_Gather", comm=0, root=2, sent=8, recvd=40 if r == 2 else 0)
        clock[r] = end
    for r in range(5):
        b.work(r, clock[r], clock[r] + 0.4 * (5 - r), "solve")
        clock[r] += 0.4 * (5 - r)
    end = max(clock) + 0.1
    for r in range(5):
        b.coll(r, clock[r], end + 0.02 * r, "MPI_Allreduce")
        b.coll(r, end + 0.1 + 0.1 * r, end + 1.0, "MPI_Barrier")
        b.work(r, end + 1.0, end + 1.5 + 0.05 * r, "MPI_Finalize").exit(r, end + 2, "main")
    return b


def random_traces(count: int, seed: int) -> list[tm.Trace]:
    """Random programs in the format of test_trace_delay.random_programs, 2 to 8 ranks."""
    rng = np.random.default_rng(seed)
    kinds = ["msg", "nbmsg", "barrier", "allreduce", "bcast", "subreduce"]
    out = []
    for _ in range(count):
        p = int(rng.integers(2, 9))
        steps = [(kinds[int(rng.integers(len(kinds)))], int(rng.integers(p)), int(rng.integers(p)),
                  [round(float(x), 3) for x in rng.uniform(0, 3, p) * (rng.random(p) < 0.7)],
                  [str(x) for x in rng.choice(list("fgh"), p)])
                 for _ in range(int(rng.integers(1, 25)))]
        out.append(build_random(p, steps).build())
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("par")
    named = {"figure3": figure3().build(), "wrong_order": wrong_order_and_waitall().build(),
             "collectives": collectives_on_subcommunicators().build()}
    named.update({f"random{i}": t for i, t in enumerate(random_traces(14, seed=7))})
    named["rma_locks"] = lock_trace()
    named.update({f"rma{seed}": random_rma_trace(seed) for seed in range(6)})
    paths = {}
    for i, (name, tr) in enumerate(named.items()):
        paths[name] = d / f"{name}.sgt"
        write_trace(tr, paths[name], "binary", compress=(i % 2 == 1))   # both block layouts
    return named, paths


def parallel_reports(paths: dict, nprocs: int) -> dict:
    """name -> the report DRIVER's parallel replay on `nprocs` processes wrote for each trace file."""
    require_tool(have_mpi(), "mpi4py and mpiexec are not installed")
    for p in paths.values():
        pathlib.Path(str(p) + ".par.json").unlink(missing_ok=True)
    res = subprocess.run([mpiexec(), "-n", str(nprocs), sys.executable, "-c", DRIVER,
                          *[str(p) for p in paths.values()]], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return {name: json.loads(pathlib.Path(str(p) + ".par.json").read_text()) for name, p in paths.items()}


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_parallel_report_equals_serial(traces, nprocs):
    named, paths = traces
    reports = parallel_reports(paths, nprocs)
    checked = 0
    for name, tr in named.items():
        par = reports[name]
        ser = serial_report(tr)
        assert "controlled logical clock" in par.pop("clock") and ser.pop("clock") == ""
        assert_same(ser, par, f"{name}@{nprocs}")
        checked += 1
    assert checked == len(named)


def test_hand_made_traces_exercise_every_pattern_family(traces):
    """The equality test means something only if the traces contain the wait states it compares."""
    named, _ = traces
    found = set()
    for tr in named.values():
        rep = serial_report(tr)
        found |= {p["key"] for p in rep["patterns"] if p["seconds"] > 0}
    for key in ("late_sender", "late_sender_wrong_order", "late_receiver", "early_scan", "late_broadcast",
                "early_reduce", "wait_nxn", "wait_barrier", "nxn_completion"):
        assert key in found, key


def test_measured_clock_offsets_are_applied_per_block(tmp_path):
    """Offset interpolation is per rank, so the parallel replay applies it and equals the serial
    command with clock correction (on a trace where no violation is left for the logical clock)."""
    require_tool(have_mpi(), "mpi4py and mpiexec are not installed")
    from scalgraph.commands.trace import analyse
    from scalgraph.trace.clock import correct_clocks
    trace = random_traces(1, seed=11)[0]
    trace.meta["clock_offsets"] = {str(r): [[0.0, 0.01 * r], [100.0, 0.01 * r + 1e-4 * r]] for r in range(trace.nranks)}
    _, clock = correct_clocks(trace)
    assert clock.offsets_applied and not clock.corrected
    path = tmp_path / "offsets.sgt"
    write_trace(trace, path, "binary")
    res = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-c", DRIVER, str(path)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    par = json.loads(pathlib.Path(str(path) + ".par.json").read_text())
    ser = without_whatif(json.loads(json.dumps(analyse(trace, clock_correction=True, top=10, source="t",
                                                       complete=True))))
    uncorrected = serial_report(trace)
    assert "interpolation of the measured clock offsets" in par.pop("clock")
    ser.pop("clock"), uncorrected.pop("clock")
    # what the serial clock correction found (the parallel replay runs no logical clock to report on)
    assert ser.pop("clock_correction")["offsets_applied"] and ser.pop("clock_violations_before_correction") == 0
    par.pop("clock_correction"), par.pop("clock_violations_before_correction")
    assert_same(ser, par)
    assert ser["run_length"] != uncorrected["run_length"]     # the offsets did change the times
