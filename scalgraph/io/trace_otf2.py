"""OTF2 traces through PyPI `otf2` (imported lazily): read what Score-P writes, write what Scalasca's
scout accepts (rules measured in shared/notes/otf2-for-scalasca.md; docs/trace-formats.md).

Reading: definitions through `otf2`'s reader; events per location through libotf2's local event
readers (which apply the archive's ID mappings and ClockOffset definitions, the first step of seed
004's correction) into fixed-size C records (otf2_events.c, built at first use; libotf2's Python
callbacks without a C compiler).  Only the locations of the ranks asked for are read
(read_otf2(anchor, ranks)).  Communicator ranks become world ranks through the COMM_LOCATIONS group
(the location order of MPI_COMM_WORLD) and the COMM_GROUP groups; without COMM_LOCATIONS, process
location groups in definition order are the ranks.  Only the first CPU thread of each process is
read (pure MPI); events of other threads are counted in meta["otf2_skipped_events"].  Times become
seconds since the trace's global offset (or exactly what scalgraph wrote).  ProgramBegin/ProgramEnd
become Trace.program_begin/program_end; COLLECTIVE_END keeps its own time (COLL_END).  OTF2's
COLLECTIVE_BEGIN and IRECV_REQUEST carry no communicator; they get the one of the COLL_END / IRECV
that completes them.

Writing emits what was recorded, plus what scout needs: one PROCESS location group per rank with
id = rank under a system tree "machine" > "node" (Score-P's classes), one CPU_THREAD location each,
one COMM_LOCATIONS group first, then one COMM_GROUP + COMM per communicator, MPI regions with source
file "MPI", their MPI names and Score-P roles, timer resolution 1 ns; a rank without MPI_Init /
MPI_Finalize gets a zero-length one at its own first / last event (scout's synchronisation points).
Each region's description names its PSG vertex ("PSG vertex 12"), which also keeps regions apart
that differ only in their vertex (otf2 merges equal definitions); regions are mapped by OTF2
reference, never by name.  RMA_SYNC inside MPI_Win_lock / MPI_Win_unlock is written as
RmaRequestLock (exclusive for tag 1 and 0 = unknown, shared for tag 2) / RmaReleaseLock; reading
maps RmaRequestLock, RmaAcquireLock (once per lock) and RmaReleaseLock back to RMA_SYNC.
What OTF2 cannot hold travels as JSON in the description of an attribute named "scalgraph": our
communicator/window ids, PSG vertices and region files, meta, the time origin, which MPI_Init /
MPI_Finalize calls were added (reading removes them), and per rank the event fields the records
cannot carry (_unrepresented), so a trace scalgraph wrote reads back identical.
meta["clock_offsets"] stays in that attribute (applied by scalgraph.trace.clock), not as OTF2 ClockOffset records.
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
from scalgraph.io.otf2_native import THREAD_ACQUIRE_LOCK, THREAD_FORK, THREAD_RELEASE_LOCK
from scalgraph.io.safe_read import MAX_JSON_DEPTH, json_depth
from scalgraph.model.trace import (EVENT_DTYPE, COLL_BEGIN, COLL_END, ENTER, EXIT, IRECV, IRECV_REQUEST, ISEND,
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

def read_otf2(anchor: str | os.PathLike, ranks=None) -> Trace:
    """The archive whose anchor file is `anchor`.  `ranks` (world ranks, e.g. a range): read only
    the locations of these ranks, the others get no events (the parallel replay's own block)."""
    otf2 = _otf2()
    stem = pathlib.Path(anchor).stem
    with _quiet_stderr():
        try:
            reader_cm = otf2.reader.open(str(anchor))
            reader = reader_cm.__enter__()
        except Exception:    # the C library reports every malformed archive as a generic error
            raise UserError(f"{anchor}: not a readable OTF2 archive: its anchor file or global definitions "
                            f"({stem}.def) are missing or damaged") from None
        return _read_archive(anchor, stem, reader, reader_cm, ranks)


def otf2_event_counts(anchor: str | os.PathLike) -> np.ndarray:
    """Events per world rank as the location definitions say (no event is read)."""
    from otf2.enums import GroupType, LocationType, Paradigm
    otf2 = _otf2()
    with _quiet_stderr():
        try:
            with otf2.reader.open(str(anchor)) as reader:
                defs = reader.definitions
                rank_of = _rank_map(defs, GroupType, LocationType, Paradigm)
                counts = np.zeros(len(set(rank_of.values())), np.int64)
                for loc in defs.locations:
                    if loc._ref in rank_of:
                        counts[rank_of[loc._ref]] += int(loc.number_of_events)
                saved = _saved_meta(defs, anchor)
        except UserError:
            raise
        except Exception:
            raise UserError(f"{anchor}: not a readable OTF2 archive: its anchor file or global definitions "
                            f"are missing or damaged") from None
    for key in ("added_init", "added_finalize"):     # our writer's zero-length calls (2 records each), which
        for r in saved.get(key, []):                  # reading removes again
            if isinstance(r, int) and 0 <= r < len(counts):
                counts[r] = max(counts[r] - 2, 0)
    return counts


class _Archive:
    """What translating one location's records needs from the definitions."""

    def __init__(self, anchor, defs, saved, rank_of, nranks, region_index, comms, comm_id, self_refs, win_id,
                 win_members):
        self.anchor, self.defs, self.saved, self.rank_of, self.nranks = anchor, defs, saved, rank_of, nranks
        self.region_index, self.comms, self.comm_id, self.self_refs = region_index, comms, comm_id, self_refs
        self.win_id, self.win_members = win_id, win_members
        res = defs.clock_properties.timer_resolution
        self.res = res
        self.zero = saved.get("time_zero_ticks", defs.clock_properties.global_offset) if saved \
            else defs.clock_properties.global_offset
        # scalgraph's shim leaves COLL_BEGIN without communicator; Score-P archives and hand-made traces get one
        self.begin_comm = saved.get("coll_begin_comm", True) if saved else True
        self.self_base = max(comms, default=-1) + 1       # MPI_COMM_SELF of rank r becomes comm self_base + r
        self.added = {k: set(saved.get(k, [])) for k in ("added_init", "added_finalize")} if saved else {}
        self.region_map = np.full(max(region_index, default=-1) + 1, -1, np.int32)   # reference -> index
        self.region_map[list(region_index)] = list(region_index.values())


def _read_archive(anchor, stem, reader, reader_cm, ranks=None) -> Trace:
    from otf2.enums import GroupType, LocationType, Paradigm
    try:
        defs = reader.definitions
        saved = _saved_meta(defs, anchor)
        rank_of = _rank_map(defs, GroupType, LocationType, Paradigm)
        nranks = len(set(rank_of.values()))
        if nranks == 0:
            raise UserError(f"{anchor}: the OTF2 archive defines no CPU locations")
        regions, region_index = _read_regions(defs, saved)
        comms, comm_id, self_comm_refs = _read_comms(defs, rank_of, GroupType, saved)
        windows, win_id, win_members = _read_windows(defs, comms, comm_id, saved)
        if saved.get("fields_file"):
            saved["exceptions"] = _read_fields_file(pathlib.Path(anchor).parent / stem / saved["fields_file"])
        arc = _Archive(anchor, defs, saved, rank_of, nranks, region_index, comms, comm_id, self_comm_refs, win_id,
                       win_members)
        wanted = set(range(nranks)) if ranks is None else {r for r in ranks if 0 <= r < nranks}
        locations = [loc for loc in defs.locations if rank_of.get(loc._ref) in wanted]
        # the other CPU threads of a rank's process (OpenMP: Score-P --thread=omp), in the serial replay
        has_omp = any(r.name.startswith("!$omp parallel") for r in regions)
        thread_of = _thread_locations(defs, rank_of, LocationType) if has_omp else {}
        if thread_of and ranks is not None:
            raise UserError(f"{anchor}: the archive has OpenMP threads, which are read with all ranks only (the "
                            f"parallel replay reads blocks of ranks); run `scalgraph trace` without --parallel, or "
                            f"on the run directory's trace.sgtrace")
        skipped = sum(int(loc.number_of_events) for loc in defs.locations
                      if loc._ref not in rank_of and loc._ref not in thread_of)
        threads = [loc for loc in defs.locations if loc._ref in thread_of]
        events = [make_events(0) for _ in range(nranks)]
        begin, end = {}, {}
        workers = {}
        for ref, raw in _location_records(reader, locations + threads, arc):
            if ref in thread_of:               # OpenMP threads: their regions (the constructs are regions)
                keep = (raw["kind"] == ENTER) | (raw["kind"] == EXIT) | (raw["kind"] >= THREAD_ACQUIRE_LOCK)
                workers[ref] = raw[keep]
                continue
            r = rank_of[ref]
            events[r], b, e = _translate_rank(arc, r, raw)
            if b is not None:
                begin[r] = b
            if e is not None:
                end[r] = e
        if saved and "nregions" in saved:
            del regions[int(saved["nregions"]):]        # MPI_Init/Finalize added for scout only
        meta = dict(saved.get("meta", {})) if saved else {"source": "otf2", "otf2_timer_resolution": arc.res}
        if skipped:
            meta["otf2_skipped_events"] = skipped
        locs = []
        if workers:
            from scalgraph.io import trace_omp
            order = sorted(workers, key=lambda ref: thread_of[ref])
            events, locs, teams, stats = trace_omp.threads_from_regions(
                regions, events, [(thread_of[ref][0], workers[ref]) for ref in order])
            comms.update(teams)
            meta["openmp"] = {"threads": len(locs), **stats}
        if any(bool((ev["kind"] >= THREAD_ACQUIRE_LOCK).any()) for ev in events):   # OpenMP lock, fork records
            from scalgraph.io import trace_omp
            events = trace_omp.lock_handovers(events, locs, meta)
        return Trace(regions=regions, comms=comms, events=events, windows=windows, meta=meta,
                     program_begin=begin, program_end=end, locations=locs)
    except (UserError, MemoryError):
        raise
    except Exception:
        raise UserError(f"{anchor}: OTF2 definitions or event data ({stem}/*.def, *.evt) are missing or damaged; "
                        f"copy the whole archive directory or record it again") from None
    finally:
        reader_cm.__exit__(None, None, None)


def _location_records(reader, locations, arc):
    """(location ref, EVENT_DTYPE records with OTF2's peers and communicator references) per
    location, in the order it was recorded.  libotf2's local event readers (one per location) apply
    the archive's ID mappings and clock offsets; the records are stored by C callbacks
    (otf2_events.c) or, without a C compiler, by Python callbacks."""
    import ctypes
    import _otf2
    from scalgraph.io import otf2_native
    if not locations:
        return
    if otf2_native.library() is None:
        yield from _python_records(reader, locations, arc)
        return
    h = reader._handle
    for loc in locations:
        _otf2.Reader_SelectLocation(h, loc._ref)
    def_files = _try(_otf2.Reader_OpenDefFiles, h)
    _try(_otf2.Reader_OpenEvtFiles, h)
    evt = {}
    try:
        for loc in locations:
            if def_files:
                dr = _otf2.Reader_GetDefReader(h, loc._ref)
                if dr:
                    _otf2.Reader_ReadAllLocalDefinitions(h, dr)
                    _otf2.Reader_CloseDefReader(h, dr)
            evt[loc._ref] = _otf2.Reader_GetEvtReader(h, loc._ref)
        if def_files:
            _otf2.Reader_CloseDefFiles(h)
        addr = ctypes.cast(h, ctypes.c_void_p).value
        for loc in locations:
            room = int(loc.number_of_events) // _ROOM_DIVISOR
            while True:
                got = otf2_native.read_location(addr, ctypes.cast(evt[loc._ref], ctypes.c_void_p).value, room,
                                                arc.zero, arc.res, arc.region_map)
                _otf2.Reader_CloseEvtReader(h, evt.pop(loc._ref))
                if got is None:
                    raise ValueError("libotf2 could not read the events")
                if got[1] <= room:
                    break
                room = got[1]                      # the definition undercounted: read it again
                evt[loc._ref] = _otf2.Reader_GetEvtReader(h, loc._ref)
            yield loc._ref, got[0]
    finally:
        for e in evt.values():
            _otf2.Reader_CloseEvtReader(h, e)
        _otf2.Reader_CloseEvtFiles(h)


_ROOM_DIVISOR = 1        # tests set 2: the location definitions then undercount, as a foreign writer may


def _try(fn, *args) -> bool:
    try:
        fn(*args)
        return True
    except Exception:        # libotf2: no local definition files is not an error (the official example)
        return False


def _python_records(reader, locations, arc):
    """The same records through libotf2's global reader and Python callbacks (no C compiler)."""
    import _otf2
    from scalgraph.io.otf2_native import ACQUIRE_LOCK, PROGRAM_BEGIN, PROGRAM_END, REQUEST_LOCK
    rows: list[tuple] = []
    add = rows.append
    N, Q = UNDEFINED_U32, UNDEFINED_U64
    lock = lambda typ: _TAG_SHARED if int(getattr(typ, "value", typ)) == 1 else _TAG_EXCLUSIVE  # noqa: E731
    # (loc, ticks, bytes, bytes_recv, request, region, peer, tag, comm, kind)
    cb = {
        "Enter": lambda loc, t, u, a, reg: add((loc, t, 0, 0, Q, reg, N, 0, N, ENTER)),
        "Leave": lambda loc, t, u, a, reg: add((loc, t, 0, 0, Q, reg, N, 0, N, EXIT)),
        "MpiSend": lambda loc, t, u, a, p, c, tag, n: add((loc, t, n, 0, Q, N, p, tag, c, SEND)),
        "MpiIsend": lambda loc, t, u, a, p, c, tag, n, q: add((loc, t, n, 0, q, N, p, tag, c, ISEND)),
        "MpiRecv": lambda loc, t, u, a, p, c, tag, n: add((loc, t, n, 0, Q, N, p, tag, c, RECV)),
        "MpiIrecv": lambda loc, t, u, a, p, c, tag, n, q: add((loc, t, n, 0, q, N, p, tag, c, IRECV)),
        "MpiIsendComplete": lambda loc, t, u, a, q: add((loc, t, 0, 0, q, N, N, 0, N, ISEND_COMPLETE)),
        "MpiIrecvRequest": lambda loc, t, u, a, q: add((loc, t, 0, 0, q, N, N, 0, N, IRECV_REQUEST)),
        "MpiRequestCancelled": lambda loc, t, u, a, q: add((loc, t, 0, 0, q, N, N, 0, N, REQUEST_CANCELLED)),
        "MpiCollectiveBegin": lambda loc, t, u, a: add((loc, t, 0, 0, Q, N, N, 0, N, COLL_BEGIN)),
        "MpiCollectiveEnd": lambda loc, t, u, a, op, c, root, n, m: add((loc, t, n, m, Q, N, root, 0, c, COLL_END)),
        "RmaPut": lambda loc, t, u, a, w, p, n, mid: add((loc, t, n, 0, mid, N, p, 0, w, RMA_PUT)),
        "RmaGet": lambda loc, t, u, a, w, p, n, mid: add((loc, t, n, 0, mid, N, p, 0, w, RMA_GET)),
        "RmaAtomic": lambda loc, t, u, a, w, p, typ, n, m, mid: add((loc, t, n, m, mid, N, p, 0, w, RMA_ACC)),
        "RmaSync": lambda loc, t, u, a, w, p, typ: add((loc, t, 0, 0, Q, N, p, 0, w, RMA_SYNC)),
        "RmaRequestLock": lambda loc, t, u, a, w, p, lid, typ: add((loc, t, 0, 0, lid, N, p, lock(typ), w,
                                                                     REQUEST_LOCK)),
        "RmaAcquireLock": lambda loc, t, u, a, w, p, lid, typ: add((loc, t, 0, 0, lid, N, p, lock(typ), w,
                                                                     ACQUIRE_LOCK)),
        "RmaReleaseLock": lambda loc, t, u, a, w, p, lid: add((loc, t, 0, 0, Q, N, p, 0, w, RMA_SYNC)),
        "ProgramBegin": lambda loc, t, u, a, *name_args: add((loc, t, 0, 0, Q, N, N, 0, N, PROGRAM_BEGIN)),
        "ProgramEnd": lambda loc, t, u, a, status: add((loc, t, status & (2**64 - 1), 0, Q, N, N, 0, N, PROGRAM_END)),
        "ThreadAcquireLock": lambda loc, t, u, a, model, lid, order: add((loc, t, 0, 0, lid, N, N, order, N,
                                                                         THREAD_ACQUIRE_LOCK)),
        "ThreadReleaseLock": lambda loc, t, u, a, model, lid, order: add((loc, t, 0, 0, lid, N, N, order, N,
                                                                         THREAD_RELEASE_LOCK)),
        "ThreadFork": lambda loc, t, u, a, model, n: add((loc, t, n, 0, Q, N, N, 0, N, THREAD_FORK)),
    }
    handle = reader._get_global_evt_reader_handle(locations)
    cbs = _otf2.GlobalEvtReaderCallbacks_New()
    for name, fn in cb.items():
        getattr(_otf2, f"GlobalEvtReaderCallbacks_Set{name}Callback")(cbs, fn)
    _otf2.GlobalEvtReader_SetCallbacks(handle, cbs, None)
    _otf2.GlobalEvtReaderCallbacks_Delete(cbs)
    _otf2.GlobalEvtReader_ReadEvents(handle, UNDEFINED_U64)
    names = ("loc", "ticks", "bytes", "bytes_recv", "request", "region", "peer", "tag", "comm", "kind")
    table = np.array(rows, dtype=[(n, "<u8") for n in names])
    rows.clear()
    for loc in locations:
        mine = table[table["loc"] == loc._ref]
        ev = np.empty(len(mine), EVENT_DTYPE)             # what otf2_events.c stores
        ev["time"] = (mine["ticks"].astype(np.int64) - np.int64(arc.zero)) / arc.res
        ev["kind"] = mine["kind"]
        ref = mine["region"]
        inside = ref < len(arc.region_map)
        ev["region"] = np.where((mine["kind"] <= EXIT) & inside, arc.region_map[np.where(inside, ref, 0)], -1) \
            if len(arc.region_map) else -1
        for f in ("peer", "tag", "comm"):
            ev[f] = mine[f].astype(np.uint32).view(np.int32)
        for f in ("bytes", "bytes_recv"):
            ev[f] = mine[f].view(np.int64)
        request = mine["request"].view(np.int64)
        ev["request"] = np.where(request < 0, -1, request)
        yield loc._ref, ev


_PARADIGM_OPENMP = 3     # OTF2_PARADIGM_OPENMP (otf2.enums.Paradigm.OPENMP), of OpenMP lock records

# OTF2 LockType (EXCLUSIVE 0, SHARED 1) <-> our RMA_SYNC tag of MPI_Win_lock (docs/rma-patterns.md)
_TAG_EXCLUSIVE, _TAG_SHARED = 1, 2


def _merge_locks(rec: np.ndarray) -> np.ndarray:
    """One MPI_Win_lock is one RMA_SYNC: Score-P may record RmaRequestLock in the lock call and
    RmaAcquireLock when the grant is seen; an acquire whose lock (window, target, lock id) was
    requested before on this location is the same lock and is dropped."""
    from scalgraph.io.otf2_native import ACQUIRE_LOCK, REQUEST_LOCK
    is_lock = (rec["kind"] == REQUEST_LOCK) | (rec["kind"] == ACQUIRE_LOCK)
    if not is_lock.any():
        return rec
    drop = np.zeros(len(rec), bool)
    requested = set()
    for i in np.flatnonzero(is_lock).tolist():
        key = (int(rec["comm"][i]), int(rec["peer"][i]), int(rec["request"][i]))
        if rec["kind"][i] == REQUEST_LOCK:
            requested.add(key)
        elif key in requested:
            requested.discard(key)
            drop[i] = True
    rec = rec[~drop]
    lock = (rec["kind"] == REQUEST_LOCK) | (rec["kind"] == ACQUIRE_LOCK)
    rec["kind"][lock] = RMA_SYNC
    rec["request"][lock] = -1
    return rec


_USES_COMM = np.zeros(256, bool)
_USES_COMM[[SEND, ISEND, RECV, IRECV, COLL_END]] = True
_IS_RMA = np.zeros(256, bool)
_IS_RMA[[RMA_PUT, RMA_GET, RMA_ACC, RMA_SYNC]] = True


def _translate_rank(arc: _Archive, rank: int, ev: np.ndarray):
    """One location's records -> (its events with world ranks and our communicator and window ids,
    program begin time or None, program end time or None).  The records are already EVENT_DTYPE
    events (times, kinds, regions, tags, sizes, requests); only the events that name a communicator
    or window are touched here."""
    from scalgraph.io.otf2_native import PROGRAM_BEGIN, PROGRAM_END
    begin = end = None
    if len(ev) and int(ev["kind"].max()) > REQUEST_CANCELLED:       # rare records: locks, program span
        ev = _merge_locks(ev)
        pb, pe = np.flatnonzero(ev["kind"] == PROGRAM_BEGIN), np.flatnonzero(ev["kind"] == PROGRAM_END)
        begin = float(ev["time"][pb[0]]) if len(pb) else None
        end = float(ev["time"][pe[-1]]) if len(pe) else None
        if len(pb) or len(pe):
            ev = ev[(ev["kind"] != PROGRAM_BEGIN) & (ev["kind"] != PROGRAM_END)]
    if rank in arc.added.get("added_init", ()):
        ev = ev[2:]                             # the zero-length MPI_Init written for scout
    if rank in arc.added.get("added_finalize", ()):
        ev = ev[:-2]
    kind = np.ascontiguousarray(ev["kind"])
    idx = np.flatnonzero(_USES_COMM[kind] | _IS_RMA[kind])
    sub_kind = kind[idx]
    cr = ev["peer"][idx].astype(np.int64)
    refs = ev["comm"][idx].astype(np.int64)
    peer = np.full(len(idx), -1, np.int64)
    comm = np.full(len(idx), -1, np.int64)
    is_rma = _IS_RMA[sub_kind]
    undefined = cr == -1                         # OTF2_UNDEFINED_UINT32 read as int32
    for ref in np.unique(refs[~is_rma]).tolist():
        sel = np.flatnonzero(~is_rma & (refs == ref))
        if ref in arc.self_refs:                  # MPI_COMM_SELF: a one-member communicator per rank
            arc.comms[arc.self_base + rank] = [rank]
            comm[sel] = arc.self_base + rank
            peer[sel] = np.where(undefined[sel], -1, rank)
            continue
        if ref not in arc.comm_id:
            raise UserError(f"{arc.anchor}: events use communicator #{ref}, which is not defined as an MPI group")
        cid = arc.comm_id[ref]
        members = np.asarray(arc.comms[cid], np.int64)
        c = np.where(undefined[sel], UNDEFINED_U32, cr[sel])
        undefined_root = (sub_kind[sel] == COLL_END) & undefined[sel]
        bad = ~undefined_root & ((c < 0) | (c >= len(members)))
        if bad.any():
            raise UserError(f"{arc.anchor}: rank {int(c[bad][0])} is outside communicator #{ref} of size "
                            f"{len(members)}")
        comm[sel] = cid
        peer[sel] = np.where(undefined_root, -1, members[np.clip(c, 0, len(members) - 1)])
    for ref in np.unique(refs[is_rma]).tolist():
        sel = np.flatnonzero(is_rma & (refs == ref))
        wid = arc.win_id[ref]
        members = np.asarray(arc.win_members[wid], np.int64)
        remote = cr[sel]
        inside = ~undefined[sel] & (remote >= 0) & (remote < len(members))
        comm[sel] = wid
        peer[sel] = np.where(inside, members[np.clip(remote, 0, max(len(members) - 1, 0))]
                             if len(members) else -1, -1)
    ev["peer"][idx] = peer
    ev["comm"][idx] = comm
    # OTF2's COLLECTIVE_BEGIN has no communicator: give each BEGIN the one of its END
    begins, ends = np.flatnonzero(kind == COLL_BEGIN), np.flatnonzero(kind == COLL_END)
    if arc.begin_comm and len(begins) == len(ends) and len(begins):
        ev["comm"][begins] = ev["comm"][ends]
    posts = np.flatnonzero(kind == IRECV_REQUEST)
    if len(posts):
        all_comm = np.ascontiguousarray(ev["comm"])
        _restore_irecv_request_comm(kind, np.ascontiguousarray(ev["request"]), all_comm)
        ev["comm"][posts] = all_comm[posts]
    for f, (at, values) in (arc.saved.get("exceptions", {}).get(str(rank), {}) if arc.saved else {}).items():
        ev[f][np.asarray(at, np.int64)] = np.asarray(values)     # what the records could not hold
    return ev, begin, end


def _restore_irecv_request_comm(kind: np.ndarray, request: np.ndarray, comm: np.ndarray) -> None:
    """OTF2's IRECV_REQUEST carries no communicator: give it the one of the IRECV completing it (the
    next IRECV of the same request id on this rank)."""
    posts = np.flatnonzero(kind == IRECV_REQUEST)
    if len(posts) == 0:
        return
    both = np.concatenate([posts, np.flatnonzero(kind == IRECV)])
    both = both[np.lexsort((both, request[both]))]     # by request id, then position
    nxt = np.append(both[1:], both[-1])
    ok = (kind[both] == IRECV_REQUEST) & (kind[nxt] == IRECV) & (request[nxt] == request[both])
    comm[both[ok]] = comm[nxt[ok]]


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


def _saved_meta(defs, where="OTF2 archive") -> dict:
    for a in defs.attributes:
        if a.name == META_ATTRIBUTE:
            raw = str(a.description).encode()
            if json_depth(raw) > MAX_JSON_DEPTH:     # forged: one clear line, not a RecursionError
                raise UserError(f"{where}: OTF2 attribute {META_ATTRIBUTE} nests deeper than scalgraph ever writes "
                                f"({MAX_JSON_DEPTH} levels); the archive is damaged or forged")
            try:
                doc = json.loads(raw, parse_constant=lambda c: None)
            except ValueError:
                return {}     # not ours after all: the events alone still make a trace
            return doc if isinstance(doc, dict) else {}
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


def _thread_locations(defs, rank_of: dict[int, int], LocationType) -> dict[int, tuple[int, int]]:
    """location ref -> (rank, thread number) for the CPU threads of a rank's process other than its
    MPI location, in definition order (Score-P defines a process's threads in their OpenMP order)."""
    group_rank = {loc.group._ref: r for loc in defs.locations if (r := rank_of.get(loc._ref)) is not None}
    out: dict[int, tuple[int, int]] = {}
    count: dict[int, int] = {}
    for loc in defs.locations:
        g = loc.group._ref
        if loc._ref in rank_of or g not in group_rank or loc.type != LocationType.CPU_THREAD:
            continue
        r = group_rank[g]
        count[r] = count.get(r, 0) + 1
        out[loc._ref] = (r, count[r])
    return out


def _read_regions(defs, saved: dict) -> tuple[list[Region], dict[int, int]]:
    """Regions in definition order, mapped by OTF2 reference (never by name: two regions may share
    name, file and line and differ only in their PSG vertex).  The vertex is the saved one of that
    definition, else the one in the description (see _region_descriptions)."""
    vertices = saved.get("region_vertices", []) if saved else []
    files = saved.get("region_files", []) if saved else []
    regions, index = [], {}
    for i, r in enumerate(defs.regions):
        index[r._ref] = i
        vertex = int(vertices[i]) if i < len(vertices) else _vertex_in(_text(r.description))
        file = str(files[i]) if i < len(files) else _text(r.source_file)
        regions.append(Region(name=r.name, file=file, line=int(r.begin_line_number), vertex=vertex))
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
    as scout requires).  The archive directory beside it must not exist yet.  OpenMP threads are
    written as Score-P writes them (io/trace_omp.py `as_scorep`): further CPU threads of their
    rank's process with their regions; reading rebuilds the team synchronisation from the regions."""
    threads = []
    if trace.locations:
        from scalgraph.io import trace_omp
        trace, threads = trace_omp.as_scorep(trace)
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
    starts = [float(e["time"][0]) for e in trace.events if len(e)] + list(trace.program_begin.values())
    tmin = min(starts, default=0.0)
    zero = 0 if tmin >= 0 else int(np.ceil(-tmin * RESOLUTION))   # ticks are unsigned
    regions = list(trace.regions)
    init_idx = _find_or_add(regions, ("MPI_Init", "MPI_Init_thread"))
    fin_idx = _find_or_add(regions, ("MPI_Finalize",))
    entered = [set(e["region"][e["kind"] == ENTER].tolist()) for e in trace.events]
    # scout needs MPI_Init and MPI_Finalize on every rank (synchronisation points of its root-cause
    # and critical-path analyses): ranks without them get a zero-length call at their own first and
    # last event, listed here so that reading the archive back removes them again
    saved = {"time_zero_ticks": zero, "comm_ids": sorted(trace.comms), "window_ids": sorted(trace.windows),
             "region_vertices": [r.vertex for r in trace.regions], "region_files": [r.file for r in trace.regions],
             "nregions": len(trace.regions), "meta": trace.meta,
             "added_init": [r for r in range(n) if not entered[r].intersection(init_idx)],
             "added_finalize": [r for r in range(n) if not entered[r].intersection(fin_idx)],
             "coll_begin_comm": any(bool((e["comm"][e["kind"] == COLL_BEGIN] >= 0).any()) for e in trace.events)}
    try:
        json.dumps(saved, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise UserError(f"cannot write {anchor}: trace meta is not plain JSON ({e})") from None
    try:
        with otf2.writer.open(str(archive_dir), archive_name=name, timer_resolution=RESOLUTION) as w:
            d = w.definitions
            # Score-P's tree: a node of class "machine" above one of class "node" (scout looks for the machine)
            machine = d.system_tree_node(str(trace.meta.get("machine", "scalgraph machine")), class_name="machine")
            node = d.system_tree_node(str(trace.meta.get("host", "node 0")), class_name="node", parent=machine)
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
            program = d._string(str(trace.meta.get("program", "program"))) \
                if trace.program_begin or trace.program_end else None
            saved["exceptions"] = {}
            for rank in range(n):
                sync_tags = _write_rank(w, locs[rank], trace, rank, region_def, comm_def, win_def, init_idx[0],
                                        fin_idx[0], rank in saved["added_init"], rank in saved["added_finalize"],
                                        zero, program, CollectiveOp, RmaAtomicType, RmaSyncType, LockType)
                exc = _unrepresented(trace, rank, zero, saved["coll_begin_comm"], sync_tags)
                if exc:
                    saved["exceptions"][str(rank)] = exc
            for rank, th, tev in threads:          # OpenMP workers: regions only
                out = w.event_writer_from_location(d.location(f"OMP thread {th}", type=LocationType.CPU_THREAD,
                                                              group=groups[rank]))
                for t, kind, g, lock, order in zip(
                        (np.rint(tev["time"] * RESOLUTION).astype(np.int64) + zero).tolist(), tev["kind"].tolist(),
                        tev["region"].tolist(), tev["request"].tolist(), tev["tag"].tolist()):
                    if kind == THREAD_ACQUIRE_LOCK or kind == THREAD_RELEASE_LOCK:
                        lock_event = otf2.events.ThreadAcquireLock if kind == THREAD_ACQUIRE_LOCK \
                            else otf2.events.ThreadReleaseLock
                        out(lock_event(t, Paradigm.OPENMP, lock, order))
                        continue
                    out((otf2.events.Enter if kind == ENTER else otf2.events.Leave)(t, region_def[g]))
            if len(json.dumps(saved["exceptions"], separators=(",", ":"))) > _INLINE_BYTES:
                _write_fields_file(archive_dir / name / FIELDS_FILE, saved.pop("exceptions"))
                saved["fields_file"] = FIELDS_FILE
            # global definitions are written when the archive closes, so this may come last
            d.attribute(META_ATTRIBUTE, description=json.dumps(saved, separators=(",", ":")), type=Type.STRING)
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


class _EventCalls:
    """libotf2's OTF2_EvtWriter_* functions called directly: the `_otf2` wrappers set each function's
    ctypes argument types again on every call, which costs twice the call itself.  The first call of
    each goes through the wrapper (which sets them once on the shared library's function object)."""

    def __init__(self, handle):
        self.handle, self.raw = handle, {}

    def __call__(self, name: str, *args) -> None:
        fn = self.raw.get(name)
        if fn is not None:
            fn(self.handle, None, *args)
            return
        import _otf2
        from _otf2.Config import conf
        getattr(_otf2, f"EvtWriter_{name}")(self.handle, None, *args)
        self.raw[name] = getattr(conf.lib, f"OTF2_EvtWriter_{name}")


def _write_rank(w, loc, trace, rank, region_def, comm_def, win_def, init_idx, fin_idx, add_init, add_finalize, zero,
                program, CollectiveOp, RmaAtomicType, RmaSyncType, LockType) -> None:
    """One rank's events through libotf2's writer calls directly (otf2's event objects cost several
    times more than the writing); the bookkeeping otf2.EventWriter.write would do is done per rank."""
    import _otf2
    out = w.event_writer_from_location(loc)
    h = out.handle
    put = _EventCalls(h)
    ev = trace.events[rank]
    reg = [r._ref for r in region_def]
    cref = {c: d._ref for c, d in comm_def.items()}
    wref = {c: d._ref for c, d in win_def.items()}
    comm_rank = {cid: {m: i for i, m in enumerate(members)} for cid, members in trace.comms.items()}
    win_rank = {wid: comm_rank.get(cid, {}) for wid, cid in trace.windows.items()}
    ticks = (np.rint(ev["time"] * RESOLUTION).astype(np.int64) + zero).tolist()
    to_tick = lambda x: int(np.rint(x * RESOLUTION)) + zero     # noqa: E731
    begin = to_tick(trace.program_begin[rank]) if rank in trace.program_begin else None
    end = to_tick(trace.program_end[rank]) if rank in trace.program_end else None
    count = 0
    stamps = []                                   # first and last timestamp written
    lock_id: dict[tuple[int, int], int] = {}      # (window, target) -> id of the open MPI_Win_lock
    lock_id_next = 0

    def write_program_begin():
        _otf2.EvtWriter_ProgramBegin(h, None, begin, program._ref, [])
        stamps.append(begin)

    if add_init:
        t = ticks[0] if ticks else (begin if begin is not None else zero)
        if begin is not None and begin <= t:
            write_program_begin()
            count, begin = count + 1, None
        put("Enter", t, reg[init_idx])
        put("Leave", t, reg[init_idx])
        stamps.append(t)
        count += 2
    stack: list[int] = []
    sync_tags = {}                                # RMA_SYNC index -> the tag reading gives it back
    for i, (t, kind, region, peer, tag, comm, nbytes, nrecv, req) in enumerate(zip(
            ticks, *(ev[f].tolist() for f in ("kind", "region", "peer", "tag", "comm", "bytes", "bytes_recv",
                                              "request")))):
        if begin is not None and begin <= t:
            write_program_begin()
            count, begin = count + 1, None
        if end is not None and end < t:
            put("ProgramEnd", end, 0)
            stamps.append(end)
            count, end = count + 1, None
        if kind == ENTER:
            stack.append(region)
            put("Enter", t, reg[region])
        elif kind == EXIT:
            top = stack.pop() if stack else region
            put("Leave", t, reg[region if region >= 0 else top])
        elif kind == SEND:
            put("MpiSend", t, comm_rank[comm][peer], cref[comm], tag, nbytes)
        elif kind == ISEND:
            put("MpiIsend", t, comm_rank[comm][peer], cref[comm], tag, nbytes, req)
        elif kind == RECV:
            put("MpiRecv", t, comm_rank[comm][peer], cref[comm], tag, nbytes)
        elif kind == IRECV:
            put("MpiIrecv", t, comm_rank[comm][peer], cref[comm], tag, nbytes, req)
        elif kind == ISEND_COMPLETE:
            put("MpiIsendComplete", t, req)
        elif kind == IRECV_REQUEST:
            put("MpiIrecvRequest", t, req)
        elif kind == REQUEST_CANCELLED:
            put("MpiRequestCancelled", t, req)
        elif kind == COLL_BEGIN:
            put("MpiCollectiveBegin", t)
        elif kind == COLL_END:
            root = UNDEFINED_U32 if peer < 0 else comm_rank[comm][peer]
            put("MpiCollectiveEnd", t, _collective_op(trace, stack, CollectiveOp), cref[comm],
                                             root, nbytes, nrecv)
        elif kind == THREAD_ACQUIRE_LOCK or kind == THREAD_RELEASE_LOCK:     # OpenMP lock (trace_omp.as_scorep)
            put("ThreadAcquireLock" if kind == THREAD_ACQUIRE_LOCK else "ThreadReleaseLock", t, _PARADIGM_OPENMP,
                req, tag)
        elif kind == THREAD_FORK:
            put("ThreadFork", t, _PARADIGM_OPENMP, nbytes)
        elif kind in (RMA_PUT, RMA_GET, RMA_ACC, RMA_SYNC):
            remote = win_rank[comm].get(peer, UNDEFINED_U32)
            mid = req if req >= 0 else UNDEFINED_U64
            if kind == RMA_PUT:
                put("RmaPut", t, wref[comm], remote, nbytes, mid)
            elif kind == RMA_GET:
                put("RmaGet", t, wref[comm], remote, nbytes, mid)
            elif kind == RMA_ACC:
                put("RmaAtomic", t, wref[comm], remote, RmaAtomicType.ACCUMULATE, nbytes, nrecv, mid)
            elif _in_region(trace, stack, "MPI_Win_lock") and remote != UNDEFINED_U32:
                lock_id[(comm, remote)] = lock_id_next = lock_id_next + 1
                put("RmaRequestLock", t, wref[comm], remote, lock_id_next,
                                               LockType.SHARED if tag == _TAG_SHARED else LockType.EXCLUSIVE)
                sync_tags[i] = _TAG_SHARED if tag == _TAG_SHARED else _TAG_EXCLUSIVE
            elif _in_region(trace, stack, "MPI_Win_unlock") and (comm, remote) in lock_id:
                put("RmaReleaseLock", t, wref[comm], remote, lock_id.pop((comm, remote)))
            else:
                put("RmaSync", t, wref[comm], remote, RmaSyncType.MEMORY)
        else:
            continue
        count += 1
    if ticks:
        stamps += [ticks[0], ticks[-1]]
    if begin is not None:
        write_program_begin()
        count += 1
    if add_finalize:
        t = ticks[-1] if ticks else (stamps[-1] if stamps else zero)
        put("Enter", t, reg[fin_idx])
        put("Leave", t, reg[fin_idx])
        stamps.append(t)
        count += 2
    if end is not None:
        put("ProgramEnd", end, 0)
        stamps.append(end)
        count += 1
    loc._number_of_events_written = count          # what EventWriter.write counts per event
    if stamps:
        w._update_timestamps(min(stamps))          # and what it tracks for the clock properties
        w._update_timestamps(max(stamps))
    return sync_tags


# Event fields up to this much JSON travel inline in the attribute, more in FIELDS_FILE inside the
# archive directory (numpy .npz, no pickle): libotf2 refuses very long strings.
_INLINE_BYTES = 64 * 1024
FIELDS_FILE = "scalgraph-fields.npz"


def _write_fields_file(path: pathlib.Path, exceptions: dict) -> None:
    arrays = {}
    for rank, exc in exceptions.items():
        for f, (idx, values) in exc.items():
            arrays[f"{rank}.{f}.index"] = np.asarray(idx, np.int64)
            arrays[f"{rank}.{f}.value"] = np.asarray(values, EVENT_DTYPE.fields[f][0])
    with open(path, "wb") as out:
        np.savez_compressed(out, **arrays)


def _read_fields_file(path: pathlib.Path) -> dict:
    """{rank: {field: (indices, values)}} from FIELDS_FILE; UserError if it is missing or damaged."""
    try:
        with np.load(path, allow_pickle=False) as z:
            out: dict = {}
            for key in z.files:
                rank, f, what = key.split(".")
                if f not in EVENT_DTYPE.names:
                    raise ValueError(key)
                out.setdefault(rank, {}).setdefault(f, [None, None])[what == "value"] = z[key]
            return out
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"{path}: scalgraph's event fields beside the OTF2 archive are missing or damaged "
                        f"({e}); copy the whole archive directory") from None


# Fields an OTF2 record of each kind carries besides its time (the rest reads back as the default).
_CARRIED = {ENTER: ("region",), EXIT: ("region",), SEND: ("peer", "tag", "comm", "bytes"),
            RECV: ("peer", "tag", "comm", "bytes"), ISEND: ("peer", "tag", "comm", "bytes", "request"),
            IRECV: ("peer", "tag", "comm", "bytes", "request"), ISEND_COMPLETE: ("request",),
            IRECV_REQUEST: ("request",), REQUEST_CANCELLED: ("request",), COLL_BEGIN: (),
            COLL_END: ("peer", "comm", "bytes", "bytes_recv"), RMA_PUT: ("peer", "comm", "bytes", "request"),
            RMA_GET: ("peer", "comm", "bytes", "request"), RMA_ACC: ("peer", "comm", "bytes", "bytes_recv", "request"),
            RMA_SYNC: ("peer", "comm"), THREAD_ACQUIRE_LOCK: ("tag", "request"),
            THREAD_RELEASE_LOCK: ("tag", "request"), THREAD_FORK: ("bytes",)}


def _unrepresented(trace: Trace, rank: int, zero: int, begin_comm: bool, sync_tags: dict) -> dict:
    """What OTF2 records cannot hold of this rank's events (a time that is not a whole nanosecond,
    the peer of our ISEND_COMPLETE, a tag on a collective, ...): {field: [indices, values]}, kept in
    the scalgraph attribute so that reading gives the identical trace.  Computed as the difference
    between the events and what the reader makes of the records."""
    ev = trace.events[rank]
    back = make_events(len(ev))
    back["time"] = ((np.rint(ev["time"] * RESOLUTION).astype(np.int64) + zero) - zero) / RESOLUTION
    back["kind"] = ev["kind"]
    for kind, fields in _CARRIED.items():
        sel = ev["kind"] == kind
        for f in fields:
            back[f][sel] = ev[f][sel]
    back["region"][(ev["kind"] == EXIT) & (ev["region"] < 0)] = -2      # written as the region it closes
    back["request"][back["request"] < 0] = -1                           # OTF2_UNDEFINED_UINT64
    rma = np.flatnonzero(np.isin(ev["kind"], (RMA_PUT, RMA_GET, RMA_ACC, RMA_SYNC)))
    for wid in np.unique(ev["comm"][rma]).tolist():
        sel = rma[ev["comm"][rma] == wid]
        members = trace.comms.get(trace.windows.get(wid, -1), [])
        back["peer"][sel] = np.where(np.isin(ev["peer"][sel], members), ev["peer"][sel], -1)
    if sync_tags:
        back["tag"][list(sync_tags)] = list(sync_tags.values())
    begins, ends = np.flatnonzero(ev["kind"] == COLL_BEGIN), np.flatnonzero(ev["kind"] == COLL_END)
    if begin_comm and len(begins) == len(ends):
        back["comm"][begins] = back["comm"][ends]
    comm = np.ascontiguousarray(back["comm"])
    _restore_irecv_request_comm(np.ascontiguousarray(back["kind"]), np.ascontiguousarray(back["request"]), comm)
    back["comm"] = comm
    out = {}
    for f in EVENT_DTYPE.names:
        idx = np.flatnonzero(back[f] != ev[f])
        if len(idx):
            out[f] = [idx.tolist(), ev[f][idx].tolist()]
    return out


def _in_region(trace: Trace, stack: list[int], name: str) -> bool:
    return bool(stack) and trace.regions[stack[-1]].name == name


def _collective_op(trace: Trace, stack: list[int], CollectiveOp):
    name = trace.regions[stack[-1]].name if stack else ""
    op = name[4:].lower() if name.upper().startswith("MPI_") else ""
    if op.startswith("i") and op[1:] in _COLLECTIVES:
        op = op[1:]                       # non-blocking collectives carry the blocking op
    return getattr(CollectiveOp, _COLLECTIVES.get(op, ("BARRIER",))[0])
