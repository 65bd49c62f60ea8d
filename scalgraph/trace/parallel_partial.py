"""The data one analysis process of the parallel replay holds: its block of application ranks in
full, plus the *communication skeleton* of the other ranks that its own ranks synchronise with.

The skeleton of a remote rank q, as seen by process P, is every event of q that the serial pattern
evaluators read when they time a synchronisation of one of P's ranks: q's sends to and receives
from P's ranks (with the ENTER/EXIT of the call around them and, for MPI_Irecv, the posting call),
q's collective-end events on every communicator P's ranks belong to and q's RMA events on the windows
of those communicators (with their calls; with passive-target locks in the trace, all of q's MPI
calls, whose times Wait for Progress reads), and q's last
event (for calls left open at the end).  Owners select and send these events in one bulk exchange
(mpi4py alltoall), in their original order, so the serial engine's matching and pattern evaluators
run unchanged on the partial trace and time every wait state of P's ranks exactly as the serial
replay does.  Each event keeps its original per-rank index, which names it globally ("serial
index" = offset of its rank in the whole trace + that index).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import forward, matching, mpi_names, patterns

_P2P_KINDS = (tm.SEND, tm.ISEND, tm.RECV, tm.IRECV)
_RMA_KINDS = (tm.RMA_PUT, tm.RMA_GET, tm.RMA_ACC, tm.RMA_SYNC)
_FILLER = tm.COLL_BEGIN      # a kind no matching step reads: keeps a rank's last time without a region


@dataclass
class Partial:
    ctx: forward.ReplayContext   # replay context over the partial trace (own ranks full, others skeleton)
    lo: int                      # own ranks: lo..hi-1
    hi: int
    bounds: np.ndarray           # [nprocs + 1] rank blocks of all processes
    counts: np.ndarray           # events per rank in the whole trace
    serial: np.ndarray           # per partial event: its index in the whole (serial) trace

    @property
    def nranks(self) -> int:
        return len(self.counts)

    def owner_of(self, ranks: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.bounds, ranks, side="right") - 1

    def mine(self, ranks: np.ndarray) -> np.ndarray:
        return (ranks >= self.lo) & (ranks < self.hi)


def rank_blocks(counts: np.ndarray, nprocs: int) -> np.ndarray:
    """Contiguous blocks of ranks with about equal numbers of events, at least one rank each
    (when there are enough ranks)."""
    nranks = len(counts)
    if nprocs >= nranks:
        return np.minimum(np.arange(nprocs + 1), nranks)
    cum = np.cumsum(counts)
    total = float(cum[-1]) if nranks else 0.0
    cuts = np.searchsorted(cum, total * np.arange(1, nprocs) / nprocs, side="left") + 1
    bounds = np.concatenate(([0], cuts, [nranks])).astype(np.int64)
    for k in range(1, nprocs):                      # at least one rank per block, monotone
        bounds[k] = min(max(bounds[k], bounds[k - 1] + 1), nranks - (nprocs - k))
    return bounds


def _skeleton_for(kind, peer, comm, windows, nest, irecv_pair, members_of, lo, hi, mpi_calls, everyone):
    """Indices (into the own flat trace) of the events process [lo, hi) needs from our ranks:
    p2p events with a peer there, collective ends on its communicators, and every RMA event on the
    windows of its communicators (epoch pairing and lock contention need a window's whole history)."""
    in_block = (peer >= lo) & (peer < hi)
    p2p = np.isin(kind, _P2P_KINDS) & in_block
    comms = [c for c, m in members_of.items() if np.any((m >= lo) & (m < hi))]
    coll = (kind == tm.COLL_END) & np.isin(comm, comms)
    wins = [w for w, c in windows.items() if c in comms or c not in members_of]
    rma = np.isin(kind, _RMA_KINDS) & np.isin(comm, wins)
    core = np.concatenate((np.flatnonzero(p2p | coll | rma), everyone))
    if mpi_calls is not None and any(c in comms for c in windows.values()):
        core = np.concatenate((core, mpi_calls))     # passive target: the target's MPI activity
    post = irecv_pair[core[kind[core] == tm.IRECV]]
    core = np.concatenate((core, post[post >= 0]))
    calls = nest.owner[core]
    calls = calls[calls >= 0]
    exits = nest.partner[calls]
    return np.concatenate((core, calls, exits[exits >= 0]))


def build_partial(comm, trace: tm.Trace, counts: np.ndarray, bounds: np.ndarray) -> Partial:
    """Exchange skeletons and build this process's replay context (collective over `comm`)."""
    me, nprocs = comm.Get_rank(), comm.Get_size()
    lo, hi = int(bounds[me]), int(bounds[me + 1])
    own = tm.Trace(regions=trace.regions, comms=trace.comms, events=trace.events[lo:hi])
    flat = matching.flatten(own)
    nest = matching.match_regions(flat)
    ev = flat.ev
    kind, peer, ecomm = ev["kind"], ev["peer"].astype(np.int64), ev["comm"]
    # the posting MPI_Irecv of each receive (only needed when there is someone to send skeletons to)
    irecv_pair = matching.match_requests(flat, tm.IRECV_REQUEST, tm.IRECV) if nprocs > 1 else None
    members_of = {c: np.asarray(m, np.int64) for c, m in trace.comms.items()}
    last = flat.offsets[1:][np.diff(flat.offsets) > 0] - 1
    mpi_calls = None
    if any(r.name.startswith("MPI_Win_lock") for r in trace.regions):   # Wait for Progress reads them
        is_mpi = np.array([mpi_names.is_mpi_region(r) for r in trace.regions] + [False], bool)
        mpi_calls = np.flatnonzero((kind == tm.ENTER) & is_mpi[ev["region"]])
    # MPI_Init/Finalize synchronise all ranks: every process needs every rank's calls
    init_exit = [i for i, r in enumerate(trace.regions)
                 if mpi_names.canonical_name(r.name) in patterns.INIT_NAMES + patterns.FINALIZE_NAMES]
    everyone = np.flatnonzero((kind == tm.ENTER) & np.isin(ev["region"], init_exit))
    outgoing = []
    for q in range(nprocs):
        if q == me or bounds[q] == bounds[q + 1]:
            outgoing.append(None)
            continue
        mark = np.zeros(len(kind), np.int8)         # a mask, not np.unique: O(n) and already sorted
        mark[last] = 2                              # filler: keeps the rank's last time
        mark[_skeleton_for(kind, peer, ecomm, trace.windows, nest, irecv_pair, members_of,
                           int(bounds[q]), int(bounds[q + 1]), mpi_calls, everyone)] = 1
        idx = np.flatnonzero(mark)
        needed = mark[idx] == 1
        rows = np.empty(len(idx), tm.EVENT_DTYPE)
        for name in tm.EVENT_DTYPE.names:
            rows[name] = ev[name][idx]
        rows["kind"][~needed] = _FILLER
        rows["region"][~needed] = -1
        rows["comm"][~needed] = -1
        rank = flat.rank[idx].astype(np.int64) + lo
        outgoing.append((rank, idx - flat.offsets[flat.rank[idx]], rows))
    incoming = comm.alltoall(outgoing)

    events = [np.zeros(0, tm.EVENT_DTYPE) for _ in range(len(counts))]
    local = [np.zeros(0, np.int64) for _ in range(len(counts))]
    for r in range(lo, hi):
        events[r] = trace.events[r]
        local[r] = np.arange(len(trace.events[r]), dtype=np.int64)
    parts = [x for x in incoming if x is not None]
    if parts:
        rank = np.concatenate([x[0] for x in parts])
        idx = np.concatenate([x[1] for x in parts])
        rows = np.concatenate([x[2] for x in parts])
        # already sorted by (rank, index): senders' blocks are in rank order and each part is sorted
        cut = np.searchsorted(rank, np.arange(len(counts) + 1))
        for r in np.unique(rank).tolist():
            events[r], local[r] = rows[cut[r]:cut[r + 1]], idx[cut[r]:cut[r + 1]]
    partial = tm.Trace(regions=trace.regions, comms=trace.comms, events=events, windows=trace.windows,
                       meta=trace.meta, locations=trace.locations)
    ctx = _context(partial, flat, nest, lo, hi)
    m = ctx.msgs
    if len(m.unmatched_send) or len(m.unmatched_recv):
        side, g = (("send", m.unmatched_send[0]) if len(m.unmatched_send) else ("receive", m.unmatched_recv[0]))
        raise UserError(f"{len(m.unmatched_send)} sends and {len(m.unmatched_recv)} receives seen by analysis "
                        f"process {me} have no partner (first: a {side} on rank {int(ctx.flat.rank[g])} at "
                        f"t={ctx.time[g]:.9g}); the trace is incomplete or a rank's file is missing")
    serial_off = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    serial = serial_off[ctx.flat.rank] + np.concatenate(local)
    return Partial(ctx=ctx, lo=lo, hi=hi, bounds=bounds, counts=counts, serial=serial)


def _context(partial: tm.Trace, own_flat: matching.Flat, own_nest: matching.Nesting, lo: int, hi: int
             ) -> forward.ReplayContext:
    """forward.build_context for the partial trace, reusing the own ranks' flat events and nesting
    (matched once, before the exchange): only the skeleton ranks are matched here, and the two are
    spliced (own block in the middle, indices and call-path ids shifted)."""
    skel = tm.Trace(regions=partial.regions, comms=partial.comms, windows=partial.windows,
                    events=[e if not lo <= r < hi else e[:0] for r, e in enumerate(partial.events)])
    sf = matching.flatten(skel)
    sn = matching.match_regions(sf)
    k, n_own, ncp_own = int(sf.offsets[lo]), len(own_flat.rank), own_nest.ncallpaths

    def idx(own, sk):                 # event indices of both parts in the spliced order
        sk = np.where(sk >= k, sk + n_own, sk)
        return np.concatenate((sk[:k], np.where(own >= 0, own + k, -1), sk[k:]))

    def cps(own, sk):
        sk = np.where(sk >= 0, sk + ncp_own, -1)
        return np.concatenate((sk[:k], own, sk[k:]))

    ev = matching.Columns((name, np.concatenate((sf.ev[name][:k], own_flat.ev[name], sf.ev[name][k:])))
                          for name in tm.EVENT_DTYPE.names)
    rank = np.concatenate((sf.rank[:k], own_flat.rank + lo, sf.rank[k:])).astype(np.int32)
    lengths = np.diff(sf.offsets)
    lengths[lo:hi] = np.diff(own_flat.offsets)
    flat = matching.Flat(ev=ev, rank=rank, offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64))
    nest = matching.Nesting(
        partner=idx(own_nest.partner, sn.partner), owner=idx(own_nest.owner, sn.owner),
        callpath=cps(own_nest.callpath, sn.callpath), cp_after=cps(own_nest.cp_after, sn.cp_after),
        cp_parent=np.concatenate((own_nest.cp_parent, np.where(sn.cp_parent >= 0, sn.cp_parent + ncp_own, -1))),
        cp_region=np.concatenate((own_nest.cp_region, sn.cp_region)))
    # the rest as in forward.build_context
    msgs = matching.match_messages(flat, nest)
    colls = matching.match_collectives(flat, nest, partial.comms)
    t = flat.ev["time"].astype(np.float64, copy=False)
    last_time = np.repeat(t[np.maximum(flat.offsets[1:] - 1, 0)], np.diff(flat.offsets))
    exit_time = np.where(nest.partner >= 0, t[np.maximum(nest.partner, 0)], last_time)
    return forward.ReplayContext(
        trace=partial, flat=flat, nest=nest, msgs=msgs, colls=colls, time=t, exit_time=exit_time,
        **forward.region_tables(partial.regions))


# --- call-path ids as the serial engine numbers them ----------------------------------------------

def _depths(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), np.int64)
    for i, p in enumerate(parent.tolist()):        # parents always have smaller ids
        depth[i] = depth[p] + 1 if p >= 0 else 0
    return depth


def rank_callpaths(part: Partial) -> list[np.ndarray]:
    """Per own rank: the (partial) call-path ids entered on it."""
    ctx = part.ctx
    off, kind = ctx.flat.offsets, ctx.ev["kind"]
    out = []
    for r in range(part.lo, part.hi):
        a, b = int(off[r]), int(off[r + 1])
        out.append(np.unique(ctx.nest.callpath[a:b][kind[a:b] == tm.ENTER]))
    return out


def merge_callpaths(tables: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]]):
    """Serial call-path numbering from every process's (parent, region, per-rank call paths), in
    process = rank order: the serial engine interns rank by rank, level by level, new paths of a
    level in (parent id, region) order.  Returns (per process: partial id -> global id, global
    parent table, global region table)."""
    ids: dict[tuple[int, int], int] = {}
    g_parent: list[int] = []
    g_region: list[int] = []
    maps = []
    for parent, region, per_rank in tables:
        depth = _depths(parent)
        gmap = np.full(len(parent), -1, np.int64)
        for cps in per_rank:
            cps = np.asarray(cps, np.int64)
            for lv in np.unique(depth[cps]).tolist():
                sel = cps[depth[cps] == lv]
                keys = sorted({((int(gmap[parent[c]]) if parent[c] >= 0 else -1), int(region[c])): c
                               for c in sel.tolist()}.items())
                for key, c in keys:
                    if key not in ids:
                        ids[key] = len(g_parent)
                        g_parent.append(key[0])
                        g_region.append(key[1])
                for c in sel.tolist():
                    gmap[c] = ids[((int(gmap[parent[c]]) if parent[c] >= 0 else -1), int(region[c]))]
        maps.append(gmap)
    return maps, np.array(g_parent, np.int64), np.array(g_region, np.int64)
