"""Wait-state patterns, one small registered unit each, in one table (Scalasca's names and hierarchy).

A pattern has a key, Scalasca's display name, a parent, a unit, a description and an evaluator.  An
evaluator takes the replay context (matched events, see forward.py) and the rows found so far by the
patterns before it, and returns its wait states as a WAIT_DTYPE array, vectorised over all instances.
Grouping nodes (Time, MPI, Point-to-point, ...) have no evaluator: their value is the time spent in
the call paths of their class.  `sync=True` marks wait states that have a causer and so take part in
delay analysis and the critical path; Late Sender / Wrong Order re-classifies Late Sender rows and is
not counted twice.  Formulas: shared/notes/trace-analysis-reference.md §3.1-3.2, via waitops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from scalgraph.model import trace as tm
from scalgraph.model.trace import OMP_TEAM_BASE
from scalgraph.trace import mpi_names, waitops

WAIT_DTYPE = np.dtype([
    ("pattern", "<i2"),
    ("rank", "<i4"),        # the waiting rank
    ("op", "<i8"),          # ENTER (global index) of the call that waits
    ("wait", "<f8"),        # waiting time ω
    ("causer", "<i4"),      # rank charged with the delay (seed 000 §5); -1 if none
    ("causer_op", "<i8"),   # ENTER of the causer's call in this synchronisation
    ("cp_causer", "<i4"),   # rank whose arrival ended the wait (critical path jumps there)
    ("cp_causer_op", "<i8"),
    ("key", "<i8"),         # synchronisation partner: peer rank (p2p) or nranks + comm index
])


@dataclass(frozen=True)
class Pattern:
    key: str
    name: str
    parent: str | None
    description: str
    evaluate: Callable | None = None      # (ctx, found: dict[key, rows]) -> rows
    region_class: str | None = None       # grouping nodes: the MPI call class they sum
    sync: bool = False
    unit: str = "sec"


def _rows(n: int) -> np.ndarray:
    return np.zeros(n, WAIT_DTYPE)


def _fill(pattern_key, rank, op, wait, causer, causer_op, key, cp_causer=None, cp_causer_op=None):
    keep = wait > 0
    out = _rows(int(keep.sum()))
    out["pattern"] = PATTERN_INDEX[pattern_key]
    out["rank"], out["op"], out["wait"] = rank[keep], op[keep], wait[keep]
    out["causer"], out["causer_op"], out["key"] = causer[keep], causer_op[keep], key[keep]
    out["cp_causer"] = (causer if cp_causer is None else cp_causer)[keep]
    out["cp_causer_op"] = (causer_op if cp_causer_op is None else cp_causer_op)[keep]
    return out


# --- point to point ----------------------------------------------------------------------------

def _late_sender(ctx, found):
    m = ctx.msgs
    t, ex = ctx.time, ctx.exit_time
    en_r, ex_r, en_s = t[m.recv_op], ex[m.recv_op], t[m.send_op]
    wait = waitops.late_sender(en_r, ex_r, en_s)
    wait[(m.recv_op < 0) | (m.send_op < 0)] = 0.0      # events outside any call: nothing to time
    wait[ctx.region_is_test[ctx.ev["region"][m.recv_op]]] = 0.0           # MPI_Test* never waits
    wait[lock_messages(ctx)] = 0.0                                         # OpenMP locks: their own pattern
    wait[~waitops.keep_largest_per_group(m.recv_op, wait)] = 0.0
    found["_late_sender_msgs"] = wait > 0
    return _fill("late_sender", m.dst, m.recv_op, wait, m.src, m.send_op, m.src)


def _wrong_order_flags(ctx):
    """Per message: a receive completed by a *later call* of the same rank got a message sent
    before this one (from any source; and: from the same source).  Messages completed by one
    Waitall are not ordered against each other."""
    m = ctx.msgs
    send_t = ctx.time[m.send_evt]
    any_src = np.zeros(len(m), bool)
    same_src = np.zeros(len(m), bool)
    order = np.lexsort((m.recv_evt, m.dst))
    bounds = np.searchsorted(m.dst[order], np.arange(ctx.nranks + 1))
    for r in range(ctx.nranks):                        # a loop over ranks, vectorised within
        sel = order[bounds[r]:bounds[r + 1]]
        if len(sel) < 2:
            continue
        any_src[sel] = _later_call_min(m.recv_op[sel], send_t[sel]) < send_t[sel]
        src = m.src[sel]
        for q in np.unique(src).tolist():
            sub = sel[src == q]
            same_src[sub] = _later_call_min(m.recv_op[sub], send_t[sub]) < send_t[sub]
    return any_src, same_src


def _later_call_min(call: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Per entry (in completion order): the minimum of `s` over entries of strictly later calls."""
    new_call = np.ones(len(call), bool)
    new_call[1:] = call[1:] != call[:-1]
    cid = np.cumsum(new_call) - 1
    call_min = np.minimum.reduceat(s, np.flatnonzero(new_call))
    later = np.append(np.minimum.accumulate(call_min[::-1])[::-1][1:], np.inf)
    return later[cid]


def _wrong_order_rows(ctx, found, key, select):
    ls = found["late_sender"]
    if len(ls) == 0:
        return _rows(0)
    if "_wrong_order_flags" not in found:
        found["_wrong_order_flags"] = _wrong_order_flags(ctx)
    any_src, same_src = found["_wrong_order_flags"]
    flag = select(any_src, same_src) & found["_late_sender_msgs"]   # the message the Late Sender row timed
    # the Late Sender row of a call is the message kept by keep_largest_per_group: find it by op
    op_flag = np.zeros(ctx.nevents, bool)
    op_flag[ctx.msgs.recv_op[flag]] = True
    rows = ls[op_flag[ls["op"]]].copy()
    rows["pattern"] = PATTERN_INDEX[key]
    return rows


def _wrong_order(ctx, found):
    """A Late Sender whose message was sent after a message that this rank receives later."""
    return _wrong_order_rows(ctx, found, "late_sender_wrong_order", lambda a, s: a)


def _wrong_order_same(ctx, found):
    return _wrong_order_rows(ctx, found, "late_sender_wrong_order_same", lambda a, s: s)


def _wrong_order_different(ctx, found):
    return _wrong_order_rows(ctx, found, "late_sender_wrong_order_different", lambda a, s: a & ~s)


def _late_receiver(ctx, found):
    m = ctx.msgs
    b = m.blocking_send & (m.send_op >= 0) & (m.post_op >= 0) & ~lock_messages(ctx)
    t, ex = ctx.time, ctx.exit_time
    wait = waitops.late_receiver(t[m.send_op[b]], ex[m.send_op[b]], t[m.post_op[b]])
    return _fill("late_receiver", m.src[b], m.send_op[b], wait, m.dst[b], m.post_op[b], m.dst[b])


# --- collectives -------------------------------------------------------------------------------

COLL_KINDS = ("", "barrier", "nxn", "1ton", "nto1", "scan", "omp_barrier", "omp_fork")
COLLECTIVE_KIND = {
    "MPI_Barrier": "barrier",
    **{n: "nxn" for n in ("MPI_Allreduce", "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall",
                          "MPI_Reduce_scatter", "MPI_Reduce_scatter_block")},
    **{n: "1ton" for n in ("MPI_Bcast", "MPI_Scatter", "MPI_Scatterv")},
    **{n: "nto1" for n in ("MPI_Reduce", "MPI_Gather", "MPI_Gatherv")},
    **{n: "scan" for n in ("MPI_Scan", "MPI_Exscan")},
}


def collective_kind(name: str) -> str:
    """The collective kind of a region name ('' if none): MPI collectives by their canonical name,
    OpenMP barriers and forks by Score-P's construct names (scalgraph/io/trace_omp.py)."""
    if name.startswith("!$omp "):
        if name.startswith(("!$omp barrier", "!$omp implicit barrier", "!$omp ibarrier")):
            return "omp_barrier"
        return "omp_fork" if name.startswith("!$omp fork") else ""
    return COLLECTIVE_KIND.get(name, "")


def _instances(ctx, kind):
    """Per communicator, the instances of collectives of one kind as 2D arrays [instances, members]."""
    for ci in ctx.colls:
        if ci.end_evt.shape[1] < 2:
            continue
        complete = np.all(ci.op >= 0, axis=1)             # COLL_END outside any call: not timed
        sel = complete & (ctx.region_coll_kind[ctx.ev["region"][np.maximum(ci.op[:, 0], 0)]]
                          == COLL_KINDS.index(kind))
        if not np.any(sel):
            continue
        op, end = ci.op[sel], ci.end_evt[sel]
        # a collective ends at its collective-end record (scout's localEndT), not at the region exit
        yield ci, op, end, ctx.time[op], ctx.time[end], ci.bytes[sel], ci.bytes_recv[sel]


def _argmax_rows(values, mask):
    v = np.where(mask, values, -np.inf)
    return np.argmax(v, axis=1), v.max(axis=1)


def _coll_rows(pattern_key, ci, op, wait, causer_col, cp_causer_col=None):
    """Rows for a [instances, members] wait matrix; causer columns are per instance ([n]) or per
    member ([n, size]); the critical-path causer defaults to the delay causer."""
    def per_member(col):
        return np.broadcast_to(col[:, None] if col.ndim == 1 else col, op.shape)

    rows_idx = np.broadcast_to(np.arange(op.shape[0])[:, None], op.shape)
    causer_col = per_member(causer_col)
    cp_col = causer_col if cp_causer_col is None else per_member(cp_causer_col)
    ranks = np.broadcast_to(ci.members, op.shape).ravel()
    key = np.full(op.size, ci.key, np.int64)
    return _fill(pattern_key, ranks, op.ravel(), wait.ravel(), ci.members[causer_col].ravel(),
                 op[rows_idx, causer_col].ravel(), key, ci.members[cp_col].ravel(), op[rows_idx, cp_col].ravel())


def _sync_wait(kind, pattern_key, senders_only):
    def evaluate(ctx, found):
        out = [_rows(0)]
        for ci, op, end, en, ex, sent, recvd in _instances(ctx, kind):
            can_cause = sent > 0 if senders_only else np.ones_like(en, bool)
            last, last_en = _argmax_rows(en, can_cause)
            wait = waitops.wait_until(en, ex, last_en[:, None])
            if senders_only:
                wait = np.where(recvd > 0, wait, 0.0)
            wait[~np.isfinite(wait)] = 0.0
            out.append(_coll_rows(pattern_key, ci, op, wait, last))
        return np.concatenate(out)
    return evaluate


def _completion(kind, pattern_key, senders_only):
    def evaluate(ctx, found):
        out = [_rows(0)]
        for ci, op, end, en, ex, sent, recvd in _instances(ctx, kind):
            part = (sent > 0) & (recvd > 0) if senders_only else np.ones_like(en, bool)
            min_ex = np.where(part, ex, np.inf).min(axis=1)
            max_en = np.where(part, en, -np.inf).max(axis=1)
            wait = np.where(part, waitops.completion(ex, min_ex[:, None], max_en[:, None]), 0.0)
            rows = _coll_rows(pattern_key, ci, op, wait, np.zeros(len(op), np.int64))
            rows["causer"], rows["causer_op"] = -1, -1     # completion waits have no causer
            rows["cp_causer"], rows["cp_causer_op"] = -1, -1
            out.append(rows)
        return np.concatenate(out)
    return evaluate


def _root_wait(kind, pattern_key, receivers_only):
    """Every member but the root waits until the root enters; the root is the causer.  1-to-n
    (Late Broadcast: only members that receive bytes) and the OpenMP fork (Idle Threads)."""
    def evaluate(ctx, found):
        out = [_rows(0)]
        for ci, op, end, en, ex, sent, recvd in _instances(ctx, kind):
            rc = root_columns(ctx, ci, end)
            ok = rc >= 0
            rows = np.arange(len(op))
            en_root = en[rows, np.maximum(rc, 0)]
            col = np.arange(op.shape[1])[None, :]
            wait = waitops.wait_until(en, ex, en_root[:, None])
            waits = (col != rc[:, None]) & ok[:, None]
            if receivers_only:
                waits &= recvd > 0
            wait = np.where(waits, wait, 0.0)
            out.append(_coll_rows(pattern_key, ci, op, wait, np.maximum(rc, 0)))
        return np.concatenate(out)
    return evaluate


_late_broadcast = _root_wait("1ton", "late_broadcast", receivers_only=True)


def _early_reduce(ctx, found):
    out = [_rows(0)]
    for ci, op, end, en, ex, sent, recvd in _instances(ctx, "nto1"):
        rc = root_columns(ctx, ci, end)
        rows = np.arange(len(op))
        col = np.arange(op.shape[1])[None, :]
        sender = (sent > 0) & (col != rc[:, None])
        last, last_en = _argmax_rows(en, sender)
        rcs = np.maximum(rc, 0)
        # Scalasca 2.6 (MAXLOC over the senders' enters; "due to the latest sending process"): the
        # root waits until the latest sender enters; that sender is the causer (seed 000: the last
        # rank to enter) and where the critical path continues
        w_root = waitops.wait_until(en[rows, rcs], ex[rows, rcs], last_en)
        w_root = np.where((rc >= 0) & (recvd[rows, rcs] > 0) & np.isfinite(last_en), w_root, 0.0)
        wait = np.zeros(op.shape)
        wait[rows, rcs] = w_root
        out.append(_coll_rows("early_reduce", ci, op, wait, last))
    return np.concatenate(out)


def _early_scan(ctx, found):
    out = [_rows(0)]
    for ci, op, end, en, ex, sent, recvd in _instances(ctx, "scan"):
        run_max = np.maximum.accumulate(en, axis=1)
        cols = np.arange(en.shape[1])[None, :]
        who = np.maximum.accumulate(np.where(en == run_max, cols, 0), axis=1)
        wait = waitops.wait_until(en, ex, run_max)
        out.append(_coll_rows("early_scan", ci, op, wait, who))
    return np.concatenate(out)


# --- OpenMP (seed 000 §7; shared/notes/trace-analysis-reference.md §3.3) -----------------------

# Idle Threads: a worker is idle from the end of its previous implicit task (or its rank's start)
# until the master forks the next parallel region; the master, whose serial execution kept it idle,
# is the causer (seed 000 §7.1).  The fork is a collective of the team whose root is the master:
# ω_worker = min(En_master, Ex_worker) - En_worker.
_idle_threads = _root_wait("omp_fork", "omp_idle_threads", receivers_only=False)


def lock_messages(ctx) -> np.ndarray:
    """[message] True for the release -> acquire hand-overs of OpenMP locks (scalgraph/io/trace_omp.py)."""
    return np.asarray(ctx.msgs.comm) >= OMP_TEAM_BASE


def _omp_lock_contention(ctx, found):
    """A thread waits to acquire a lock another thread holds until that one releases it (the Late
    Sender formula on the hand-over, reference note §3.3 [DER]): ω = min(r_prev, Ex(A)) - En(A);
    causer = the releasing thread."""
    m = ctx.msgs
    sel = lock_messages(ctx) & (m.recv_op >= 0) & (m.send_op >= 0)
    t, ex = ctx.time, ctx.exit_time
    wait = waitops.late_sender(t[m.recv_op[sel]], ex[m.recv_op[sel]], t[m.send_op[sel]])
    return _fill("omp_lock_contention", m.dst[sel], m.recv_op[sel], wait, m.src[sel], m.send_op[sel], m.src[sel])


# --- MPI_Init / MPI_Finalize ---------------------------------------------------------------------

INIT_NAMES = ("MPI_Init", "MPI_Init_thread")
FINALIZE_NAMES = ("MPI_Finalize",)


def init_exit_calls(ctx, names) -> np.ndarray | None:
    """[calls, ranks] ENTERs of the k-th MPI_Init(_thread) / MPI_Finalize of every rank (they
    synchronise all ranks), or None when a rank has no such call or there is one rank."""
    regions = [i for i, r in enumerate(ctx.trace.regions) if mpi_names.canonical_name(r.name) in names]
    if not regions or ctx.nranks < 2:
        return None
    idx = np.flatnonzero((ctx.ev["kind"] == tm.ENTER) & np.isin(ctx.ev["region"], regions))
    rank = ctx.flat.rank[idx]
    counts = np.bincount(rank, minlength=ctx.nranks)
    # OpenMP workers make no MPI calls
    k = int(counts[tm.mpi_locations(ctx.trace)].min() if ctx.trace.locations else counts.min())
    if k == 0:
        return None
    ordinal = np.arange(len(idx)) - np.repeat(np.cumsum(counts) - counts, counts)
    keep = ordinal < k
    out = np.empty((k, ctx.nranks), np.int64)
    out[ordinal[keep], rank[keep]] = idx[keep]
    return out[:, tm.mpi_locations(ctx.trace)] if ctx.trace.locations else out


class _World:
    """A stand-in communicator instance for MPI_Init/Finalize: all ranks, no partner key."""
    def __init__(self, ctx):
        self.members, self.key = np.asarray(tm.mpi_locations(ctx.trace), np.int64), -1


def _wait_at_finalize(ctx, found):
    """Scalasca's Wait at Finalize: ω = min(max_k En_k, Ex_l) - En_l, as at a barrier (MPI.pattern)."""
    op = init_exit_calls(ctx, FINALIZE_NAMES)
    if op is None:
        return _rows(0)
    en, ex = ctx.time[op], ctx.exit_time[op]
    last, last_en = _argmax_rows(en, np.ones_like(en, bool))
    rows = _coll_rows("wait_finalize", _World(ctx), op, waitops.wait_until(en, ex, last_en[:, None]), last)
    rows["causer"], rows["causer_op"], rows["cp_causer"], rows["cp_causer_op"] = -1, -1, -1, -1
    return rows


def _init_completion(ctx, found):
    """Scalasca's Init Completion: the time in MPI_Init after the first rank finished it and all
    had entered, ω = Ex_l - max(min_k Ex_k, min(max_k En_k, Ex_l)) (MPI.pattern; no wait time)."""
    op = init_exit_calls(ctx, INIT_NAMES)
    if op is None:
        return _rows(0)
    en, ex = ctx.time[op], ctx.exit_time[op]
    latest = np.minimum(en.max(axis=1)[:, None], ex)
    wait = np.maximum(ex - np.maximum(ex.min(axis=1)[:, None], latest), 0.0)
    rows = _coll_rows("init_completion", _World(ctx), op, wait, np.zeros(len(op), np.int64))
    rows["causer"], rows["causer_op"], rows["cp_causer"], rows["cp_causer_op"] = -1, -1, -1, -1
    return rows


def root_columns(ctx, ci, end) -> np.ndarray:
    """Column of the root (a world rank in the COLL_END event) per instance, -1 if not a member."""
    root = ctx.ev["peer"][end[:, 0]]
    col_of = np.full(ctx.nranks + 1, -1, np.int64)
    col_of[ci.members] = np.arange(len(ci.members))
    return np.where((root >= 0) & (root < ctx.nranks), col_of[np.clip(root, 0, ctx.nranks)], -1)


from scalgraph.trace import rma  # noqa: E402  (its evaluators use _fill above)

PATTERNS: tuple[Pattern, ...] = (
    Pattern("time", "Time", None, "Total time of all call paths on all ranks", region_class="all"),
    Pattern("mpi", "MPI", "time", "Time spent in MPI calls", region_class="mpi"),
    Pattern("p2p", "Point-to-point", "mpi", "Time in MPI point-to-point calls", region_class="p2p"),
    Pattern("late_sender", "Late Sender", "p2p",
            "A receive (or the wait completing it) blocked before the matching send started",
            _late_sender, sync=True),
    Pattern("late_sender_wrong_order", "Late Sender / Wrong Order", "late_sender",
            "Late Sender while a message sent earlier was still waiting to be received",
            _wrong_order),
    Pattern("late_sender_wrong_order_different", "Messages from different sources", "late_sender_wrong_order",
            "Wrong order where the earlier-sent message came from another source", _wrong_order_different),
    Pattern("late_sender_wrong_order_same", "Messages from same source", "late_sender_wrong_order",
            "Wrong order where the earlier-sent message came from the same source (e.g. other tag)",
            _wrong_order_same),
    Pattern("late_receiver", "Late Receiver", "p2p",
            "A blocking send waited for the receiver to post the matching receive",
            _late_receiver, sync=True),
    Pattern("collective", "Collective", "mpi", "Time in MPI collective communication",
            region_class="collective"),
    Pattern("early_reduce", "Early Reduce", "collective",
            "The root of an n-to-1 operation waited for the first sender", _early_reduce, sync=True),
    Pattern("early_scan", "Early Scan", "collective",
            "A rank in a scan waited for a lower rank to enter", _early_scan, sync=True),
    Pattern("late_broadcast", "Late Broadcast", "collective",
            "A rank in a 1-to-n operation waited for the root to enter", _late_broadcast, sync=True),
    Pattern("wait_nxn", "Wait at N x N", "collective",
            "A rank in an n-to-n operation waited for the last rank to enter",
            _sync_wait("nxn", "wait_nxn", senders_only=True), sync=True),
    Pattern("nxn_completion", "N x N Completion", "collective",
            "Time in an n-to-n operation after the first rank finished it",
            _completion("nxn", "nxn_completion", senders_only=True)),
    Pattern("synchronization", "Synchronization", "mpi", "Time in MPI barriers", region_class="barrier"),
    Pattern("wait_barrier", "Wait at Barrier", "synchronization",
            "A rank waited in a barrier for the last rank to enter",
            _sync_wait("barrier", "wait_barrier", senders_only=False), sync=True),
    Pattern("barrier_completion", "Barrier Completion", "synchronization",
            "Time in a barrier after the first rank finished it",
            _completion("barrier", "barrier_completion", senders_only=False)),
    Pattern("init_exit", "Init/Exit", "mpi", "Time in MPI_Init(_thread) and MPI_Finalize",
            region_class="init_exit"),
    Pattern("init_completion", "Init Completion", "init_exit",
            "Time in MPI_Init after the first rank finished it (Scalasca's MPI Initialization Completion)",
            _init_completion),
    Pattern("wait_finalize", "Wait at Finalize", "init_exit",
            "A rank waited in MPI_Finalize for the last rank to enter it", _wait_at_finalize),
    # one-sided communication (seed 002; docs/rma-patterns.md)
    Pattern("rma", "One-sided", "mpi", "Time in MPI one-sided (RMA) calls", region_class="rma"),
    Pattern("rma_sync", "RMA Synchronization", "rma", "Time in RMA synchronisation calls",
            region_class="rma_sync"),
    Pattern("rma_active", "Active Target", "rma_sync",
            "Time in fences and in post/start/complete/wait", region_class="rma_active"),
    Pattern("rma_late_post", "Late Post", "rma_active",
            "An access epoch waited for a target to post its exposure epoch", rma.late_post, sync=True),
    Pattern("rma_late_post_start", "at MPI_Win_start", "rma_late_post",
            "Late Post where MPI_Win_start blocked", rma.late_post_start),
    Pattern("rma_late_post_complete", "at MPI_Win_complete", "rma_late_post",
            "Late Post where MPI_Win_complete blocked", rma.late_post_complete),
    Pattern("rma_early_wait", "Early Wait", "rma_active",
            "MPI_Win_wait waited for the origins to complete their access epochs", rma.early_wait, sync=True),
    Pattern("rma_late_complete", "Late Complete", "rma_early_wait",
            "Early Wait after the origins' last RMA operation (MPI_Win_complete called late)",
            rma.late_complete),
    Pattern("rma_wait_at_fence", "Wait at Fence", "rma_active",
            "A rank waited in a synchronising MPI_Win_fence for the last rank to enter",
            rma.wait_at_fence, sync=True),
    Pattern("rma_early_fence", "Early Fence", "rma_wait_at_fence",
            "Wait at Fence while RMA operations targeting this rank were still running", rma.early_fence),
    Pattern("rma_passive", "Passive Target", "rma_sync", "Time in MPI_Win_lock/unlock and friends",
            region_class="rma_passive"),
    Pattern("rma_lock_contention", "Lock Contention", "rma_passive",
            "A lock or unlock waited for another origin to release a conflicting lock",
            rma.lock_contention, sync=True),
    Pattern("rma_wait_for_progress", "Wait for Progress", "rma_passive",
            "A lock epoch call waited while the target was computing outside MPI", rma.wait_for_progress),
    Pattern("rma_window", "Window Management", "rma", "Time in window creation and free",
            region_class="rma_window"),
    Pattern("rma_wait_at_create", "Wait at Create", "rma_window",
            "A rank waited in window creation for the last rank to enter", rma.wait_at_create, sync=True),
    Pattern("rma_wait_at_free", "Wait at Free", "rma_window",
            "A rank waited in MPI_Win_free for the last rank to enter", rma.wait_at_free, sync=True),
    Pattern("rma_comm", "RMA Communication", "rma", "Time in MPI_Put/Get/Accumulate and friends",
            region_class="rma_comm"),
    Pattern("rma_early_transfer", "Early Transfer", "rma_comm",
            "An RMA operation waited for its target to post the exposure epoch", rma.early_transfer, sync=True),
    Pattern("rma_comm_lock_contention", "Lock Contention", "rma_comm",
            "An RMA operation in a lock epoch waited for a conflicting lock to be released",
            rma.comm_lock_contention, sync=True),
    Pattern("rma_comm_wait_for_progress", "Wait for Progress", "rma_comm",
            "An RMA operation in a lock epoch waited while the target was computing outside MPI",
            rma.comm_wait_for_progress),
    # OpenMP (seed 000 §7; Scalasca's names; docs/openmp.md)
    Pattern("omp", "OMP", "time", "Time in OpenMP synchronisation: forks, barriers, locks", region_class="omp"),
    Pattern("omp_barrier", "Wait at OpenMP Barrier", "omp",
            "A thread waited at an OpenMP barrier (explicit or implicit) for the last thread of its team",
            _sync_wait("omp_barrier", "omp_barrier", False), sync=True),
    Pattern("omp_lock_contention", "OpenMP Lock Contention", "omp",
            "A thread waited to acquire an OpenMP lock or critical section another thread held",
            _omp_lock_contention, sync=True),
    Pattern("omp_idle_threads", "Idle Threads", "time",
            "A worker thread idled between parallel regions while its master ran serial code", _idle_threads,
            sync=True),
    Pattern("rma_pairwise_sync", "Pairwise Synchronizations for RMA", None,
            "Origin-target pairs synchronised by fences and GATS epochs (a count)", rma.pairwise_sync,
            unit="occ"),
    Pattern("rma_unneeded_sync", "Unneeded", "rma_pairwise_sync",
            "Pairwise synchronisations with no RMA operation between the pair in the epoch",
            rma.unneeded_sync, unit="occ"),
)

# grouping nodes: the region classes each one sums (others sum their own class)
CLASS_MEMBERS = {
    "mpi": {"mpi", "p2p", "collective", "barrier", "init_exit", "rma_active", "rma_passive", "rma_window",
            "rma_comm"},
    "rma": {"rma_active", "rma_passive", "rma_window", "rma_comm"},
    "rma_sync": {"rma_active", "rma_passive"},
}

PATTERN_INDEX = {p.key: i for i, p in enumerate(PATTERNS)}
SYNC_PATTERNS = np.array([p.sync for p in PATTERNS])


def children(key: str) -> list[str]:
    return [p.key for p in PATTERNS if p.parent == key]


# MPI call classes of the grouping nodes, by region name (Scalasca classifies by name too)
def region_class(name: str) -> str:
    if name.startswith("!$omp ") or name.startswith(("omp_set_", "omp_unset_")):
        return "omp"
    name = mpi_names.mpi_function(name)
    if name is None:                     # only real MPI routines are MPI (mpi_names.py)
        return "user"
    rma_class = rma.call_class(name)
    if rma_class is not None:
        return rma_class
    if name == "MPI_Barrier":
        return "barrier"
    if name in INIT_NAMES + FINALIZE_NAMES:
        return "init_exit"
    if name in COLLECTIVE_KIND or name.startswith(("MPI_Allgather", "MPI_Alltoall", "MPI_Gather",
                                                   "MPI_Scatter", "MPI_Reduce", "MPI_Bcast", "MPI_Scan",
                                                   "MPI_Exscan", "MPI_Allreduce")):
        return "collective"
    if name.startswith(("MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Bsend", "MPI_Ssend",
                        "MPI_Rsend", "MPI_Ibsend", "MPI_Issend", "MPI_Irsend", "MPI_Wait", "MPI_Test",
                        "MPI_Sendrecv", "MPI_Probe", "MPI_Iprobe", "MPI_Start", "MPI_Cancel",
                        "MPI_Request_free")):
        return "p2p"
    return "mpi"
