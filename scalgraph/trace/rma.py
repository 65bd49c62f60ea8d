"""One-sided (MPI RMA) wait states: seed 002's active-target patterns, passive-target lock waits and
window creation/free waits, vectorised over all epochs of a trace.

How RMA calls appear in a Trace (docs/rma-patterns.md): every RMA call holds at least one RMA event
whose `comm` is the window id; the region name says which call it is.
  MPI_Win_create/allocate/free, MPI_Win_fence, MPI_Win_complete, MPI_Win_wait (and a successful
  MPI_Win_test)            ENTER · RMA_SYNC(peer=-1) · EXIT
  MPI_Win_post / MPI_Win_start(group)   ENTER · RMA_SYNC(peer=g) for every group member g · EXIT
  MPI_Win_lock(type, target)            ENTER · RMA_SYNC(peer=target, tag=LOCK_EXCLUSIVE|LOCK_SHARED) · EXIT
  MPI_Win_unlock(target)                ENTER · RMA_SYNC(peer=target) · EXIT
  MPI_Put / MPI_Get / MPI_Accumulate    ENTER · RMA_PUT / RMA_GET / RMA_ACC(peer=target, bytes) · EXIT

Epochs are paired locally (start with the next complete, post with the next wait, lock with the next
unlock of the same target, per rank and window); the j-th access epoch of origin O that names target
T meets the j-th exposure epoch of T that names O (MPI's ordering rule).  Fences and window
creation/free are matched like collectives: the k-th call of every member of the window.
Formulas: shared/notes/trace-analysis-reference.md §3.4; choices marked [DER] are documented in
docs/rma-patterns.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import waitops

LOCK_EXCLUSIVE, LOCK_SHARED = 1, 2      # RMA_SYNC tag of MPI_Win_lock; 0 (unknown) counts as exclusive

(OTHER, CREATE, FREE, FENCE, POST, START, COMPLETE, WAIT, LOCK, UNLOCK, TRANSFER) = range(11)
_CALLS = {
    CREATE: ("MPI_Win_create", "MPI_Win_allocate", "MPI_Win_allocate_shared", "MPI_Win_create_dynamic"),
    FREE: ("MPI_Win_free",), FENCE: ("MPI_Win_fence",), POST: ("MPI_Win_post",),
    START: ("MPI_Win_start",), COMPLETE: ("MPI_Win_complete",), WAIT: ("MPI_Win_wait", "MPI_Win_test"),
    LOCK: ("MPI_Win_lock",), UNLOCK: ("MPI_Win_unlock",),
    TRANSFER: ("MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Rput", "MPI_Rget", "MPI_Raccumulate",
               "MPI_Get_accumulate", "MPI_Rget_accumulate", "MPI_Fetch_and_op", "MPI_Compare_and_swap"),
}
CALL_OF_NAME = {n: code for code, names in _CALLS.items() for n in names}


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
    win_ids = ev["comm"][rma_evt].astype(np.int64)
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
            what = _CALLS[int(c[i])][0]
            raise UserError(f"rank {int(r[i])}, window {wins[int(w[i])]}: {what} at t={ctx.time[o[i]]:.9g} has no "
                            f"matching {_CALLS[close_code if c[i] == open_code else open_code][0]}; "
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


# --- helpers -----------------------------------------------------------------------------------

def _max_by(group, value, ngroups):
    """Per group: max of value and the row holding it (-inf / -1 where a group has no row)."""
    best = np.full(ngroups, -np.inf)
    arg = np.full(ngroups, -1, np.int64)
    if len(group):
        order = np.lexsort((value, group))
        last = np.ones(len(order), bool)
        last[:-1] = group[order][1:] != group[order][:-1]
        g = group[order][last]
        best[g] = value[order][last]
        arg[g] = order[last]
    return best, arg


def _out(key, rank, op, wait, causer, causer_op, partner):
    from scalgraph.trace import patterns        # patterns imports this module for its table
    wait = np.where(np.isfinite(wait), wait, 0.0)
    return patterns._fill(key, np.asarray(rank, np.int64), np.asarray(op, np.int64), wait,
                          np.asarray(causer, np.int64), np.asarray(causer_op, np.int64), np.asarray(partner, np.int64))


def _comm_key(ctx, win_index) -> np.ndarray:
    """Delay-analysis partner key of a window-wide synchronisation: nranks + index of its communicator."""
    comm_index = {c: i for i, c in enumerate(sorted(ctx.trace.comms))}
    wins = sorted(ctx.trace.windows)
    per_win = np.array([ctx.nranks + comm_index.get(ctx.trace.windows[w], len(comm_index)) for w in wins] + [0],
                       np.int64)
    return per_win[win_index]


# --- active target: general active target synchronisation (post/start/complete/wait) ------------

def _post_times(ctx, rt: RmaTables):
    """Per GATS pair: the target's En(post), its post ENTER and the target rank."""
    post = rt.exposure.first[rt.pair_exposure]
    return ctx.time[post], post, rt.exposure.rank[rt.pair_exposure]


def _late_post_rows(ctx, found):
    """Late Post, seed 002: P* = latest En(post) of the targets of an access epoch.  If P* falls in
    MPI_Win_start, start blocked: ω = P* - En(start); else if it falls in MPI_Win_complete,
    ω = P* - En(complete) [interval test DER].  Causer: the target that posted last."""
    if "_rma_late_post" not in found:
        rt, t, ex = tables(ctx, found), ctx.time, ctx.exit_time
        acc = rt.access
        en_post, post_op, target = _post_times(ctx, rt)
        p_star, arg = _max_by(rt.pair_access, en_post, len(acc.first))
        has = arg >= 0
        a = np.maximum(arg, 0)
        if len(target) == 0:                               # no matched pair: nothing can be late
            target = post_op = np.full(1, -1)
        s, c = acc.first, acc.last
        at_start = has & (t[s] <= p_star) & (p_star <= ex[s])
        at_complete = has & ~at_start & (t[c] <= p_star) & (p_star <= ex[c])
        op = np.where(at_start, s, c)
        wait = np.where(at_start | at_complete, p_star - t[op], 0.0)
        found["_rma_late_post"] = (acc.rank, op, wait, target[a], post_op[a], at_start)
    return found["_rma_late_post"]


def late_post(ctx, found):
    rank, op, wait, causer, causer_op, _ = _late_post_rows(ctx, found)
    return _out("rma_late_post", rank, op, wait, causer, causer_op, causer)


def late_post_start(ctx, found):
    rank, op, wait, causer, causer_op, at_start = _late_post_rows(ctx, found)
    return _out("rma_late_post_start", rank, op, np.where(at_start, wait, 0.0), causer, causer_op, causer)


def late_post_complete(ctx, found):
    rank, op, wait, causer, causer_op, at_start = _late_post_rows(ctx, found)
    return _out("rma_late_post_complete", rank, op, np.where(at_start, 0.0, wait), causer, causer_op, causer)


def early_transfer(ctx, found):
    """Early Transfer, seed 002: an RMA op X of an access epoch whose target posted inside X:
    En(X) <= En(post) <= Ex(X)  ->  ω = En(post) - En(X) [formula DER], charged to the op."""
    rt, t, ex = tables(ctx, found), ctx.time, ctx.exit_time
    en_post, post_op, target = _post_times(ctx, rt)
    ok = rt.xfer_pair >= 0
    p = np.maximum(rt.xfer_pair, 0)
    x = rt.xfer_op
    ep = np.where(ok, en_post[p] if len(en_post) else 0.0, np.inf)
    wait = np.where(ok & (t[x] <= ep) & (ep <= ex[x]), ep - t[x], 0.0)
    keep = waitops.keep_largest_per_group(x, wait)       # one call, one wait
    wait = np.where(keep, wait, 0.0)
    causer_op = np.where(ok, post_op[p] if len(post_op) else -1, -1)
    return _out("rma_early_transfer", rt.xfer_rank, x, wait, rt.xfer_target, causer_op, rt.xfer_target)


def _last_op_exit(ctx, rt: RmaTables) -> np.ndarray:
    """Per GATS pair: Ex of the origin's last RMA op to the target in the epoch, else Ex(start)."""
    npairs = len(rt.pair_access)
    last = ctx.exit_time[rt.access.first[rt.pair_access]].copy()
    ok = rt.xfer_pair >= 0
    if ok.any():
        best, _ = _max_by(rt.xfer_pair[ok], ctx.exit_time[rt.xfer_op[ok]], npairs)
        last = np.where(np.isfinite(best), best, last)
    return last


def _early_wait_rows(ctx, found):
    if "_rma_early_wait" not in found:
        rt, t, ex = tables(ctx, found), ctx.time, ctx.exit_time
        xp = rt.exposure
        complete = rt.access.last[rt.pair_access]
        c_star, arg = _max_by(rt.pair_exposure, t[complete], len(xp.first))
        w = xp.last
        wait = waitops.wait_until(t[w], ex[w], c_star)      # -inf (no origin) gives 0
        a = np.maximum(arg, 0)
        if len(complete):
            origin = np.where(arg >= 0, rt.access.rank[rt.pair_access[a]], -1)
            causer_op = np.where(arg >= 0, complete[a], -1)
        else:
            origin = causer_op = np.full(len(arg), -1)
        l_star, _ = _max_by(rt.pair_exposure, _last_op_exit(ctx, rt), len(xp.first))
        late = np.maximum(np.minimum(c_star, ex[w]) - np.maximum(t[w], l_star), 0.0)
        found["_rma_early_wait"] = (xp.rank, w, wait, np.minimum(late, wait), origin, causer_op)
    return found["_rma_early_wait"]


def early_wait(ctx, found):
    """Early Wait, seed 002: ω = max_O En(complete_O) - En(wait_T); causer: the last origin to complete."""
    rank, op, wait, _, causer, causer_op = _early_wait_rows(ctx, found)
    return _out("rma_early_wait", rank, op, wait, causer, causer_op, causer)


def late_complete(ctx, found):
    """Late Complete: the part of Early Wait after the origins' last RMA op (or start exit):
    ω = max_O En(complete_O) - max(En(wait), max_O L_O), at least 0 [clip DER]."""
    rank, op, _, late, causer, causer_op = _early_wait_rows(ctx, found)
    return _out("rma_late_complete", rank, op, late, causer, causer_op, causer)


# --- active target: fences, and window creation / free -----------------------------------------

def _collective_calls(ctx, rt: RmaTables, code: int):
    """Per window: [instances, members] ENTERs of the k-th call `code` of every member."""
    name = _CALLS[code][0]
    sel = rt.call_code == code
    ops, wins = rt.call_op[sel], rt.call_win[sel]
    for wi, w in enumerate(rt.wins):
        these = ops[wins == wi]                       # sorted: rank-major global order
        if len(these) == 0:
            continue
        members = np.asarray(ctx.trace.comms.get(ctx.trace.windows[w], []), np.int64)
        rk = ctx.flat.rank[these]
        counts = np.bincount(rk, minlength=ctx.nranks)
        if len(members) == 0 or np.any(counts[members] != counts[members[0]]) or counts.sum() != counts[members].sum():
            raise UserError(f"window {w}: its members called {name} different numbers of times "
                            f"({ {int(m): int(counts[m]) for m in members} }); the trace is truncated or inconsistent")
        cols = [these[rk == m] for m in members.tolist()]
        yield wi, members, np.stack(cols, axis=1)


def _sync_collective(ctx, rt, code):
    """Seed 002's overlap test: synchronising iff max En < min Ex; then ω_l = max En - En_l."""
    t, ex = ctx.time, ctx.exit_time
    for wi, members, op in _collective_calls(ctx, rt, code):
        en = t[op]
        last = np.argmax(en, axis=1)
        max_en = en.max(axis=1)
        sync = max_en < ex[op].min(axis=1)
        wait = np.where(sync[:, None], max_en[:, None] - en, 0.0)
        yield wi, members, op, wait, last


def _collective_rows(ctx, found, code, key):
    rt = tables(ctx, found)
    out = [_out(key, *(np.zeros(0, np.int64),) * 2, np.zeros(0), *(np.zeros(0, np.int64),) * 3)]
    for wi, members, op, wait, last in _sync_collective(ctx, rt, code):
        rows = np.arange(op.shape[0])
        causer = np.broadcast_to(members[last][:, None], op.shape)
        causer_op = np.broadcast_to(op[rows, last][:, None], op.shape)
        part = np.full(op.size, _comm_key(ctx, np.array([wi]))[0])
        out.append(_out(key, np.broadcast_to(members, op.shape).ravel(), op.ravel(), wait.ravel(),
                        causer.ravel(), causer_op.ravel(), part))
    return np.concatenate(out)


def wait_at_fence(ctx, found):
    return _collective_rows(ctx, found, FENCE, "rma_wait_at_fence")


def wait_at_create(ctx, found):
    return _collective_rows(ctx, found, CREATE, "rma_wait_at_create")


def wait_at_free(ctx, found):
    return _collective_rows(ctx, found, FREE, "rma_wait_at_free")


def _fence_epoch_ops(ctx, rt: RmaTables, wi, members, op):
    """RMA ops of the fence epochs of window `wi` (not inside a GATS or lock epoch): per op its
    closing fence instance k (>= 1) and the target's member column; ops outside fence epochs dropped."""
    sel = np.flatnonzero((rt.xfer_win == wi) & (rt.xfer_access < 0) & (rt.xfer_lock < 0))
    col_of = np.full(ctx.nranks, -1, np.int64)
    col_of[members] = np.arange(len(members))
    x, o = rt.xfer_op[sel], rt.xfer_rank[sel]
    oc = col_of[o]
    k = np.zeros(len(sel), np.int64)
    for c in np.unique(oc[oc >= 0]).tolist():          # per origin: fences before the op
        m = oc == c
        k[m] = np.searchsorted(op[:, c], x[m])
    tc = col_of[np.clip(rt.xfer_target[sel], 0, ctx.nranks - 1)]
    ok = (oc >= 0) & (tc >= 0) & (k >= 1) & (k < op.shape[0])
    return sel[ok], k[ok], oc[ok], tc[ok]


def early_fence(ctx, found):
    """Early Fence: ω_l = (latest Ex of the ops that target l in the closing epoch) - En_l(fence),
    capped at the Wait at Fence value [cap DER]."""
    rt, t, ex = tables(ctx, found), ctx.time, ctx.exit_time
    out = [_out("rma_early_fence", *(np.zeros(0, np.int64),) * 2, np.zeros(0), *(np.zeros(0, np.int64),) * 3)]
    for wi, members, op, waf, last in _sync_collective(ctx, rt, FENCE):
        sel, k, oc, tc = _fence_epoch_ops(ctx, rt, wi, members, op)
        latest = np.full(op.size, -np.inf)
        np.maximum.at(latest, k * op.shape[1] + tc, ex[rt.xfer_op[sel]])
        latest = latest.reshape(op.shape)
        wait = np.minimum(np.maximum(latest - t[op], 0.0), waf)
        rows = np.arange(op.shape[0])
        out.append(_out("rma_early_fence", np.broadcast_to(members, op.shape).ravel(), op.ravel(), wait.ravel(),
                        np.broadcast_to(members[last][:, None], op.shape).ravel(),
                        np.broadcast_to(op[rows, last][:, None], op.shape).ravel(),
                        np.full(op.size, _comm_key(ctx, np.array([wi]))[0])))
    return np.concatenate(out)


# --- pairwise synchronisation counts -----------------------------------------------------------

def _pairwise_counts(ctx, found):
    """Per synchronising call: (pairwise syncs, unneeded ones).  GATS: one per (exposure epoch,
    origin of its post group), unneeded when that origin issued no op to the target in its matching
    access epoch; charged to the target's MPI_Win_wait.  Fence: every closing fence of target l
    (all but a window's first) counts size-1 pairs, unneeded = size-1 - distinct other origins that
    accessed l in the epoch [EXT, Scalasca uses the communicator size]."""
    if "_rma_pairs" in found:
        return found["_rma_pairs"]
    rt = tables(ctx, found)
    ops, total, unneeded = [], [], []
    used = np.zeros(len(rt.pair_access), bool)
    used[rt.xfer_pair[rt.xfer_pair >= 0]] = True
    xw = rt.exposure.last[rt.pair_exposure]
    ops.append(xw), total.append(np.ones(len(xw))), unneeded.append((~used).astype(float))
    for wi, members, op, _, _ in _sync_collective(ctx, rt, FENCE):
        size = len(members)
        sel, k, oc, tc = _fence_epoch_ops(ctx, rt, wi, members, op)
        other = oc != tc
        trip = np.unique((k[other] * size + tc[other]) * size + oc[other])
        distinct = np.bincount(trip // size, minlength=op.size).reshape(op.shape)
        closing = np.arange(op.shape[0]) >= 1
        tot = np.where(closing[:, None], size - 1, 0).astype(float) * np.ones(op.shape)
        ops.append(op.ravel()), total.append(tot.ravel()), unneeded.append((tot - distinct).ravel())
    found["_rma_pairs"] = (np.concatenate(ops), np.concatenate(total), np.concatenate(unneeded))
    return found["_rma_pairs"]


def pairwise_sync(ctx, found):
    op, total, _ = _pairwise_counts(ctx, found)
    none = np.full(len(op), -1)
    return _out("rma_pairwise_sync", ctx.flat.rank[op], op, total, none, none, none)


def unneeded_sync(ctx, found):
    op, _, unneeded = _pairwise_counts(ctx, found)
    none = np.full(len(op), -1)
    return _out("rma_unneeded_sync", ctx.flat.rank[op], op, unneeded, none, none, none)


# --- passive target ----------------------------------------------------------------------------

def _lock_calls(ctx, found):
    """Every call of a lock epoch (the lock, its ops, the unlock) with the epoch it belongs to and
    the release time of the previous conflicting epoch on the same window and target.
    [DER] The lock is granted at the *release* of the previous conflicting holder, taken as the exit
    of its MPI_Win_unlock; holders are ordered by release time; exclusive locks conflict with every
    holder, shared ones only with exclusive holders."""
    if "_rma_lock_calls" in found:
        return found["_rma_lock_calls"]
    rt, ex = tables(ctx, found), ctx.exit_time
    lk = rt.locks
    nl = len(lk.first)
    release = ex[lk.last]
    order = np.lexsort((release, lk.target, lk.win))
    same = np.zeros(nl, bool)
    if nl > 1:
        same[1:] = (lk.win[order][1:] == lk.win[order][:-1]) & (lk.target[order][1:] == lk.target[order][:-1])
    pos = np.arange(nl)
    group_start = np.maximum.accumulate(np.where(~same, pos, 0)) if nl else pos
    prev_any = np.where(same, pos - 1, -1)
    excl_sorted = rt.lock_exclusive[order]
    last_excl = np.maximum.accumulate(np.where(excl_sorted, pos, -1)) if nl else pos
    prev_excl = np.concatenate(([-1], last_excl[:-1])) if nl else pos
    prev_excl = np.where(prev_excl >= group_start, prev_excl, -1)
    prev_sorted = np.where(excl_sorted, prev_any, prev_excl)
    prev = np.full(nl, -1, np.int64)
    prev[order] = np.where(prev_sorted >= 0, order[np.maximum(prev_sorted, 0)], -1)
    r_prev = np.where(prev >= 0, release[np.maximum(prev, 0)] if nl else 0.0, -np.inf)

    inside = rt.xfer_lock >= 0
    call = np.concatenate((lk.first, lk.last, rt.xfer_op[inside]))
    epoch = np.concatenate((np.arange(nl), np.arange(nl), rt.xfer_lock[inside])).astype(np.int64)
    is_op = np.concatenate((np.zeros(2 * nl, bool), np.ones(int(inside.sum()), bool)))
    call, first = np.unique(call, return_index=True)
    found["_rma_lock_calls"] = (call, epoch[first], is_op[first], r_prev, prev)
    return found["_rma_lock_calls"]


def _lock_contention(ctx, found, ops_only: bool, key: str):
    """Lock Contention [DER]: each call of the epoch waits until the previous conflicting holder
    released the lock: ω = min(r_prev, Ex) - En, at least 0 (covers eager and lazy lock protocols);
    causer: that holder, at its MPI_Win_unlock."""
    rt, t, ex = tables(ctx, found), ctx.time, ctx.exit_time
    call, epoch, is_op, r_prev, prev = _lock_calls(ctx, found)
    sel = is_op == ops_only
    call, epoch = call[sel], epoch[sel]
    wait = waitops.wait_until(t[call], ex[call], r_prev[epoch]) if len(call) else np.zeros(0)
    p = prev[epoch]
    causer = np.where(p >= 0, rt.locks.rank[np.maximum(p, 0)] if len(p) else -1, -1)
    causer_op = np.where(p >= 0, rt.locks.last[np.maximum(p, 0)] if len(p) else -1, -1)
    return _out(key, ctx.flat.rank[call], call, wait, causer, causer_op, causer)


def lock_contention(ctx, found):
    return _lock_contention(ctx, found, False, "rma_lock_contention")


def comm_lock_contention(ctx, found):
    return _lock_contention(ctx, found, True, "rma_comm_lock_contention")


def _mpi_activity(ctx):
    """Per rank, sorted ENTER times of its MPI calls and their exits."""
    regions = ctx.trace.regions
    is_mpi = np.array([r.is_mpi for r in regions] + [False], bool)
    ev = ctx.ev
    enter = np.flatnonzero((ev["kind"] == tm.ENTER) & is_mpi[ev["region"]])
    return enter, ctx.time[enter], ctx.exit_time[enter], ctx.flat.rank[enter]


def _wait_for_progress(ctx, found, ops_only: bool, key: str):
    """Wait for Progress [DER]: after the lock is free (r_prev), a passive-target call of the origin
    can only complete when the target's MPI library makes progress, i.e. the target is inside an MPI
    call.  If the target computes outside MPI at s = max(En, r_prev), the call waits until the
    target's next MPI call or its own exit: ω = min(next MPI enter on T, Ex) - s.  No causer (like
    the completion patterns), so no delay attribution."""
    rt, t, ex = tables(ctx, found), ctx.time, ctx.exit_time
    call, epoch, is_op, r_prev, _ = _lock_calls(ctx, found)
    sel = is_op == ops_only
    call, epoch = call[sel], epoch[sel]
    target = rt.locks.target[epoch]
    s = np.maximum(t[call], np.minimum(r_prev[epoch], ex[call]))
    enter, en_t, ex_t, rank_t = _mpi_activity(ctx)
    wait = np.zeros(len(call))
    for T in np.unique(target).tolist():                 # a loop over target ranks, vectorised within
        m = np.flatnonzero(target == T)
        r = rank_t == T
        e, x = en_t[r], ex_t[r]
        j = np.searchsorted(e, s[m], "right") - 1
        inside = (j >= 0) & (x[np.maximum(j, 0)] > s[m]) if len(e) else np.zeros(len(m), bool)
        nxt = np.append(e, np.inf)[j + 1] if len(e) else np.full(len(m), np.inf)
        w = np.maximum(np.minimum(nxt, ex[call[m]]) - s[m], 0.0)
        wait[m] = np.where(inside | (ctx.flat.rank[call[m]] == T), 0.0, w)
    none = np.full(len(call), -1)
    return _out(key, ctx.flat.rank[call], call, wait, none, none, target)


def wait_for_progress(ctx, found):
    return _wait_for_progress(ctx, found, False, "rma_wait_for_progress")


def comm_wait_for_progress(ctx, found):
    return _wait_for_progress(ctx, found, True, "rma_comm_wait_for_progress")
