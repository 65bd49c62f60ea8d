"""OTF2 traces through PyPI `otf2` (imported lazily): read what Score-P writes, write what Scalasca's
scout accepts (rules measured in shared/notes/otf2-for-scalasca.md).

Reading translates communicator ranks to world ranks through the COMM_LOCATIONS group (the
location order of MPI_COMM_WORLD) and the COMM_GROUP groups; without COMM_LOCATIONS, process
location groups in definition order are the ranks.  Only the first CPU thread of each process is
read (pure MPI); events of other threads are counted in meta["otf2_skipped_events"].  Times become
seconds since the trace's global offset (or exactly what scalgraph wrote, see below); libotf2 has
already applied Score-P's per-location ClockOffset definitions (linear offset interpolation, the
first step of seed 004's correction).  OTF2's
COLLECTIVE_BEGIN and IRECV_REQUEST carry no communicator; they get the one of the COLL_END / IRECV
that completes them.

Writing emits: one PROCESS location group per rank with id = rank, one CPU_THREAD location each,
one COMM_LOCATIONS group first, then one COMM_GROUP + COMM per communicator, MPI regions with
source file "MPI" and their MPI names and Score-P roles, COLL_BEGIN before every COLL_END, a
zero-length MPI_Init/MPI_Finalize at the global first/last time on ranks whose trace lacks them,
timer resolution 1 ns.  Each region's description names its PSG vertex ("PSG vertex 12"), which also
keeps regions apart that differ only in their vertex (otf2 merges equal definitions); regions are
mapped by OTF2 reference, never by name.  RMA_SYNC inside MPI_Win_lock / MPI_Win_unlock is written
as RmaRequestLock (lock type exclusive for tag 1 and 0 = unknown, shared for tag 2) / RmaReleaseLock;
reading maps RmaRequestLock, RmaAcquireLock (once per lock) and RmaReleaseLock back to RMA_SYNC.
Definitions OTF2 cannot hold (our communicator/window ids, PSG vertices, meta, the time origin,
whether COLL_BEGIN carried a communicator) travel as JSON in the description of an attribute named
"scalgraph", so a trace scalgraph wrote reads back identical (times are whole nanoseconds; a lock
of unknown type, tag 0, reads back as exclusive, tag 1, which the analysis treats the same).
meta["clock_offsets"] stays in that attribute (it is applied by scalgraph.trace.clock), not as OTF2 ClockOffset records.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import sys

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model.trace import (COLL_BEGIN, COLL_END, ENTER, EXIT, IRECV, IRECV_REQUEST, ISEND,
                                   ISEND_COMPLETE, RECV, REQUEST_CANCELLED, RMA_ACC, RMA_GET, RMA_PUT,
                                   RMA_SYNC, SEND, Region, Trace, make_events)

RESOLUTION = 1_000_000_000          # ticks per second we write
UNDEFINED_U32 = 0xFFFFFFFF
UNDEFINED_U64 = 2**64 - 1
META_ATTRIBUTE = "scalgraph"

# MPI name (lower case, without MPI_) -> (OTF2 collective op name, Score-P region role name)
_COLLECTIVES = {
    "barrier": ("BARRIER", "BARRIER"), "bcast": ("BCAST", "COLL_ONE2ALL"),
    "scatter": ("SCATTER", "COLL_ONE2ALL"), "scatterv": ("SCATTERV", "COLL_ONE2ALL"),
    "reduce": ("REDUCE", "COLL_ALL2ONE"), "gather": ("GATHER", "COLL_ALL2ONE"),
    "gatherv": ("GATHERV", "COLL_ALL2ONE"), "allreduce": ("ALLREDUCE", "COLL_ALL2ALL"),
    "allgather": ("ALLGATHER", "COLL_ALL2ALL"), "allgatherv": ("ALLGATHERV", "COLL_ALL2ALL"),
    "alltoall": ("ALLTOALL", "COLL_ALL2ALL"), "alltoallv": ("ALLTOALLV", "COLL_ALL2ALL"),
    "alltoallw": ("ALLTOALLW", "COLL_ALL2ALL"), "reduce_scatter": ("REDUCE_SCATTER", "COLL_ALL2ALL"),
    "reduce_scatter_block": ("REDUCE_SCATTER_BLOCK", "COLL_ALL2ALL"), "scan": ("SCAN", "COLL_OTHER"),
    "exscan": ("EXSCAN", "COLL_OTHER"),
}
_P2P = {"send", "bsend", "ssend", "rsend", "isend", "ibsend", "issend", "irsend", "recv", "irecv",
        "sendrecv", "sendrecv_replace"}


def _otf2():
    try:
        import otf2
    except ImportError:
        raise UserError("OTF2 support needs the Python package `otf2`: pip install otf2") from None
    return otf2


def is_otf2_anchor(head: bytes) -> bool:
    # An OTF2 anchor file is a small binary file whose first bytes carry the format name.
    return b"OTF2" in head[:8]


# --------------------------------------------------------------------------------------------- read

def read_otf2(anchor: str | os.PathLike) -> Trace:
    otf2 = _otf2()
    stem = pathlib.Path(anchor).stem
    with _quiet_stderr():
        try:
            reader_cm = otf2.reader.open(str(anchor))
            reader = reader_cm.__enter__()
        except Exception:    # the C library reports every malformed archive as a generic error
            raise UserError(f"{anchor}: not a readable OTF2 archive: its anchor file or global definitions "
                            f"({stem}.def) are missing or damaged") from None
        return _read_archive(anchor, stem, reader, reader_cm)


def _read_archive(anchor, stem, reader, reader_cm) -> Trace:
    from otf2.enums import GroupType, LocationType, Paradigm
    try:
        defs = reader.definitions
        saved = _saved_meta(defs)
        res = defs.clock_properties.timer_resolution
        zero = saved.get("time_zero_ticks", defs.clock_properties.global_offset) if saved else defs.clock_properties.global_offset
        rank_of = _rank_map(defs, GroupType, LocationType, Paradigm)
        nranks = len(set(rank_of.values()))
        if nranks == 0:
            raise UserError(f"{anchor}: the OTF2 archive defines no CPU locations")
        regions, region_index = _read_regions(defs, saved)
        comms, comm_id, self_comm_refs = _read_comms(defs, rank_of, GroupType, saved)
        windows, win_id, win_members = _read_windows(defs, comms, comm_id, saved)
        raw = _raw_events(reader)
        # scalgraph's shim leaves COLL_BEGIN without communicator; Score-P archives and hand-made traces get one
        begin_comm = saved.get("coll_begin_comm", True) if saved else True
        events, skipped = _translate(raw, anchor, nranks, rank_of, region_index, comms, comm_id, self_comm_refs,
                                     win_id, win_members, zero, res, begin_comm)
        meta = dict(saved.get("meta", {})) if saved else {"source": "otf2", "otf2_timer_resolution": res}
        if skipped:
            meta["otf2_skipped_events"] = skipped
        return Trace(regions=regions, comms=comms, events=events, windows=windows, meta=meta)
    except UserError:
        raise
    except Exception:
        raise UserError(f"{anchor}: OTF2 definitions or event data ({stem}/*.def, *.evt) are missing or damaged; "
                        f"copy the whole archive directory or record it again") from None
    finally:
        reader_cm.__exit__(None, None, None)


# Raw record: (location ref, ticks, kind, region ref, peer in comm/window ranks, tag, comm or window ref,
# bytes, bytes received, request).  Built straight from libotf2's callbacks: constructing otf2's event
# objects costs several times more than the reading itself.
_RAW = ("loc", "ticks", "kind", "region", "peer", "tag", "comm", "bytes", "bytes_recv", "request")
_RAW_DTYPE = np.dtype([(name, "<u8" if name in ("loc", "ticks", "request") else "<i8") for name in _RAW])


def _raw_events(reader) -> np.ndarray:
    import _otf2
    rows: list[tuple] = []
    NOREQ = UNDEFINED_U64
    add = rows.append
    cb = {
        "Enter": lambda loc, t, u, a, reg: add((loc, t, ENTER, reg, -1, 0, -1, 0, 0, NOREQ)),
        "Leave": lambda loc, t, u, a, reg: add((loc, t, EXIT, reg, -1, 0, -1, 0, 0, NOREQ)),
        "MpiSend": lambda loc, t, u, a, peer, comm, tag, n: add((loc, t, SEND, -1, peer, tag, comm, n, 0, NOREQ)),
        "MpiIsend": lambda loc, t, u, a, peer, comm, tag, n, req: add((loc, t, ISEND, -1, peer, tag, comm, n, 0, req)),
        "MpiRecv": lambda loc, t, u, a, peer, comm, tag, n: add((loc, t, RECV, -1, peer, tag, comm, n, 0, NOREQ)),
        "MpiIrecv": lambda loc, t, u, a, peer, comm, tag, n, req: add((loc, t, IRECV, -1, peer, tag, comm, n, 0, req)),
        "MpiIsendComplete": lambda loc, t, u, a, req: add((loc, t, ISEND_COMPLETE, -1, -1, 0, -1, 0, 0, req)),
        "MpiIrecvRequest": lambda loc, t, u, a, req: add((loc, t, IRECV_REQUEST, -1, -1, 0, -1, 0, 0, req)),
        "MpiRequestCancelled": lambda loc, t, u, a, req: add((loc, t, REQUEST_CANCELLED, -1, -1, 0, -1, 0, 0, req)),
        "MpiCollectiveBegin": lambda loc, t, u, a: add((loc, t, COLL_BEGIN, -1, -1, 0, -1, 0, 0, NOREQ)),
        "MpiCollectiveEnd": lambda loc, t, u, a, op, comm, root, n, m: add((loc, t, COLL_END, -1, root, 0, comm, n, m, NOREQ)),
        "RmaPut": lambda loc, t, u, a, win, peer, n, mid: add((loc, t, RMA_PUT, -1, peer, 0, win, n, 0, mid)),
        "RmaGet": lambda loc, t, u, a, win, peer, n, mid: add((loc, t, RMA_GET, -1, peer, 0, win, n, 0, mid)),
        "RmaAtomic": lambda loc, t, u, a, win, peer, typ, n, m, mid: add((loc, t, RMA_ACC, -1, peer, 0, win, n, m, mid)),
        "RmaSync": lambda loc, t, u, a, win, peer, typ: add((loc, t, RMA_SYNC, -1, peer, 0, win, 0, 0, NOREQ)),
        # locks: the lock type becomes the RMA_SYNC tag, the lock id rides in `request` until _merge_locks
        "RmaRequestLock": lambda loc, t, u, a, win, peer, lid, typ: add((loc, t, _RAW_REQUEST_LOCK, -1, peer,
                                                                         _lock_tag(typ), win, 0, 0, lid)),
        "RmaAcquireLock": lambda loc, t, u, a, win, peer, lid, typ: add((loc, t, _RAW_ACQUIRE_LOCK, -1, peer,
                                                                         _lock_tag(typ), win, 0, 0, lid)),
        "RmaReleaseLock": lambda loc, t, u, a, win, peer, lid: add((loc, t, RMA_SYNC, -1, peer, 0, win, 0, 0, NOREQ)),
    }
    handle = reader._get_global_evt_reader_handle(None)
    cbs = _otf2.GlobalEvtReaderCallbacks_New()
    for name, fn in cb.items():
        getattr(_otf2, f"GlobalEvtReaderCallbacks_Set{name}Callback")(cbs, fn)
    _otf2.GlobalEvtReader_SetCallbacks(handle, cbs, None)
    _otf2.GlobalEvtReaderCallbacks_Delete(cbs)
    # Batches become numpy rows at once, so Python tuples never hold more than one batch.
    batch = 1 << 16
    chunks = []
    while True:
        got = _otf2.GlobalEvtReader_ReadEvents(handle, batch)
        chunks.append(np.array(rows, dtype=_RAW_DTYPE))
        rows.clear()
        if got < batch:
            return _merge_locks(np.concatenate(chunks))


# Raw kinds of lock records before _merge_locks turns them into RMA_SYNC (outside EVENT_KINDS).
_RAW_REQUEST_LOCK, _RAW_ACQUIRE_LOCK = 100, 101
# OTF2 LockType (EXCLUSIVE 0, SHARED 1) <-> our RMA_SYNC tag of MPI_Win_lock (docs/rma-patterns.md)
_TAG_EXCLUSIVE, _TAG_SHARED = 1, 2


def _lock_tag(lock_type) -> int:
    return _TAG_SHARED if int(getattr(lock_type, "value", lock_type)) == 1 else _TAG_EXCLUSIVE


def _merge_locks(raw: np.ndarray) -> np.ndarray:
    """One MPI_Win_lock is one RMA_SYNC: Score-P may record RmaRequestLock in the lock call and
    RmaAcquireLock when the grant is seen; an acquire whose lock (location, window, target, lock id)
    was requested before is the same lock and is dropped."""
    is_lock = np.isin(raw["kind"], (_RAW_REQUEST_LOCK, _RAW_ACQUIRE_LOCK))
    if not is_lock.any():
        return raw
    drop = np.zeros(len(raw), bool)
    requested = set()
    for i in np.flatnonzero(is_lock).tolist():
        key = (int(raw["loc"][i]), int(raw["comm"][i]), int(raw["peer"][i]), int(raw["request"][i]))
        if raw["kind"][i] == _RAW_REQUEST_LOCK:
            requested.add(key)
        elif key in requested:
            requested.discard(key)
            drop[i] = True
    raw = raw[~drop]
    lock = np.isin(raw["kind"], (_RAW_REQUEST_LOCK, _RAW_ACQUIRE_LOCK))
    raw["kind"][lock] = RMA_SYNC
    raw["request"][lock] = UNDEFINED_U64
    return raw


def _lookup(mapping: dict[int, int], keys: np.ndarray, missing: int = -1) -> np.ndarray:
    """Vectorised dict lookup for integer keys; `missing` where a key is absent."""
    if not mapping:
        return np.full(len(keys), missing, np.int64)
    k = np.array(sorted(mapping), dtype=np.uint64)
    v = np.array([mapping[x] for x in sorted(mapping)], dtype=np.int64)
    pos = np.clip(np.searchsorted(k, keys), 0, len(k) - 1)
    return np.where(k[pos] == keys, v[pos], missing)


def _translate(raw, anchor, nranks, rank_of, region_index, comms, comm_id, self_comm_refs, win_id, win_members,
               zero, res, begin_comm: bool):
    """Raw records -> per-rank event arrays with world ranks and our communicator/window ids."""
    cols = {name: raw[name] for name in _RAW}
    rank = _lookup(rank_of, cols["loc"])
    keep = rank >= 0
    skipped = int((~keep).sum())
    cols = {k: v[keep] for k, v in cols.items()}
    rank = rank[keep]
    kind = cols["kind"]
    n = len(kind)
    region = np.full(n, -1, np.int64)
    is_region = (kind == ENTER) | (kind == EXIT)
    region[is_region] = _lookup(region_index, cols["region"][is_region].astype(np.uint64))
    peer = np.full(n, -1, np.int64)
    comm = np.full(n, -1, np.int64)
    uses_comm = np.isin(kind, (SEND, ISEND, RECV, IRECV, COLL_END))
    for ref in np.unique(cols["comm"][uses_comm]).tolist():
        sel = uses_comm & (cols["comm"] == ref)
        crank = cols["peer"][sel]
        if ref in self_comm_refs:             # MPI_COMM_SELF: a one-member communicator per rank
            base = max(comms, default=-1) + 1
            for r in np.unique(rank[sel]).tolist():
                comms[base + r] = [r]
            comm[sel] = base + rank[sel]
            peer[sel] = np.where(crank == UNDEFINED_U32, -1, rank[sel])
            continue
        if ref not in comm_id:
            raise UserError(f"{anchor}: events use communicator #{ref}, which is not defined as an MPI group")
        cid = comm_id[ref]
        members = np.asarray(comms[cid], np.int64)
        undefined_root = (kind[sel] == COLL_END) & (crank == UNDEFINED_U32)
        bad = ~undefined_root & ((crank < 0) | (crank >= len(members)))
        if bad.any():
            raise UserError(f"{anchor}: rank {int(crank[bad][0])} is outside communicator #{ref} of size {len(members)}")
        comm[sel] = cid
        peer[sel] = np.where(undefined_root, -1, members[np.clip(crank, 0, len(members) - 1)])
    is_rma = np.isin(kind, (RMA_PUT, RMA_GET, RMA_ACC, RMA_SYNC))
    for ref in np.unique(cols["comm"][is_rma]).tolist():
        sel = is_rma & (cols["comm"] == ref)
        wid = win_id[ref]
        members = np.asarray(win_members[wid], np.int64)
        remote = cols["peer"][sel]
        inside = (remote >= 0) & (remote < len(members))
        comm[sel] = wid
        peer[sel] = np.where(inside, members[np.clip(remote, 0, max(len(members) - 1, 0))] if len(members) else -1, -1)
    request = cols["request"].view(np.int64)
    request = np.where(request < 0, -1, request)        # OTF2_UNDEFINED_UINT64 and the like
    times = (cols["ticks"].astype(np.int64) - np.int64(zero)) / res
    order = np.argsort(rank, kind="stable")           # libotf2 delivers in time order; keep it per rank
    counts = np.bincount(rank, minlength=nranks)
    events = []
    start = 0
    for r in range(nranks):
        idx = order[start:start + counts[r]]
        start += counts[r]
        ev = make_events(len(idx))
        ev["time"] = times[idx]
        ev["kind"] = kind[idx]
        ev["region"] = region[idx]
        ev["peer"] = peer[idx]
        ev["tag"] = cols["tag"][idx]
        ev["comm"] = comm[idx]
        ev["bytes"] = cols["bytes"][idx]
        ev["bytes_recv"] = cols["bytes_recv"][idx]
        ev["request"] = request[idx]
        # OTF2's COLLECTIVE_BEGIN has no communicator: give each BEGIN the one of its END
        begins, ends = np.flatnonzero(ev["kind"] == COLL_BEGIN), np.flatnonzero(ev["kind"] == COLL_END)
        if begin_comm and len(begins) == len(ends):
            ev["comm"][begins] = ev["comm"][ends]
        events.append(ev)
    _restore_request_comms(events)
    return events, skipped


def _restore_request_comms(events: list[np.ndarray]) -> None:
    """OTF2's IRECV_REQUEST carries no communicator: give it the one of the IRECV completing it."""
    from scalgraph.trace import matching
    flat = matching.flatten(Trace(regions=[], comms={}, events=events))
    pair = matching.match_requests(flat, IRECV_REQUEST, IRECV)
    posts = np.flatnonzero((flat.ev["kind"] == IRECV_REQUEST) & (pair >= 0))
    comm = flat.ev["comm"]
    comm[posts] = comm[pair[posts]]
    for r, ev in enumerate(events):
        ev["comm"] = comm[flat.offsets[r]:flat.offsets[r + 1]]


@contextlib.contextmanager
def _quiet_stderr():
    """libotf2 prints every internal error to file descriptor 2; we report one line instead."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _text(s) -> str:
    """A string field: the reader gives str, a definition or None (undefined)."""
    if s is None:
        return ""
    return s if isinstance(s, str) else str(getattr(s, "name", s))


def _saved_meta(defs) -> dict:
    for a in defs.attributes:
        if a.name == META_ATTRIBUTE:
            try:
                return json.loads(a.description)
            except ValueError:
                return {}
    return {}


def _rank_map(defs, GroupType, LocationType, Paradigm) -> dict[int, int]:
    """location ref -> world rank."""
    for g in defs.groups:
        if g.group_type == GroupType.COMM_LOCATIONS and g.paradigm == Paradigm.MPI:
            return {loc._ref: r for r, loc in enumerate(g.members)}
    # No MPI: process location groups in definition order are the ranks; first CPU thread of each.
    rank_of: dict[int, int] = {}
    firsts: dict[int, int] = {}
    for loc in defs.locations:
        if loc.type == LocationType.CPU_THREAD and loc.group._ref not in firsts:
            firsts[loc.group._ref] = loc._ref
    for r, gref in enumerate(sorted(firsts)):
        rank_of[firsts[gref]] = r
    return rank_of


def _read_regions(defs, saved: dict) -> tuple[list[Region], dict[int, int]]:
    """Regions in definition order, mapped by OTF2 reference (never by name: two regions may share
    name, file and line and differ only in their PSG vertex).  The vertex is the saved one of that
    definition, else the one in the description (see _region_descriptions)."""
    vertices = saved.get("region_vertices", []) if saved else []
    regions, index = [], {}
    for i, r in enumerate(defs.regions):
        index[r._ref] = i
        vertex = int(vertices[i]) if i < len(vertices) else _vertex_in(_text(r.description))
        regions.append(Region(name=r.name, file=_text(r.source_file), line=int(r.begin_line_number), vertex=vertex))
    return regions, index


_VERTEX_PREFIX = "PSG vertex "


def _vertex_in(description: str) -> int:
    if description.startswith(_VERTEX_PREFIX):
        number = description[len(_VERTEX_PREFIX):].split(" ", 1)[0]
        if number.isdigit():
            return int(number)
    return -1


def _read_comms(defs, rank_of, GroupType, saved: dict):
    ids = saved.get("comm_ids") if saved else None
    comms, comm_id, self_refs = {}, {}, set()
    for k, c in enumerate(defs.comms):
        group = getattr(c, "group", None)
        if group is None:
            continue                      # inter-communicators are not modelled
        if group.group_type == GroupType.COMM_SELF:
            self_refs.add(c._ref)
            continue
        if group.group_type != GroupType.COMM_GROUP:
            continue                      # e.g. Score-P's "Process x Threads" measurement communicator
        members = [rank_of.get(loc._ref) for loc in group.members]
        if any(m is None for m in members):
            continue
        cid = int(ids[k]) if ids and k < len(ids) else c._ref
        comms[cid] = members
        comm_id[c._ref] = cid
    return comms, comm_id, self_refs


def _read_windows(defs, comms, comm_id, saved: dict):
    ids = saved.get("window_ids") if saved else None
    windows, win_id, members = {}, {}, {}
    for k, w in enumerate(defs.rma_wins):
        wid = int(ids[k]) if ids and k < len(ids) else w._ref
        win_id[w._ref] = wid
        cid = comm_id.get(w.comm._ref, -1)
        windows[wid] = cid
        members[wid] = comms.get(cid, [])
    return windows, win_id, members


# -------------------------------------------------------------------------------------------- write

def write_otf2(trace: Trace, anchor: str | os.PathLike) -> None:
    """Write the archive whose anchor file is `anchor` (must end in .otf2, basename > 5 characters,
    as scout requires).  The archive directory beside it must not exist yet."""
    otf2 = _otf2()
    from otf2.enums import (CollectiveOp, GroupType, LocationGroupType, LocationType, LockType, Paradigm,
                            RegionRole, RmaAtomicType, RmaSyncType, Type)
    anchor = pathlib.Path(anchor)
    if anchor.suffix != ".otf2" or len(anchor.name) <= 5 + len(".otf2"):
        raise UserError(f"{anchor}: an OTF2 anchor must end in .otf2 with a base name longer than 5 characters "
                        f"(e.g. traces.otf2), or Scalasca will not open it")
    archive_dir, name = anchor.parent, anchor.stem
    if anchor.exists() or (archive_dir / name).exists():
        raise UserError(f"{anchor}: an OTF2 archive of that name already exists; choose another name or remove it")
    archive_dir.mkdir(parents=True, exist_ok=True)
    n = trace.nranks
    tmin = min((float(e["time"][0]) for e in trace.events if len(e)), default=0.0)
    tmax = max((float(e["time"][-1]) for e in trace.events if len(e)), default=0.0)
    zero = 0 if tmin >= 0 else int(np.ceil(-tmin * RESOLUTION))   # ticks are unsigned
    saved = {"time_zero_ticks": zero, "comm_ids": sorted(trace.comms), "window_ids": sorted(trace.windows),
             "region_vertices": [r.vertex for r in trace.regions], "meta": trace.meta,
             "coll_begin_comm": any(bool((e["comm"][e["kind"] == COLL_BEGIN] >= 0).any()) for e in trace.events)}
    try:
        saved_text = json.dumps(saved, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise UserError(f"cannot write {anchor}: trace meta is not plain JSON ({e})") from None
    regions = list(trace.regions)
    init_idx = _find_or_add(regions, ("MPI_Init", "MPI_Init_thread"))
    fin_idx = _find_or_add(regions, ("MPI_Finalize",))
    try:
        with otf2.writer.open(str(archive_dir), archive_name=name, timer_resolution=RESOLUTION) as w:
            d = w.definitions
            d.attribute(META_ATTRIBUTE, description=saved_text, type=Type.STRING)
            node = d.system_tree_node("machine")
            groups = [d.location_group(f"MPI Rank {r}", location_group_type=LocationGroupType.PROCESS,
                                       system_tree_parent=node) for r in range(n)]
            locs = [d.location("Master thread", type=LocationType.CPU_THREAD, group=g) for g in groups]
            d.group("MPI_COMM_WORLD locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
                    members=locs)
            comm_def = {}
            for cid in sorted(trace.comms):
                members = [int(m) for m in trace.comms[cid]]
                g = d.group(f"comm {cid} group", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                            members=members)
                cname = "MPI_COMM_WORLD" if members == list(range(n)) and "MPI_COMM_WORLD" not in \
                    {c.name for c in comm_def.values()} else f"MPI comm {cid}"
                comm_def[cid] = d.comm(cname, group=g)
            win_def = {wid: d.rma_win(f"window {wid}", comm=comm_def[trace.windows[wid]]) for wid in sorted(trace.windows)}
            region_def = [_region_def(d, r, text, Paradigm, RegionRole)
                          for r, text in zip(regions, _region_descriptions(regions))]
            for rank in range(n):
                _write_rank(w, locs[rank], trace, rank, region_def, comm_def, win_def,
                            init_idx, fin_idx, tmin, tmax, zero, CollectiveOp, RmaAtomicType, RmaSyncType, LockType)
    except UserError:
        shutil.rmtree(archive_dir / name, ignore_errors=True)
        anchor.unlink(missing_ok=True)
        raise


def _find_or_add(regions: list[Region], names: tuple[str, ...]) -> list[int]:
    """Indices of the regions with one of `names` (the first name is added if none exists)."""
    found = [i for i, r in enumerate(regions) if r.name in names]
    if not found:
        regions.append(Region(name=names[0], file="MPI"))
        found = [len(regions) - 1]
    return found


def _region_descriptions(regions: list[Region]) -> list[str]:
    """One description per region that makes every region definition distinct: otf2 returns the
    existing definition for equal fields, which would merge regions differing only in their PSG
    vertex (or not at all) and shift every later region index."""
    texts, seen = [], set()
    for i, r in enumerate(regions):
        text = f"{_VERTEX_PREFIX}{r.vertex}" if r.vertex >= 0 else ""
        key = (r.name, r.is_mpi, r.file if not r.is_mpi else "MPI", r.line, text)
        if key in seen:
            text = f"{text} (region {i})".strip()
        seen.add(key)
        texts.append(text)
    return texts


def _region_def(d, r: Region, description: str, Paradigm, RegionRole):
    if not r.is_mpi:
        return d.region(r.name, canonical_name=r.name, description=description, source_file=r.file or None,
                        begin_line_number=r.line, end_line_number=r.line, paradigm=Paradigm.USER,
                        region_role=RegionRole.FUNCTION)
    op = r.name[4:].lower() if r.name.upper().startswith("MPI_") else ""
    if op in _COLLECTIVES:
        role = getattr(RegionRole, _COLLECTIVES[op][1])
    elif op in _P2P:
        role = RegionRole.POINT2POINT
    else:
        role = RegionRole.FUNCTION
    # scout classifies MPI regions by the source file "MPI" alone; the name keeps its MPI spelling.
    return d.region(r.name, canonical_name=r.name, description=description, source_file="MPI",
                    begin_line_number=r.line, end_line_number=r.line, paradigm=Paradigm.MPI, region_role=role)


def _write_rank(w, loc, trace, rank, region_def, comm_def, win_def, init_idx, fin_idx, tmin, tmax, zero,
                CollectiveOp, RmaAtomicType, RmaSyncType, LockType) -> None:
    """One rank's events through libotf2's writer calls directly (otf2's event objects cost several
    times more than the writing); the bookkeeping otf2.EventWriter.write would do is done per rank."""
    import _otf2
    out = w.event_writer_from_location(loc)
    h = out.handle
    ev = trace.events[rank]
    reg = [r._ref for r in region_def]
    cref = {c: d._ref for c, d in comm_def.items()}
    wref = {c: d._ref for c, d in win_def.items()}
    comm_rank = {cid: {m: i for i, m in enumerate(members)} for cid, members in trace.comms.items()}
    win_rank = {wid: comm_rank.get(cid, {}) for wid, cid in trace.windows.items()}
    ticks = (np.rint(ev["time"] * RESOLUTION).astype(np.int64) + zero).tolist()
    regions_entered = set(ev["region"][ev["kind"] == ENTER].tolist())
    count = 0
    first = last = None
    lock_id: dict[tuple[int, int], int] = {}      # (window, target) -> id of the open MPI_Win_lock
    lock_id_next = 0
    if not regions_entered.intersection(init_idx):
        first = t = int(round(tmin * RESOLUTION)) + zero
        _otf2.EvtWriter_Enter(h, None, t, reg[init_idx[0]])
        _otf2.EvtWriter_Leave(h, None, t, reg[init_idx[0]])
        count += 2
    stack: list[int] = []
    for t, kind, region, peer, tag, comm, nbytes, nrecv, req in zip(
            ticks, *(ev[f].tolist() for f in ("kind", "region", "peer", "tag", "comm", "bytes", "bytes_recv", "request"))):
        if kind == ENTER:
            stack.append(region)
            _otf2.EvtWriter_Enter(h, None, t, reg[region])
        elif kind == EXIT:
            top = stack.pop() if stack else region
            _otf2.EvtWriter_Leave(h, None, t, reg[region if region >= 0 else top])
        elif kind == SEND:
            _otf2.EvtWriter_MpiSend(h, None, t, comm_rank[comm][peer], cref[comm], tag, nbytes)
        elif kind == ISEND:
            _otf2.EvtWriter_MpiIsend(h, None, t, comm_rank[comm][peer], cref[comm], tag, nbytes, req)
        elif kind == RECV:
            _otf2.EvtWriter_MpiRecv(h, None, t, comm_rank[comm][peer], cref[comm], tag, nbytes)
        elif kind == IRECV:
            _otf2.EvtWriter_MpiIrecv(h, None, t, comm_rank[comm][peer], cref[comm], tag, nbytes, req)
        elif kind == ISEND_COMPLETE:
            _otf2.EvtWriter_MpiIsendComplete(h, None, t, req)
        elif kind == IRECV_REQUEST:
            _otf2.EvtWriter_MpiIrecvRequest(h, None, t, req)
        elif kind == REQUEST_CANCELLED:
            _otf2.EvtWriter_MpiRequestCancelled(h, None, t, req)
        elif kind == COLL_BEGIN:
            _otf2.EvtWriter_MpiCollectiveBegin(h, None, t)
        elif kind == COLL_END:
            root = UNDEFINED_U32 if peer < 0 else comm_rank[comm][peer]
            _otf2.EvtWriter_MpiCollectiveEnd(h, None, t, _collective_op(trace, stack, CollectiveOp), cref[comm],
                                             root, nbytes, nrecv)
        elif kind in (RMA_PUT, RMA_GET, RMA_ACC, RMA_SYNC):
            remote = win_rank[comm].get(peer, UNDEFINED_U32)
            mid = req if req >= 0 else UNDEFINED_U64
            if kind == RMA_PUT:
                _otf2.EvtWriter_RmaPut(h, None, t, wref[comm], remote, nbytes, mid)
            elif kind == RMA_GET:
                _otf2.EvtWriter_RmaGet(h, None, t, wref[comm], remote, nbytes, mid)
            elif kind == RMA_ACC:
                _otf2.EvtWriter_RmaAtomic(h, None, t, wref[comm], remote, RmaAtomicType.ACCUMULATE, nbytes, nrecv, mid)
            elif _in_region(trace, stack, "MPI_Win_lock") and remote != UNDEFINED_U32:
                lock_id[(comm, remote)] = lock_id_next = lock_id_next + 1
                _otf2.EvtWriter_RmaRequestLock(h, None, t, wref[comm], remote, lock_id_next,
                                               LockType.SHARED if tag == _TAG_SHARED else LockType.EXCLUSIVE)
            elif _in_region(trace, stack, "MPI_Win_unlock") and (comm, remote) in lock_id:
                _otf2.EvtWriter_RmaReleaseLock(h, None, t, wref[comm], remote, lock_id.pop((comm, remote)))
            else:
                _otf2.EvtWriter_RmaSync(h, None, t, wref[comm], remote, RmaSyncType.MEMORY)
        else:
            continue
        count += 1
    if ticks:
        first = ticks[0] if first is None else first
        last = ticks[-1]
    if not regions_entered.intersection(fin_idx):
        last = t = int(round(tmax * RESOLUTION)) + zero
        first = t if first is None else first
        _otf2.EvtWriter_Enter(h, None, t, reg[fin_idx[0]])
        _otf2.EvtWriter_Leave(h, None, t, reg[fin_idx[0]])
        count += 2
    loc._number_of_events_written = count          # what EventWriter.write counts per event
    if first is not None:
        w._update_timestamps(first)                # and what it tracks for the clock properties
        w._update_timestamps(last)


def _in_region(trace: Trace, stack: list[int], name: str) -> bool:
    return bool(stack) and trace.regions[stack[-1]].name == name


def _collective_op(trace: Trace, stack: list[int], CollectiveOp):
    name = trace.regions[stack[-1]].name if stack else ""
    op = name[4:].lower() if name.upper().startswith("MPI_") else ""
    if op.startswith("i") and op[1:] in _COLLECTIVES:
        op = op[1:]                       # non-blocking collectives carry the blocking op
    return getattr(CollectiveOp, _COLLECTIVES.get(op, ("BARRIER",))[0])
