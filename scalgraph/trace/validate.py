"""Structural checks of a Trace before any analysis: each failure is one clear UserError line.

Checked: the event layout; finite, non-decreasing times per location; known event kinds and regions;
properly nested ENTER/EXIT (an EXIT that names a region must close that region); communicators and
windows that exist, with members that are world ranks; peers and roots that belong to the
communicator; every point-to-point message sent as often as received per (src, dst, tag, comm);
non-blocking completions that refer to a request opened earlier; every member of a communicator
taking part in the same number of collectives.  Clock-condition violations are NOT structural
errors; scalgraph.trace.clock finds and corrects them.  All checks are numpy-vectorised.
"""
from __future__ import annotations

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model.trace import (COLL_BEGIN, COLL_END, ENTER, EVENT_DTYPE, EVENT_KINDS, EXIT, IRECV,
                                   IRECV_REQUEST, ISEND, ISEND_COMPLETE, RECV, RMA_ACC, RMA_GET, RMA_PUT,
                                   RMA_SYNC, SEND, Trace)
from scalgraph.trace import native

P2P_SENDS = (SEND, ISEND)
P2P_RECVS = (RECV, IRECV)
RMA_KINDS = (RMA_PUT, RMA_GET, RMA_ACC, RMA_SYNC)
MAX_SECONDS = 1e11     # |timestamp| bound in seconds, about 3000 years: epoch-based times (1.8e9 s) pass


def check_trace(trace: Trace, where: str = "trace") -> None:
    """Raise UserError (one line, naming rank and event index) on the first structural problem."""
    n = trace.nranks
    if n == 0:
        raise UserError(f"{where}: the trace has no locations")
    columns: list[dict] = []
    check_ranks(trace, range(n), where, columns)
    _check_messages_matched(columns, where)
    _check_collectives_matched(trace, columns, where)


# the fields the checks across ranks read, kept as columns by check_ranks (13 of 49 bytes per event)
_ACROSS = ("kind", "peer", "tag", "comm")
# the fields any check reads (no check reads the byte counts): copied as columns per rank
_CHECKED = ("time", "kind", "region", "peer", "tag", "comm", "request")


def check_ranks(trace: Trace, ranks, where: str = "trace", columns: list | None = None) -> None:
    """The checks each rank's events pass on their own (times, kinds, regions, nesting, references,
    requests), for `ranks` only: what a parallel-replay process can check of the block it read.
    `columns`: a list to append each rank's kind, peer, tag and comm columns to (check_trace's
    checks across ranks read them)."""
    _check_definitions(trace, where)
    nregions = len(trace.regions)
    membership = _membership(trace)
    for rank in ranks:
        ev = trace.events[rank]
        at = f"{where}: rank {rank}"
        if ev.dtype != EVENT_DTYPE:
            raise UserError(f"{at}: events are not in scalgraph's event layout")
        # each field once as a contiguous column: the checks read kind, region, peer... several
        # times, and a field of the packed records is a strided view touching every record
        cols = {name: np.empty(len(ev), EVENT_DTYPE[name]) for name in _CHECKED}
        if not native.split_records(ev, cols):
            cols = {name: np.ascontiguousarray(ev[name]) for name in _CHECKED}
        ev = cols
        _check_times(ev, at)
        _check_kinds_and_regions(ev, nregions, at)
        _check_nesting(ev, at)
        _check_references(trace, rank, ev, at, membership)
        _check_requests(ev, at)
        if columns is not None:
            columns.append({name: ev[name] for name in _ACROSS})


def _check_definitions(trace: Trace, where: str) -> None:
    n = trace.nranks
    for c, members in trace.comms.items():
        m = np.asarray(members, dtype=np.int64)
        if len(m) == 0 or m.min() < 0 or m.max() >= n or len(np.unique(m)) != len(m):
            raise UserError(f"{where}: communicator {c} has members {members[:8]} that are not distinct "
                            f"world ranks 0..{n - 1}")
    for w, c in trace.windows.items():
        if c not in trace.comms:
            raise UserError(f"{where}: RMA window {w} refers to unknown communicator {c}")


def _check_times(ev: np.ndarray, at: str) -> None:
    t = ev["time"]
    if not np.isfinite(t).all():
        i = int(np.flatnonzero(~np.isfinite(t))[0])
        raise UserError(f"{at} event {i}: timestamp is not a finite number")
    # sums of durations over events and ranks must stay finite and keep sub-microsecond precision:
    # no real trace spans more than MAX_SECONDS (the analysis would print inf or nan)
    far = np.flatnonzero(np.abs(t) > MAX_SECONDS)
    if len(far):
        i = int(far[0])
        raise UserError(f"{at} event {i}: timestamp {t[i]:.6g} s is beyond {MAX_SECONDS:.0e} s (about 3000 years); "
                        f"the trace is damaged or its time unit is wrong")
    back = np.flatnonzero(np.diff(t) < 0)
    if len(back):
        i = int(back[0]) + 1
        raise UserError(f"{at} event {i}: time goes backwards ({t[i]:.9g} s after {t[i - 1]:.9g} s); "
                        f"timestamps must be non-decreasing per location")


def _check_kinds_and_regions(ev: np.ndarray, nregions: int, at: str) -> None:
    bad = np.flatnonzero(ev["kind"] >= len(EVENT_KINDS))
    if len(bad):
        raise UserError(f"{at} event {int(bad[0])}: unknown event kind {int(ev['kind'][bad[0]])}")
    kinds, region = ev["kind"], ev["region"]
    bad = np.flatnonzero((kinds == ENTER) & ((region < 0) | (region >= nregions)))
    if len(bad):
        raise UserError(f"{at} event {int(bad[0])}: ENTER of undefined region {int(region[bad[0]])} "
                        f"(the trace defines {nregions})")
    bad = np.flatnonzero((kinds == EXIT) & (region >= nregions))
    if len(bad):
        raise UserError(f"{at} event {int(bad[0])}: EXIT of undefined region {int(region[bad[0]])}")


def _check_nesting(ev: np.ndarray, at: str) -> None:
    """ENTER/EXIT must nest.  Vectorised: give ENTER the depth after it and EXIT the depth before it;
    sorted stably by that level, each level must then read ENTER, EXIT, ENTER, EXIT, ... and each
    EXIT's (optional) region must equal the ENTER just before it on its level."""
    idx = np.flatnonzero((ev["kind"] == ENTER) | (ev["kind"] == EXIT))
    if len(idx) == 0:
        return
    is_enter = ev["kind"][idx] == ENTER
    depth_after = np.cumsum(np.where(is_enter, 1, -1))
    if depth_after.min() < 0:
        i = int(idx[np.flatnonzero(depth_after < 0)[0]])
        raise UserError(f"{at} event {i}: EXIT without a matching ENTER (regions are not properly nested)")
    if depth_after[-1] != 0:
        raise UserError(f"{at}: {int(depth_after[-1])} region(s) entered but never exited "
                        f"(truncated trace?); every ENTER needs its EXIT")
    level = np.where(is_enter, depth_after, depth_after + 1)
    # idx ascends: a stable sort by level alone is lexsort((idx, level)), and on int16 a radix sort
    order = np.argsort(level.astype(np.int16) if level.max() < 32000 else level, kind="stable")
    ent, ex = idx[order][0::2], idx[order][1::2]
    regions = ev["region"]
    wrong = np.flatnonzero((regions[ex] >= 0) & (regions[ex] != regions[ent]))
    if len(wrong):
        j = int(wrong[0])
        raise UserError(f"{at} event {int(ex[j])}: EXIT of region {int(regions[ex[j]])} closes ENTER of region "
                        f"{int(regions[ent[j]])} at event {int(ent[j])} (regions are not properly nested)")


def _membership(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Sorted communicator ids, and the sorted keys index(comm) * nranks + member of every membership."""
    ids = np.array(sorted(trace.comms), dtype=np.int64)
    keys = [i * trace.nranks + np.asarray(trace.comms[int(c)], np.int64) for i, c in enumerate(ids)]
    return ids, np.sort(np.concatenate(keys)) if keys else np.zeros(0, np.int64)


def _in_sorted(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """np.isin(x, table) for a sorted table, by binary search (no sort of x)."""
    if len(table) == 0:
        return np.zeros(len(x), bool)
    at = np.minimum(np.searchsorted(table, x), len(table) - 1)
    return table[at] == x


def _kinds(*kinds: int) -> np.ndarray:
    """A table kind -> bool: table[ev["kind"]] is np.isin(ev["kind"], kinds) without a sort."""
    table = np.zeros(256, bool)
    table[list(kinds)] = True
    return table


_USES_COMM = _kinds(*P2P_SENDS, *P2P_RECVS, COLL_END)
_RMA = _kinds(*RMA_KINDS)
_RMA_OPS = _kinds(RMA_PUT, RMA_GET, RMA_ACC)
_REQUESTS = _kinds(ISEND, ISEND_COMPLETE, IRECV_REQUEST, IRECV)
_SENDS, _RECVS = _kinds(*P2P_SENDS), _kinds(*P2P_RECVS)


def _check_references(trace: Trace, rank: int, ev: np.ndarray, at: str, membership) -> None:
    """Vectorised over all events of the rank, whatever the number of communicators."""
    ids, member_keys = membership
    n = trace.nranks
    kinds = ev["kind"]
    uses_comm = np.flatnonzero(_USES_COMM[kinds])
    comm = ev["comm"][uses_comm].astype(np.int64)
    known = _in_sorted(comm, ids)
    if not known.all():
        i = int(uses_comm[np.flatnonzero(~known)[0]])
        raise UserError(f"{at} event {i}: unknown communicator {int(ev['comm'][i])}; define it in the trace's communicators")
    index = np.searchsorted(ids, comm)
    inside = _in_sorted(index * n + rank, member_keys)
    if not inside.all():
        i = int(uses_comm[np.flatnonzero(~inside)[0]])
        raise UserError(f"{at} event {i}: rank {rank} uses communicator {int(ev['comm'][i])} but is not one of its members")
    peer = ev["peer"][uses_comm].astype(np.int64)
    is_p2p = kinds[uses_comm] != COLL_END
    must_be_member = is_p2p | (peer >= 0)        # p2p peers always; collective roots when there is one
    ok = ~must_be_member | ((peer >= 0) & (peer < n) & _in_sorted(index * n + peer, member_keys))
    if not ok.all():
        j = int(np.flatnonzero(~ok)[0])
        i = int(uses_comm[j])
        what = "peer" if is_p2p[j] else "collective root"
        raise UserError(f"{at} event {i}: {what} {int(peer[j])} is not a member of communicator {int(comm[j])}")
    rma = _RMA[kinds]
    for w in np.unique(ev["comm"][rma]).tolist():
        if w not in trace.windows:
            first = int(np.flatnonzero(rma & (ev["comm"] == w))[0])
            raise UserError(f"{at} event {first}: unknown RMA window {w}; define it in the trace's windows")
    bad = np.flatnonzero(_RMA_OPS[kinds] & ((ev["peer"] < 0) | (ev["peer"] >= n)))
    if len(bad):
        raise UserError(f"{at} event {int(bad[0])}: RMA target {int(ev['peer'][bad[0]])} is not a world rank")


def _check_requests(ev: np.ndarray, at: str) -> None:
    """ISEND_COMPLETE and IRECV must complete a request opened earlier on the same rank by
    ISEND / IRECV_REQUEST; a request id may be reused once completed.  Per request id (sends and
    receives apart) a completion is valid exactly when the event before it on that id opened it
    (an open request stays open however often it is opened; a completion closes it)."""
    kinds = ev["kind"]
    sel = np.flatnonzero(_REQUESTS[kinds])
    if len(sel) == 0:
        return
    k = kinds[sel]
    recv_side = (k == IRECV_REQUEST) | (k == IRECV)
    completes = (k == ISEND_COMPLETE) | (k == IRECV)
    req = ev["request"][sel].astype(np.int64)
    # sel ascends: a stable sort by (recv_side, req) as one key is lexsort((sel, req, recv_side))
    span = int(req.max() - req.min()) + 1
    if span < 2 ** 40:
        key = recv_side * span + (req - req.min())
        order = np.argsort(key.astype(np.int16) if 2 * span < 32000 else key, kind="stable")
    else:
        order = np.lexsort((sel, req, recv_side))
    same_id = np.zeros(len(sel), bool)
    same_id[1:] = (req[order][1:] == req[order][:-1]) & (recv_side[order][1:] == recv_side[order][:-1])
    opened_before = np.zeros(len(sel), bool)
    opened_before[1:] = ~completes[order][:-1]
    bad = order[completes[order] & ~(same_id & opened_before)]
    if len(bad):
        j = int(bad.min())
        i, what = int(sel[j]), ("IRECV", "IRECV_REQUEST") if recv_side[j] else ("ISEND_COMPLETE", "ISEND")
        raise UserError(f"{at} event {i}: {what[0]} of request {int(req[j])} that no earlier {what[1]} opened")


def _message_keys(columns, kinds: np.ndarray, sender_is_self: bool) -> np.ndarray:
    """(src, dst, tag, comm) of each message end of `kinds`; `columns`: per rank (all ranks, in
    order) its kind, peer, tag and comm columns, or the Trace itself."""
    rows = []
    for rank, ev in enumerate(columns.events if isinstance(columns, Trace) else columns):
        sel = kinds[ev["kind"]]
        k = np.empty((int(sel.sum()), 4), dtype=np.int64)
        me = np.full(len(k), rank)
        k[:, 0] = me if sender_is_self else ev["peer"][sel]
        k[:, 1] = ev["peer"][sel] if sender_is_self else me
        k[:, 2] = ev["tag"][sel]
        k[:, 3] = ev["comm"][sel]
        rows.append(k)
    return np.concatenate(rows) if rows else np.empty((0, 4), dtype=np.int64)


def _packed_rows(a: np.ndarray, b: np.ndarray):
    """Rows of a and b as one int64 each (columns shifted to 0 and weighted by the spans after
    them, so equal rows give equal numbers), or None when the spans do not fit in 62 bits."""
    both = np.concatenate((a, b))
    if len(both) == 0:
        return a[:, 0], b[:, 0]
    lo, hi = both.min(axis=0), both.max(axis=0)
    spans = [float(x) for x in hi - lo + 1]
    if np.prod(spans) >= 2.0 ** 62:
        return None
    out = []
    for rows in (a, b):
        acc = rows[:, 0] - lo[0]
        for col in range(1, rows.shape[1]):
            acc = acc * int(hi[col] - lo[col] + 1) + (rows[:, col] - lo[col])
        out.append(acc)
    return out[0], out[1]


def _check_messages_matched(columns, where: str) -> None:
    """`columns`: as for _message_keys."""
    sends = _message_keys(columns, _SENDS, True)
    recvs = _message_keys(columns, _RECVS, False)
    packed = _packed_rows(sends, recvs) if len(sends) == len(recvs) else None
    if packed is not None and np.array_equal(np.sort(packed[0]), np.sort(packed[1])):
        return                                  # the same multiset of (src, dst, tag, comm)
    s_keys, s_counts = np.unique(sends, axis=0, return_counts=True)
    r_keys, r_counts = np.unique(recvs, axis=0, return_counts=True)
    if len(s_keys) == len(r_keys) and np.array_equal(s_keys, r_keys) and np.array_equal(s_counts, r_counts):
        return
    counts: dict[tuple, list[int]] = {}
    for keys, cnt, slot in ((s_keys, s_counts, 0), (r_keys, r_counts, 1)):
        for key, c in zip(map(tuple, keys.tolist()), cnt.tolist()):
            counts.setdefault(key, [0, 0])[slot] = c
    for (src, dst, tag, comm), (ns, nr) in sorted(counts.items()):
        if ns != nr:
            raise UserError(f"{where}: unmatched messages from rank {src} to rank {dst} (tag {tag}, communicator "
                            f"{comm}): {ns} sent, {nr} received; the trace is incomplete or inconsistent")


def _check_collectives_matched(trace: Trace, columns: list[dict], where: str) -> None:
    for rank, ev in enumerate(columns):
        nb, ne = int((ev["kind"] == COLL_BEGIN).sum()), int((ev["kind"] == COLL_END).sum())
        if nb != ne:
            raise UserError(f"{where}: rank {rank} has {nb} COLL_BEGIN but {ne} COLL_END events")
    per_comm: dict[int, dict[int, int]] = {}
    for rank, ev in enumerate(columns):
        comms, counts = np.unique(ev["comm"][ev["kind"] == COLL_END], return_counts=True)
        for c, k in zip(comms.tolist(), counts.tolist()):
            per_comm.setdefault(c, {})[rank] = k
    for c, by_rank in sorted(per_comm.items()):
        members = trace.comms.get(c, [])
        counts = {r: by_rank.get(r, 0) for r in members}
        if len(set(counts.values())) > 1:
            lo = min(counts, key=counts.get)
            hi = max(counts, key=counts.get)
            raise UserError(f"{where}: unmatched collective on communicator {c}: rank {hi} took part in "
                            f"{counts[hi]} collectives, rank {lo} in {counts[lo]}")
