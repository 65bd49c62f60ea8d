"""What-if, trace mode: re-time a trace with some computation shortened, keeping the event order.

Like Scalasca's re-enactment, but over our own replay context: each rank's events keep their order
and their own durations; only the waiting is recomputed from the partners' new times.  An event's new
time is the previous event's new time plus the gap between them (shortened where the gap is spent
in a shortened call path on that rank), except at the events that waited for another rank:

* a receive completing (RECV, or IRECV in the Wait/Waitall/Test that completes it), in the MPI call
  entered at a (MPI_Recv or the Wait), whose receives were sent at s_1..s_k: the call waited until
  the last of them was sent (or not at all), then took t_e - max(t_a, t_s1..t_sk) to finish.  New:
      t'_e = max(t'_a, t'_s1, ..., t'_sk) + (t_e - max(t_a, t_s1, ..., t_sk))
  (a multi-completion stamps all its completions at its end: it waits for its latest message).
* a collective's end (COLL_END) in instance k, entered at a_q by member q:
      N x N, barrier, scan:  t'_e = max_q t'_{a_q} + (t_e - max_q t_{a_q})   (everyone waits for the last)
      1 to N, non-root:      waits for the root's entry likewise;  the root does not wait
      N to 1, root:          waits for every member;               the others do not wait
  (the part after the last awaited entry, the collective's own work, is kept; never negative.)

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


def retime(ctx: ReplayContext, callpaths: list[int], fraction: np.ndarray) -> Retimed:
    """Re-time the trace with the exclusive time of `callpaths` on rank r cut by fraction[r]."""
    t = ctx.time
    n = len(t)
    rank = ctx.flat.rank
    off = ctx.flat.offsets
    cut = np.isin(ctx.nest.cp_after, np.asarray(callpaths, np.int64)) & (fraction[rank] > 0)
    gap = ctx.gap * np.where(cut, 1.0 - fraction[rank], 1.0)

    # the events that wait for another rank, and what they wait for
    dep_kind = np.zeros(n, np.int8)                 # 0 local, 1 receive completion, 2 collective end
    m = ctx.msgs
    dep_kind[m.recv_evt] = 1
    enter_of = ctx.nest.owner                       # the MPI call each completion is in
    sends_of_call: dict[int, list[int]] = {}        # call ENTER -> the sends its receives complete
    for e, snd in zip(m.recv_evt.tolist(), m.send_evt.tolist()):
        sends_of_call.setdefault(int(enter_of[e]), []).append(snd)
    coll_of: dict[int, tuple[np.ndarray, int, int]] = {}    # COLL_END -> (member op ENTERs, kind, root pos)
    for ci in ctx.colls:
        for k in range(ci.end_evt.shape[0]):
            ops = ci.op[k]
            ends = ci.end_evt[k]
            region = ctx.flat.ev["region"][ops[0]] if ops[0] >= 0 else -1
            kind = int(ctx.region_coll_kind[region]) if region >= 0 else _KIND["nxn"]
            root = int(ctx.flat.ev["peer"][ends[0]])
            root_pos = int(np.flatnonzero(ci.members == root)[0]) if root in set(ci.members.tolist()) else -1
            for q, e in enumerate(ends.tolist()):
                dep_kind[e] = 2
                coll_of[e] = (ops, kind, q if root_pos < 0 else root_pos)
    new = np.empty(n)
    done = np.zeros(n, bool)
    sync = [np.flatnonzero(dep_kind[off[r]:off[r + 1]]) + off[r] for r in range(ctx.nranks)]
    cursor = off[:-1].copy()
    nxt = [0] * ctx.nranks
    remaining = int(sum(off[r + 1] - off[r] > 0 for r in range(ctx.nranks)))
    finished = [off[r + 1] == off[r] for r in range(ctx.nranks)]
    while remaining:
        progressed = False
        for r in range(ctx.nranks):
            if finished[r]:
                continue
            while True:
                c = int(cursor[r])
                stop = int(sync[r][nxt[r]]) if nxt[r] < len(sync[r]) else int(off[r + 1])
                if c < stop:                       # a local stretch: one cumulative sum
                    base = new[c - 1] if c > off[r] else t[c]
                    first = c if c > off[r] else c + 1
                    if c == off[r]:
                        new[c] = t[c]
                    if stop > first:
                        new[first:stop] = base + np.cumsum(gap[first - 1:stop - 1])
                    done[c:stop] = True
                    cursor[r] = stop
                    progressed = True
                if stop == off[r + 1]:
                    finished[r] = True
                    remaining -= 1
                    break
                value = _sync_time(stop, dep_kind[stop], t, new, done, sends_of_call, enter_of, coll_of)
                if value is None:
                    break                          # a partner is not there yet
                prev = new[stop - 1] if stop > off[r] else value
                new[stop] = max(value, prev)
                done[stop] = True
                cursor[r] = stop + 1
                nxt[r] += 1
                progressed = True
        if not progressed:
            raise RuntimeError("trace re-timing found a cycle of dependences; the trace's matching is inconsistent")
    nonempty = [r for r in range(ctx.nranks) if off[r + 1] > off[r]]
    first = np.array([off[r] for r in nonempty])
    last = np.array([off[r + 1] - 1 for r in nonempty])
    return Retimed(new, float(t[last].max() - t[first].min()), float(new[last].max() - new[first].min()))


def _sync_time(e: int, kind: int, t, new, done, sends_of_call, enter_of, coll_of) -> float | None:
    if kind == 1:
        a = int(enter_of[e])
        sends = sends_of_call[a]
        if not all(done[s] for s in sends):
            return None
        ready_old = max(t[a], max(t[s] for s in sends))
        return max(new[a], max(new[s] for s in sends)) + max(t[e] - ready_old, 0.0)
    ops, ckind, root = coll_of[e]
    if not all(done[o] for o in ops.tolist() if o >= 0):
        return None
    q = int(np.flatnonzero(ops == enter_of[e])[0]) if enter_of[e] in ops else root
    mine = int(ops[q])
    if ckind == _KIND["1ton"] and q != root:
        awaited = [mine, int(ops[root])]
    elif ckind == _KIND["nto1"] and q != root:
        awaited = [mine]
    elif ckind == _KIND["1ton"]:
        awaited = [mine]
    else:                                          # N x N, barrier, scan, N to 1 at the root
        awaited = [int(o) for o in ops.tolist() if o >= 0]
    last_old = max(t[o] for o in awaited)
    return max(new[o] for o in awaited) + max(t[e] - last_old, 0.0)


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
