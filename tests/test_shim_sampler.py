"""Profile format 2 and unbiased measurement: the v2 arrays round trip through the core (cffi); in real
MPI runs of instrument/testprogs/phases.c the task-clock sampler gives each phase its CPU time, the
computation between two MPI calls matches the program's own CLOCK_THREAD_CPUTIME_ID measurement,
cores and ranks per host are recorded, the ITIMER_PROF fallback says so, threads get their own
events (closed when they exit), and a program that takes the sampling signal over keeps it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from conftest import BIN, MPICC, MPIEXEC, require_tool
from scalgraph.errors import UserError
from scalgraph.io import profile_file as pf

PHASES = Path(__file__).resolve().parent.parent / "instrument" / "testprogs" / "phases.c"
V_INIT, V_SLEEP, V_A, V_B, V_ROUND, V_FINALIZE = 1, 4, 5, 6, 7, 9   # vertices of phases.c
# big phases: a 1 ms sampling period is small against them even when the machine is loaded
ROUNDS, A_US, B_US, SLEEP_US = 40, 8000, 24000, 500


# ---- format 2 through the MPI-free core ----

@pytest.fixture
def core(tmp_path):
    cffi = pytest.importorskip("cffi")
    require_tool(shutil.which("cc") is not None, "no C compiler (cc) to build the shim core")
    from scalgraph.runtime.shim import core_library, header_cdef
    copy = tmp_path / f"core-{uuid.uuid4().hex}.so"
    shutil.copy(core_library(), copy)
    ffi = cffi.FFI()
    ffi.cdef(header_cdef())
    return ffi, ffi.dlopen(str(copy))


def test_v2_arrays_and_header_fields_round_trip(core, tmp_path):
    ffi, lib = core
    lib.sg_core_init(0, 1)
    for ns in (1_000_000, 3_000_000):
        lib.sg_sample_charge(ns)                       # root vertex: no tables registered
    lib.sg_record_mpi(0, 7_000, 1)
    lib.sg_record_comp(0, 5_000_000, 4_000_000, 6_000)
    lib.sg_record_comp(0, 1_000_000, 500_000, 1_000)
    out = tmp_path / "prof"
    assert lib.sg_write_profile(str(out).encode(), 1) == 0
    rec = pf.read_rank_file(out / "rank-0.sgp")
    assert rec["version"] == pf.VERSION == 3 and rec["header_size"] == pf.HEADER_DTYPE.itemsize
    assert rec["threads"] is None                      # format 3's thread section, empty without OpenMP
    assert rec["samples"].tolist() == [2] and rec["sample_ns"].tolist() == [4_000_000]
    assert rec["comp_wall_ns"].tolist() == [6_000_000] and rec["comp_cpu_ns"].tolist() == [4_500_000]
    assert rec["mpi_cpu_ns"].tolist() == [7_000] and rec["time_ns"].tolist() == [7_000]
    assert rec["sampler_name"] == "off" and rec["signo"] == 0      # nothing started in the bare core
    run = pf.read_run(out)
    assert (run.comp_wall[0, 0], run.comp_cpu[0, 0]) == pytest.approx((6e-3, 4.5e-3), rel=1e-12)
    assert (run.mpi_cpu[0, 0], run.time[0, 0]) == pytest.approx((7e-6, 7e-6), rel=1e-12)   # MPI vertex: exact
    assert run.meta["sampler"] == "off" and run.meta["hz"] == 0.0
    assert run.meta["cores"] == [0] and run.meta["ranks_on_host"] == [0]


def test_sampled_vertices_get_the_cpu_time_charged_not_samples_over_hz(tmp_path):
    arrays = {"samples": [0, 3, 0], "sample_ns": [0, 7_500_000, 0], "calls": [0, 0, 2], "time_ns": [0, 0, 9_000]}
    for r in range(2):
        pf.write_rank_file(tmp_path / f"rank-{r}.sgp", 3, arrays, rank=r, nranks=2, hz=1000.0, sampler=1 + r,
                           hz_delivered=900.0 + 100 * r, cores=2, ranks_on_host=2)
    run = pf.read_run(tmp_path)
    assert run.time[:, 1] == pytest.approx([7.5e-3] * 2) and run.time[:, 2] == pytest.approx([9e-6] * 2)
    assert run.meta["samplers"] == ["task-clock", "itimer"] and run.meta["sampler"] == "itimer"
    assert run.meta["hz"] == pytest.approx(950.0) and run.meta["hz_requested"] == 1000.0
    assert run.meta["cores"] == [2, 2] and run.meta["ranks_on_host"] == [2, 2]
    assert "ITIMER_PROF fallback" in pf.fallback_note([tmp_path])


def test_a_version_1_file_asks_for_a_rerun(tmp_path):
    pf.write_rank_file(tmp_path / "rank-0.sgp", 1, {}, rank=0, nranks=1)
    data = bytearray((tmp_path / "rank-0.sgp").read_bytes())
    data[8:12] = (1).to_bytes(4, "little")
    (tmp_path / "rank-0.sgp").write_bytes(bytes(data[:616 + 4 * 8]))   # a v1 header and its 4 arrays
    with pytest.raises(UserError, match="format version 1; this scalgraph reads versions 2-3: rerun"):
        pf.read_run(tmp_path)


# ---- real MPI runs ----

@pytest.fixture(scope="module")
def phases(tmp_path_factory):
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (mpicc/mpiexec)")
    from scalgraph.runtime.shim import INSTRUMENT_DIR, link_flags, shim_library
    d = tmp_path_factory.mktemp("phases")
    subprocess.run([MPICC, "-O2", "-g", "-I", str(INSTRUMENT_DIR), str(PHASES),
                    *link_flags(shim_library(MPICC)), "-o", str(d / "phases")], check=True)
    return d / "phases"


def run_phases(exe, out, ranks, args, env=None):
    """(the program's lines as {rank: {key: number}}, stderr, RunProfile)"""
    e = dict(os.environ, SCALGRAPH_OUT=str(out), **(env or {}))
    res = subprocess.run([MPIEXEC, "-n", str(ranks), str(exe), *map(str, args)], env=e, capture_output=True,
                         text=True, timeout=600, check=True)
    lines = {}
    for line in res.stdout.splitlines():
        w = line.split()
        lines[int(w[1])] = {w[i]: float(w[i + 1]) for i in range(2, len(w) - 1, 2)}
    return lines, res.stderr, pf.read_run(out)


@pytest.fixture(scope="module")
def barrier_run(phases, tmp_path_factory):
    """Two ranks, rank 1 computes, a barrier closes every round; the default sampler at 1 kHz."""
    out = tmp_path_factory.mktemp("barrier") / "prof"
    lines, _, prof = run_phases(phases, out, 2, [ROUNDS, A_US, B_US, SLEEP_US, 1],
                                env={"SCALGRAPH_HZ": "1000", "SCALGRAPH_SAMPLER": ""})
    return lines, prof


def test_computation_between_mpi_calls_matches_the_programs_own_clocks(barrier_run):
    lines, prof = barrier_run
    truth = lines[1]
    assert prof.comp_cpu[1, V_ROUND] == pytest.approx(truth["between_cpu_ns"] * 1e-9, rel=0.03)
    assert prof.comp_wall[1, V_ROUND] == pytest.approx(truth["between_wall_ns"] * 1e-9, rel=0.03)
    assert prof.comp_cpu[0, V_ROUND] < 0.05 * prof.comp_cpu[1, V_ROUND]    # rank 0 only waited
    assert np.all(prof.comp_cpu <= prof.comp_wall + 1e-6)
    # only MPI vertices end a computation; the CPU inside the calls is at most their wall time
    mpi = prof.calls > 0
    assert np.all(prof.comp_wall[~mpi] == 0) and np.all(prof.mpi_cpu[~mpi] == 0)
    assert np.all(prof.mpi_cpu[mpi] <= prof.time[mpi] + 1e-4)
    assert np.all(prof.comp_wall[:, V_INIT] > 0)          # start-up before MPI_Init: from the shim's start


def test_task_clock_samples_give_each_phase_its_cpu_time(barrier_run):
    lines, prof = barrier_run
    require_tool(prof.meta["sampler"] == "task-clock", "perf events are not available here")
    assert prof.meta["samplers"] == ["task-clock", "task-clock"] and prof.meta["sampling_off_ranks"] == []
    assert 0 < prof.meta["hz"] <= 1100 and prof.meta["hz_requested"] == 1000.0
    for v, key in ((V_A, "a_ns"), (V_B, "b_ns")):
        truth = lines[1][key] * 1e-9
        assert prof.time[1, v] == pytest.approx(truth, rel=0.05), (v, prof.time[1, v], truth)
        assert prof.samples[1, v] == pytest.approx(truth * 1000, rel=0.25)   # samples arrive at about the rate
    assert prof.time[1, V_SLEEP] < 0.01 * prof.time[1, V_A]   # sleeping costs no CPU
    assert prof.time[0, V_A] == 0 and prof.time[0, V_B] == 0


def test_cores_and_ranks_on_the_host_are_recorded(barrier_run, phases, tmp_path):
    _, prof = barrier_run
    assert prof.meta["ranks_on_host"] == [2, 2]          # from the launcher's environment
    assert all(1 <= c <= os.cpu_count() for c in prof.meta["cores"])
    # without the launcher's word: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) in MPI_Init's wrapper
    env = dict(os.environ, SCALGRAPH_OUT=str(tmp_path / "prof"))
    subprocess.run([MPIEXEC, "-n", "3", "env", "-u", "MPI_LOCALNRANKS", "-u", "OMPI_COMM_WORLD_LOCAL_SIZE",
                    str(phases), "1", "100", "100", "0"], env=env, capture_output=True, check=True, timeout=300)
    assert pf.read_run(tmp_path / "prof").meta["ranks_on_host"] == [3, 3, 3]


def test_the_itimer_fallback_is_forced_and_said(phases, tmp_path):
    lines, _, prof = run_phases(phases, tmp_path / "prof", 1, [5, 4000, 4000, 0],
                                env={"SCALGRAPH_SAMPLER": "itimer"})
    assert prof.meta["sampler"] == "itimer" and prof.meta["samplers"] == ["itimer"]
    assert 0 < prof.meta["hz"] < 1500 and prof.samples[0].sum() > 0
    assert "ITIMER_PROF fallback" in pf.fallback_note([tmp_path / "prof"])
    assert prof.comp_cpu[0, V_ROUND] == pytest.approx(lines[0]["between_cpu_ns"] * 1e-9, rel=0.05)


def test_no_sampling_at_zero_hz(phases, tmp_path):
    _, _, prof = run_phases(phases, tmp_path / "prof", 1, [2, 1000, 1000, 0], env={"SCALGRAPH_HZ": "0"})
    assert prof.meta["sampler"] == "off" and prof.samples.sum() == 0 and prof.comp_cpu[0, V_ROUND] > 0


def test_a_program_that_takes_the_sampling_signal_keeps_it(phases, tmp_path):
    """The program installs its own handler for the shim's real-time signal with signal() after
    MPI_Init: the shim's signal() stops the events first, so the program's handler never runs for
    them (60 ms of CPU follow: 60 overflows at 1 kHz), it runs to the end, and the shim says once
    that sampling stopped."""
    lines, err, prof = run_phases(phases, tmp_path / "prof", 1, [10, 3000, 3000, 0, -1, "steal"],
                                  env={"SCALGRAPH_HZ": "1000", "SCALGRAPH_SAMPLER": ""})
    require_tool(prof.meta["sampler"] == "task-clock", "perf events are not available here")
    assert lines[0]["stolen_signal"] > 0 and lines[0]["caught"] == 0
    assert lines[0]["a_ns"] > 0 and prof.calls[0, V_FINALIZE] == 1
    assert prof.meta["sampling_off_ranks"] == [0]
    assert prof.samples[0, V_A] == 0 and prof.samples[0, V_B] == 0   # stopped before the phases
    assert err.count("scalgraph: the program installed its own handler for signal") == 1


ARM_BATCH = 16   # instrument/sg_sampler.c: overflows per REFRESH


def test_a_signal_taken_behind_the_shims_back_gets_at_most_one_batch(phases, tmp_path):
    """sigset() reaches the kernel without the shim's wrappers: the event armed for ARM_BATCH overflows
    is not re-armed (the shim's handler no longer runs), so the program's handler runs for at most what
    was left of the batch out of the 60 overflows that follow, the program runs to the end, and
    Finalize notices."""
    lines, err, prof = run_phases(phases, tmp_path / "prof", 1, [10, 3000, 3000, 0, -1, "steal-sigset"],
                                  env={"SCALGRAPH_HZ": "1000", "SCALGRAPH_SAMPLER": ""})
    require_tool(prof.meta["sampler"] == "task-clock", "perf events are not available here")
    assert lines[0]["stolen_signal"] > 0 and 1 <= lines[0]["caught"] <= ARM_BATCH
    assert lines[0]["a_ns"] > 0 and prof.calls[0, V_FINALIZE] == 1
    assert prof.meta["sampling_off_ranks"] == [0]
    assert err.count("scalgraph: the program installed its own handler for signal") == 1


THREADS = r"""
#include <dirent.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "scalgraph.h"
/* vertices: 0 main, 1 Init, 2 Finalize, 3 worker (function), 4 its loop */
uint32_t __sg_fid_tp_main = 0xFFFFFFFFu, __sg_fid_tp_worker = 0xFFFFFFFFu;
static const uint32_t inst_base[] = {0, 3}, inst_func[] = {0, 1}, inst_vid[] = {0, 1, 2, 3, 4};
static const int32_t inst_callee[] = {-1, -1, -1, -1, -1};
static const uint32_t func_default_inst[] = {0, 1};
static uint32_t *const fid_slots[] = {&__sg_fid_tp_main, &__sg_fid_tp_worker};
static const uint8_t vertex_kind[5] = {0};
static const struct sg_psg_tables tables = {"threadphases0000", 5, 2, 2, inst_base, inst_func, inst_vid,
                                            inst_callee, func_default_inst, fid_slots, vertex_kind};
__attribute__((constructor)) static void register_tables(void) { sg_register_psg(&tables); }
static uint64_t cpu_ns(void) { struct timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
                               return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec; }
static volatile double sink;
static uint64_t spent[2];
static int perf_fds(void) {
    int n = 0; char path[64], target[128]; DIR *d = opendir("/proc/self/fd"); struct dirent *e;
    while (d && (e = readdir(d))) {
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len > 0) { target[len] = 0; n += strstr(target, "perf_event") != NULL; }
    }
    if (d) closedir(d);
    return n;
}
static void *worker(void *arg) {
    sg_fn_enter(__sg_fid_tp_worker);
    uint64_t c0 = cpu_ns();
    sg_cur = 1;
    double x = 0;
    for (long i = 0; i < 120000000L; i++) x += (double)(i % 7) * 0.5;
    sink = x;
    spent[(long)arg] = cpu_ns() - c0;
    sg_fn_exit();
    return NULL;
}
int main(int argc, char **argv) {
    sg_fn_enter(__sg_fid_tp_main);
    sg_cur = 1;
    MPI_Init(&argc, &argv);
    int before = perf_fds();
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("rank 0 cpu_ns %llu perf_fds_before %d perf_fds_after %d\n",
           (unsigned long long)(spent[0] + spent[1]), before, perf_fds());
    sg_cur = 2;
    MPI_Finalize();
    return 0;
}
"""


def test_threads_get_their_own_events_closed_at_their_exit(tmp_path):
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (mpicc/mpiexec)")
    from scalgraph.runtime.shim import INSTRUMENT_DIR, link_flags, shim_library
    (tmp_path / "tp.c").write_text(THREADS)
    exe = tmp_path / "tp"
    subprocess.run([MPICC, "-O1", "-pthread", "-I", str(INSTRUMENT_DIR), str(tmp_path / "tp.c"),
                    *link_flags(shim_library(MPICC)), "-o", str(exe)], check=True)
    lines, _, prof = run_phases(exe, tmp_path / "prof", 1, [])
    require_tool(prof.meta["sampler"] == "task-clock", "perf events are not available here")
    truth = lines[0]["cpu_ns"] * 1e-9
    assert prof.time[0, 4] == pytest.approx(truth, rel=0.05)       # both threads' loops, sampled
    assert lines[0]["perf_fds_before"] == lines[0]["perf_fds_after"] == 1   # the main thread's only


def test_scalgraph_run_says_when_the_fallback_sampled(tmp_path):
    """One note line after runs whose profiles were sampled with ITIMER_PROF; none with task-clock."""
    sgcc = BIN / "sgcc"
    require_tool(sgcc.exists() and MPIEXEC is not None, "no sgcc/mpiexec")
    exe = tmp_path / "mw"
    root = Path(__file__).resolve().parent.parent
    subprocess.run([str(sgcc), "-O2", "-o", str(exe), str(root / "samples" / "masterworker" / "masterworker.c")],
                   check=True, capture_output=True, timeout=600)
    notes = {}
    for sampler in ("itimer", "task-clock"):
        res = subprocess.run([sys.executable, "-m", "scalgraph.cli", "run", "-n", "2", "--hz", "500", "-o",
                              str(tmp_path / sampler), "--", str(exe), "12"], capture_output=True, text=True,
                             timeout=600, cwd=tmp_path, env=dict(os.environ, SCALGRAPH_SAMPLER=sampler))
        assert res.returncode == 0, res.stderr
        notes[sampler] = [line for line in res.stderr.splitlines() if "ITIMER_PROF fallback" in line]
        prof = pf.read_run(tmp_path / sampler / "scale-2" / "rep-0")
        assert prof.meta["hz_requested"] == 500.0
    assert len(notes["itimer"]) == 1 and notes["itimer"][0].startswith("scalgraph run: note: 1 run(s) sampled")
    if prof.meta["sampler"] == "task-clock":
        assert notes["task-clock"] == []


DENY_PERF = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>
/* plays a host where perf_event_paranoid or seccomp refuses perf_event_open */
long syscall(long n, ...) {
    va_list ap;
    va_start(ap, n);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_perf_event_open) { errno = EACCES; return -1; }
    long (*real)(long, ...) = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
"""


def test_where_perf_events_are_refused_the_itimer_fallback_runs_and_says_so(phases, tmp_path):
    cc = shutil.which("cc")
    require_tool(cc is not None, "no C compiler (cc)")
    (tmp_path / "deny.c").write_text(DENY_PERF)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", str(tmp_path / "deny.c"), "-o", str(tmp_path / "deny.so"), "-ldl"],
                   check=True)
    lines, err, prof = run_phases(phases, tmp_path / "prof", 2, [4, 4000, 4000, 0],
                                  env={"LD_PRELOAD": str(tmp_path / "deny.so"), "SCALGRAPH_SAMPLER": ""})
    assert prof.meta["samplers"] == ["itimer", "itimer"] and prof.meta["hz"] > 0
    assert err.count("perf events are not available here (Permission denied); sampling falls back to "
                     "ITIMER_PROF") == 1                                    # rank 0 only
    assert sorted(lines) == [0, 1] and all(v["a_ns"] > 0 for v in lines.values())


def test_repetitions_keep_the_computation_between_mpi_calls_and_detect_notes_the_fallback(tmp_path):
    from scalgraph.io.experiment import _partial_notes, median_of_repetitions
    from scalgraph.model.profile import empty_profile
    reps = []
    for k in (1.0, 3.0, 2.0):
        prof = empty_profile(1, 2)
        prof.comp_wall[0, 1], prof.comp_cpu[0, 1], prof.mpi_cpu[0, 1] = 10 * k, 5 * k, k
        reps.append(prof)
    med = median_of_repetitions(reps)
    assert (med.comp_wall[0, 1], med.comp_cpu[0, 1], med.mpi_cpu[0, 1]) == (20.0, 10.0, 2.0)
    notes = _partial_notes("scale-2/rep-0", {"sampler": "itimer", "hz": 250.0})
    assert notes == ["scale-2/rep-0: sampled with the ITIMER_PROF fallback (250 samples per CPU second): perf "
                     "events were not available; sampled times are tick-biased"]
    assert _partial_notes("x", {"sampler": "task-clock", "hz": 990.0}) == []
