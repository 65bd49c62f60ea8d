"""The hybrid controlled logical clock of seed 004 §IV-V: the clock condition across the threads of
a process as well as across processes, for traces whose OpenMP threads are locations (rank, thread)
(scalgraph/io/trace_omp.py; Score-P traces read by threads_from_regions).

Seed 004 maps every OpenMP happened-before relation onto a logical message and reuses the MPI
algorithm's forward and backward amortisation; its parallel version replays the trace with one
analysis thread per application thread.  Here the locations already are the process x thread
structure, and the amortisation of clock.py runs over all of them at once, so "mirroring" is: each
location (rank, thread) has its own forward recurrence, and timestamps move between the threads of
a team only through these logical messages:

  fork     the master's fork (ENTER of `!$omp fork`) -> each worker's fork exit (the team
           collective's COLL_END on the worker, just before it enters the parallel region): a
           worker cannot start the region before the master forked it;
  join     each worker's EXIT of the parallel region (its OpenMP collective exit) -> the master's
           EXIT of the region (the join): max-reduction over the workers;
  barrier  every thread's ENTER of an OpenMP barrier -> every thread's COLL_END in it: nobody leaves
           before the last thread arrived (max-reduction forward), and in the backward amortisation
           an ENTER's bound is the earliest COLL_END of the team (min-reduction);
  lock     a release -> the next acquisition of the same lock by another thread, in the order of the
           recorded acquisition times, fixed before any correction (trace_omp._lock_events writes
           it as a SEND/RECV pair on the team communicator; OTF2 lock records are read the same way).

Minimum latency of these messages: ClockParams.l_min_omp (Scalasca's shared-memory latency, 10 ns).
MPI messages keep l_min_p2p / l_min_coll.  `openmp=False` (clock.correct_clocks) gives the pure MPI
correction of seed 004 §III for comparison: OpenMP constructs are internal events, lock hand-overs
included, so moving an MPI receive forward can put a worker's region before its fork (seed 004
Fig. 2; `openmp_violations` counts them).
"""
from __future__ import annotations

import numpy as np

from scalgraph.model import trace as tm
from scalgraph.trace import matching

# logical-message kinds after clock.py's MPI ones (clock.MESSAGE_KINDS holds their texts)
FORK, JOIN, OMP_BARRIER, LOCK = 7, 8, 9, 10
OPENMP_KINDS = (FORK, JOIN, OMP_BARRIER, LOCK)


def has_threads(trace: tm.Trace) -> bool:
    """Whether the trace has OpenMP team communicators (threads as locations)."""
    return any(c >= tm.OMP_TEAM_BASE for c in trace.comms)


def hybrid_messages(trace: tm.Trace, flat, lm, params, openmp: bool = True):
    """clock.logical_messages' MPI edges `lm` with the OpenMP ones appended (openmp=True), or with
    the lock hand-overs, which pair_messages finds as messages on the team communicator, removed
    (openmp=False: the pure MPI correction)."""
    from scalgraph.trace.clock import LogicalMessages
    first = lm.set_members[lm.set_ptr[:-1]]
    is_lock = (lm.set_kind == 0) & (flat.ev["comm"][first] >= tm.OMP_TEAM_BASE)   # P2P on a team
    if not openmp:
        return _subset(lm, ~is_lock)
    kind = np.where(is_lock, LOCK, lm.set_kind).astype(np.int8)
    lmin = np.where(is_lock, params.l_min_omp, lm.set_lmin)
    sets, sizes, kinds, recv_evt, recv_set = _team_messages(trace, flat)
    n0 = lm.nsets
    sizes = np.asarray(sizes, np.int64)
    kinds = np.asarray(kinds, np.int8)
    return LogicalMessages(
        set_members=np.concatenate([lm.set_members, *sets]).astype(np.int64),
        set_ptr=np.concatenate((lm.set_ptr, lm.set_ptr[-1] + np.cumsum(sizes))).astype(np.int64),
        set_kind=np.concatenate((kind, kinds)),
        set_lmin=np.concatenate((lmin, np.full(len(kinds), params.l_min_omp))),
        recv_evt=np.concatenate([lm.recv_evt, *recv_evt]).astype(np.int64),
        recv_set=np.concatenate([lm.recv_set, *[r + n0 for r in recv_set]]).astype(np.int64))


def _subset(lm, keep: np.ndarray):
    """The logical messages of the kept sender sets (renumbered), with their receives."""
    from scalgraph.trace.clock import LogicalMessages
    if keep.all():
        return lm
    new_id = np.cumsum(keep) - 1
    size = np.diff(lm.set_ptr)
    members = lm.set_members[np.repeat(keep, size)]
    r_keep = keep[lm.recv_set]
    return LogicalMessages(set_members=members,
                           set_ptr=np.concatenate(([0], np.cumsum(size[keep]))).astype(np.int64),
                           set_kind=lm.set_kind[keep], set_lmin=lm.set_lmin[keep],
                           recv_evt=lm.recv_evt[r_keep], recv_set=new_id[lm.recv_set[r_keep]])


def _team_messages(trace: tm.Trace, flat):
    """Fork, join and barrier messages of every team collective: (sender arrays, set sizes, kinds,
    receive arrays, set index arrays numbered from 0)."""
    ev = flat.ev
    names = [r.name for r in trace.regions]
    fork_reg = np.array([n.startswith("!$omp fork") for n in names] + [False])
    par_reg = np.array([n.startswith("!$omp parallel") for n in names] + [False])
    sets, sizes, kinds, recv_evt, recv_set = [], [], [], [], []
    nsets = 0

    def add(kind, senders: np.ndarray, receivers: np.ndarray) -> None:
        """One set per row of `senders` (m x a) with the receivers of the same row (m x b)."""
        nonlocal nsets
        m = len(senders)
        if m == 0 or senders.shape[1] == 0 or receivers.shape[1] == 0:
            return
        sets.append(senders.ravel())
        sizes.extend([senders.shape[1]] * m)
        kinds.extend([kind] * m)
        recv_evt.append(receivers.ravel())
        recv_set.append(np.repeat(nsets + np.arange(m), receivers.shape[1]))
        nsets += m

    team_comms = {c: m for c, m in trace.comms.items() if c >= tm.OMP_TEAM_BASE}
    if not team_comms:
        return sets, sizes, kinds, recv_evt, recv_set
    depth = matching.depth_after(flat)
    kind = ev["kind"]
    coll_end = np.flatnonzero((kind == tm.COLL_END) & (ev["comm"] >= tm.OMP_TEAM_BASE))
    owner = np.full(len(flat.rank), -1, np.int64)
    owner[coll_end] = matching.owner_of(flat, depth, coll_end)
    par_enter = np.flatnonzero((kind == tm.ENTER) & par_reg[np.where(ev["region"] >= 0, ev["region"], -1)])
    for inst in matching.match_collectives(flat, _Owner(owner), trace.comms):
        size = len(inst.members)
        if inst.comm not in team_comms or size < 2:
            continue
        enters, ends = inst.op, inst.end_evt
        ok = np.all(enters >= 0, axis=1)
        reg = np.where(ok, ev["region"][np.maximum(enters[:, 0], 0)], -1)
        is_fork = ok & fork_reg[reg]
        is_bar = ok & ~fork_reg[reg]
        # barrier: all ENTERs -> all OpenMP collective exits
        add(OMP_BARRIER, enters[is_bar], ends[is_bar])
        if not is_fork.any():
            continue
        e, x = enters[is_fork], ends[is_fork]
        root = ev["peer"][x[:, 0]]
        hit = inst.members[None, :] == root[:, None]
        col = np.where(hit.any(axis=1), np.argmax(hit, axis=1), -1)
        good = col >= 0
        e, x, col = e[good], x[good], col[good]
        if not len(e):
            continue
        rows = np.arange(len(e))
        master_fork = e[rows, col]
        others = np.ones(e.shape, bool)
        others[rows, col] = False
        workers_end = x[others].reshape(len(e), size - 1)
        add(FORK, master_fork[:, None], workers_end)
        # join: each thread's parallel region after its fork; the workers' EXITs -> the master's
        pe = np.searchsorted(par_enter, x.ravel(), "right")
        nxt = np.where(pe < len(par_enter), par_enter[np.minimum(pe, len(par_enter) - 1)], -1)
        same_loc = (nxt >= 0) & (flat.rank[np.maximum(nxt, 0)] == flat.rank[x.ravel()])
        px = np.full(nxt.shape, -1, np.int64)
        if same_loc.any():
            px[same_loc] = matching.exit_of(flat, depth, nxt[same_loc])
        px = px.reshape(x.shape)
        full = np.all(px >= 0, axis=1)
        if full.any():
            p, c = px[full], col[full]
            r = np.arange(len(p))
            keep = np.ones(p.shape, bool)
            keep[r, c] = False
            add(JOIN, p[keep].reshape(len(p), size - 1), p[r, c][:, None])
    return sets, sizes, kinds, recv_evt, recv_set


class _Owner:
    """What match_collectives reads of a Nesting: the owner ENTER of each COLL_END."""

    def __init__(self, owner: np.ndarray):
        self.owner = owner


def openmp_violations(trace: tm.Trace, l_min: float = 0.0) -> np.ndarray:
    """The OpenMP logical messages (fork, join, barrier, lock) whose receive is earlier than
    `l_min` after its latest sender: clock.VIOLATION_DTYPE rows.  What a pure MPI correction may
    leave behind (seed 004 Fig. 2, Table III)."""
    from scalgraph.trace import clock
    flat = matching.flatten(trace)
    params = clock.ClockParams()
    empty = clock.LogicalMessages(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int8),
                                  np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    mpi = clock.logical_messages(trace, params, flat)
    hyb = hybrid_messages(trace, flat, mpi, params)
    omp = _subset(hyb, np.isin(hyb.set_kind, OPENMP_KINDS)) if hyb.nsets else empty
    return clock._violations(flat.ev["time"], flat, omp, l_min)


def summary(lm) -> dict:
    """Numbers of OpenMP logical messages by kind, for the report."""
    names = {FORK: "fork", JOIN: "join", OMP_BARRIER: "barrier", LOCK: "lock"}
    counts = np.bincount(lm.set_kind, minlength=LOCK + 1) if lm.nsets else np.zeros(LOCK + 1, int)
    return {names[k]: int(counts[k]) for k in OPENMP_KINDS}
