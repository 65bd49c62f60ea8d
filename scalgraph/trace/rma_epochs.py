"""The epochs of one-sided communication in a trace, paired and matched with numpy (no per-event
Python): which RMA call each event belongs to, access epochs (MPI_Win_start .. MPI_Win_complete),
exposure epochs (MPI_Win_post .. MPI_Win_wait), lock epochs (MPI_Win_lock .. MPI_Win_unlock), the
matching of access to exposure epochs, and the epoch of every put/get/accumulate.
The patterns using them are in rma.py.  Event sequences (docs/rma-patterns.md): every RMA call holds
at least one RMA event whose `comm` is the window id; the region name says which call it is.
  MPI_Win_create/allocate/free, MPI_Win_fence, MPI_Win_complete, MPI_Win_wait (and a successful
  MPI_Win_test)            ENTER · RMA_SYNC(peer=-1) · EXIT
  MPI_Win_post / MPI_Win_start(group)   ENTER · RMA_SYNC(peer=g) for every group member g · EXIT
  MPI_Win_lock(type, target)            ENTER · RMA_SYNC(peer=target, tag=LOCK_EXCLUSIVE|LOCK_SHARED) · EXIT
  MPI_Win_unlock(target)                ENTER · RMA_SYNC(peer=target) · EXIT
  MPI_Put / MPI_Get / MPI_Accumulate    ENTER · RMA_PUT / RMA_GET / RMA_ACC(peer=target, bytes) · EXIT
Epochs pair locally per rank and window (and target, for locks); the j-th access epoch of origin O
naming T meets the j-th exposure epoch of T naming O (MPI's ordering rule).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model import trace as tm

LOCK_EXCLUSIVE, LOCK_SHARED = 1, 2      # RMA_SYNC tag of MPI_Win_lock; 0 (unknown) counts as exclusive

(OTHER, CREATE, FREE, FENCE, POST, START, COMPLETE, WAIT, LOCK, UNLOCK, TRANSFER) = range(11)
CALL_NAMES = {
    CREATE: ("MPI_Win_create", "MPI_Win_allocate", "MPI_Win_allocate_shared", "MPI_Win_create_dynamic"),
    FREE: ("MPI_Win_free",), FENCE: ("MPI_Win_fence",), POST: ("MPI_Win_post",),
    START: ("MPI_Win_start",), COMPLETE: ("MPI_Win_complete",), WAIT: ("MPI_Win_wait", "MPI_Win_test"),
    LOCK: ("MPI_Win_lock",), UNLOCK: ("MPI_Win_unlock",),
    TRANSFER: ("MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Rput", "MPI_Rget", "MPI_Raccumulate",
               "MPI_Get_accumulate", "MPI_Rget_accumulate", "MPI_Fetch_and_op", "MPI_Compare_and_swap"),
}
CALL_OF_NAME = {n: code for code, names in CALL_NAMES.items() for n in names}


def call_class(name: str) -> str | None:
    """Region class of an RMA routine for the pattern tree's grouping nodes; None if not RMA."""
    code = CALL_OF_NAME.get(name)
    if code in (CREATE, FREE):
        return "rma_window"
    if code == TRANSFER:
        return "rma_comm"
    if code in (LOCK, UNLOCK) or name.startswith(("MPI_Win_lock", "MPI_Win_unlock", "MPI_Win_flush",
                                                  "MPI_Win_sync")):
        return "rma_passive"
    if code is not None or name.startswith("MPI_Win_"):
        return "rma_active"
    return None


# --- the epoch tables (built once per replay, cached in `found`) --------------------------------

@dataclass
class Epochs:
    """Start/end calls (ENTER indices) of paired epochs, their rank, window and (locks) target."""
    first: np.ndarray
    last: np.ndarray
    rank: np.ndarray
    win: np.ndarray
    target: np.ndarray


@dataclass
class RmaTables:
    call_op: np.ndarray         # per RMA call: its ENTER
    call_code: np.ndarray
    call_win: np.ndarray        # window *index* (into wins)
    wins: list[int]             # window ids in index order
    access: Epochs              # MPI_Win_start .. MPI_Win_complete
    exposure: Epochs            # MPI_Win_post .. MPI_Win_wait
    locks: Epochs               # MPI_Win_lock .. MPI_Win_unlock (target = locked rank)
    lock_exclusive: np.ndarray
    pair_access: np.ndarray     # GATS pairs (origin's access epoch, target's exposure epoch)
    pair_exposure: np.ndarray
    xfer_op: np.ndarray         # per RMA transfer event: the call's ENTER, origin, window index, target
    xfer_rank: np.ndarray
    xfer_win: np.ndarray
    xfer_target: np.ndarray
    xfer_access: np.ndarray     # access epoch holding it, or -1
    xfer_lock: np.ndarray       # lock epoch holding it, or -1
    xfer_pair: np.ndarray       # GATS pair (its access epoch, its target), or -1


def tables(ctx, found) -> RmaTables:
    if "_rma" not in found:
        found["_rma"] = _build(ctx)
    return found["_rma"]


def _build(ctx) -> RmaTables:
    ev, nest, n = ctx.ev, ctx.nest, ctx.nevents
    kind = ev["kind"]
    rma_evt = np.flatnonzero((kind >= tm.RMA_PUT) & (kind <= tm.RMA_SYNC))
    rma_evt = rma_evt[nest.owner[rma_evt] >= 0]           # outside any call: nothing to time
    owner = nest.owner[rma_evt]
    names = [r.name for r in ctx.trace.regions]
    code_of_region = np.array([CALL_OF_NAME.get(x, OTHER) for x in names] + [OTHER], np.int64)
    code = code_of_region[ev["region"][owner]]
    wins = sorted(ctx.trace.windows)
    # (a trace without one-sided events has no window column left: forward.ONE_SIDED_ONLY)
    win_ids = ev["comm"][rma_evt].astype(np.int64) if len(rma_evt) else np.zeros(0, np.int64)
    unknown = np.setdiff1d(win_ids, np.asarray(wins, np.int64))
    if len(unknown):
        raise UserError(f"RMA events use window {int(unknown[0])}, which the trace does not define; "
                        f"the trace's definitions are incomplete")
    win = np.searchsorted(np.asarray(wins, np.int64), win_ids)
    peer = ev["peer"][rma_evt].astype(np.int64)

    call_op, first = np.unique(owner, return_index=True)
    call_code, call_win = code[first], win[first]

    def epochs(open_code, close_code, with_target=False) -> Epochs:
        """Pair each opening call with the next closing call of its rank and window (and target)."""
        sel = np.flatnonzero(np.isin(code, (open_code, close_code)) & (kind[rma_evt] == tm.RMA_SYNC))
        _, u = np.unique(owner[sel], return_index=True)       # one row per call, not per group member
        sel = sel[u]
        tgt = peer[sel] if with_target else np.full(len(sel), -1)
        rank = ctx.flat.rank[owner[sel]].astype(np.int64)
        order = np.lexsort((owner[sel], tgt, win[sel], rank))
        s = sel[order]
        c, r, w, t, o = code[s], rank[order], win[s], tgt[order], owner[s]
        if len(s) == 0:
            return Epochs(*(np.zeros(0, np.int64),) * 5)
        opening = c == open_code
        ok = opening[:-1] & (c[1:] == close_code) & (r[1:] == r[:-1]) & (w[1:] == w[:-1]) & (t[1:] == t[:-1])
        paired_open = np.append(ok, False)
        paired_close = np.insert(ok, 0, False)
        lonely = np.flatnonzero(~(paired_open | paired_close))
        if len(lonely):
            i = int(lonely[0])
            what = CALL_NAMES[int(c[i])][0]
            raise UserError(f"rank {int(r[i])}, window {wins[int(w[i])]}: {what} at t={ctx.time[o[i]]:.9g} has no "
                            f"matching {CALL_NAMES[close_code if c[i] == open_code else open_code][0]}; "
                            f"the trace is truncated or the program's RMA synchronisation is erroneous")
        a = np.flatnonzero(paired_open)
        return Epochs(first=o[a], last=o[a + 1], rank=r[a], win=w[a], target=t[a])

    access = epochs(START, COMPLETE)
    exposure = epochs(POST, WAIT)
    locks = epochs(LOCK, UNLOCK, with_target=True)
    lock_tag = np.zeros(len(locks.first), np.int64)
    lk = np.flatnonzero(code == LOCK)
    if len(lk):
        pos = np.searchsorted(owner[lk], locks.first)        # owner[lk] is sorted: global index order
        lock_tag = ev["tag"][rma_evt[lk[np.minimum(pos, len(lk) - 1)]]].astype(np.int64)
    lock_exclusive = lock_tag != LOCK_SHARED

    pair_access, pair_exposure = _gats_pairs(ctx, code, owner, peer, access, exposure)

    xf = np.flatnonzero(np.isin(kind[rma_evt], (tm.RMA_PUT, tm.RMA_GET, tm.RMA_ACC)))
    xfer_op, xfer_win, xfer_target = owner[xf], win[xf], peer[xf]
    xfer_rank = ctx.flat.rank[xfer_op].astype(np.int64)
    xfer_access = _enclosing(access, xfer_op, xfer_win, np.full(len(xf), -1), n)
    xfer_lock = _enclosing(locks, xfer_op, xfer_win, xfer_target, n)
    # the pair of (access epoch, target): pairs sorted by that key
    nr = ctx.nranks
    xfer_pair = np.full(len(xf), -1, np.int64)
    if len(pair_access):
        pkey = pair_access * nr + exposure.rank[pair_exposure]
        order = np.argsort(pkey, kind="stable")
        q = np.where(xfer_access >= 0, xfer_access * nr + xfer_target, -1)
        j = np.minimum(np.searchsorted(pkey[order], q), len(order) - 1)
        xfer_pair = np.where((xfer_access >= 0) & (pkey[order][j] == q), order[j], -1)
    return RmaTables(call_op=call_op, call_code=call_code, call_win=call_win, wins=wins, access=access,
                     exposure=exposure, locks=locks, lock_exclusive=lock_exclusive, pair_access=pair_access,
                     pair_exposure=pair_exposure, xfer_op=xfer_op, xfer_rank=xfer_rank, xfer_win=xfer_win,
                     xfer_target=xfer_target, xfer_access=xfer_access, xfer_lock=xfer_lock, xfer_pair=xfer_pair)


def _enclosing(ep: Epochs, op, win, target, n) -> np.ndarray:
    """Per call: the epoch of the same rank/window/target whose first..last calls enclose it, or -1.
    Global event indices are rank-major, so (window, target, ENTER index) orders one rank's epochs."""
    if len(ep.first) == 0 or len(op) == 0:
        return np.full(len(op), -1, np.int64)
    # dense ids of (window, target) keep the combined key small: groups x events
    groups, gid = np.unique(np.concatenate((ep.win, win)) * (n + 1) + np.concatenate((ep.target, target)) + 1,
                            return_inverse=True)
    key = gid[:len(ep.first)] * n + ep.first
    order = np.argsort(key)
    q = gid[len(ep.first):] * n + op
    j = np.searchsorted(key[order], q, "right") - 1
    e = order[np.maximum(j, 0)]
    ok = (j >= 0) & (ep.win[e] == win) & (ep.target[e] == target) & (ep.first[e] < op) & (op < ep.last[e])
    return np.where(ok, e, -1)


def _gats_pairs(ctx, code, owner, peer, access: Epochs, exposure: Epochs):
    """(access epoch, exposure epoch) pairs: the j-th access epoch of O naming T meets the j-th
    exposure epoch of T naming O on the same window."""
    nr = ctx.nranks

    def members(open_code, ep: Epochs):
        sel = np.flatnonzero((code == open_code) & (peer >= 0))
        order = np.argsort(ep.first)
        if len(order) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        e = order[np.minimum(np.searchsorted(ep.first, owner[sel], sorter=order), len(order) - 1)]
        return e, peer[sel]

    a_ep, a_peer = members(START, access)
    x_ep, x_peer = members(POST, exposure)

    def keyed(origin, target, win, first):
        base = (origin * nr + target) * max(len(ctx.trace.windows), 1) + win
        order = np.lexsort((first, base))
        b = base[order]
        new = np.ones(len(b), bool)
        new[1:] = b[1:] != b[:-1]
        start = np.maximum.accumulate(np.where(new, np.arange(len(b)), 0)) if len(b) else b
        ordinal = np.empty(len(b), np.int64)
        ordinal[order] = np.arange(len(b)) - start
        return base * (len(owner) + 1) + ordinal

    ka = keyed(access.rank[a_ep], a_peer, access.win[a_ep], access.first[a_ep])
    kx = keyed(x_peer, exposure.rank[x_ep], exposure.win[x_ep], exposure.first[x_ep])
    order = np.argsort(kx)
    j = np.minimum(np.searchsorted(kx[order], ka), max(len(kx) - 1, 0))
    hit = (kx[order][j] == ka) if len(kx) else np.zeros(len(ka), bool)
    return a_ep[hit].astype(np.int64), x_ep[order[j[hit]]].astype(np.int64)
