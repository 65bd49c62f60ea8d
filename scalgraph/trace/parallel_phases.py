"""The three phases of the parallel replay, each run by every analysis process on its own ranks with
the serial engine's functions, and the data they exchange (seed 000 §5):

forward     the serial pattern evaluators on the partial trace (parallel_partial.py); only the wait
            states of own ranks are kept.  Nothing else is exchanged: the skeleton already carries
            the partner timestamps.
backward    delay costs: the waiter's process computes its processing profile over its
            synchronisation interval and sends it, with ω and the causer's call, to the causer's
            process (one alltoall); that process computes Δ, the scale s, the short-term costs and
            the rows of M (its own waits inside the causer's interval).  Long-term costs need Γ =
            M (ω + Γ), a chain across all ranks: every process sends only its per-wait (ω, end time)
            and its entries of M to process 0, which solves the sparse triangular system with the
            serial solver and returns each process the Γ values it asked for.
critical    the walk hands a token (rank, time, step) from process to process whenever the path
            path        jumps to a rank of another block; each process profiles its own segments.
"""
from __future__ import annotations

import numpy as np

from scalgraph.model import trace as tm
from scalgraph.trace import delay, patterns, waitops
from scalgraph.trace.critical_path import CriticalPath, activity_time, finalize_regions, performance_impact
from scalgraph.trace.parallel_partial import Partial

NPAT = len(patterns.PATTERNS)
_MSG_PATTERNS = {patterns.PATTERN_INDEX[k] for k in ("late_sender", "late_sender_wrong_order",
                                                     "late_sender_wrong_order_different",
                                                     "late_sender_wrong_order_same")}
_LATE_RECEIVER = patterns.PATTERN_INDEX["late_receiver"]
_COLL_PATTERNS = {patterns.PATTERN_INDEX[k] for k in ("early_reduce", "early_scan", "late_broadcast", "wait_nxn",
                                                      "nxn_completion", "wait_barrier", "barrier_completion")}


def to_global(arr: np.ndarray, part: Partial, cpmap: np.ndarray, ncp: int) -> np.ndarray:
    """[..., partial call path, rank] -> [..., global call path, rank], own ranks' columns only."""
    out = np.zeros(arr.shape[:-2] + (ncp, part.nranks))
    used = np.flatnonzero(cpmap[:arr.shape[-2]] >= 0)
    out[..., cpmap[used], part.lo:part.hi] = arr[..., used, part.lo:part.hi]
    return out


def wait_ids(part: Partial, waits: np.ndarray) -> np.ndarray:
    """A global name for each wait state: (serial index of its call, pattern)."""
    return part.serial[waits["op"]] * NPAT + waits["pattern"]


def order_keys(part: Partial, rows: np.ndarray) -> np.ndarray:
    """[n, 6] keys whose lexicographic order is the serial engine's row order: pattern, then the
    message order of matching.match_messages (src, dst, tag, comm, send) or the collective order of
    match_collectives (comm, instance, member column); one-sided rows by their call, which is the
    serial order only up to ties among equal waits."""
    ctx, m = part.ctx, part.ctx.msgs
    keys = np.zeros((len(rows), 6), np.int64)
    keys[:, 0] = rows["pattern"]
    n1 = ctx.nevents + 1
    is_msg = np.isin(rows["pattern"], list(_MSG_PATTERNS))
    is_lr = rows["pattern"] == _LATE_RECEIVER
    for sel, a, b in ((is_msg, m.recv_op, m.send_op), (is_lr, m.send_op, m.post_op)):
        if not np.any(sel) or len(m) == 0:
            continue
        mk = (a + 1) * n1 + (b + 1)
        order = np.argsort(mk, kind="stable")
        q = (rows["op"][sel] + 1) * n1 + (rows["causer_op"][sel] + 1)
        j = order[np.minimum(np.searchsorted(mk[order], q), len(order) - 1)]
        keys[sel, 1:] = np.stack((m.src[j], m.dst[j], m.tag[j], m.comm[j], part.serial[m.send_evt[j]]), axis=1)
    coll = np.isin(rows["pattern"], list(_COLL_PATTERNS))
    other = ~(is_msg | is_lr | coll)
    keys[other, 1] = part.serial[rows["op"][other]]     # one-sided: by the waiting call
    if np.any(coll) and ctx.colls:
        ops = np.concatenate([ci.op.ravel() for ci in ctx.colls])
        info = np.concatenate([np.stack((np.full(ci.op.size, ci.comm),
                                         np.repeat(np.arange(ci.op.shape[0]), ci.op.shape[1]),
                                         np.tile(np.arange(ci.op.shape[1]), ci.op.shape[0])), axis=1)
                               for ci in ctx.colls])
        order = np.argsort(ops, kind="stable")
        j = order[np.minimum(np.searchsorted(ops[order], rows["op"][coll]), len(order) - 1)]
        keys[coll, 1:4] = info[j]
    return keys


# --- forward ---------------------------------------------------------------------------------------

def top_instances(part: Partial, waits: np.ndarray, cpmap: np.ndarray, n: int) -> list[tuple]:
    """Per pattern, this process's n most severe wait states in serial tie order, as plain tuples
    (keys..., wait, rank, enter time, global call path, causer) for the merge on process 0."""
    out = []
    keys = order_keys(part, waits)
    ctx = part.ctx
    for i in range(NPAT):
        sel = np.flatnonzero(waits["pattern"] == i)
        if len(sel) == 0:
            continue
        k = keys[sel]
        best = sel[np.lexsort((*k.T[::-1], -waits["wait"][sel]))[:n]]
        for j, w in zip(np.searchsorted(sel, best), waits[best]):
            out.append((tuple(int(x) for x in k[j]), float(w["wait"]), int(w["rank"]),
                        float(ctx.time[w["op"]]), int(cpmap[ctx.nest.callpath[w["op"]]]), int(w["causer"])))
    return out


# --- backward: delay costs ---------------------------------------------------------------------------

def delay_requests(part: Partial, waits: np.ndarray, cpmap: np.ndarray, nprocs: int,
                   options: delay.DelayOptions = delay.DelayOptions()) -> list[dict]:
    """Waiter side: per causer process, the waits it must explain with the waiter's profiles."""
    ctx, p = part.ctx, part.nranks
    t = ctx.time
    r_rank, d_rank = waits["rank"].astype(np.int64), waits["causer"].astype(np.int64)
    r_end = t[waits["op"]]
    r_start = delay.interval_starts(ctx, waits, r_rank, waits["key"], r_end, options)
    index = delay.wait_index(ctx, waits)
    parts = []
    for lo in range(0, len(waits), delay.CHUNK):        # chunks keep the expanded pieces in cache
        sl = slice(lo, lo + delay.CHUNK)
        (ri, rc, rv), _ = delay.processing_profiles(ctx, waits, r_rank[sl], r_start[sl], r_end[sl], index)
        parts.append((ri + lo, rc, rv))
    ri, rc, rv = delay._concat(parts)
    rc = cpmap[rc]
    d_key = np.where(waits["key"] >= p, waits["key"], r_rank)
    dest = part.owner_of(d_rank)
    out = []
    for q in range(nprocs):
        sel = np.flatnonzero(dest == q)
        new = np.full(len(waits) + 1, -1, np.int64)
        new[sel] = np.arange(len(sel))
        keep = new[ri] >= 0
        out.append({"id": wait_ids(part, waits[sel]), "d_rank": d_rank[sel], "d_key": d_key[sel],
                    "rank": r_rank[sel], "enter": r_end[sel],
                    "d_end": t[waits["causer_op"][sel]], "d_op": part.serial[waits["causer_op"][sel]],
                    "omega": waits["wait"][sel].astype(float), "pattern": waits["pattern"][sel].astype(np.int64),
                    "pi": new[ri[keep]], "pc": rc[keep], "pv": rv[keep]})
    return out


def _join(parts: list[dict]) -> dict:
    out = {k: np.concatenate([x[k] for x in parts]) for k in parts[0] if k != "pi"}
    shift = np.cumsum([0] + [len(x["id"]) for x in parts[:-1]])
    out["pi"] = np.concatenate([x["pi"] + s for x, s in zip(parts, shift)])
    return out


def explain_waits(part: Partial, waits: np.ndarray, incoming: list[dict], ncp: int, cpmap: np.ndarray,
                  options: delay.DelayOptions = delay.DelayOptions()):
    """Causer side: Δ, s, the short-term costs and this process's entries of M (rows: own waits v
    inside the causer's interval, columns: the explained waits w), vectorised as in delay.py."""
    ctx, p = part.ctx, part.nranks
    inc = _join(incoming)
    n = len(inc["id"])
    d_start = delay.interval_starts(ctx, waits, inc["d_rank"], inc["d_key"], inc["d_end"], options)
    nkeys = p + len(ctx.trace.comms) + 1
    _, first, u_of = np.unique(inc["d_op"] * nkeys + inc["d_key"], return_index=True, return_inverse=True)
    u_of = u_of.ravel()
    nu = len(first)
    index = delay.wait_index(ctx, waits)
    c_parts, w_parts = [], []
    for lo in range(0, nu, delay.CHUNK):
        sel = first[lo:lo + delay.CHUNK]
        (di, dc, dv), (wi, ww, wa) = delay.processing_profiles(ctx, waits, inc["d_rank"][sel], d_start[sel],
                                                              inc["d_end"][sel], index)
        c_parts.append((di + lo, dc, dv))
        w_parts.append((wi + lo, ww, wa))
    du, dc, dv = delay._concat(c_parts)
    wu, wv, wa = delay._concat(w_parts)
    dc = cpmap[dc]
    d_bounds = np.searchsorted(du, np.arange(nu + 1))
    w_bounds = np.searchsorted(wu, np.arange(nu + 1))
    w_d = np.bincount(wu, weights=wa, minlength=nu)[u_of] if n else np.zeros(0)
    pi, pc, pv = inc["pi"], inc["pc"], inc["pv"]
    p_bounds = np.searchsorted(pi, np.arange(n + 1))
    parts, sum_delta = [], np.zeros(n)
    for lo in range(0, n, delay.CHUNK):
        hi = min(n, lo + delay.CHUNK)
        u = u_of[lo:hi]
        rep_i, rep_j = delay._expand(d_bounds[u], d_bounds[u + 1] - 1)
        a, b = p_bounds[lo], p_bounds[hi]
        ids, cps, diff = delay._sum_by_key(np.concatenate((rep_i, pi[a:b] - lo)), np.concatenate((dc[rep_j], pc[a:b])),
                                           np.concatenate((dv[rep_j], -pv[a:b])), ncp)
        dlt = waitops.difference_profile(diff, 0.0)
        pos = dlt > 0
        ids, cps, dlt = ids[pos] + lo, cps[pos], dlt[pos]
        parts.append((ids, cps, dlt))
        sum_delta += np.bincount(ids, weights=dlt, minlength=n)[:n]
    ids, cps, dlt = delay._concat(parts)
    s = waitops.delay_scale(sum_delta, w_d)
    wi, rep = delay._expand(w_bounds[u_of], w_bounds[u_of + 1] - 1)
    m_rows = wait_ids(part, waits[wv[rep]])
    m_cols = inc["id"][wi]
    m_vals = s[wi] * wa[rep]
    clip = delay.CLIPPED_PATTERNS[inc["pattern"]] & (options.scale == "scalasca")
    dist = waitops.clipped_wait(inc["omega"], sum_delta, w_d, clip)
    short = waitops.segment_sum((inc["pattern"][ids] * ncp + cps) * p + inc["d_rank"][ids], dist[ids] * s[ids] * dlt,
                                NPAT * ncp * p).reshape(NPAT, ncp, p)
    state = {"inc": inc, "s": s, "ids": ids, "cps": cps, "dlt": dlt, "sum_delta": sum_delta, "w_d": w_d,
             "dist": dist}
    return short, (m_rows, m_cols, m_vals), state


def solve_gamma(gathered: list[tuple], options: delay.DelayOptions = delay.DelayOptions()):
    """Process 0: Γ per delay family for every wait from all processes' (ids, ω, end) and M entries
    and the causers' (ids, distributed waiting, pattern), with the serial solver.  Returns (sorted ids,
    ω, Γ [n, families], pattern of each family column) in id order."""
    ids = np.concatenate([g[0] for g in gathered])
    omega = np.concatenate([g[1] for g in gathered])
    end = np.concatenate([g[2] for g in gathered])
    order = np.argsort(ids)
    ids, omega, end = ids[order], omega[order], end[order]
    rows = np.searchsorted(ids, np.concatenate([g[3] for g in gathered]))
    cols = np.searchsorted(ids, np.concatenate([g[4] for g in gathered]))
    vals = np.concatenate([g[5] for g in gathered])
    where = np.searchsorted(ids, np.concatenate([g[6] for g in gathered]))
    dist, pattern = np.zeros(len(ids)), np.zeros(len(ids), np.int64)
    dist[where] = np.concatenate([g[7] for g in gathered])
    pattern[where] = np.concatenate([g[8] for g in gathered])
    fams, col = delay.family_columns(pattern, options)
    gamma = delay.solve_family_gamma(rows, cols, vals, dist, col, len(fams), end)
    return ids, omega, gamma, fams


def wait_table(gathered: list[tuple]) -> dict:
    """Process 0: the per-wait delay data the causers computed, in wait-id order (as solve_gamma)."""
    ids = np.concatenate([g[6] for g in gathered])
    order = np.argsort(ids)
    cols = {"distributed": 7, "pattern": 8, "rank": 9, "enter": 10, "causer": 11, "scale": 12, "sum_delta": 13,
            "wait_in_interval": 14}
    return {k: np.concatenate([g[i] for g in gathered])[order] for k, i in cols.items()}


def finish_delay(state: dict, gamma_fam: np.ndarray, fams: np.ndarray, ncp: int, p: int):
    """Causer side, once Γ (per family) of the explained waits is back: long-term costs and the
    per-wait sums (unexplained, direct, indirect), as delay.delay_analysis computes them."""
    inc, s, ids, cps, dlt, dist = state["inc"], state["s"], state["ids"], state["cps"], state["dlt"], state["dist"]
    gamma_fam = gamma_fam.reshape(len(inc["id"]), len(fams))
    _, long_ = delay.file_costs(inc["pattern"], inc["d_rank"], ids, cps, dist, gamma_fam, fams, s, dlt, ncp, p, NPAT)
    gamma_w = gamma_fam.sum(axis=1)
    sums = np.array([float((inc["omega"] - dist * (s > 0)).sum() + (gamma_w * (s == 0)).sum()),
                     float((dist * s * state["sum_delta"]).sum()), float((dist * s * state["w_d"]).sum())])
    return long_, sums


# --- backward: critical path ------------------------------------------------------------------------

def end_candidates(part: Partial) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per own rank: latest MPI_Finalize ENTER time (-inf if none), last time, last non-EXIT time;
    process 0 picks the end rank from these exactly as critical_path._end_rank does."""
    ctx = part.ctx
    fin = finalize_regions(ctx.trace.regions)
    off, kind, t = ctx.flat.offsets, ctx.ev["kind"], ctx.time
    n = part.hi - part.lo
    fin_t, last, busy = np.full(n, -np.inf), np.full(n, -np.inf), np.full(n, -np.inf)
    for i, r in enumerate(range(part.lo, part.hi)):
        a, b = int(off[r]), int(off[r + 1])
        if b == a:
            continue
        k = kind[a:b]
        if fin:
            e = np.flatnonzero((k == tm.ENTER) & np.isin(ctx.ev["region"][a:b], fin))
            if len(e):
                fin_t[i] = t[a + e].max()
        last[i] = t[b - 1]
        not_exit = np.flatnonzero(k != tm.EXIT)
        busy[i] = t[a + not_exit[-1]] if len(not_exit) else last[i]
    return fin_t, last, busy


def pick_end_point(fin_t: np.ndarray, last: np.ndarray, busy: np.ndarray) -> tuple[int, float]:
    """(rank, time) where the path ends, as critical_path._end_point."""
    if np.any(np.isfinite(fin_t)):
        r = int(np.argmax(fin_t))                    # first rank on a tie, like argmax over the flat trace
        return r, float(fin_t[r])
    r = int(np.lexsort((busy, last))[-1])
    return r, float(last[r])


def jump_table(part: Partial, sync: np.ndarray) -> tuple[np.ndarray, ...]:
    """Own ranks' share of what the critical-path walk reads: per wait with a critical-path causer
    (rank, end of the wait, causer rank), and per own rank its first and last event time."""
    ctx = part.ctx
    waits = sync[sync["cp_causer"] >= 0]
    end = ctx.time[waits["op"]] + waits["wait"]
    off = ctx.flat.offsets
    first = np.array([ctx.time[off[r]] if off[r + 1] > off[r] else 0.0 for r in range(part.lo, part.hi)])
    last = np.array([ctx.time[off[r + 1] - 1] if off[r + 1] > off[r] else 0.0 for r in range(part.lo, part.hi)])
    return waits["rank"].astype(np.int64), end, waits["cp_causer"].astype(np.int64), first, last


def walk(tables: list[tuple], nranks: int, end_rank: int, end_time: float) -> list[tuple]:
    """Process 0: critical_path.walk's loop over the gathered jump tables (the walk is a chain with
    one step per wait on the path, so it runs where the small per-wait table is, instead of
    handing a token between processes at every jump).  Returns (rank, start, end), latest first."""
    rank_of = np.concatenate([t[0] for t in tables])
    end = np.concatenate([t[1] for t in tables])
    causer = np.concatenate([t[2] for t in tables])
    first = np.concatenate([t[3] for t in tables])
    last = np.concatenate([t[4] for t in tables])
    order = np.lexsort((end, rank_of))                  # per rank by end, stable like the serial sort
    bounds = np.searchsorted(rank_of[order], np.arange(nranks + 1))
    used = np.zeros(len(end), bool)
    rank, t = end_rank, end_time
    segs = []
    for _ in range(len(end) + 1):
        idx = order[bounds[rank]:bounds[rank + 1]]
        j = int(np.searchsorted(end[idx], t, side="right")) - 1
        while j >= 0 and used[idx[j]]:                  # a wait already passed (degenerate equal times)
            j -= 1
        if j < 0:
            segs.append((rank, min(float(first[rank]), t), t))
            break
        w = idx[j]
        used[w] = True
        segs.append((rank, float(end[w]), t))
        rank, t = int(causer[w]), float(end[w])
    return segs


def path_profiles(part: Partial, fwd_excl: np.ndarray, sync: np.ndarray, segs: list[tuple], cpmap, ncp: int):
    """Own ranks: [call path, rank] time on the path, and non-waiting time t_l (critical_path.py)."""
    ctx, p = part.ctx, part.nranks
    seg = np.array(segs, float).reshape(-1, 3)
    seg_rank = seg[:, 0].astype(np.int64)
    (ids, cps, vals), _ = delay.processing_profiles(ctx, sync, seg_rank, seg[:, 1], seg[:, 2])
    profile = np.zeros((ncp, p))
    np.add.at(profile, (cpmap[cps], seg_rank[ids]), vals)
    t_l = to_global(activity_time(ctx, fwd_excl, sync), part, cpmap, ncp)
    return profile, t_l


def critical_path_result(segs: list[tuple], profile: np.ndarray, t_l: np.ndarray) -> CriticalPath:
    seg = np.array(segs, float).reshape(-1, 3)
    return CriticalPath(seg_rank=seg[:, 0].astype(np.int64), seg_start=seg[:, 1], seg_end=seg[:, 2],
                        profile=profile, time=t_l,
                        imbalance=waitops.imbalance_indicator(profile.sum(axis=1), t_l),
                        **performance_impact(profile, t_l))
