"""What-if, trace mode: re-time a trace with some computation shortened, keeping the event order.

Like Scalasca's re-enactment, but over our own replay context: each rank's events keep their order
and their own durations; only the waiting is recomputed from the partners' new times.  An event's new
time is the previous event's new time plus the gap between them (shortened where the gap is spent
in a shortened call path on that rank), except at the events that waited for another rank:

* a receive completing (RECV, or IRECV in the Wait/Waitall/Test that completes it), in the MPI call
  entered at a (MPI_Recv or the Wait), whose receives were sent at s_1..s_k; the call was ready at
  r = max(t_a, t_s1..t_sk) and took d = t_e - r after that.  New:
      t'_e = max(t'_a + o, max_i t'_si + x)
  The trace shows one of the two parts of each call.  A call that waited for its last message shows
  the transfer: x = d (what followed the send); its own part, counted from its entry, is not shown:
  o = min(d, the median d of the receives that did not wait).  A call that did not wait shows its own
  part: o = d, and x = min(d, the median d of the receives that waited) (when the fix makes its
  partner late, the own part and the waiting overlap instead of adding up).  On a crowded machine a
  waiting receiver runs again only a while after its message came (sweep at 8 ranks on 2 cores:
  11-18 ms against 0.01 ms for a receive that found its message): that is no part of the call once
  the fix lets the message come first.  A multi-completion stamps all its completions at its end: it
  waits for its latest message.
* a collective's end (COLL_END) in instance k, entered at a_q by member q, likewise over the entries
  it awaits:
      N x N, barrier, scan:  every member's entry            (everyone waits for the last)
      1 to N, non-root:      the root's entry;               the root awaits nobody
      N to 1, root:          every member's entry;           the others await nobody
  (the part after the last awaited entry, the collective's own work, is kept; never negative; its
  own part counted from the entry estimated as for receives.)
  With nothing shortened every event keeps its time.

* one-sided synchronisation likewise, at the end (EXIT) of the call: MPI_Win_fence over the entries
  of that fence on every rank of the window, MPI_Win_start and MPI_Win_complete over the MPI_Win_post
  entries of the exposure epochs they access (Late Post), MPI_Win_wait over the MPI_Win_complete
  entries of the access epochs accessing it (Early Wait).
* MPI_Finalize, likewise at its end, over every rank's entry: it synchronises all ranks (they leave
  it together; masterworker at 8 ranks: entered 0.08-0.47 s before the end, left within 30 ms).
  Its parts are estimated from Finalize calls alone (its teardown is no collective's own work).

Sends are taken as not waiting (eager delivery: a Late Receiver's sender keeps its original
duration), and passive-target locks as local; both are documented limits.  Only the synchronising events
(and each rank's first) are solved: any other event keeps its distance from the last of them before
it, over the shortened gaps (prefix sums).  The dependences point backwards along the program's
causal order, so rounds that advance every rank whose next synchronising event has all its partners
placed always finish.  A small C loop (kernels.c) solves them one at a time; without a C
compiler the same rounds run in numpy, a few array operations over the ranks per round (about 8000
rounds for 10^6 events of a 16-rank halo exchange), with the same values bit for bit.
"""
from __future__ import annotations

import pathlib
from dataclasses import dataclass

import numpy as np

from scalgraph.model import trace as tm
from scalgraph.model.fix import extra_share, fix_level, typical
from scalgraph.trace import native, patterns
from scalgraph.trace.forward import ReplayContext
from scalgraph.trace.heap import returns_freed_memory

_KIND = {k: patterns.COLL_KINDS.index(k) for k in patterns.COLL_KINDS}


@dataclass
class Retimed:
    time: np.ndarray          # new time of every (flat) event
    run_length: float         # original: last event - first event over all ranks
    fixed_run_length: float   # after re-timing

    @property
    def gain(self) -> float:
        return max(self.run_length - self.fixed_run_length, 0.0)


def shrink_fractions(ctx: ReplayContext, excl: np.ndarray, callpaths: list[int],
                     level: float | None = None) -> np.ndarray:
    """[R] fraction of the given call paths' exclusive time each rank loses when fixed: its time
    there brought down to the (lower) median rank's, or to `level` seconds if that is lower (the
    level the diagnosis scale's fix comes to at this scale, model/fix.py)."""
    cps = np.asarray(callpaths, np.int64)
    per_rank = excl[cps].sum(axis=0) if len(cps) else np.zeros(ctx.nranks)
    if per_rank.size == 0:
        return per_rank
    ref = np.quantile(per_rank, 0.5, method="lower")
    if level is not None:
        ref = min(ref, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(per_rank > ref, 1.0 - ref / np.where(per_rank > 0, per_rank, 1.0), 0.0)


@dataclass
class _Deps:
    """Per synchronising event (`sync`, sorted): what it waits for and how long it took once it could
    finish.  Partners are shared in groups: the sends of one Wait's receives, the entries one
    collective instance's members await."""
    sync: np.ndarray       # the synchronising events: receive completions and collective ends
    entry: np.ndarray      # [S] the ENTER of the MPI call each is in
    group: np.ndarray      # [S] its partner group, -1 for none
    gstart: np.ndarray     # [G] group g's partners are partner[gstart[g]:gstop[g]]
    gstop: np.ndarray
    partner: np.ndarray
    own: np.ndarray        # [S] seconds from readiness to the event: its own part, counted from its entry
    transfer: np.ndarray   # [S] seconds from the latest partner to the event


def _dependences(ctx: ReplayContext) -> _Deps:
    """Every receive completion and collective end, with its partners and its two durations."""
    t = ctx.time
    owner = ctx.nest.owner
    m = ctx.msgs
    # receives: a call completing several (a Waitall) waits for all their sends; one group per call
    calls = owner[m.recv_evt]
    order = np.argsort(calls, kind="stable")
    call_sorted = calls[order]
    heads = np.flatnonzero(np.r_[True, call_sorted[1:] != call_sorted[:-1]]) if len(calls) else np.zeros(0, np.int64)
    gstart = [heads]
    gstop = [np.r_[heads[1:], len(calls)].astype(np.int64) if len(calls) else heads]
    partners = [m.send_evt[order]]
    sync_ev = [m.recv_evt]
    sync_group = [np.searchsorted(call_sorted[heads], calls)] if len(calls) else [np.zeros(0, np.int64)]
    sync_class = [np.zeros(len(calls), np.int8)]   # 0 receive, 1 collective, 2 one-sided, 3 MPI_Finalize
    base, ngroups = len(calls), len(heads)
    ev_region, ev_peer = ctx.flat.ev["region"], ctx.flat.ev["peer"]
    for ci in ctx.colls:
        ops, ends = ci.op, ci.end_evt                     # [K x M]
        if ops.size == 0:
            continue
        nk, nm = ops.shape
        first_op, first_end = _first_valid(ops), _first_valid(ends)
        region = np.where(first_op >= 0, ev_region[np.maximum(first_op, 0)], -1)
        ckind = np.where(region >= 0, ctx.region_coll_kind[np.maximum(region, 0)], _KIND["nxn"])
        root = np.where(first_end >= 0, ev_peer[np.maximum(first_end, 0)], -1)
        pos_of = {int(r): i for i, r in enumerate(ci.members.tolist())}
        root_pos = np.array([pos_of.get(int(r), -1) for r in root], np.int64)
        q = np.broadcast_to(np.arange(nm), (nk, nm))
        is_root = q == root_pos[:, None]
        root_op = np.where(root_pos >= 0, ops[np.arange(nk), np.maximum(root_pos, 0)], -1)
        one_to_n = (ckind == _KIND["1ton"])[:, None]
        n_to_one = (ckind == _KIND["nto1"])[:, None]
        awaits_root = one_to_n & ~is_root & (root_op >= 0)[:, None]
        awaits_none = (one_to_n & is_root) | (n_to_one & ~is_root) | (one_to_n & ~is_root & (root_op < 0)[:, None])
        awaits_all = ~awaits_root & ~awaits_none
        valid = ends >= 0
        # group per instance: all its entries (awaited by N x N members and N-to-1's root) ...
        counts = (ops >= 0).sum(axis=1)
        all_start = base + np.cumsum(counts) - counts
        partners.append(ops[ops >= 0])                   # row-major: instance by instance
        gstart.append(all_start)
        gstop.append(all_start + counts)
        base += int(counts.sum())
        all_group = ngroups + np.arange(nk)
        ngroups += nk
        # ... and the root's entry (awaited by 1-to-N's other members)
        partners.append(np.maximum(root_op, 0))
        gstart.append(base + np.arange(nk))
        gstop.append(base + np.arange(nk) + 1)
        base += nk
        root_group = ngroups + np.arange(nk)
        ngroups += nk
        grp = np.where(awaits_all, all_group[:, None], np.where(awaits_root, root_group[:, None], -1))
        sync_ev.append(ends[valid])
        sync_group.append(grp[valid])
        sync_class.append(np.ones(int(valid.sum()), np.int8))
    for evs, grp, parts in _rma_dependences(ctx):
        partners.append(parts[0])
        gstart.append(base + parts[1])
        gstop.append(base + parts[2])
        sync_ev.append(evs)
        sync_group.append(ngroups + grp)
        sync_class.append(np.full(len(evs), 2, np.int8))
        base += len(parts[0])
        ngroups += len(parts[1])
    op = patterns.init_exit_calls(ctx, patterns.FINALIZE_NAMES)
    if op is not None:
        # MPI_Finalize synchronises all ranks (they leave it together, as the k-th call's entries
        # show; the clock correction and Wait at Finalize read it so): its end awaits every entry
        nk, nm = op.shape
        ends = ctx.nest.partner[op]
        partners.append(op.ravel())
        gstart.append(base + nm * np.arange(nk))
        gstop.append(base + nm * np.arange(nk) + nm)
        base += op.size
        valid = ends >= 0
        sync_ev.append(ends[valid])
        sync_group.append(np.broadcast_to((ngroups + np.arange(nk))[:, None], (nk, nm))[valid])
        sync_class.append(np.full(int(valid.sum()), 3, np.int8))
        ngroups += nk
    sync = np.concatenate(sync_ev).astype(np.int64)
    group = np.concatenate(sync_group).astype(np.int64)
    klass = np.concatenate(sync_class)
    order = np.argsort(sync, kind="stable")
    sync, group, klass = sync[order], group[order], klass[order]
    gstart_a, gstop_a = np.concatenate(gstart).astype(np.int64), np.concatenate(gstop).astype(np.int64)
    partner = np.concatenate(partners).astype(np.int64)
    entry = owner[sync]
    t_entry = np.where(entry >= 0, t[entry], t[sync])
    # readiness in the trace: the call's entry or its latest partner, whichever came later
    glatest = np.full(len(gstart_a), -np.inf)
    nonempty = np.flatnonzero(gstop_a > gstart_a)
    if len(nonempty):          # the groups tile the partner array in order: one reduceat
        glatest[nonempty] = np.maximum.reduceat(t[partner], gstart_a[nonempty])
    latest = np.where(group >= 0, glatest[np.maximum(group, 0)], -np.inf)
    waited = latest > t_entry
    ready = np.where(waited, latest, t_entry)
    after = np.maximum(t[sync] - ready, 0.0)
    own, transfer = after.copy(), after.copy()
    # The trace shows one of the two parts per call: a call that waited shows the transfer (what
    # followed its latest partner), one that did not its own part (from its entry).  The part not
    # shown is estimated from the calls of the same class that show it, never above what was shown.
    for sel in (klass == 0, klass == 1, klass == 2, klass == 3):
        seen, early = sel & waited, sel & ~waited
        if seen.any() and early.any():
            transfer[early] = np.minimum(after[early], float(np.median(after[seen])))
            own[seen] = np.minimum(after[seen], float(np.median(after[early])))
    return _Deps(sync, entry, group, gstart_a, gstop_a, partner, own, transfer)


def _rma_dependences(ctx: ReplayContext) -> list[tuple]:
    """One-sided synchronisation as partner groups: (synchronising events, their group, (partners,
    group starts, group stops) with positions local to these partners).  The end (EXIT) of every
    MPI_Win_fence awaits the entries of that fence instance on all ranks (the k-th fence of each rank
    on a window); MPI_Win_start and MPI_Win_complete of an access epoch await the MPI_Win_post of
    every exposure epoch they access (Late Post), MPI_Win_wait of an exposure epoch awaits the
    MPI_Win_complete of every access epoch accessing it (Early Wait).  Locks stay local."""
    from scalgraph.trace import rma_epochs as re_
    kind = ctx.flat.ev["kind"]
    if not ((kind >= tm.RMA_PUT) & (kind <= tm.RMA_SYNC)).any():
        return []
    tb = re_.tables(ctx, {})
    exit_of = ctx.nest.partner
    out = []
    fence = np.flatnonzero(tb.call_code == re_.FENCE)
    if len(fence):
        op = tb.call_op[fence]
        key_rank = ctx.flat.rank[op].astype(np.int64) * (len(tb.wins) + 1) + tb.call_win[fence]
        order = np.lexsort((op, key_rank))
        ks = key_rank[order]
        heads = np.r_[True, ks[1:] != ks[:-1]]
        ordinal = np.arange(len(ks)) - np.maximum.accumulate(np.where(heads, np.arange(len(ks)), 0))
        inst = tb.call_win[fence][order] * (len(fence) + 1) + ordinal      # (window, k-th fence)
        by = np.argsort(inst, kind="stable")
        inst_s = inst[by]
        ih = np.flatnonzero(np.r_[True, inst_s[1:] != inst_s[:-1]])
        parts = op[order][by]
        grp = np.empty(len(fence), np.int64)
        grp[by] = np.cumsum(np.r_[True, inst_s[1:] != inst_s[:-1]]) - 1
        ends = exit_of[op[order]]
        ok = ends >= 0
        out.append((ends[ok], grp[ok], (parts, ih, np.r_[ih[1:], len(parts)])))
    acc, exp = tb.access, tb.exposure
    if len(tb.pair_access):
        # Late Post: an access epoch's start and complete await the posts of its exposure epochs
        by = np.argsort(tb.pair_access, kind="stable")
        pa = tb.pair_access[by]
        heads = np.flatnonzero(np.r_[True, pa[1:] != pa[:-1]])
        parts = exp.first[tb.pair_exposure[by]]
        epochs = pa[heads]
        evs = np.r_[exit_of[acc.first[epochs]], exit_of[acc.last[epochs]]]
        grp = np.r_[np.arange(len(epochs)), np.arange(len(epochs))]
        ok = evs >= 0
        out.append((evs[ok], grp[ok], (parts, heads, np.r_[heads[1:], len(parts)])))
        # Early Wait: an exposure epoch's wait awaits the completes of the access epochs accessing it
        by = np.argsort(tb.pair_exposure, kind="stable")
        px = tb.pair_exposure[by]
        heads = np.flatnonzero(np.r_[True, px[1:] != px[:-1]])
        parts = acc.last[tb.pair_access[by]]
        evs = exit_of[exp.last[px[heads]]]
        ok = evs >= 0
        out.append((evs[ok], np.arange(len(heads))[ok], (parts, heads, np.r_[heads[1:], len(parts)])))
    return out


def _first_valid(a: np.ndarray) -> np.ndarray:
    """Per row of a [K x M] table of event indices (-1: none), the first valid one, else -1."""
    valid = a >= 0
    pick = a[np.arange(len(a)), valid.argmax(axis=1)]
    return np.where(valid.any(axis=1), pick, -1)


def _shortened_prefix_sums(ctx: ReplayContext, callpaths: list[int], fraction: np.ndarray) -> np.ndarray:
    """[n + 1] prefix sums of the gaps between events, each gap spent in `callpaths` on rank r cut by
    fraction[r]: built in place, rank by rank (no full-size temporaries), summed in one pass."""
    P = np.empty(ctx.nevents + 1)
    P[0] = 0.0
    ctx.gap_into(P[1:])
    cps = np.asarray(callpaths, np.int64)
    off, cp_after = ctx.flat.offsets, ctx.nest.cp_after
    for r in np.flatnonzero(fraction > 0).tolist():
        seg = P[1 + off[r]:1 + off[r + 1]]
        seg[np.isin(cp_after[off[r]:off[r + 1]], cps)] *= 1.0 - fraction[r]
    np.cumsum(P[1:], out=P[1:])
    return P


@returns_freed_memory(before=True)
def retime(ctx: ReplayContext, callpaths: list[int], fraction: np.ndarray) -> Retimed:
    """Re-time the trace with the exclusive time of `callpaths` on rank r cut by fraction[r]."""
    t = ctx.time
    n = len(t)
    off = ctx.flat.offsets
    d = _dependences(ctx)
    # Anchors: each rank's first event and every synchronising event.  Between anchors an event's new
    # time is its anchor's plus the (shortened) gaps since (prefix sums P): only anchors are solved,
    # in rounds that advance every rank whose next anchor's partners are all placed.  The full-size
    # arrays are P (which becomes the result) and each event's anchor (int32 where it fits).
    P = _shortened_prefix_sums(ctx, callpaths, fraction)
    nonempty = np.flatnonzero(off[1:] > off[:-1])
    firsts = off[:-1][nonempty]
    is_anchor = np.zeros(n, bool)
    is_anchor[d.sync] = True
    is_anchor[firsts] = True
    anchors = np.flatnonzero(is_anchor)
    anc = np.cumsum(is_anchor, dtype=np.int32 if n < 2**31 else np.int64)
    anc -= 1                                                # each event's anchor (position in anchors)
    del is_anchor
    na = len(anchors)
    base = P[anchors]
    ng = len(d.gstart)
    # per anchor: its partner group (ng: none), its entry's anchor, and (a_par, one gather per round)
    # the entry's offset from that anchor, own part, transfer, and the offset of the event before it
    # from that event's anchor.  Each rank's first anchor is placed at its own time, never solved: it
    # blocks (group ng + 1, never ready) the rank before it once that one is done; the extra slot na
    # blocks the last rank.
    a_group = np.full(na + 1, ng, np.int64)
    a_par = np.zeros((na, 4))
    s_pos = anc[d.sync]
    a_group[s_pos] = np.where(d.group >= 0, d.group, ng)
    a_par[s_pos, 1] = d.own
    a_par[s_pos, 2] = d.transfer
    a_prev = np.maximum(anchors - 1, 0)
    a_par[:, 3] = P[a_prev] - base[np.maximum(anc[a_prev], 0)]
    del a_prev
    a_entpos = np.arange(na) - 1
    a_par[:, 0] = a_par[:, 3]
    inside = d.entry >= 0                                # (a completion outside every call: no entry)
    a_entpos[s_pos[inside]] = anc[d.entry[inside]]
    a_par[s_pos[inside], 0] = P[d.entry[inside]] - base[anc[d.entry[inside]]]
    first_pos = anc[firsts]
    a_group[first_pos] = ng + 1
    a_group[na] = ng + 1
    # partners: each resolves when its anchor is solved; a group is ready when none remains
    gsize = d.gstop - d.gstart
    p_anc = anc[d.partner]
    by_anchor = np.argsort(p_anc, kind="stable")         # partners in anchor order: a range per anchor
    ps_anc = p_anc[by_anchor]
    ps_off = P[d.partner[by_anchor]] - base[ps_anc]
    ps_group = np.repeat(np.arange(ng), gsize)[by_anchor]    # the groups tile the partner array in order
    del p_anc, by_anchor, d, anchors, s_pos, inside     # the per-event dependences are all in the tables now
    e_lo = np.searchsorted(ps_anc, np.arange(na), "left")
    e_len = np.searchsorted(ps_anc, np.arange(na), "right") - e_lo
    remaining = np.r_[gsize, 0, 1].astype(np.int64)
    gval = np.full(ng + 2, -np.inf)
    new_a = np.full(na, np.nan)
    new_a[first_pos] = t[firsts]
    todo = na - len(first_pos)
    left = native.retime_rounds(first_pos, todo, new_a, a_group, a_par, a_entpos, e_lo, e_len, ps_off, ps_group,
                               remaining, gval)
    if left is None:                                     # no C compiler: the same rounds in numpy
        left = _rounds_numpy(first_pos, todo, new_a, a_group, a_par, a_entpos, e_lo, e_len, ps_anc, ps_off,
                             ps_group, remaining, gval)
    if left:
        raise RuntimeError("trace re-timing found a cycle of dependences; the trace's matching is inconsistent")
    new = P[:n]                  # in place, rank by rank: the anchor's new time plus the distance from it
    for r in nonempty.tolist():
        a, seg = anc[off[r]:off[r + 1]], new[off[r]:off[r + 1]]
        seg -= base[a]
        seg += new_a[a]
    last = off[1:][nonempty] - 1
    return Retimed(new, float(t[last].max() - t[firsts].min()), float(new[last].max() - new[firsts].min()))


def _rounds_numpy(first_pos, todo, new_a, a_group, a_par, a_entpos, e_lo, e_len, ps_anc, ps_off, ps_group,
                  remaining, gval) -> int:
    """Solve the anchors (new_a, in place) in rounds that advance every rank whose next anchor's
    partners are all placed; the fallback of native.retime_rounds (kernels.c), same values.
    Returns the number of anchors left unsolved (non-zero: a cycle of dependences)."""
    def place(ks):                                       # partners anchored at the solved anchors ks
        lens = e_len[ks]                                 # (array methods: no wrappers, ~10^4 rounds)
        ends = lens.cumsum()
        if not len(ends) or not ends[-1]:
            return
        idx = (e_lo[ks] - (ends - lens)).repeat(lens)
        idx += np.arange(ends[-1])
        g = ps_group[idx]
        np.subtract.at(remaining, g, 1)
        np.maximum.at(gval, g, new_a[ps_anc[idx]] + ps_off[idx])

    place(first_pos)
    ptr = first_pos + 1                                  # per rank: its next anchor to solve
    while todo:
        g = a_group[ptr]
        sel = (remaining[g] == 0).nonzero()[0]
        if not len(sel):
            return todo
        every = len(sel) == len(ptr)                     # (the common case: no gathers by sel)
        k, g = (ptr.copy(), g) if every else (ptr[sel], g[sel])
        par = a_par[k]
        value = np.maximum(new_a[a_entpos[k]] + par[:, 0] + par[:, 1], gval[g] + par[:, 2])
        new_a[k] = np.maximum(value, new_a[k - 1] + par[:, 3])
        if every:
            ptr += 1
        else:
            ptr[sel] = k + 1
        todo -= len(k)
        place(k)
    return 0


def whatif_for_callpaths(ctx: ReplayContext, excl: np.ndarray, callpaths: list[int],
                         share: float | None = None) -> dict:
    """The trace-mode what-if of fixing `callpaths`: their excess over the median rank removed, or,
    at a scale other than the diagnosis scale, the share of their time the diagnosis removed there
    (`share`, its `extra_share`; model/fix.py)."""
    cps = np.asarray(callpaths, np.int64)
    per_rank = excl[cps].sum(axis=0) if len(cps) else np.zeros(ctx.nranks)
    frac = shrink_fractions(ctx, excl, callpaths, None if share is None else fix_level(per_rank, share))
    res = retime(ctx, callpaths, frac)
    gain_share = res.gain / res.run_length if res.run_length > 0 else 0.0
    return {"method": "trace re-timing", "run_length": res.run_length, "fixed_run_length": res.fixed_run_length,
            "gain": res.gain, "gain_share": gain_share, "typical_seconds": typical(per_rank),
            "extra_share": extra_share(per_rank),
            "ranks_shortened": {str(r): float(f) for r, f in enumerate(frac.tolist()) if f > 0}}


def whatif_at_scales(root_causes: list[dict], traces: dict, big: int, spans: dict | None = None) -> None:
    """An experiment's other traced scales (`traces`: p -> clock-corrected Trace; `big`: the scale the
    causes were diagnosed at): each cause's fix re-timed at every scale, the fix being the diagnosis
    scale's (the share of the cause's time the late ranks had there beyond the typical rank, removed
    at p too; model/fix.py).  At a smaller scale every rank may run the cause (zeusmp's boundary loop
    on both ranks at p=2), and it may not be a verdict cause there at all.
    Adds whatif["by_scale"] = {p: {"gain", "run_length"}}."""
    from scalgraph.trace.forward import build_context, exclusive_time
    from scalgraph.trace.matching import callpath_names
    causes = [c for c in root_causes if c.get("whatif") and c["whatif"].get("fixed_callpaths")]
    for c in causes:
        w = c["whatif"]
        w["scale"] = big
        w["by_scale"] = {str(big): {"gain": w["gain"], "run_length": w["run_length"]}}
    for p, trace in sorted(traces.items()):
        if p == big or not causes:
            continue
        ctx = build_context(trace)
        excl = exclusive_time(ctx)
        ids = {n: i for i, n in enumerate(callpath_names(ctx.nest, ctx.trace.regions))}
        for c in causes:
            w = c["whatif"]
            cps = fixed_callpaths(ctx, [ids[n] for n in w["fixed_callpaths"] if n in ids], spans)
            at = whatif_for_callpaths(ctx, excl, cps, w.get("extra_share", 0.0))
            w["by_scale"][str(p)] = {"gain": at["gain"], "run_length": at["run_length"]}


def whatif_across_experiment(root_causes: list[dict], experiment: str, analysed: str,
                             clock_correction: bool = True, params=None, spans: dict | None = None) -> None:
    """`scalgraph trace EXP`: after the largest traced scale (`analysed`, its trace file), re-time the
    first repetition of every other traced scale with each cause fixed (whatif_at_scales)."""
    import pathlib
    import re
    from scalgraph.io.trace_read import read_trace
    here = pathlib.Path(analysed)
    m = re.fullmatch(r"scale-(\d+)", here.parent.parent.name)
    if m is None or not any(c.get("whatif") for c in root_causes):
        return
    traces = {}
    for t in sorted(pathlib.Path(experiment).glob("scale-*/rep-0/trace.sgtrace")):
        q = re.fullmatch(r"scale-(\d+)", t.parent.parent.name)
        if q is None or t == here:
            continue
        trace = read_trace(str(t))
        if clock_correction:
            from scalgraph.trace.clock import ClockParams, correct_clocks
            trace, _ = correct_clocks(trace, params or ClockParams())
        traces[int(q.group(1))] = trace
    whatif_at_scales(root_causes, traces, int(m.group(1)), spans)



def fixed_callpaths(ctx: ReplayContext, cps: list[int], spans: dict | None = None) -> list[int]:
    """The call paths a fix of `cps` shortens: the cause's own, those of regions whose source lines lie
    inside the cause's lines (`spans`: PSG vertex -> (file, first line, last line); an inlined copy of
    the same loop nest with another shape), and every call path nested below any of them."""
    regions = ctx.trace.regions
    cp_region, cp_parent = ctx.nest.cp_region, ctx.nest.cp_parent
    chosen = np.zeros(len(cp_region), bool)
    chosen[cps] = True
    if spans:
        outer = [spans[regions[cp_region[c]].vertex] for c in cps if regions[cp_region[c]].vertex in spans]
        for c in range(len(cp_region)):
            reg = regions[cp_region[c]]
            if reg.is_mpi or reg.vertex not in spans:
                continue
            f, lo, hi = spans[reg.vertex]
            if any(f == of and olo <= lo and hi <= ohi for of, olo, ohi in outer):
                chosen[c] = True
    # descendants: call paths are numbered after their parents, so one pass in order suffices
    for c in range(len(cp_region)):
        if not chosen[c] and cp_parent[c] >= 0 and chosen[cp_parent[c]] and not regions[cp_region[c]].is_mpi:
            chosen[c] = True
    return np.flatnonzero(chosen).tolist()


def add_whatif(root_causes: list[dict], fwd, spans: dict | None = None) -> None:
    """Give each verdict cause (trace/verdict.py entries, `callpaths` by name) its trace-mode what-if."""
    from scalgraph.trace.matching import callpath_names
    names = callpath_names(fwd.ctx.nest, fwd.ctx.trace.regions)
    ids = {n: i for i, n in enumerate(names)}
    own = [[ids[n] for n in cause.get("callpaths", []) if n in ids] for cause in root_causes]
    for i, cause in enumerate(root_causes):
        cps = list(own[i])
        for j, other in enumerate(root_causes):      # another verdict line for the same loop nest
            if j != i and _nested_either_way(cause, other, spans):
                cps += own[j]
        if cps:
            fixed = fixed_callpaths(fwd.ctx, cps, spans)
            cause["whatif"] = whatif_for_callpaths(fwd.ctx, fwd.excl_time, fixed)
            cause["whatif"]["fixed_callpaths"] = [names[c] for c in fixed]


def _nested_either_way(a: dict, b: dict, spans: dict | None) -> bool:
    """Two verdict causes whose source lines nest (an inlined copy of one loop nest can be a LOOP at
    29-31 on one rank and a COMP at 30-31 on another): fixing the code fixes both."""
    if not spans or a.get("vertex") not in spans or b.get("vertex") not in spans:
        return False
    fa, la, ha = spans[a["vertex"]]
    fb, lb, hb = spans[b["vertex"]]
    return fa == fb and ((la <= lb and hb <= ha) or (lb <= la and ha <= hb))


def whatif_line(cause: dict) -> str:
    """'fixing cg.c:21 saves 2.1 s of 4.4 s (48 %) of the run'"""
    w = cause["whatif"]
    place = (f"{pathlib.Path(cause['file']).name}:{cause['line']}" if cause.get("file")
             else ", ".join(cause.get("callpaths", [])))
    others = sorted((int(p), v) for p, v in w.get("by_scale", {}).items() if int(p) != w.get("scale"))
    at = "".join(f", p={p}: {v['gain']:.3g} s of {v['run_length']:.3g} s" for p, v in others)
    return (f"fixing {place} saves {w['gain']:.3g} s of "
            f"{w['run_length']:.3g} s ({100 * w['gain_share']:.0f} % of the run; trace re-timing){at}")
