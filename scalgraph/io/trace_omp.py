"""Read the per-rank OpenMP records the shim writes in trace mode (rank-<r>.sgomp, layout in
instrument/sg_trace_omp.c): per OpenMP thread of the rank, its fork/join, implicit task, barrier and
lock records and (for the threads the MPI trace does not follow) its samples, in time order."""
from __future__ import annotations

import pathlib

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model.trace import OMP_TEAM_BASE

MAGIC = b"SGOMPTR\x00"
HEADER_DTYPE = np.dtype([("magic", "S8"), ("version", "<u4"), ("record_size", "<u4"), ("rank", "<i4"),
                         ("nranks", "<i4")])
CHUNK_DTYPE = np.dtype([("thread", "<u4"), ("n", "<u4"), ("dropped", "<u4"), ("traced", "<u4")])
RECORD_DTYPE = np.dtype([("time_ns", "<u8"), ("arg", "<u8"), ("vertex", "<u4"), ("kind", "<u2"),
                         ("reserved", "<u2")])
assert HEADER_DTYPE.itemsize == 24 and CHUNK_DTYPE.itemsize == 16 and RECORD_DTYPE.itemsize == 24
# record kinds (SG_TOMP_* in instrument/sg_trace.h)
(FORK, JOIN, TASK_BEGIN, TASK_END, BARRIER_BEGIN, BARRIER_END, LOCK_WAIT, LOCK_ACQUIRED, LOCK_RELEASED,
 SAMPLE) = range(1, 11)


def omp_files(run_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted(pathlib.Path(run_dir).glob("rank-*.sgomp"))


def read_omp_rank(path: pathlib.Path) -> dict:
    """-> {"rank", "threads": {thread: records (time order)}, "traced": thread of the MPI trace or -1,
    "dropped": records lost}; UserError if damaged."""
    from scalgraph.io.safe_read import read_regular
    data = read_regular(path, "OpenMP trace")
    if len(data) < HEADER_DTYPE.itemsize or data[:8] != MAGIC:
        raise UserError(f"{path} is not a scalgraph OpenMP trace (wrong magic or too short); rerun with --trace")
    h = np.frombuffer(data, HEADER_DTYPE, count=1)[0]
    if int(h["version"]) != 1 or int(h["record_size"]) != RECORD_DTYPE.itemsize:
        raise UserError(f"{path} has another OpenMP trace version; rerun with this scalgraph's shim")
    parts: dict[int, list[np.ndarray]] = {}
    traced, dropped, pos = -1, 0, HEADER_DTYPE.itemsize
    while pos < len(data):
        if pos + CHUNK_DTYPE.itemsize > len(data):
            raise UserError(f"{path} is damaged (a cut chunk header); rerun the program")
        c = np.frombuffer(data, CHUNK_DTYPE, count=1, offset=pos)[0]
        n = int(c["n"])
        pos += CHUNK_DTYPE.itemsize
        if pos + n * RECORD_DTYPE.itemsize > len(data):
            raise UserError(f"{path} is damaged (a chunk runs past the end); rerun the program")
        parts.setdefault(int(c["thread"]), []).append(np.frombuffer(data, RECORD_DTYPE, count=n, offset=pos))
        pos += n * RECORD_DTYPE.itemsize
        dropped += int(c["dropped"])
        if int(c["traced"]):
            traced = int(c["thread"])
    threads = {}
    for th, p in parts.items():
        rec = np.concatenate(p)
        threads[th] = rec[np.argsort(rec["time_ns"], kind="stable")]
    return {"rank": int(h["rank"]), "threads": threads, "traced": traced, "dropped": dropped}


# --- thread locations -----------------------------------------------------------------------------
# Each OpenMP thread of a rank becomes a location (rank, thread) of the Trace; the rank's MPI thread
# keeps location `rank`, workers are appended after all ranks.  OpenMP synchronisation is expressed
# with the model's collective and point-to-point records on one "team" communicator per rank
# (id OMP_TEAM_BASE + rank, members: the master's location first, then its workers'), so the replay,
# the delay analysis and the critical path treat it like any other synchronisation (seed 000 §7:
# threads are agents, shared variables replace messages):
#   fork        master ENTER(!$omp fork) COLL_BEGIN COLL_END(root master) EXIT, all at the fork;
#               each worker the same, from the end of its previous implicit task (or the rank's first
#               event) to the begin of its implicit task: the worker's idle time (Idle Threads,
#               caused by the master's serial execution)
#   parallel    ENTER(!$omp parallel) .. EXIT on every thread (master: from its implicit task to the join)
#   barrier     ENTER(!$omp [implicit] barrier) COLL_BEGIN .. COLL_END EXIT (Wait at OpenMP Barrier)
#   lock        acquire: ENTER(omp_set_lock | !$omp critical) [RECV] EXIT, the RECV the release of the
#               lock's previous holder when that was another thread, which sends it at its release
#               ENTER(omp_unset_lock ..) SEND EXIT (OpenMP Lock Contention, the Late Sender formula)
MUTEX_CRITICAL = 5
IMPLICIT_PARALLEL = 9      # ompt_sync_region_barrier_implicit_parallel: the barrier that ends a region


def is_team_comm(comm) -> bool:
    return comm >= OMP_TEAM_BASE


def _records(rec: np.ndarray, kind: int) -> np.ndarray:
    return rec[rec["kind"] == kind]


def _barriers(rec: np.ndarray):
    """(begin, end or nan, kind, vertex) of each barrier of one thread's records, in order."""
    out = []
    for x in rec[(rec["kind"] == BARRIER_BEGIN) | (rec["kind"] == BARRIER_END)].tolist():
        t, arg, v, k = x[0] / 1e9, int(x[1]), int(x[2]), int(x[3])
        if k == BARRIER_BEGIN:
            out.append([t, float("nan"), arg, v])
        elif out and np.isnan(out[-1][1]):
            out[-1][1] = t
    return out


def thread_events(first_time: float, master: np.ndarray, workers: dict[int, np.ndarray], names,
                  rank: int, worker_loc: dict[int, int]) -> tuple[dict[int, list], dict]:
    """Per thread (master key -1, workers by thread id): the OpenMP events as (time, order, kind,
    region name key, peer, tag, comm, bytes), plus counts of what could not be used.
    `names(kind, vertex)` gives a region id for ("fork" | "parallel" | "barrier" | "ibarrier" |
    "lock_acquire" | "lock_release" | "critical_acquire" | "critical_release", vertex)."""
    from scalgraph.model.trace import COLL_BEGIN, COLL_END, ENTER, EXIT, RECV, SEND
    comm = OMP_TEAM_BASE + rank
    out: dict[int, list] = {-1: []}
    out.update({w: [] for w in workers})
    forks = _records(master, FORK)
    joins = _records(master, JOIN)["time_ns"] / 1e9
    f_t = forks["time_ns"] / 1e9
    stats = {"regions": len(forks), "regions_skipped": 0}
    all_threads = {-1: master, **workers}
    # per thread and region: task begin, task end, barriers
    per: dict[int, dict[int, dict]] = {}
    for th, rec in all_threads.items():
        tb = _records(rec, TASK_BEGIN)["time_ns"] / 1e9
        te = _records(rec, TASK_END)["time_ns"] / 1e9
        bars = _barriers(rec)
        d: dict[int, dict] = {}
        for t in tb.tolist():
            i = int(np.searchsorted(f_t, t, "right")) - 1
            if i >= 0 and i not in d:
                d[i] = {"tb": t, "te": float("nan"), "bars": []}
        for t in te.tolist():
            i = int(np.searchsorted(f_t, t, "right")) - 1
            if i in d and np.isnan(d[i]["te"]):
                d[i]["te"] = t
        for b in bars:
            i = int(np.searchsorted(f_t, b[0], "right")) - 1
            if i in d:
                d[i]["bars"].append(b)
        per[th] = d
    idle_from = {w: first_time for w in workers}
    for i in range(len(forks)):
        m = per[-1].get(i)
        join = joins[np.searchsorted(joins, f_t[i], "left")] if np.any(joins >= f_t[i]) else float("nan")
        nb = len(m["bars"]) if m else -1
        ok = (m is not None and np.isfinite(join) and nb > 0 and not np.isnan(m["bars"][-1][1])
              and all(i in per[w] and len(per[w][i]["bars"]) == nb for w in workers))
        if not ok:
            stats["regions_skipped"] += 1
            for w in workers:             # a worker that ran this region is not idle through it
                if i in per[w]:
                    ends = [x for x in (per[w][i]["te"], join) if np.isfinite(x)]
                    idle_from[w] = max(idle_from[w], min(ends) if ends else per[w][i]["tb"])
            continue
        fv = int(forks["vertex"][i])
        fork_reg, par_reg = names("fork", fv), names("parallel", fv)
        team_done = m["bars"][-1][1]      # the master leaves the closing barrier when all have arrived
        root = rank
        # master: fork, parallel region, barriers
        ev = out[-1]
        ev += [(f_t[i], 0, ENTER, fork_reg, -1, 0, -1, 0), (f_t[i], 0, COLL_BEGIN, -1, -1, 0, comm, 0),
               (f_t[i], 0, COLL_END, -1, root, 0, comm, 1), (f_t[i], 0, EXIT, fork_reg, -1, 0, -1, 0),
               (m["tb"], 0, ENTER, par_reg, -1, 0, -1, 0)]
        for b in m["bars"]:
            reg = names("ibarrier" if b[2] != 3 else "barrier", b[3])
            ev += [(b[0], 2, ENTER, reg, -1, 0, -1, 0), (b[0], 2, COLL_BEGIN, -1, -1, 0, comm, 0),
                   (b[1], 2, COLL_END, -1, -1, 0, comm, 0), (b[1], 2, EXIT, reg, -1, 0, -1, 0)]
        ev.append((join, 0, EXIT, par_reg, -1, 0, -1, 0))
        for w in workers:
            d = per[w][i]
            tb = max(d["tb"], f_t[i])
            ev = out[w]
            start = min(idle_from[w], tb)
            ev += [(start, 0, ENTER, fork_reg, -1, 0, -1, 0), (start, 0, COLL_BEGIN, -1, -1, 0, comm, 0),
                   (tb, 0, COLL_END, -1, root, 0, comm, 0), (tb, 0, EXIT, fork_reg, -1, 0, -1, 0),
                   (tb, 0, ENTER, par_reg, -1, 0, -1, 0)]
            last = tb
            for k, b in enumerate(d["bars"]):
                reg = names("ibarrier" if b[2] != 3 else "barrier", b[3])
                # the region's closing barrier ends for everybody when the master leaves it: libomp
                # reports a worker's end only when it is woken for the next region
                end = team_done if k == nb - 1 else b[1]
                if np.isnan(end):
                    end = team_done
                bb = max(b[0], last)
                end = max(end, bb)
                ev += [(bb, 2, ENTER, reg, -1, 0, -1, 0), (bb, 2, COLL_BEGIN, -1, -1, 0, comm, 0),
                       (end, 2, COLL_END, -1, -1, 0, comm, 0), (end, 2, EXIT, reg, -1, 0, -1, 0)]
                last = end
            ev.append((last, 0, EXIT, par_reg, -1, 0, -1, 0))
            idle_from[w] = last
    _lock_events(all_threads, out, names, comm, rank, worker_loc, stats)
    return out, stats


def _lock_events(all_threads, out, names, comm, rank, worker_loc, stats) -> None:
    """Acquire and release regions on every thread; a message from each release to the next
    acquisition of the same lock by another thread (ordered by the acquisition times)."""
    from scalgraph.model.trace import ENTER, EXIT, RECV, SEND
    acq = []          # (acquired time, lock, thread, wait begin, release time, vertex, kind)
    for th, rec in all_threads.items():
        pending: dict[int, tuple] = {}
        held: dict[int, list] = {}
        for x in rec[(rec["kind"] >= LOCK_WAIT) & (rec["kind"] <= LOCK_RELEASED)].tolist():
            t, arg, v, k = x[0] / 1e9, int(x[1]), int(x[2]), int(x[3])
            if k == LOCK_WAIT:
                pending[arg] = (t, v)
            elif k == LOCK_ACQUIRED:
                t0, v0 = pending.pop(arg, (t, v))
                held.setdefault(arg, []).append([t, arg, th, t0, float("nan"), v0])
            elif held.get(arg):
                a = held[arg].pop()
                a[4] = t
                acq.append(a)
    if not acq:
        return
    acq.sort(key=lambda a: (a[1], a[0]))
    stats["lock_acquisitions"] = len(acq)
    tags: dict[int, int] = {}

    def loc(th):
        return rank if th == -1 else worker_loc[th]
    for j, (t_acq, lock, th, t_wait, t_rel, v) in enumerate(acq):
        crit = (lock >> 56) == MUTEX_CRITICAL
        tag = tags.setdefault(lock, len(tags))
        acq_reg = names("critical_acquire" if crit else "lock_acquire", v)
        rel_reg = names("critical_release" if crit else "lock_release", v)
        prev = acq[j - 1] if j > 0 and acq[j - 1][1] == lock and acq[j - 1][2] != th else None
        nxt = acq[j + 1] if j + 1 < len(acq) and acq[j + 1][1] == lock and acq[j + 1][2] != th else None
        ev = out[th]
        ev.append((t_wait, 2, ENTER, acq_reg, -1, 0, -1, 0))
        if prev is not None:
            ev.append((t_acq, 2, RECV, -1, loc(prev[2]), tag, comm, 0))
        ev.append((t_acq, 2, EXIT, acq_reg, -1, 0, -1, 0))
        ev.append((t_rel, 2, ENTER, rel_reg, -1, 0, -1, 0))
        if nxt is not None:
            ev.append((t_rel, 2, SEND, -1, loc(nxt[2]), tag, comm, 0))
        ev.append((t_rel, 2, EXIT, rel_reg, -1, 0, -1, 0))


def to_events(rows: list) -> np.ndarray:
    """(time, order, kind, region, peer, tag, comm, bytes) tuples -> model events, in list order."""
    from scalgraph.model.trace import make_events
    ev = make_events(len(rows))
    if rows:
        cols = list(zip(*rows))
        ev["time"], ev["kind"], ev["region"] = cols[0], cols[2], cols[3]
        ev["peer"], ev["tag"], ev["comm"], ev["bytes"] = cols[4], cols[5], cols[6], cols[7]
    return ev


def merge_master(ev: np.ndarray, rows: list) -> np.ndarray:
    """The master thread's OpenMP events merged into its MPI-trace events by time; at equal times
    fork and parallel-region events go before the trace's own, barrier and lock events after."""
    if not rows:
        return ev
    extra = to_events(rows)
    prio = np.array([0 if r[1] == 0 else 2 for r in rows])
    allev = np.concatenate((ev, extra))
    pr = np.concatenate((np.ones(len(ev), np.int64), prio))
    seq = np.concatenate((np.arange(len(ev)), np.arange(len(extra))))
    return allev[np.lexsort((seq, pr, allev["time"]))]


def worker_events(rows: list) -> np.ndarray:
    """A worker's events, by time; equal times keep the order they were made in."""
    order = sorted(range(len(rows)), key=lambda i: rows[i][0])
    return to_events([rows[i] for i in order])


def region_name(what: str, file: str, line: int) -> str:
    """Score-P's names for OpenMP constructs (!$omp parallel @file:line); locks by their API call."""
    at = f" @{file}:{line}" if file else ""
    return {"fork": f"!$omp fork{at}", "parallel": f"!$omp parallel{at}", "barrier": f"!$omp barrier{at}",
            "ibarrier": f"!$omp implicit barrier{at}", "lock_acquire": "omp_set_lock",
            "lock_release": "omp_unset_lock", "critical_acquire": f"!$omp critical{at}",
            "critical_release": f"!$omp critical sblock{at}"}[what]


# --- traces from elsewhere (OTF2 from Score-P --thread=omp) -----------------------------------------

BARRIER_PREFIXES = ("!$omp barrier", "!$omp implicit barrier", "!$omp ibarrier")


def _parallel_instances(ev: np.ndarray, par: np.ndarray, bar: np.ndarray) -> list[tuple[int, int, list]]:
    """(ENTER index, EXIT index, [(barrier ENTER, barrier EXIT) ...]) of each parallel region of a
    thread, outermost regions only (no nested parallelism, as in Scalasca)."""
    from scalgraph.model.trace import ENTER, EXIT
    out, open_par, open_bar, depth = [], None, None, 0
    for i in np.flatnonzero(((ev["kind"] == ENTER) | (ev["kind"] == EXIT)) & (ev["region"] >= 0)).tolist():
        g, k = int(ev["region"][i]), int(ev["kind"][i])
        if g >= len(par):                          # regions added after the masks were made (forks)
            continue
        if par[g]:
            depth += 1 if k == ENTER else -1
            if k == ENTER and depth == 1:
                open_par = [i, -1, []]
            elif k == EXIT and depth == 0 and open_par is not None:
                open_par[1] = i
                out.append(tuple(open_par))
                open_par = None
        elif bar[g] and open_par is not None and depth == 1:
            if k == ENTER:
                open_bar = i
            elif open_bar is not None:
                open_par[2].append((open_bar, i))
                open_bar = None
    return out


def threads_from_regions(regions: list, events: list[np.ndarray], workers: list[tuple[int, np.ndarray]]):
    """Threads of a trace whose OpenMP constructs are regions (Score-P: "!$omp parallel @f:l" entered
    by every thread of the team, "!$omp implicit barrier @f:l", "!$omp barrier @f:l"): the same
    locations and team synchronisation as the shim's records give, inserted next to the trace's own
    regions (a barrier region gets COLL_BEGIN / COLL_END on the team communicator; before each
    parallel region every thread gets the fork region "!$omp fork @f:l", a worker from the end of its
    previous parallel region).  `events`: each rank's MPI thread; `workers`: (rank, events) of its
    other threads in thread order.  A region whose threads do not pass the same number of barriers is
    left as it is (counted).  Returns (all locations' events, locations, team communicators, stats);
    adds the fork regions to `regions`."""
    from scalgraph.model.trace import COLL_BEGIN, COLL_END, ENTER, EXIT, Region, make_events
    nranks = len(events)
    par = np.array([r.name.startswith("!$omp parallel") for r in regions] + [False])
    bar = np.array([r.name.startswith(BARRIER_PREFIXES) for r in regions] + [False])
    fork_of: dict[int, int] = {}

    def fork_region(g: int) -> int:
        if g not in fork_of:
            base = regions[g]
            fork_of[g] = len(regions)
            regions.append(Region(name=base.name.replace("!$omp parallel", "!$omp fork", 1), file=base.file,
                                  line=base.line))
        return fork_of[g]

    out = list(events)
    locations = [(r, 0) for r in range(nranks)]
    comms: dict[int, list[int]] = {}
    stats = {"regions": 0, "regions_skipped": 0}
    by_rank: dict[int, list[np.ndarray]] = {}
    for r, ev in workers:
        by_rank.setdefault(r, []).append(ev)
    for r, wevs in sorted(by_rank.items()):
        comm = OMP_TEAM_BASE + r
        team = [events[r], *wevs]
        inst = [_parallel_instances(ev, par, bar) for ev in team]
        n = min(len(x) for x in inst)
        stats["regions"] += len(inst[0])
        stats["regions_skipped"] += len(inst[0]) - n
        t0 = float(events[r]["time"][0]) if len(events[r]) else 0.0
        idle_from = [t0] * len(team)
        adds: list[list[tuple]] = [[] for _ in team]      # (position, time, kind, region, peer, bytes)
        for i in range(n):
            nb = len(inst[0][i][2])
            if any(len(x[i][2]) != nb for x in inst):
                stats["regions_skipped"] += 1
                continue
            pe0 = inst[0][i][0]
            fork = fork_region(int(events[r]["region"][pe0]))
            # the master's ThreadFork record before the region (Score-P writes one) is the fork;
            # without one, the master's entry into the region
            f_at = _fork_record(events[r], pe0, inst[0][i - 1][1] if i else -1)
            t_fork = float(events[r]["time"][pe0 if f_at < 0 else f_at])
            for k, ev in enumerate(team):
                pe, px, bars = inst[k][i]
                t_in = float(ev["time"][pe])
                start = t_fork if k == 0 else min(idle_from[k], t_in)
                end = t_fork if k == 0 else t_in
                at = pe if k or f_at < 0 else f_at
                while k and at > 0 and ev["kind"][at - 1] == ENTER and ev["time"][at - 1] == t_in:
                    at -= 1                        # a worker written with its call path: the fork goes before it
                adds[k] += [(at, start, ENTER, fork, -1, 0), (at, start, COLL_BEGIN, -1, -1, 0),
                            (at, end, COLL_END, -1, r, int(k == 0)), (at, end, EXIT, fork, -1, 0)]
                for be, bx in bars:
                    adds[k] += [(be + 1, float(ev["time"][be]), COLL_BEGIN, -1, -1, 0),
                                (bx, float(ev["time"][bx]), COLL_END, -1, -1, 0)]
                idle_from[k] = float(ev["time"][px])
        for k, ev in enumerate(team):
            if not adds[k]:
                new = ev
            else:
                pos, t, kind, reg, peer, nbytes = (list(c) for c in zip(*adds[k]))
                extra = make_events(len(pos))
                extra["time"], extra["kind"], extra["region"], extra["peer"] = t, kind, reg, peer
                extra["bytes"] = nbytes
                extra["comm"] = np.where(np.isin(extra["kind"], [COLL_BEGIN, COLL_END]), comm, -1)
                new = np.insert(ev, pos, extra)
            if k == 0:
                out[r] = new
            else:           # under the master's call path at each fork (Score-P's workers start at the region)
                out.append(with_master_context(out[r], new, par, bar))
                locations.append((r, k))
        comms[comm] = [r] + [len(locations) - len(wevs) + j for j in range(len(wevs))]
    return out, locations, comms, stats


def _fork_record(ev: np.ndarray, enter: int, after: int) -> int:
    """Index of the last ThreadFork record between `after` and the region's ENTER, or -1."""
    from scalgraph.io.otf2_native import THREAD_FORK
    hits = np.flatnonzero(ev["kind"][after + 1:enter] == THREAD_FORK)
    return int(after + 1 + hits[-1]) if len(hits) else -1


def with_master_context(master: np.ndarray, worker: np.ndarray, par: np.ndarray, bar: np.ndarray,
                        copy_body: np.ndarray | None = None) -> np.ndarray:
    """A worker's parallel regions under the master's call path at the fork (Scalasca's call tree:
    a team's threads share it), so the delay analysis compares a worker's work with the master's on
    the same call paths: the regions open on the master at each of its `!$omp parallel` ENTERs are
    entered around the worker's matching region.  `copy_body` (per region, True: may be copied): the
    master's first region inside the parallel region (the outlined function, traced on the master
    only) is entered by the worker too, up to its closing barrier.  Regions are matched in order;
    a worker with another number of regions than the master is left as it is."""
    from scalgraph.model.trace import ENTER, EXIT, make_events
    m_inst, w_inst = _parallel_instances(master, par, bar), _parallel_instances(worker, par, bar)
    if not m_inst or len(m_inst) != len(w_inst):
        return worker
    kinds, regs = master["kind"], master["region"]
    ee = np.flatnonzero((kinds == ENTER) | (kinds == EXIT))
    stack: list[int] = []
    at_enter: dict[int, list[int]] = {}
    wanted = {pe for pe, _, _ in m_inst}
    for i in ee.tolist():
        if i in wanted:
            at_enter[i] = list(stack)
        if kinds[i] == ENTER:
            stack.append(int(regs[i]))
        elif stack:
            stack.pop()
    adds = []                                      # (position, time, kind, region)
    wt = worker["time"]
    w_depth = np.cumsum((worker["kind"] == ENTER).astype(np.int64) - (worker["kind"] == EXIT))
    for (pe, px, bars), (we, wx, wbars) in zip(m_inst, w_inst):
        if we > 0 and w_depth[we - 1] > 0:         # the worker has its call path already (our own OTF2)
            continue
        t_in, t_out = float(wt[we]), float(wt[wx])
        for g in at_enter.get(pe, []):
            adds.append((we, t_in, ENTER, g))
        if copy_body is not None and pe + 1 < len(master) and kinds[pe + 1] == ENTER and regs[pe + 1] >= 0 \
                and copy_body[regs[pe + 1]]:
            g = int(regs[pe + 1])
            close = wbars[-1][0] if wbars else wx
            adds += [(we + 1, t_in, ENTER, g), (close, float(wt[close]), EXIT, g)]
        for g in reversed(at_enter.get(pe, [])):
            adds.append((wx + 1, t_out, EXIT, g))
    if not adds:
        return worker
    pos, t, kind, reg = (list(c) for c in zip(*adds))
    extra = make_events(len(pos))
    extra["time"], extra["kind"], extra["region"] = t, kind, reg
    return np.insert(worker, pos, extra)


def as_scorep(trace):
    """A trace with threads -> (the ranks' MPI threads without the team synchronisation and fork
    regions; [(rank, thread, ENTER/EXIT and lock events of the thread without its fork regions)]):
    what Score-P records, from which threads_from_regions rebuilds the rest.  Lock hand-overs become
    OpenMP lock records (lock_records) in place of their SEND and RECV."""
    from dataclasses import replace
    from scalgraph.model.trace import COLL_END, ENTER, EXIT
    from scalgraph.io.otf2_native import THREAD_ACQUIRE_LOCK
    from scalgraph.io.otf2_native import THREAD_FORK
    fork = np.array([r.name.startswith("!$omp fork") for r in trace.regions] + [False])
    events = lock_records(trace)

    def plain(ev, enter_exit_only):
        reg = np.where(ev["region"] >= 0, ev["region"], len(fork) - 1)
        keep = ~fork[reg] & (ev["comm"] < OMP_TEAM_BASE)
        if not enter_exit_only:         # the master's fork: a ThreadFork record (bytes: the team's size)
            ends = np.flatnonzero((ev["kind"] == COLL_END) & (ev["comm"] >= OMP_TEAM_BASE) & (ev["bytes"] > 0))
            forks = ends - 2                              # ENTER(fork) COLL_BEGIN COLL_END EXIT
            forks = forks[(forks >= 0) & (ev["kind"][np.maximum(forks, 0)] == ENTER) & fork[reg[np.maximum(forks, 0)]]]
            if len(forks):
                ev = ev.copy()
                team = [len(trace.comms.get(int(c), ())) for c in ev["comm"][forks + 2].tolist()]
                ev["kind"][forks], ev["region"][forks], ev["bytes"][forks] = THREAD_FORK, -1, team
                keep[forks] = True
        if enter_exit_only:
            keep &= (ev["kind"] == ENTER) | (ev["kind"] == EXIT) | (ev["kind"] >= THREAD_ACQUIRE_LOCK)
        return ev[keep]
    ranks = [i for i, (_, th) in enumerate(trace.locations) if th == 0]
    threads = [(r, th, plain(events[i], True)) for i, (r, th) in enumerate(trace.locations) if th > 0]
    mpi = replace(trace, events=[plain(events[i], False) for i in ranks], locations=[],
                  comms={c: m for c, m in trace.comms.items() if c < OMP_TEAM_BASE})
    return mpi, threads


# --- OpenMP lock records (OTF2 ThreadAcquireLock / ThreadReleaseLock, as Score-P writes them) ---------
# A record carries the lock id (kept in the event's `request`) and the acquisition order (in `tag`):
# an acquisition with order n waited for the release with order n - 1 (Score-P numbers a lock's
# acquisitions; a release carries the number of the acquisition it ends).  A hand-over in a trace is
# a SEND (release) and RECV (next acquisition, another thread) on the team communicator, tag = lock.

def lock_records(trace) -> list[np.ndarray]:
    """Each location's events with the lock hand-overs as lock records: the j-th hand-over of a lock
    (by time) becomes a release with order 2j and an acquisition with order 2j + 1.  Acquisitions
    that no other thread waited for are not written (no hand-over reads back from them)."""
    from scalgraph.io.otf2_native import THREAD_ACQUIRE_LOCK, THREAD_RELEASE_LOCK
    from scalgraph.model.trace import RECV, SEND
    events = list(trace.events)
    sides: dict[tuple[int, int, int], list] = {}     # (rank, lock, SEND or RECV) -> [(time, loc, index)]
    for loc, ev in enumerate(events):
        rank = trace.locations[loc][0] if trace.locations else loc
        for i in np.flatnonzero(((ev["kind"] == SEND) | (ev["kind"] == RECV)) & (ev["comm"] >= OMP_TEAM_BASE)).tolist():
            sides.setdefault((rank, int(ev["tag"][i]), int(ev["kind"][i])), []).append((float(ev["time"][i]), loc, i))
    if not sides:
        return events
    events = [ev.copy() for ev in events]
    for (rank, lock, kind), items in sides.items():
        if kind != SEND:
            continue
        sends, recvs = sorted(items), sorted(sides.get((rank, lock, RECV), []))
        for j, ((_, sl, si), (_, rl, ri)) in enumerate(zip(sends, recvs)):
            for loc, i, k, order in ((sl, si, THREAD_RELEASE_LOCK, 2 * j), (rl, ri, THREAD_ACQUIRE_LOCK, 2 * j + 1)):
                e = events[loc]
                e["kind"][i], e["request"][i], e["tag"][i], e["peer"][i], e["comm"][i] = k, lock, order, -1, -1
    return events


def lock_handovers(events: list[np.ndarray], locations: list, meta: dict) -> list[np.ndarray]:
    """Lock records read from OTF2 -> hand-overs: the release with order n - 1 on one thread sends to
    the acquisition with order n of the same lock on another thread of the rank (SEND / RECV on the
    team communicator, tag = lock id, peers as location indices); the other records are dropped.
    Lock ids are per process (Score-P)."""
    from scalgraph.io.otf2_native import THREAD_ACQUIRE_LOCK, THREAD_RELEASE_LOCK
    from scalgraph.model.trace import RECV, SEND
    rel: dict[tuple[int, int, int], tuple[int, int]] = {}     # (rank, lock, order) -> (loc, index)
    acq: list[tuple[int, int, int, int, int]] = []           # (rank, lock, order, loc, index)
    for loc, ev in enumerate(events):
        rank = locations[loc][0] if locations else loc
        for i in np.flatnonzero(ev["kind"] >= THREAD_ACQUIRE_LOCK).tolist():
            key = (rank, int(ev["request"][i]), int(ev["tag"][i]))
            if ev["kind"][i] == THREAD_RELEASE_LOCK:
                rel[key] = (loc, i)
            elif ev["kind"][i] == THREAD_ACQUIRE_LOCK:
                acq.append((*key, loc, i))
    out = [ev.copy() for ev in events]
    handovers = 0
    for rank, lock, order, loc, i in acq:
        prev = rel.get((rank, lock, order - 1))
        if prev is None or prev[0] == loc or not locations:
            continue
        (pl, pi), comm = prev, OMP_TEAM_BASE + rank
        for where, at, kind, peer in ((pl, pi, SEND, loc), (loc, i, RECV, pl)):
            e = out[where]
            e["kind"][at], e["peer"][at], e["tag"][at], e["comm"][at] = kind, peer, lock, comm
            e["request"][at], e["region"][at] = -1, -1
        handovers += 1
    if acq:
        meta.setdefault("openmp", {})["lock_handovers"] = handovers
    return [ev[ev["kind"] < THREAD_ACQUIRE_LOCK] for ev in out]
