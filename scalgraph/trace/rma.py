"""One-sided (MPI RMA) wait states: seed 002's active-target patterns, passive-target lock waits and
window creation/free waits, each an evaluator for the pattern table (patterns.py), vectorised over
all epochs of a trace (rma_epochs.py pairs and matches them).

Formulas: shared/notes/trace-analysis-reference.md §3.4; the event sequences and every choice marked
[DER] (ours where seed 002 leaves it open) are documented in docs/rma-patterns.md.
"""
from __future__ import annotations

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import mpi_names, waitops
from scalgraph.trace.rma_epochs import CALL_NAMES, CREATE, FENCE, FREE, RmaTables, tables
# re-exported: the pattern table classifies regions with call_class, traces name lock types with these
from scalgraph.trace.rma_epochs import LOCK_EXCLUSIVE, LOCK_SHARED, call_class  # noqa: F401


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
    name = CALL_NAMES[code][0]
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
    is_mpi = np.array([mpi_names.is_mpi_region(r) for r in regions] + [False], bool)
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
