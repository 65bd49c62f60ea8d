"""The shim inside real MPI programs (instrument/testprogs/patterns.c, hand-written probes and PSG
tables), read back in Python: exact call counts, the exact dependence pattern of a ring, a 2-D halo
with Isend/Irecv/Waitall, wildcard receives, a sub-communicator collective and persistent requests;
samples in the loop that burns the time; unchanged output; files at exit, on SIGTERM."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import MPICC, MPIEXEC, build_probed, require_tool
from scalgraph.io.profile_file import read_rank_file, read_run, written_by
from scalgraph.model.profile import DEP_COLL, DEP_RECV, DEP_SEND

PROGRAM = Path(__file__).resolve().parent.parent / "instrument" / "testprogs" / "patterns.c"
THREADS = PROGRAM.with_name("threads.c")
CLOCKSOURCE = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")

# vertex ids of patterns.c (see its header comment)
BURN_A, BURN_B, INIT, SEND, RECV, IRECV, ISEND, WAITALL, WILD, WORKER, SPLIT, ALLRED, BARRIER, \
    FINALIZE, START, PWAIT = 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20
ITERS = 5


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """patterns.c linked with the shim, and the same program without it."""
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (mpicc/mpiexec)")
    from scalgraph.runtime.shim import INSTRUMENT_DIR, link_flags, shim_library
    d = tmp_path_factory.mktemp("progs")
    build_probed(PROGRAM, d)
    subprocess.run([MPICC, "-O2", "-I", str(INSTRUMENT_DIR), str(PROGRAM.with_name("callcost.c")),
                    *link_flags(shim_library(MPICC)), "-o", str(d / "callcost")], check=True)
    subprocess.run([MPICC, "-O1", "-g", "-pthread", "-I", str(INSTRUMENT_DIR), str(THREADS),
                    *link_flags(shim_library(MPICC)), "-o", str(d / "threads")], check=True)
    return d


def run(exe: Path, n: int, args, out: Path, env=None, check=True) -> subprocess.CompletedProcess:
    e = dict(os.environ, SCALGRAPH_OUT=str(out), **(env or {}))
    return subprocess.run([MPIEXEC, "-n", str(n), str(exe), *map(str, args)], env=e, capture_output=True,
                          text=True, timeout=120, check=check)


def expected_rows(rank: int, size: int, px: int, py: int, members_of) -> set:
    """(vertex, kind, peer, tag, comm, count, bytes) rows the program must produce on `rank`."""
    rows = set()
    if size > 1:
        rows.add((SEND, DEP_SEND, (rank + 1) % size, 7, 0, ITERS, ITERS * 400))
        rows.add((RECV, DEP_RECV, (rank - 1) % size, 7, 0, ITERS, ITERS * 400))
    x, y = rank % px, rank // px
    nb = [y * px + (x + 1) % px, y * px + (x - 1) % px, ((y + 1) % py) * px + x, ((y - 1) % py) * px + x]
    opposite = [1, 0, 3, 2]
    for d in range(4):
        rows.add((WAITALL, DEP_SEND, nb[d], d, 0, ITERS, ITERS * 400))
        rows.add((WAITALL, DEP_RECV, nb[d], opposite[d], 0, ITERS, ITERS * 400))
    if rank == 0:
        rows |= {(WILD, DEP_RECV, w, 100 + w, 0, 3, 120) for w in range(1, size)}
    else:
        rows.add((WORKER, DEP_SEND, 0, 100 + rank, 0, 3, 120))
    rows.add((ALLRED, DEP_COLL, -1, -1, members_of(sorted(range(rank % 2, size, 2))), ITERS, ITERS * 8))
    rows.add((PWAIT, DEP_SEND, (rank + 1) % size, 9, 0, ITERS, ITERS * 4))
    rows.add((PWAIT, DEP_RECV, (rank - 1) % size, 9, 0, ITERS, ITERS * 4))
    rows.add((BARRIER, DEP_COLL, -1, -1, 0, 1, 0))
    return rows


def expected_calls(rank: int, size: int) -> dict:
    return {INIT: 1, SEND: ITERS if size > 1 else 0, RECV: ITERS if size > 1 else 0, IRECV: 4 * ITERS,
            ISEND: 4 * ITERS, WAITALL: ITERS, WILD: 3 * (size - 1) if rank == 0 else 0,
            WORKER: 0 if rank == 0 else 3, SPLIT: 2, ALLRED: ITERS, BARRIER: 1, FINALIZE: 1,
            START: 2 + ITERS + 2, PWAIT: ITERS}


@pytest.mark.parametrize("px, py", [(2, 1), (2, 2)])
def test_exact_calls_and_dependences(programs, tmp_path, px, py):
    size = px * py
    run(programs / "with_shim", size, [px, py, ITERS, 1000, 1000], tmp_path / "prof")
    prof = read_run(tmp_path / "prof")
    assert prof.nranks == size and prof.nvertices == 21 and prof.psg_hash == "0123456789abcdef"
    assert not prof.meta["incomplete"] and prof.meta["written_by"] == ["finalize"] * size

    def comm_with(members):
        ids = [c for c, m in prof.comm_members.items() if m == members]
        assert len(ids) == 1, (members, prof.comm_members)
        return ids[0]

    assert prof.comm_members[0] == list(range(size))
    for r in range(size):
        calls = {v: int(c) for v, c in enumerate(prof.calls[r]) if c}
        assert calls == {v: c for v, c in expected_calls(r, size).items() if c}
        mine = prof.deps[prof.deps["rank"] == r]
        got = {tuple(int(row[k]) for k in ("vertex", "kind", "peer", "tag", "comm", "count", "bytes"))
               for row in mine}
        assert len(got) == len(mine)                     # one row per distinct tuple
        assert got == expected_rows(r, size, px, py, comm_with)
    # MPI time is exact and waiting is part of it; blocking receives wait, sends posted do not
    mpi = prof.calls > 0
    assert np.all(prof.time[mpi] > 0) and np.all(prof.wait <= prof.time + 1e-12)
    assert np.all(prof.wait[:, ISEND] == 0) and np.all(prof.wait[:, WAITALL] > 0)
    assert np.all(prof.deps["wait"] >= 0)
    # a Waitall's blocked time goes to the receives it completed, not to its sends
    for r in range(size):
        at = prof.deps[(prof.deps["rank"] == r) & (prof.deps["vertex"] == WAITALL)]
        assert np.all(at["wait"][at["kind"] == DEP_SEND] == 0)
        assert at["wait"][at["kind"] == DEP_RECV].sum() == pytest.approx(prof.wait[r, WAITALL], abs=1e-7)


@pytest.mark.parametrize("sampler", ["task-clock", "itimer"])
def test_samples_land_in_the_loop_that_burns_the_time(programs, tmp_path, sampler):
    run(programs / "with_shim", 2, [2, 1, ITERS, 400_000_000, 100_000_000], tmp_path / "prof",
        env={"SCALGRAPH_SAMPLER": sampler, "SCALGRAPH_HZ": "200"})
    prof = read_run(tmp_path / "prof")
    require_tool(prof.meta["sampler"] == sampler, f"perf events are not available here ({prof.meta['sampler']})")
    assert prof.meta["samplers"] == [sampler] * 2 and prof.meta["hz_requested"] == 200.0
    assert 20 < prof.meta["hz"] < 400      # delivered: samples per CPU second (itimer: tick-bound)
    for r in range(2):
        # MPI vertices are timed exactly; a rank that polls while its partner computes gets samples
        # there too (the process CPU timer of the fallback sees the polling), so look at the others
        s = np.where(prof.calls[r] > 0, 0, prof.samples[r])
        assert s.argmax() == BURN_A, s                   # the same function, from its costly call site
        assert s[BURN_A] > 2 * s[BURN_B] > 0, s
        assert s[BURN_A] >= 0.5 * s.sum(), s
        # each sample is charged the CPU time since the previous one: a few periods at most
        assert 0.5 / 200 * s[BURN_A] < prof.time[r, BURN_A] < 4 / 200 * s[BURN_A]


def test_program_output_is_unchanged_by_the_shim(programs, tmp_path):
    args = [2, 2, ITERS, 1000, 1000]
    plain = run(programs / "plain", 4, args, tmp_path / "plain")
    shim = run(programs / "with_shim", 4, args, tmp_path / "shim")
    assert sorted(plain.stdout.splitlines()) == sorted(shim.stdout.splitlines())
    assert len(plain.stdout.splitlines()) == 4
    assert not (tmp_path / "plain").exists() and len(list((tmp_path / "shim").glob("rank-*.sgp"))) == 4


def test_file_is_written_at_exit_without_finalize(programs, tmp_path):
    run(programs / "with_shim", 2, [2, 1, ITERS, 1000, 1000, "exit"], tmp_path / "prof")
    prof = read_run(tmp_path / "prof")
    assert prof.meta["written_by"] == ["exit", "exit"] and not prof.meta["incomplete"]
    assert prof.calls[:, BARRIER].tolist() == [1, 1] and prof.calls[:, FINALIZE].tolist() == [0, 0]
    assert not list((tmp_path / "prof").glob("*.tmp.*"))


def test_file_is_written_on_sigterm(programs, tmp_path):
    """A singleton rank blocked in pause() is terminated: its file is there, marked as such."""
    out = tmp_path / "prof"
    proc = subprocess.Popen([str(programs / "with_shim"), "1", "1", str(ITERS), "1000", "1000", "hang"],
                            env=dict(os.environ, SCALGRAPH_OUT=str(out)), stdout=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert lines[1].startswith("pid 0 "), lines
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    prof = read_run(out)
    assert prof.meta["written_by"] == ["sigterm"]
    assert prof.calls[0, WAITALL] == ITERS and prof.calls[0, SEND] == 0


def test_a_killed_rank_leaves_the_other_files_intact_and_the_run_incomplete(programs, tmp_path):
    """Rank 1 hangs and is killed (SIGKILL); rank 0 reached MPI_Finalize, whose file is complete."""
    out = tmp_path / "prof"
    proc = subprocess.Popen([MPIEXEC, "-n", "2", str(programs / "with_shim"), "2", "1", str(ITERS), "1000",
                             "1000", "hang1"], env=dict(os.environ, SCALGRAPH_OUT=str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("pid 1 "):
            line = proc.stdout.readline()
        victim = int(line.split()[2])
        deadline = time.monotonic() + 60
        while not (out / "rank-0.sgp").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    prof = read_run(out)
    assert prof.meta["incomplete"] and prof.meta["missing_ranks"] == [1]
    assert prof.meta["written_by"] == ["finalize", None]
    assert prof.calls[0].tolist() == [expected_calls(0, 2).get(v, 0) for v in range(21)]
    assert prof.calls[1].sum() == 0 and not list(out.glob("*.tmp.*"))


def test_comm_sampling_zero_keeps_counts_and_drops_dependences(programs, tmp_path):
    run(programs / "with_shim", 2, [2, 1, ITERS, 1000, 1000], tmp_path / "prof",
        env={"SCALGRAPH_COMM_SAMPLE": "0"})
    prof = read_run(tmp_path / "prof")
    assert len(prof.deps) == 0 and prof.meta["comm_sample"] == 0.0
    assert prof.calls[:, WAITALL].tolist() == [ITERS, ITERS]


def test_counters_are_recorded_where_available_and_absent_otherwise(programs, tmp_path):
    res = run(programs / "with_shim", 2, [2, 1, ITERS, 200_000_000, 1000], tmp_path / "prof",
              env={"SCALGRAPH_COUNTERS": "task-clock,no-such-counter"})
    prof = read_run(tmp_path / "prof")
    assert "no-such-counter" not in prof.counters and "unknown counter 'no-such-counter'" in res.stderr
    require_tool("task-clock" in prof.counters, "perf_event_open software events are not permitted here")
    tc = prof.counters["task-clock"]
    assert tc.shape == (2, 21) and np.all(tc >= 0)
    assert np.all(tc.argmax(axis=1) == BURN_A)


def test_threads_calling_mpi_concurrently_keep_their_own_context(programs, tmp_path):
    """MPI_THREAD_MULTIPLE: two threads per rank in two functions; a forked child writes nothing."""
    n = 200
    res = run(programs / "threads", 2, [n, tmp_path / "child"], tmp_path / "prof", check=False)
    if "no MPI_THREAD_MULTIPLE" in res.stdout:
        require_tool(False, "this MPI does not provide MPI_THREAD_MULTIPLE")
    assert res.returncode == 0, res.stderr
    prof = read_run(tmp_path / "prof")
    init, finalize, barrier, a_sendrecv, b_sendrecv = 1, 2, 3, 5, 7
    for r in range(2):
        calls = {v: int(c) for v, c in enumerate(prof.calls[r]) if c}
        assert calls == {init: 1, finalize: 1, barrier: 1, a_sendrecv: n, b_sendrecv: n}
        rows = {(int(d["vertex"]), int(d["kind"]), int(d["peer"]), int(d["tag"]), int(d["count"]))
                for d in prof.deps[prof.deps["rank"] == r]}
        assert rows == {(a_sendrecv, DEP_SEND, 1 - r, 1, n), (a_sendrecv, DEP_RECV, 1 - r, 1, n),
                        (b_sendrecv, DEP_SEND, 1 - r, 2, n), (b_sendrecv, DEP_RECV, 1 - r, 2, n),
                        (barrier, DEP_COLL, -1, -1, 1)}
    assert not (tmp_path / "child").exists()


OWN_SIGPROF = r"""
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
static volatile long ticks;
static void on_prof(int sig) { (void)sig; ticks++; }
int main(int argc, char **argv) {
    signal(SIGPROF, on_prof);
    struct itimerval it = {{0, 2000}, {0, 2000}}, cur;
    setitimer(ITIMER_PROF, &it, NULL);
    MPI_Init(&argc, &argv);
    volatile double x = 0;
    for (long i = 0; i < 300000000L && ticks < 20; i++) x += i;
    MPI_Finalize();
    getitimer(ITIMER_PROF, &cur);
    printf("ticks %d timer %ld\n", ticks >= 20, (long)cur.it_interval.tv_usec);
    return 0;
}
"""


@pytest.mark.parametrize("sampler", ["task-clock", "itimer"])
def test_a_program_that_owns_sigprof_keeps_it(programs, tmp_path, sampler):
    """The program's own SIGPROF handler and timer win.  The task-clock sampler does not need them
    and samples on; the ITIMER_PROF fallback notes that it did not sample."""
    from scalgraph.runtime.shim import link_flags, shim_library
    src = tmp_path / "ownprof.c"
    src.write_text(OWN_SIGPROF)
    exe = tmp_path / "ownprof"
    subprocess.run([MPICC, str(src), *link_flags(shim_library(MPICC)), "-o", str(exe)], check=True)
    res = run(exe, 1, [], tmp_path / "prof", env={"SCALGRAPH_SAMPLER": sampler})
    assert res.stdout.split() == ["ticks", "1", "timer", "2000"]   # its handler ran, its timer still set
    prof = read_run(tmp_path / "prof")
    assert prof.calls[0, 0] == 2
    if sampler == "itimer":
        assert prof.meta["sampling_off_ranks"] == [0]
        assert "scalgraph: the program installed its own SIGPROF handler" in res.stderr
    else:
        require_tool(prof.meta["sampler"] == "task-clock", "perf events are not available here")
        assert prof.meta["sampling_off_ranks"] == [] and "scalgraph:" not in res.stderr


def test_clock_offsets_by_ping_pong_are_bounded_by_half_the_round_trip(programs, tmp_path):
    """On one host the true offset is 0, so the estimate can be off by at most rtt/2; by default the
    shim knows all ranks share the clock and measures nothing (offsets 0, rtt 0)."""
    run(programs / "with_shim", 4, [2, 2, 1, 1000, 1000], tmp_path / "forced",
        env={"SCALGRAPH_CLOCK_SYNC": "3"})
    run(programs / "with_shim", 4, [2, 2, 1, 1000, 1000], tmp_path / "auto")
    forced, auto = read_run(tmp_path / "forced").meta, read_run(tmp_path / "auto").meta
    for when in ("init", "final"):
        off, rtt = forced[f"clock_offset_{when}"], forced[f"clock_rtt_{when}"]
        assert off[0] == 0 and rtt[0] == 0 and all(r > 0 for r in rtt[1:])
        assert all(abs(o) <= r / 2 + 1e-9 for o, r in zip(off, rtt))
        assert auto[f"clock_offset_{when}"] == [0.0] * 4 and auto[f"clock_rtt_{when}"] == [0.0] * 4


@pytest.mark.parametrize("timer", ["tsc-if-possible", "clock"])
def test_blocked_time_is_measured_in_seconds(programs, tmp_path, timer):
    """Rank 1 sleeps 0.3 s before the ring: rank 0's first receive blocks that long (both timers)."""
    env = {"SCALGRAPH_TIMER": "clock"} if timer == "clock" else {}
    run(programs / "with_shim", 2, [2, 1, 1, 1000, 1000, "late"], tmp_path / "prof", env=env)
    prof = read_run(tmp_path / "prof")
    if timer == "clock":
        assert prof.meta["timer"] == ["clock", "clock"]
    elif CLOCKSOURCE.is_file() and CLOCKSOURCE.read_text().strip() == "tsc":
        assert prof.meta["timer"] == ["tsc", "tsc"]
    assert 0.28 <= prof.wait[0, RECV] == prof.time[0, RECV] < 0.3 + 0.5 * prof.wall_time
    assert prof.deps[(prof.deps["rank"] == 0) & (prof.deps["vertex"] == RECV)]["wait"][0] == \
        pytest.approx(prof.wait[0, RECV])
    assert prof.time[0][prof.calls[0] > 0].sum() <= prof.wall_time


def test_ten_million_mpi_calls_need_no_more_memory_and_no_bigger_file(programs, tmp_path):
    """callcost.c makes 4 MPI calls per iteration (Iprobe, Irecv, Isend, Waitall): 2.5e6 iterations
    against 1e4, one rank; peak RSS and the file size stay the same."""
    def peak_rss_kb(n: int, out: Path) -> int:
        proc = subprocess.Popen([str(programs / "callcost"), str(n)], stdout=subprocess.DEVNULL,
                                env=dict(os.environ, SCALGRAPH_OUT=str(out)))
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        assert proc.returncode == 0
        return usage.ru_maxrss

    small, big = peak_rss_kb(10_000, tmp_path / "small"), peak_rss_kb(2_500_000, tmp_path / "big")
    assert big <= small + 2048, (small, big)
    assert (tmp_path / "big" / "rank-0.sgp").stat().st_size == (tmp_path / "small" / "rank-0.sgp").stat().st_size
    prof = read_run(tmp_path / "big")
    assert prof.calls[0, 2] == 2_500_000 + 1 and prof.calls[0, 3] == 3 * 2_500_000   # + MPI_Init at 2
    rows = prof.deps[prof.deps["vertex"] == 3]
    assert sorted(rows[["kind", "peer", "tag", "count", "bytes"]].tolist()) == [
        (DEP_SEND, 0, 5, 2_500_000, 4 * 2_500_000), (DEP_RECV, 0, 5, 2_500_000, 4 * 2_500_000)]


def test_an_unwritable_output_directory_is_reported_not_fatal(programs, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("")                      # a file where the directory should be
    res = run(programs / "with_shim", 2, [2, 1, 1, 1000, 1000], blocker / "prof")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 2
    assert res.stderr.count("scalgraph: cannot write the profile ") == 2
    assert "set SCALGRAPH_OUT to a writable directory" in res.stderr


def test_bad_settings_are_named_and_the_defaults_used(programs, tmp_path):
    res = run(programs / "with_shim", 2, [2, 1, 1, 1000, 1000], tmp_path / "prof",
              env={"SCALGRAPH_HZ": "fast", "SCALGRAPH_COMM_SAMPLE": "2"})
    assert "scalgraph: SCALGRAPH_HZ='fast' is not a number from 0 to 10000; using 1000" in res.stderr
    assert "scalgraph: SCALGRAPH_COMM_SAMPLE='2' is not a number from 0 to 1; using 1" in res.stderr
    prof = read_run(tmp_path / "prof")
    assert prof.meta["hz_requested"] == 1000.0 and prof.meta["comm_sample"] == 1.0 and len(prof.deps) > 0


def test_file_is_written_by_mpi_abort(programs, tmp_path):
    res = run(programs / "with_shim", 2, [2, 1, ITERS, 1000, 1000, "abort"], tmp_path / "prof", check=False)
    assert res.returncode != 0
    rec = read_rank_file(tmp_path / "prof" / "rank-1.sgp")
    assert written_by(rec["flags"]) == "abort"
    assert rec["calls"][FINALIZE] == 1 and rec["calls"][WAITALL] == ITERS   # the Abort call itself counted


def test_ld_preload_into_an_unmodified_program(tmp_path):
    """No probes, no relinking: every call lands on the root vertex, counts and peers exact."""
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (mpicc/mpiexec)")
    from scalgraph.runtime.shim import shim_library
    src = tmp_path / "ring.c"
    src.write_text("#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) {\n"
                   "  int r, n, x = 0; MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);\n"
                   "  MPI_Comm_size(MPI_COMM_WORLD, &n);\n"
                   "  for (int i = 0; i < 3; i++) MPI_Sendrecv_replace(&x, 1, MPI_INT, (r + 1) % n, 4,\n"
                   "      (r + n - 1) % n, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);\n"
                   "  printf(\"%d\\n\", r); MPI_Finalize(); return 0; }\n")
    subprocess.run([MPICC, str(src), "-o", str(tmp_path / "ring")], check=True)
    res = run(tmp_path / "ring", 3, [], tmp_path / "prof", env={"LD_PRELOAD": str(shim_library(MPICC))})
    assert sorted(res.stdout.split()) == ["0", "1", "2"]
    prof = read_run(tmp_path / "prof")
    assert prof.nvertices == 1 and prof.psg_hash == "" and prof.calls[:, 0].tolist() == [5, 5, 5]
    rows = {(int(d["rank"]), int(d["kind"]), int(d["peer"]), int(d["count"])) for d in prof.deps
            if d["kind"] != DEP_COLL}
    assert rows == {(r, k, (r + 1) % 3 if k == DEP_SEND else (r - 1) % 3, 3)
                    for r in range(3) for k in (DEP_SEND, DEP_RECV)}


def test_static_archive_links_and_records(tmp_path):
    """libscalgraph.a linked statically into patterns.c gives the same exact counts as the .so."""
    require_tool(MPICC is not None and MPIEXEC is not None, "no MPI (mpicc/mpiexec)")
    from scalgraph.runtime.shim import INSTRUMENT_DIR, link_flags, shim_library
    archive = shim_library(MPICC, static=True)
    assert archive.name == "libscalgraph.a"
    exe = tmp_path / "static"
    subprocess.run([MPICC, "-O1", "-I", str(INSTRUMENT_DIR), str(PROGRAM), *link_flags(archive), "-o", str(exe)],
                   check=True)
    needed = subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
    assert "libscalgraph" not in needed
    run(exe, 4, [2, 2, ITERS, 1000, 1000], tmp_path / "prof")
    prof = read_run(tmp_path / "prof")
    for r in range(4):
        assert {v: int(c) for v, c in enumerate(prof.calls[r]) if c} == \
            {v: c for v, c in expected_calls(r, 4).items() if c}
