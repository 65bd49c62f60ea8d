"""What-if, trace mode: re-time a trace with some computation shortened, keeping the event order.

Like Scalasca's re-enactment, but over our own replay context: each rank's events keep their order
and their own durations; only the waiting is recomputed from the partners' new times.  An event's new
time is the previous event's new time plus the gap between them (shortened where the gap is spent
in a shortened call path on that rank), except at the events that waited for another rank:

* a receive completing (RECV, or IRECV in the Wait/Waitall/Test that completes it), in the MPI call
  entered at a (MPI_Recv or the Wait), whose receives were sent at s_1..s_k; the call was ready at
  r = max(t_a, t_s1..t_sk) and took d = t_e - r after that.  New:
      t'_e = max(t'_a + d, max_i t'_si + x)
  where x = d when the call waited for its last message (the time after the send is what the trace
  shows the transfer takes), and x = min(d, the median d of the receives that waited) when it did not
  (the trace shows that call's own part only, counted from its entry; when the fix makes its partner
  late, the own part and the waiting overlap instead of adding up).  A multi-completion stamps all
  its completions at its end: it waits for its latest message.
* a collective's end (COLL_END) in instance k, entered at a_q by member q, likewise over the entries
  it awaits:
      N x N, barrier, scan:  every member's entry            (everyone waits for the last)
      1 to N, non-root:      the root's entry;               the root awaits nobody
      N to 1, root:          every member's entry;           the others await nobody
  (the part after the last awaited entry, the collective's own work, is kept; never negative.)
  With nothing shortened every event keeps its time.

Sends are taken as not waiting (eager delivery: a Late Receiver's sender keeps its original
duration), and one-sided operations as local; both are documented limits.  The dependences point
backwards along the program's causal order, so a round-robin over the ranks that advances each as far
as its partners allow always finishes; local stretches are re-timed with one cumulative sum each.
"""
from __future__ import annotations

import pathlib
from dataclasses import dataclass

import numpy as np

from scalgraph.trace import patterns
from scalgraph.trace.forward import ReplayContext

_KIND = {k: patterns.COLL_KINDS.index(k) for k in patterns.COLL_KINDS}


@dataclass
class Retimed:
    time: np.ndarray          # new time of every (flat) event
    run_length: float         # original: last event - first event over all ranks
    fixed_run_length: float   # after re-timing

    @property
    def gain(self) -> float:
        return max(self.run_length - self.fixed_run_length, 0.0)


def shrink_fractions(ctx: ReplayContext, excl: np.ndarray, callpaths: list[int]) -> np.ndarray:
    """[R] fraction of the given call paths' exclusive time each rank loses when fixed: its time
    there brought down to the (lower) median rank's."""
    cps = np.asarray(callpaths, np.int64)
    per_rank = excl[cps].sum(axis=0) if len(cps) else np.zeros(ctx.nranks)
    if per_rank.size == 0:
        return per_rank
    ref = np.quantile(per_rank, 0.5, method="lower")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(per_rank > ref, 1.0 - ref / np.where(per_rank > 0, per_rank, 1.0), 0.0)


@dataclass
class _Deps:
    """Per synchronising event e (arrays over all events, meaningful where `kind` > 0): what it waits
    for and how long it took once it could finish."""
    kind: np.ndarray       # 0 local, 1 receive completion, 2 collective end
    entry: np.ndarray      # the ENTER of the MPI call e is in
    start: np.ndarray      # e's partners are partner[start[e]:stop[e]] (sends, or awaited members' entries)
    stop: np.ndarray
    partner: np.ndarray
    own: np.ndarray        # seconds from the call's readiness to e: its own part, counted from its entry
    transfer: np.ndarray   # seconds from the latest partner to e


def _dependences(ctx: ReplayContext) -> _Deps:
    t = ctx.time
    n = len(t)
    entry = ctx.nest.owner
    kind = np.zeros(n, np.int8)
    start = np.zeros(n, np.int64)
    stop = np.zeros(n, np.int64)
    m = ctx.msgs
    # receives: a call completing several (a Waitall) waits for all their sends
    calls = entry[m.recv_evt]
    order = np.argsort(calls, kind="stable")
    partner_p2p = m.send_evt[order]
    call_sorted = calls[order]
    first = np.searchsorted(call_sorted, calls, "left")
    last = np.searchsorted(call_sorted, calls, "right")
    kind[m.recv_evt] = 1
    start[m.recv_evt], stop[m.recv_evt] = first, last
    parts = [partner_p2p]
    base = len(partner_p2p)
    ev_region, ev_peer = ctx.flat.ev["region"], ctx.flat.ev["peer"]
    for ci in ctx.colls:
        members = ci.members.tolist()
        for k in range(ci.end_evt.shape[0]):
            ops = ci.op[k]
            ends = ci.end_evt[k]
            region = ev_region[ops[0]] if ops[0] >= 0 else -1
            ckind = int(ctx.region_coll_kind[region]) if region >= 0 else _KIND["nxn"]
            root = int(ev_peer[ends[0]])
            root_pos = members.index(root) if root in members else -1
            present = ops[ops >= 0]
            for q, e in enumerate(ends.tolist()):
                if e < 0:
                    continue
                if ckind == _KIND["1ton"] and q != root_pos and root_pos >= 0 and ops[root_pos] >= 0:
                    awaited = ops[root_pos:root_pos + 1]       # a non-root waits for the root
                elif (ckind == _KIND["1ton"] and q == root_pos) or (ckind == _KIND["nto1"] and q != root_pos):
                    awaited = present[:0]                       # the root of 1-to-N, a sender of N-to-1
                else:                                           # N x N, barrier, scan, N-to-1's root
                    awaited = present
                kind[e] = 2
                start[e], stop[e] = base, base + len(awaited)
                parts.append(awaited)
                base += len(awaited)
    partner = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    sync = np.flatnonzero(kind)
    # readiness in the trace: the call's entry or its latest partner, whichever came later
    latest = np.full(n, -np.inf)
    if len(partner):
        nonempty = sync[stop[sync] > start[sync]]
        idx = np.repeat(nonempty, stop[nonempty] - start[nonempty])
        np.maximum.at(latest, idx, t[partner[_ranges(start[nonempty], stop[nonempty])]])
    waited = np.zeros(n, bool)
    waited[sync] = latest[sync] > t[entry[sync]]
    ready = np.where(waited, latest, t[entry])
    own = np.zeros(n)
    own[sync] = np.maximum(t[sync] - ready[sync], 0.0)
    # A call that did not wait shows only its own part, counted from its entry.  How long a transfer
    # takes after its partner's send (or last entry) is what the calls that waited show: their median.
    # When the fix makes such a partner late, the call's own part and the waiting overlap.
    transfer = own.copy()
    for k in (1, 2):
        of_kind = sync[kind[sync] == k]
        seen = of_kind[waited[of_kind]]
        if len(seen):
            typical = float(np.median(own[seen]))
            early = of_kind[~waited[of_kind]]
            transfer[early] = np.minimum(own[early], typical)
    return _Deps(kind, entry, start, stop, partner, own, transfer)


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenated index ranges lo[i]:hi[i]."""
    lengths = hi - lo
    heads = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum())) - np.repeat(heads - lo, lengths)


def retime(ctx: ReplayContext, callpaths: list[int], fraction: np.ndarray) -> Retimed:
    """Re-time the trace with the exclusive time of `callpaths` on rank r cut by fraction[r]."""
    t = ctx.time
    rank = ctx.flat.rank
    off = ctx.flat.offsets
    cut = np.isin(ctx.nest.cp_after, np.asarray(callpaths, np.int64)) & (fraction[rank] > 0)
    gap = ctx.gap * np.where(cut, 1.0 - fraction[rank], 1.0)
    deps = _dependences(ctx)
    new = np.empty(len(t))
    nranks = ctx.nranks
    sync = [np.flatnonzero(deps.kind[off[r]:off[r + 1]]) + off[r] for r in range(nranks)]
    cursor = off[:-1].copy()            # rank r's events before cursor[r] have their new times
    nxt = [0] * nranks
    finished = [off[r + 1] == off[r] for r in range(nranks)]
    remaining = nranks - sum(finished)
    kind, entry, start, stop, partner = deps.kind, deps.entry, deps.start, deps.stop, deps.partner
    own, transfer = deps.own, deps.transfer
    while remaining:
        progressed = False
        for r in range(nranks):
            if finished[r]:
                continue
            while True:
                c = int(cursor[r])
                stop_at = int(sync[r][nxt[r]]) if nxt[r] < len(sync[r]) else int(off[r + 1])
                if c < stop_at:                       # a local stretch: one cumulative sum
                    if c == off[r]:
                        new[c] = t[c]
                        c += 1
                    if stop_at > c:
                        new[c:stop_at] = new[c - 1] + np.cumsum(gap[c - 1:stop_at - 1])
                    cursor[r] = stop_at
                    progressed = True
                if stop_at == off[r + 1]:
                    finished[r] = True
                    remaining -= 1
                    break
                e = stop_at
                ps = partner[start[e]:stop[e]]
                if len(ps) and (ps >= cursor[rank[ps]]).any():
                    break                          # a partner is not there yet
                value = new[entry[e]] + own[e]
                if len(ps):
                    value = max(value, new[ps].max() + transfer[e])
                new[e] = max(value, new[e - 1]) if e > off[r] else value
                cursor[r] = e + 1
                nxt[r] += 1
                progressed = True
        if not progressed:
            raise RuntimeError("trace re-timing found a cycle of dependences; the trace's matching is inconsistent")
    nonempty = [r for r in range(nranks) if off[r + 1] > off[r]]
    first = np.array([off[r] for r in nonempty])
    last = np.array([off[r + 1] - 1 for r in nonempty])
    return Retimed(new, float(t[last].max() - t[first].min()), float(new[last].max() - new[first].min()))


def whatif_for_callpaths(ctx: ReplayContext, excl: np.ndarray, callpaths: list[int]) -> dict:
    """The trace-mode what-if of fixing `callpaths` (their excess over the median rank removed)."""
    frac = shrink_fractions(ctx, excl, callpaths)
    res = retime(ctx, callpaths, frac)
    share = res.gain / res.run_length if res.run_length > 0 else 0.0
    return {"method": "trace re-timing", "run_length": res.run_length, "fixed_run_length": res.fixed_run_length,
            "gain": res.gain, "gain_share": share,
            "ranks_shortened": {str(r): float(f) for r, f in enumerate(frac.tolist()) if f > 0}}



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
    ids = {n: i for i, n in enumerate(callpath_names(fwd.ctx.nest, fwd.ctx.trace.regions))}
    own = [[ids[n] for n in cause.get("callpaths", []) if n in ids] for cause in root_causes]
    for i, cause in enumerate(root_causes):
        cps = list(own[i])
        for j, other in enumerate(root_causes):      # another verdict line for the same loop nest
            if j != i and _nested_either_way(cause, other, spans):
                cps += own[j]
        if cps:
            cause["whatif"] = whatif_for_callpaths(fwd.ctx, fwd.excl_time, fixed_callpaths(fwd.ctx, cps, spans))


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
    return (f"fixing {place} saves {w['gain']:.3g} s of "
            f"{w['run_length']:.3g} s ({100 * w['gain_share']:.0f} % of the run; trace re-timing)")
