"""Match the events of a trace to each other, vectorised over numpy arrays.

Everything works on the *flat* trace: all ranks' event arrays end to end, so an event is one global
index (``flat.offsets[rank] + local index``).  Results are numpy index arrays, never Python objects
per event, so the replay passes can stay vectorised.

- ``flatten``: the flat trace.
- ``match_regions``: ENTER/EXIT pairs, the region each event belongs to, call-path ids.
- ``match_requests``: ISEND..ISEND_COMPLETE and IRECV_REQUEST..IRECV by request id (ids are reused
  after completion, so each begin pairs with the next completion of the same id on its rank).
- ``match_messages``: sends to receives by MPI's non-overtaking rule: FIFO per (src, dst, tag, comm),
  senders in send order, receivers in *posting* order (MPI_Recv, or the MPI_Irecv call).
- ``match_collectives``: per communicator, the k-th collective of every member is instance k.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import heap, native


class Columns(dict):
    """The flat events as one contiguous array per EVENT_DTYPE field: ev["time"], ev["kind"], ...
    (contiguous columns are much faster to scan and gather than fields of a packed record array)."""

    def __len__(self) -> int:
        return len(self["time"])


@dataclass
class Flat:
    ev: Columns             # EVENT_DTYPE fields as columns, all ranks end to end
    rank: np.ndarray        # int32 world rank of each event
    offsets: np.ndarray     # int64 [nranks + 1]: rank r owns ev[offsets[r]:offsets[r+1]]
    # pair_messages' result, computed once: the clock correction and the replay context both pair
    # the messages, and the pairing reads no time (the correction changes only times)
    pairs: tuple | None = None

    @property
    def nranks(self) -> int:
        return len(self.offsets) - 1


@dataclass
class Nesting:
    partner: np.ndarray     # ENTER -> its EXIT, EXIT -> its ENTER, else -1
    owner: np.ndarray       # ENTER of the region the event belongs to (ENTER/EXIT: that region; others: innermost open region), -1 outside all
    callpath: np.ndarray    # call path of `owner`, -1 outside all regions
    cp_after: np.ndarray    # call path that the time after this event (up to the next one) is spent in
    cp_parent: np.ndarray   # call-path table: parent call path (-1 for roots)
    cp_region: np.ndarray   # call-path table: region index

    @property
    def ncallpaths(self) -> int:
        return len(self.cp_region)


@dataclass
class Messages:
    send_evt: np.ndarray    # SEND/ISEND event
    recv_evt: np.ndarray    # RECV/IRECV event (the completion of the receive)
    send_op: np.ndarray     # ENTER of the call that starts the send (MPI_Send, MPI_Isend, ...)
    recv_op: np.ndarray     # ENTER of the call that completes the receive (MPI_Recv, MPI_Wait*, ...)
    post_op: np.ndarray     # ENTER of the call that posts the receive (MPI_Recv or MPI_Irecv)
    src: np.ndarray
    dst: np.ndarray
    tag: np.ndarray
    comm: np.ndarray
    blocking_send: np.ndarray   # bool: SEND (not ISEND)
    nbytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # bytes sent (the event field
    # is dropped from the replay context once matched: forward.MATCHING_ONLY)
    unmatched_send: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    unmatched_recv: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.send_evt)


@dataclass
class CommInstances:
    comm: int
    members: np.ndarray     # world ranks in communicator-rank order
    end_evt: np.ndarray     # [ninstances, size] COLL_END events
    op: np.ndarray          # [ninstances, size] ENTER of the collective call
    key: int = -1           # synchronisation-partner key: nranks + index of the communicator
    bytes: np.ndarray | None = None       # [ninstances, size] bytes sent at each COLL_END
    bytes_recv: np.ndarray | None = None  # [ninstances, size] bytes received at each COLL_END


TRIM_EVERY = 16 << 20      # bytes of events dropped between two heap trims while flattening


def flatten(trace: tm.Trace, release: bool = False) -> Flat:
    """The flat trace.  `release`: the caller needs the trace's events no more; each location's
    array is dropped (emptied in `trace.events`) once copied and the freed memory handed back
    (heap.trim), so the events are held about once, not twice, while flattening."""
    lengths = np.array([len(e) for e in trace.events], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    # rank by rank and field by field, so each rank's records are read while they are in cache
    ev = Columns((name, np.empty(int(offsets[-1]), tm.EVENT_DTYPE[name])) for name in tm.EVENT_DTYPE.names)
    freed = 0
    for r in range(len(trace.events)):
        e = trace.events[r]
        a, b = offsets[r], offsets[r + 1]
        if not native.split_records(e, {name: col[a:b] for name, col in ev.items()}):
            for name, col in ev.items():
                col[a:b] = e[name]
        if release:
            trace.events[r] = e[:0].copy()
            freed += e.nbytes
            del e
            if freed >= TRIM_EVERY or r == len(trace.events) - 1:     # (a trim walks the heap: not per rank)
                heap.trim()
                freed = 0
    rank = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
    return Flat(ev=ev, rank=rank, offsets=offsets)


# --- regions -----------------------------------------------------------------------------------

_STEP = np.zeros(256, np.int8)
_STEP[tm.ENTER], _STEP[tm.EXIT] = 1, -1


def _last_enter_at_level(keys, enters, level, pos, m1):
    """For each query (level, pos) on one rank: the last ENTER at `level` before `pos`, or -1.
    `keys` = level * m1 + position of the ENTERs `enters`, sorted."""
    q = level.astype(np.int64) * m1 + pos
    j = np.searchsorted(keys, q, side="left") - 1
    jj = np.maximum(j, 0)
    if len(enters) == 0:
        return np.full(len(q), -1, np.int64)
    ok = (j >= 0) & (level > 0) & (keys[jj] // m1 == level)
    return np.where(ok, enters[jj], -1)


class _CallPathTable:
    """Interns (parent call path, region) pairs into dense call-path ids shared by all ranks."""

    def __init__(self, nreg: int):
        self.nreg = nreg
        self.ids: dict[int, int] = {}
        self.parent: list[int] = []
        self.region: list[int] = []

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        out = np.empty(len(keys), np.int64)
        for i, k in enumerate(keys.tolist()):         # one step per distinct call path of a rank
            cid = self.ids.get(k)
            if cid is None:
                cid = self.ids[k] = len(self.parent)
                self.parent.append(k // self.nreg - 1)
                self.region.append(k % self.nreg - 1)
            out[i] = cid
        return out


def _match_rank(kind, region, table: _CallPathTable, rank: int):
    """Nesting of one rank's events (local indices): partner, owner, callpath, cp_after.  The pairs
    and owners come from a stack pass in C where it is built (native.match_regions; the same
    arrays as _match_rank_numpy's sorts by level), the call paths are interned here either way."""
    got = native.match_regions(kind, tm.ENTER, tm.EXIT)
    if got is None:
        return _match_rank_numpy(kind, region, table, rank)
    partner, owner, parent, level, deepest = got
    if deepest < 0:
        raise UserError(f"rank {rank}: EXIT without a matching ENTER at event {-1 - deepest}; "
                        f"the trace is corrupt or truncated at the front")
    enter_idx = np.flatnonzero(kind == tm.ENTER)
    lv = level[enter_idx]
    enters = enter_idx[np.argsort(lv.astype(np.int16) if deepest < 32000 else lv, kind="stable")]
    cp_of_enter = _intern_callpaths(table, region, enters, level[enters], parent, len(kind))
    callpath = np.where(owner >= 0, cp_of_enter[np.maximum(owner, 0)], -1)
    cp_after = callpath.copy()
    ex = np.flatnonzero(kind == tm.EXIT)             # after an EXIT the time is the parent's
    par_of_exit = parent[partner[ex]]
    cp_after[ex] = np.where(par_of_exit >= 0, cp_of_enter[np.maximum(par_of_exit, 0)], -1)
    return partner, owner, callpath, cp_after


def _intern_callpaths(table: _CallPathTable, region, enters, enter_level, parent_of, m: int) -> np.ndarray:
    """[m] call path of each ENTER in `enters` (sorted by level, then position; parent_of[e]: the
    enclosing ENTER of e, or -1), -1 elsewhere: level by level, so parents get their ids first."""
    cp_of_enter = np.full(m, -1, np.int64)
    bounds = np.searchsorted(enter_level, np.arange(int(enter_level.max()) + 2 if len(enters) else 1))
    for lv_ in range(1, len(bounds) - 1):
        sel = enters[bounds[lv_]:bounds[lv_ + 1]]
        par = parent_of[sel]
        pcp = np.where(par >= 0, cp_of_enter[np.maximum(par, 0)], -1)
        uniq, inv = np.unique((pcp + 1) * table.nreg + (region[sel] + 1), return_inverse=True)
        cp_of_enter[sel] = table.lookup(uniq)[inv]
    return cp_of_enter


def _match_rank_numpy(kind, region, table: _CallPathTable, rank: int):
    """_match_rank without the C pass: pairs and owners from sorts by nesting level."""
    m = len(kind)
    step = _STEP[kind]
    depth = np.cumsum(step, dtype=np.int64)
    if m and depth.min() < 0:
        bad = int(np.argmax(depth < 0))
        raise UserError(f"rank {rank}: EXIT without a matching ENTER at event {bad}; "
                        f"the trace is corrupt or truncated at the front")
    is_enter, is_exit = step > 0, step < 0
    level = depth + is_exit                           # ENTER opens depth_after, EXIT closes depth_after + 1
    ee = np.flatnonzero(step)
    lv = level[ee]
    ee = ee[np.argsort(lv.astype(np.int16) if len(lv) and lv.max() < 32000 else lv, kind="stable")]
    partner = np.full(m, -1, np.int64)
    a, b = ee[:-1], ee[1:]                            # per level: ENTER, EXIT, ENTER, EXIT ...
    pair = is_enter[a] & is_exit[b] & (level[a] == level[b])
    partner[a[pair]], partner[b[pair]] = b[pair], a[pair]
    stray = is_exit & (partner < 0)                   # ENTERs left open at the end are tolerated
    if np.any(stray):
        raise UserError(f"rank {rank}: EXIT without a matching ENTER at event {int(np.flatnonzero(stray)[0])}; "
                        f"the trace is corrupt")
    enters = ee[is_enter[ee]]                         # sorted by (level, position)
    m1 = m + 1
    keys = level[enters] * m1 + enters
    enter_idx = np.flatnonzero(is_enter)
    other = np.flatnonzero(step == 0)
    owner = np.empty(m, np.int64)
    owner[enter_idx] = enter_idx
    owner[is_exit] = partner[is_exit]
    owner[other] = _last_enter_at_level(keys, enters, depth[other], other, m1)
    parent_enter = _last_enter_at_level(keys, enters, level[enter_idx] - 1, enter_idx, m1)

    parent_of = np.full(m, -1, np.int64)
    parent_of[enter_idx] = parent_enter
    cp_of_enter = _intern_callpaths(table, region, enters, level[enters], parent_of, m)
    callpath = np.where(owner >= 0, cp_of_enter[np.maximum(owner, 0)], -1)
    cp_after = callpath.copy()
    ex = np.flatnonzero(is_exit)                      # after an EXIT the time is the parent's
    par_of_exit = parent_enter[np.searchsorted(enter_idx, partner[ex])]
    cp_after[ex] = np.where(par_of_exit >= 0, cp_of_enter[np.maximum(par_of_exit, 0)], -1)
    return partner, owner, callpath, cp_after


def index_dtype(n: int):
    """int32 for event indices and call-path ids when n fits (call paths are fewer than events),
    else int64.  Keys built from them (call path x ranks + rank) are computed in int64."""
    return np.int32 if n < 2**31 - 1 else np.int64


def match_regions(flat: Flat) -> Nesting:
    """ENTER/EXIT pairs, owners and call paths, one rank at a time (ranks are independent, and
    rank-sized arrays stay in cache)."""
    kind, region = flat.ev["kind"], flat.ev["region"]
    n = len(kind)
    table = _CallPathTable(int(region.max()) + 2 if n else 1)
    idx = index_dtype(n)                              # int32 halves the four event-sized arrays
    partner = np.empty(n, idx)
    owner = np.empty(n, idx)
    callpath = np.empty(n, idx)
    cp_after = np.empty(n, idx)
    for r in range(flat.nranks):
        a, b = int(flat.offsets[r]), int(flat.offsets[r + 1])
        pa, ow, cp, ca = _match_rank(kind[a:b], region[a:b].astype(np.int64), table, r)   # rank-sized copy
        partner[a:b] = np.where(pa >= 0, pa + a, -1)
        owner[a:b] = np.where(ow >= 0, ow + a, -1)
        callpath[a:b], cp_after[a:b] = cp, ca
    return Nesting(partner=partner, owner=owner, callpath=callpath, cp_after=cp_after,
                   cp_parent=np.array(table.parent, np.int64), cp_region=np.array(table.region, np.int64))


def depth_after(flat: Flat) -> np.ndarray:
    """Region nesting depth after each event (0 outside all regions), for all ranks at once: the
    light part of match_regions, for passes that need the regions of a few events only."""
    total = np.cumsum(_STEP[flat.ev["kind"]], dtype=np.int64)
    base = np.concatenate(([0], total))[flat.offsets[:-1]]
    depth = total - np.repeat(base, np.diff(flat.offsets))
    if len(depth) and depth.min() < 0:
        bad = int(np.argmax(depth < 0))
        rank = int(flat.rank[bad])
        raise UserError(f"rank {rank}: EXIT without a matching ENTER at event {bad - int(flat.offsets[rank])}; "
                        f"the trace is corrupt or truncated at the front")
    return depth


def _first_below(depth: np.ndarray, start: np.ndarray, stop: np.ndarray, level: np.ndarray,
                 backwards: bool) -> np.ndarray:
    """For each query: the first position from `start` towards `stop` (exclusive; backwards: down
    to stop) whose depth is below `level`, or -1.  Windows that double in size: region calls are
    short, so most queries end in the first window."""
    out = np.full(len(start), -1, np.int64)
    todo = np.arange(len(start))
    pos = start.astype(np.int64).copy()
    width = 4
    while len(todo):
        steps = np.arange(width)
        at = pos[todo, None] - steps if backwards else pos[todo, None] + steps
        inside = at > stop[todo, None] if backwards else at < stop[todo, None]
        hit = inside & (depth[np.where(inside, at, 0)] < level[todo, None])
        found = hit.any(axis=1)
        out[todo[found]] = at[found, np.argmax(hit[found], axis=1)]
        more = ~found & inside[:, -1]
        pos[todo[more]] = at[more, -1] + (-1 if backwards else 1)
        todo = todo[more]
        width *= 2
    return out


def exit_of(flat: Flat, depth: np.ndarray, enters: np.ndarray) -> np.ndarray:
    """The EXIT of each ENTER (global indices; -1 where the region is left open), as
    match_regions' partner."""
    enters = np.asarray(enters, np.int64)
    stop = flat.offsets[flat.rank[enters] + 1]
    return _first_below(depth, enters + 1, stop, depth[enters], backwards=False)


def owner_of(flat: Flat, depth: np.ndarray, events: np.ndarray) -> np.ndarray:
    """The ENTER of the innermost region open at each event that is neither ENTER nor EXIT
    (-1 outside all regions), as match_regions' owner: the event after the last one before it
    whose depth is below its own."""
    events = np.asarray(events, np.int64)
    first = flat.offsets[flat.rank[events]]
    below = _first_below(depth, events - 1, first - 1, depth[events], backwards=True)
    return np.where(depth[events] > 0, np.where(below >= 0, below + 1, first), -1)


def callpath_names(nest: Nesting, regions: list[tm.Region]) -> list[str]:
    """'main/solve/MPI_Recv' for every call path id."""
    names: list[str] = []
    for par, reg in zip(nest.cp_parent.tolist(), nest.cp_region.tolist()):
        own = regions[reg].name if 0 <= reg < len(regions) else f"region{reg}"
        names.append(own if par < 0 else f"{names[par]}/{own}")
    return names


# --- requests and messages ----------------------------------------------------------------------

def match_requests(flat: Flat, begin_kind: int, end_kind: int) -> np.ndarray:
    """For each event: if it is a `begin_kind` event, the index of its completion (`end_kind` or
    REQUEST_CANCELLED with the same request id, next on the same rank), else -1; and vice versa."""
    kind, req = flat.ev["kind"], flat.ev["request"]
    sel = np.flatnonzero(((kind == begin_kind) | (kind == end_kind) | (kind == tm.REQUEST_CANCELLED)) & (req >= 0))
    order = np.lexsort((sel, req[sel], flat.rank[sel]))
    sel = sel[order]
    out = np.full(len(kind), -1, np.int64)
    if len(sel) < 2:
        return out
    a, b = sel[:-1], sel[1:]
    pair = ((kind[a] == begin_kind) & (kind[b] != begin_kind) & (req[a] == req[b])
            & (flat.rank[a] == flat.rank[b]))
    out[a[pair]], out[b[pair]] = b[pair], a[pair]
    return out


def _group_ordinal(keys: list[np.ndarray], order_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort rows by (keys..., order_key); return the order and each sorted row's position in its key group."""
    order = np.lexsort((order_key, *keys[::-1]))
    n = len(order)
    if n == 0:
        return order, np.zeros(0, np.int64)
    change = np.zeros(n, bool)
    change[0] = True
    for k in keys:
        ks = k[order]
        change[1:] |= ks[1:] != ks[:-1]
    start = np.maximum.accumulate(np.where(change, np.arange(n), 0))
    return order, np.arange(n) - start


def _packed_keys(skeys: list[np.ndarray], rkeys: list[np.ndarray]) -> tuple[list, list]:
    """The (src, dst, tag, comm) columns of both sides as one int64 column each, if it fits.
    Each field is shifted to start at 0 and weighted by the ranges after it, so the packed key
    sorts and compares exactly like the tuple; sorting one key instead of four is much cheaper."""
    if not len(skeys[0]) or not len(rkeys[0]):
        return skeys, rkeys
    lows, spans = [], []
    for k, q in zip(skeys, rkeys):
        lo, hi = min(int(k.min()), int(q.min())), max(int(k.max()), int(q.max()))
        lows.append(lo)
        spans.append(hi - lo + 1)
    if np.prod([float(x) for x in spans]) >= 2.0 ** 62:
        return skeys, rkeys
    packed = []
    for keys in (skeys, rkeys):
        acc = keys[0] - lows[0]
        for k, lo, span in zip(keys[1:], lows[1:], spans[1:]):
            acc *= span
            acc += k - lo
        packed.append([acc])
    return packed[0], packed[1]


def match_messages(flat: Flat, nest: Nesting) -> Messages:
    ev, kind = flat.ev, flat.ev["kind"]
    send_evt, recv_evt, post_of_recv, unmatched_send, unmatched_recv = pair_messages(flat)
    return Messages(
        send_evt=send_evt, recv_evt=recv_evt,
        send_op=nest.owner[send_evt], recv_op=nest.owner[recv_evt], post_op=nest.owner[post_of_recv],
        src=flat.rank[send_evt].astype(np.int64), dst=flat.rank[recv_evt].astype(np.int64),
        tag=ev["tag"][send_evt].astype(np.int64), comm=ev["comm"][send_evt].astype(np.int64),
        blocking_send=kind[send_evt] == tm.SEND, nbytes=ev["bytes"][send_evt].astype(np.int64),
        unmatched_send=unmatched_send, unmatched_recv=unmatched_recv)


def pair_messages(flat: Flat):
    """Sends paired with receives (MPI's non-overtaking rule): send events, receive events, the
    event that posted each receive, unmatched sends, unmatched receives.  Kept in flat.pairs."""
    if flat.pairs is None:
        flat.pairs = _pair_messages(flat)
    return flat.pairs


def _pair_messages(flat: Flat):
    ev, kind = flat.ev, flat.ev["kind"]
    s = np.flatnonzero((kind == tm.SEND) | (kind == tm.ISEND))
    r = np.flatnonzero((kind == tm.RECV) | (kind == tm.IRECV))
    irecv_pair = match_requests(flat, tm.IRECV_REQUEST, tm.IRECV)
    post_evt = np.where(kind[r] == tm.IRECV, irecv_pair[r], r)
    # an IRECV without its IRECV_REQUEST (e.g. a trace cut at the front) posts at its own position
    post_evt = np.where(post_evt >= 0, post_evt, r)

    skeys = [flat.rank[s].astype(np.int64), ev["peer"][s].astype(np.int64),
             ev["tag"][s].astype(np.int64), ev["comm"][s].astype(np.int64)]
    rkeys = [ev["peer"][r].astype(np.int64), flat.rank[r].astype(np.int64),
             ev["tag"][r].astype(np.int64), ev["comm"][r].astype(np.int64)]
    skeys, rkeys = _packed_keys(skeys, rkeys)
    so, sord = _group_ordinal(skeys, s)
    ro, rord = _group_ordinal(rkeys, post_evt)
    s_sorted, r_sorted = s[so], r[ro]
    # join the two sides on (src, dst, tag, comm, ordinal)
    side = np.concatenate((np.zeros(len(s), np.int8), np.ones(len(r), np.int8)))
    rows = np.concatenate((s_sorted, r_sorted))
    cols = [np.concatenate((k[so], q[ro])) for k, q in zip(skeys, rkeys)] + [np.concatenate((sord, rord))]
    order = np.lexsort((side, *cols[::-1]))
    side, rows = side[order], rows[order]
    cols = [c[order] for c in cols]
    same = np.ones(max(len(rows) - 1, 0), bool)
    for c in cols:
        same &= c[1:] == c[:-1]
    pair = same & (side[:-1] == 0) & (side[1:] == 1)
    send_evt, recv_evt = rows[:-1][pair], rows[1:][pair]
    matched = np.zeros(len(rows), bool)
    matched[:-1] |= pair
    matched[1:] |= pair
    unmatched_send = np.sort(rows[~matched & (side == 0)])
    unmatched_recv = np.sort(rows[~matched & (side == 1)])

    post_of_recv = post_evt[np.searchsorted(r, recv_evt)]     # r is sorted and holds every recv_evt
    return send_evt, recv_evt, post_of_recv, unmatched_send, unmatched_recv


# --- collectives -------------------------------------------------------------------------------

def match_collectives(flat: Flat, nest: Nesting, comms: dict[int, list[int]]) -> list[CommInstances]:
    kind, comm = flat.ev["kind"], flat.ev["comm"]
    ends = np.flatnonzero(kind == tm.COLL_END)
    used = np.unique(comm[ends])
    unknown = [int(c) for c in used if int(c) not in comms]
    if unknown:
        raise UserError(f"collective on unknown communicator {unknown[0]} (the trace defines "
                        f"{len(comms)} communicators); the trace's definitions are incomplete")
    order = np.lexsort((ends, flat.rank[ends], comm[ends]))
    ends = ends[order]
    out: list[CommInstances] = []
    comm_index = {c: i for i, c in enumerate(sorted(comms))}
    for c in used.tolist():
        members = np.asarray(comms[c], np.int64)
        these = ends[comm[ends] == c]
        counts = np.bincount(flat.rank[these], minlength=flat.nranks)
        if np.any(counts[members] != counts[members[0]]) or counts.sum() != counts[members].sum():
            per = {int(m): int(counts[m]) for m in members if counts[m] != counts[members[0]]}
            raise UserError(f"communicator {c}: members took part in different numbers of collectives "
                            f"({int(counts[members[0]])} on rank {int(members[0])}, {per} elsewhere) "
                            f"or a non-member did; the trace is truncated or inconsistent")
        ninst = int(counts[members[0]])
        if ninst == 0:
            continue
        # these is sorted by rank then position: split into per-rank columns in comm-rank order
        by_rank = {}
        rk = flat.rank[these]
        for m in np.unique(rk).tolist():
            by_rank[m] = these[rk == m]
        end_evt = np.stack([by_rank[int(m)] for m in members], axis=1)
        out.append(CommInstances(comm=c, members=members, end_evt=end_evt, op=nest.owner[end_evt],
                                 key=flat.nranks + comm_index[c], bytes=flat.ev["bytes"][end_evt],
                                 bytes_recv=flat.ev["bytes_recv"][end_evt]))
    return out
