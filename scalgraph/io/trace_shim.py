"""Convert the per-rank raw trace files the shim writes in trace mode (rank-<r>.sgt, layout in
instrument/sg_trace.h) into a scalgraph.model.trace.Trace.

Regions: every MPI routine at every PSG vertex it was called from is a region (file "MPI", Scalasca's
rule; `line` is the call's source line, `vertex` its PSG vertex), and every traced function instance
is a region named after its function with its file, first line and FUNCTION vertex.  Communicator
definitions and the clock offsets to rank 0 come from the profile files (rank-<r>.sgp) written in the
same run; the offsets become meta["clock_offsets"] ([local time, rank 0 - local] at MPI_Init and at
MPI_Finalize) for scalgraph/trace/clock.py to interpolate.
"""
from __future__ import annotations

import pathlib

import numpy as np

from scalgraph.errors import UserError
from scalgraph.io import trace_omp
from scalgraph.model.trace import ENTER, EXIT, IRECV_REQUEST, ISEND_COMPLETE, Region, Trace, make_events

MAGIC, END_MAGIC = b"SGRAWTR\x00", b"SGRAWEND"
VERSION = 2
NAME_LEN = 48
WINDOW_DEF = 15
HEADER_DTYPE = np.dtype([("magic", "S8"), ("version", "<u4"), ("event_size", "<u4"), ("rank", "<i4"),
                         ("nranks", "<i4"), ("header_size", "<u4"), ("reserved", "<u4")])
TRAILER_DTYPE = np.dtype([("nevents", "<u8"), ("nnames", "<u4"), ("flushes", "<u4"), ("dropped", "<u4"),
                          ("nsamples", "<u4"), ("nblocks", "<u4"), ("npolls", "<u4"), ("samples_bytes", "<u4"),
                          ("reserved", "<u4"), ("magic", "S8")])
BLOCK_DTYPE = np.dtype([("nevents", "<u4"), ("nbytes", "<u4"), ("t_prev", "<u8")])
SAMPLE_DTYPE = np.dtype([("time_ns", "<u8"), ("vertex", "<u4"), ("reserved", "<u4")])
POLL_DTYPE = np.dtype([("calls", "<u8"), ("ns", "<u8"), ("region", "<i4"), ("vertex", "<u4")])
# decoded events (the encoding is in instrument/sg_trace.h)
RAW_DTYPE = np.dtype([("time_ns", "<u8"), ("bytes", "<i8"), ("aux", "<i8"), ("region", "<i4"), ("peer", "<i4"),
                      ("tag", "<i4"), ("comm", "<i4"), ("vertex", "<u4"), ("kind", "u1")])
# the mask bits SG_TF_* in field order, with each field's default when its bit is clear
FIELDS = (("region", -1), ("vertex", 0), ("peer", -1), ("tag", 0), ("comm", -1), ("bytes", 0), ("aux", -1))
assert HEADER_DTYPE.itemsize == 32 and TRAILER_DTYPE.itemsize == 48 and BLOCK_DTYPE.itemsize == 16
assert POLL_DTYPE.itemsize == 24
_POPCOUNT = np.array([bin(m).count("1") for m in range(256)], np.int64)


def has_shim_trace(run_dir: str | pathlib.Path) -> bool:
    return any(pathlib.Path(run_dir).glob("rank-*.sgt"))


def read_raw_rank(path: pathlib.Path) -> dict:
    """One rank-<r>.sgt file -> header fields, decoded events, MPI routine names, samples and the
    unsuccessful polls per call site; UserError if damaged."""
    from scalgraph.io.safe_read import read_regular
    data = read_regular(path, "raw trace")     # a FIFO or device is refused, never opened to block
    if len(data) < HEADER_DTYPE.itemsize + TRAILER_DTYPE.itemsize or data[:8] != MAGIC:
        raise UserError(f"{path} is not a scalgraph raw trace (wrong magic or too short); rerun with --trace")
    h = np.frombuffer(data, HEADER_DTYPE, count=1)[0]
    tr = np.frombuffer(data, TRAILER_DTYPE, count=1, offset=len(data) - TRAILER_DTYPE.itemsize)[0]
    if int(h["version"]) != VERSION or tr["magic"] != END_MAGIC:
        raise UserError(f"{path} has another raw trace version or is incomplete; rerun with this scalgraph's shim")
    n, nn, ns, nb, npo, sb = (int(tr[k]) for k in ("nevents", "nnames", "nsamples", "nblocks", "npolls",
                                                   "samples_bytes"))
    tail = nn * NAME_LEN + sb + npo * POLL_DTYPE.itemsize + TRAILER_DTYPE.itemsize
    end = len(data) - tail
    if end < HEADER_DTYPE.itemsize:
        raise UserError(f"{path} is inconsistent (its counts say more than its {len(data)} bytes); rerun the program")
    if int(tr["dropped"]):
        raise UserError(f"{path}: {int(tr['dropped'])} events could not be written (disk full?); rerun the program")
    ev = _decode_blocks(data, HEADER_DTYPE.itemsize, end, nb, path)
    if len(ev) != n:
        raise UserError(f"{path} is inconsistent ({len(ev)} events, its trailer says {n}); rerun the program")
    off = end
    names = [data[off + i * NAME_LEN: off + (i + 1) * NAME_LEN].split(b"\0", 1)[0].decode(errors="replace")
             for i in range(nn)]
    off += nn * NAME_LEN
    samples = _decode_samples(np.frombuffer(data, np.uint8, count=sb, offset=off), ns, path)
    polls = np.frombuffer(data, POLL_DTYPE, count=npo, offset=off + sb)
    return {"rank": int(h["rank"]), "nranks": int(h["nranks"]), "events": ev, "names": names, "samples": samples,
            "polls": polls, "flushes": int(tr["flushes"]), "bytes": len(data),
            "event_bytes": end - HEADER_DTYPE.itemsize}


def _decode_blocks(data: bytes, start: int, end: int, nblocks: int, path) -> np.ndarray:
    parts, pos = [], start
    for _ in range(nblocks):
        if pos + BLOCK_DTYPE.itemsize > end:
            raise UserError(f"{path} is inconsistent (a block runs past the events); rerun the program")
        bh = np.frombuffer(data, BLOCK_DTYPE, count=1, offset=pos)[0]
        k, nbytes = int(bh["nevents"]), int(bh["nbytes"])
        pos += BLOCK_DTYPE.itemsize
        if pos + 2 * k + nbytes > end:
            raise UserError(f"{path} is inconsistent (a block runs past the events); rerun the program")
        kinds = np.frombuffer(data, np.uint8, count=k, offset=pos)
        masks = np.frombuffer(data, np.uint8, count=k, offset=pos + k)
        varints = np.frombuffer(data, np.uint8, count=nbytes, offset=pos + 2 * k)
        parts.append(decode_block(kinds, masks, varints, int(bh["t_prev"]), path))
        pos += 2 * k + nbytes
    if pos != end:
        raise UserError(f"{path} is inconsistent ({end - pos} bytes between the events and the names); rerun it")
    return np.concatenate(parts) if parts else np.zeros(0, RAW_DTYPE)


def _decode_samples(b: np.ndarray, n: int, path) -> np.ndarray:
    """(time, vertex) delta varint pairs -> SAMPLE_DTYPE records."""
    try:
        vals = decode_varints(b)
    except ValueError:
        vals = None
    if vals is None or len(vals) != 2 * n or (len(b) and b[-1] >= 128):
        raise UserError(f"{path} is damaged (its samples do not decode); rerun the program")
    out = np.zeros(n, SAMPLE_DTYPE)
    out["time_ns"] = np.cumsum(_unzigzag(vals[0::2])).astype(np.uint64)
    out["vertex"] = np.cumsum(_unzigzag(vals[1::2])).astype(np.uint32)
    return out


def decode_varints(b: np.ndarray) -> np.ndarray:
    """LEB128 varints (7 bits per byte, high bit = more follows) -> uint64 values, vectorised."""
    if len(b) == 0:
        return np.zeros(0, np.uint64)
    ends = b < 128
    starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
    group = np.cumsum(ends) - ends
    shift = (np.arange(len(b)) - starts[group]) * 7
    if len(shift) and shift.max() > 63:
        raise ValueError("varint longer than 64 bits")
    return np.add.reduceat((b & 127).astype(np.uint64) << shift.astype(np.uint64), starts)


def _unzigzag(v: np.ndarray) -> np.ndarray:
    return (v >> np.uint64(1)).astype(np.int64) ^ -(v & np.uint64(1)).astype(np.int64)


def decode_block(kinds: np.ndarray, masks: np.ndarray, varints: np.ndarray, t_prev: int, path="trace") -> np.ndarray:
    """One block: per event the delta time and the fields its mask names (instrument/sg_trace.h)."""
    try:
        vals = decode_varints(varints)
    except ValueError:
        vals = None
    if vals is None or (len(varints) and varints[-1] >= 128):
        raise UserError(f"{path} is damaged (a cut or overlong number in the events); rerun the program")
    nf = 1 + _POPCOUNT[masks]
    first = np.cumsum(nf) - nf
    if len(kinds) and first[-1] + nf[-1] != len(vals):
        raise UserError(f"{path} is damaged (event fields do not add up); rerun the program")
    ev = np.zeros(len(kinds), RAW_DTYPE)
    ev["kind"] = kinds
    ev["time_ns"] = np.uint64(t_prev) + np.cumsum(_unzigzag(vals[first])).astype(np.uint64) if len(kinds) else []
    for bit, (name, default) in enumerate(FIELDS):
        has = (masks >> bit) & 1 == 1
        at = first + 1 + _POPCOUNT[masks & ((1 << bit) - 1)]
        field = np.full(len(kinds), default, np.int64)
        field[has] = _unzigzag(vals[at[has]]) if name != "vertex" else vals[at[has]].astype(np.int64)
        ev[name] = field
    return ev


def read_shim_trace(run_dir: str | pathlib.Path, psg=None) -> Trace:
    """All ranks of one run directory -> Trace (psg: the program's PSG, for region names and lines;
    by default EXP/psg.json two levels up, when the run directory is EXP/scale-p/rep-k)."""
    from scalgraph.io.profile_file import read_rank_file
    d = pathlib.Path(run_dir)
    files = sorted(d.glob("rank-*.sgt"))
    if not files:
        raise UserError(f"{d}: no raw trace files (rank-*.sgt); record with `scalgraph run --trace`")
    raws = [read_raw_rank(f) for f in files]
    nranks = raws[0]["nranks"]
    by_rank = {r["rank"]: r for r in raws}
    missing = sorted(set(range(nranks)) - set(by_rank))
    if missing:
        raise UserError(f"{d}: the traces of ranks {missing[:8]} are missing (the run did not finish); rerun it")
    if psg is None:
        psg = _psg_beside(d)
    profiles = [read_rank_file(d / f"rank-{r}.sgp") if (d / f"rank-{r}.sgp").is_file() else None
                for r in range(nranks)]

    regions: list[Region] = []
    region_of: dict[tuple, int] = {}

    def region(key: tuple, make) -> int:
        if key not in region_of:
            region_of[key] = len(regions)
            regions.append(make())
        return region_of[key]

    def mpi_region(name: str, v: int) -> Region:
        ok = psg is not None and 0 <= v < len(psg)
        return Region(name=name, file="MPI", line=psg.line_first[v] if ok else 0, vertex=v if ok else -1)

    def function_region(v: int) -> Region:
        if psg is None or not 0 <= v < len(psg):
            return Region(name=f"vertex {v}", vertex=v)
        return Region(name=psg.function[v] or psg.name[v], file=psg.file[v], line=psg.line_first[v], vertex=v)

    def vertex_region(v: int) -> Region:
        name = f"{psg.name[v]}@{pathlib.Path(psg.file[v]).name}:{psg.line_first[v]}"
        return Region(name=name, file=psg.file[v], line=psg.line_first[v], vertex=v)

    def sampled_region(v: int) -> int:
        return region(("vertex", v), lambda v=v: vertex_region(v))

    def omp_region(what: str, v: int) -> int:
        ok = psg is not None and 0 <= v < len(psg)
        file, line = (psg.file[v], psg.line_first[v]) if ok else ("", 0)
        return region(("omp", what, v), lambda: Region(name=trace_omp.region_name(what, pathlib.Path(file).name, line),
                                                       file="OMP", line=line))

    omp = {}
    for f in trace_omp.omp_files(d):
        o = trace_omp.read_omp_rank(f)
        if 0 <= o["rank"] < nranks and o["traced"] >= 0 and len(o["threads"]) > 1:
            omp[o["rank"]] = o
    workers: list[tuple[int, int, np.ndarray]] = []    # (rank, thread, records) per worker location
    omp_stats: dict = {}
    events, windows, offsets, raw_events = [], {}, {}, 0
    for r in range(nranks):
        raw = by_rank[r]["events"]
        names = by_rank[r]["names"]
        raw_events += len(raw)
        defs = raw["kind"] == WINDOW_DEF
        for w, c in zip(raw["comm"][defs].tolist(), raw["peer"][defs].tolist()):
            windows[int(w)] = int(c)
        raw = raw[~defs]
        ev = make_events(len(raw))
        ev["time"] = raw["time_ns"] / 1e9     # exactly what a 1 ns-tick format (OTF2) reads back
        ev["kind"] = raw["kind"]
        for f in ("peer", "tag", "comm", "bytes"):
            ev[f] = raw[f]
        is_coll_end = raw["kind"] == 9
        ev["bytes_recv"] = np.where(is_coll_end, raw["aux"], 0)
        ev["request"] = np.where(is_coll_end, -1, raw["aux"])
        # a completion or post is its request id, as in OTF2 (the ISEND / IRECV holds the message)
        done = raw["kind"] == ISEND_COMPLETE
        for f, default in (("peer", -1), ("tag", 0), ("comm", -1), ("bytes", 0)):
            ev[f][done] = default
        ev["tag"][raw["kind"] == IRECV_REQUEST] = 0
        enter_exit = np.flatnonzero((raw["kind"] == ENTER) | (raw["kind"] == EXIT))
        # one lookup per distinct (MPI routine or -1, vertex) pair, not per event
        keys = (raw["region"][enter_exit].astype(np.int64) << 32) | raw["vertex"][enter_exit].astype(np.int64)
        distinct, inverse = np.unique(keys, return_inverse=True)     # one int64 per pair: a fast sort
        ids = np.array([region(("mpi", names[g], v), lambda g=g, v=v: mpi_region(names[g], v)) if g >= 0
                        else region(("fn", v), lambda v=v: function_region(v))
                        for g, v in zip((distinct >> 32).tolist(), (distinct & 0xFFFFFFFF).tolist())],
                       dtype=np.int64)
        ev["region"][enter_exit] = ids[inverse.ravel()] if len(ids) else []
        ev = _close_open_regions(ev)
        offsets[r] = _clock_pairs(ev, regions, profiles[r])
        if r in omp:
            ev = _add_threads(ev, omp[r], r, nranks, workers, omp_region, omp_stats, regions)
        if psg is not None:
            ev = _sampled_vertices(ev, by_rank[r]["samples"], psg, regions, sampled_region)
        events.append(ev)
    locations = []
    if workers:
        locations = [(r, 0) for r in range(nranks)] + [(r, th) for r, th, _ in workers]
        for _, _, wev in workers:
            if psg is not None:
                wev[1] = _sampled_vertices(wev[1], wev[0], psg, regions, sampled_region)
            events.append(wev[1])
    _distinct_names(regions)
    comms = _comms(profiles, nranks)
    for r in omp:
        comms[trace_omp.OMP_TEAM_BASE + r] = [r] + [nranks + i for i, w in enumerate(workers) if w[0] == r]
    meta = {"source": "scalgraph shim", "timer": "CLOCK_MONOTONIC", "raw_events": raw_events,
            "raw_bytes": sum(x["bytes"] for x in raws),
            "raw_event_bytes": sum(x["event_bytes"] for x in raws),
            "buffer_flushes": sum(x["flushes"] for x in raws)}
    polls = _unrecorded_polls(by_rank, nranks, psg)
    if polls:
        meta["unrecorded_polls"] = polls
    for i, (r, _, _) in enumerate(workers):       # a worker reads its rank's clock
        offsets[nranks + i] = offsets.get(r, [])
    if any(offsets.values()):
        meta["clock_offsets"] = {str(r): p for r, p in offsets.items() if p}
    if psg is not None:
        meta["psg_hash"] = psg.hash()
    if omp:
        meta["openmp"] = {"threads": len(locations) or nranks, **omp_stats,
                          "records_dropped": sum(o["dropped"] for o in omp.values())}
    return Trace(regions=regions, comms=comms, events=events, windows=windows, meta=meta, locations=locations)


def _add_threads(ev: np.ndarray, o: dict, rank: int, nranks: int, workers: list, omp_region,
                 stats: dict, regions: list[Region]) -> np.ndarray:
    """The rank's OpenMP threads (scalgraph/io/trace_omp.py): its workers become locations (appended
    to `workers` as (rank, thread, [samples, events])), the master's OpenMP events are merged into
    `ev`; worker locations are numbered from `nranks` in the order ranks are read."""
    threads = o["threads"]
    master = threads[o["traced"]]
    others = {th: rec for th, rec in sorted(threads.items()) if th != o["traced"] and np.any(
        rec["kind"] == trace_omp.TASK_BEGIN)}
    if not others:
        return ev
    worker_loc = {th: nranks + len(workers) + k for k, th in enumerate(others)}
    rows, st = trace_omp.thread_events(float(ev["time"][0]) if len(ev) else 0.0, master,
                                       {th: rec[rec["kind"] != trace_omp.SAMPLE] for th, rec in others.items()},
                                       omp_region, rank, worker_loc)
    for key in ("regions", "regions_skipped", "lock_acquisitions"):
        stats[key] = stats.get(key, 0) + st.get(key, 0)
    ev = trace_omp.merge_master(ev, rows[-1])
    # workers run under the master's call path at the fork, its outlined function included
    par = np.array([r.name.startswith("!$omp parallel") for r in regions] + [False])
    bar = np.array([r.name.startswith(trace_omp.BARRIER_PREFIXES) for r in regions] + [False])
    body = np.array([r.file != "OMP" and not r.is_mpi and r.vertex >= 0 for r in regions] + [False])
    for th, rec in others.items():
        samples = rec[rec["kind"] == trace_omp.SAMPLE]
        s = np.zeros(len(samples), SAMPLE_DTYPE)
        s["time_ns"], s["vertex"] = samples["time_ns"], samples["vertex"]
        wev = trace_omp.with_master_context(ev, trace_omp.worker_events(rows[th]), par, bar, body)
        workers.append((rank, th, [s, wev]))
    return ev


def convert_shim_trace(run_dir: str | pathlib.Path, target: str | pathlib.Path, psg=None) -> Trace:
    """The run's raw per-rank files -> one checked, zlib-compressed binary trace at `target`; the raw
    files are removed once it is written, so a traced run keeps one copy of its events."""
    from scalgraph.io.trace_read import write_trace
    d = pathlib.Path(run_dir)
    trace = read_shim_trace(d, psg)
    write_trace(trace, target, "binary", compress=True)
    for f in [*d.glob("rank-*.sgt"), *trace_omp.omp_files(d)]:
        f.unlink()
    return trace


def _unrecorded_polls(by_rank: dict, nranks: int, psg) -> list[dict]:
    """The polls the shim counted instead of recording (MPI_Test*, MPI_Iprobe that completed or found
    nothing), per rank and call site: routine, PSG vertex and line, calls, seconds inside MPI.
    Vertex -1: call sites beyond the shim's table, summed."""
    out = []
    for r in range(nranks):
        names = by_rank[r]["names"]
        for p in by_rank[r]["polls"]:
            g, v = int(p["region"]), int(p["vertex"])
            v = -1 if v == 0xFFFFFFFF else v
            out.append({"rank": r, "routine": names[g] if 0 <= g < len(names) else "MPI_Test*", "vertex": v,
                        "line": psg.line_first[v] if psg is not None and 0 <= v < len(psg) else 0,
                        "calls": int(p["calls"]), "seconds": int(p["ns"]) / 1e9})
    return out


def _distinct_names(regions: list[Region]) -> None:
    """User-code vertices with the same name, file and line (two COMPs of one line) get their vertex
    id in the name (`comp [v12]`), so tools that show only region names (Cube, Vampir) keep them
    apart.  MPI regions keep their routine name, which the patterns look up."""
    seen: dict[tuple, int] = {}
    for r in regions:
        key = (r.name, r.file, r.line)
        seen[key] = seen.get(key, 0) + 1
    for r in regions:
        if seen[(r.name, r.file, r.line)] > 1 and r.vertex >= 0 and not r.is_mpi:
            r.name = f"{r.name} [v{r.vertex}]"


def _close_open_regions(ev: np.ndarray) -> np.ndarray:
    """Regions still open when the file was closed (main, the functions around MPI_Finalize) end at
    the last event; EXITs without their ENTER (the file starts inside them) cannot happen."""
    enter_exit = ev[(ev["kind"] == ENTER) | (ev["kind"] == EXIT)]
    depth = np.cumsum(np.where(enter_exit["kind"] == ENTER, 1, -1))
    if len(depth) == 0 or depth[-1] <= 0:
        return ev
    # the regions still open: for each depth 1..final, the last ENTER that reached it
    stack = []
    for d in range(1, int(depth[-1]) + 1):
        at = np.flatnonzero((depth == d) & (enter_exit["kind"] == ENTER))
        stack.append(int(enter_exit["region"][at[-1]]))
    tail = make_events(len(stack))
    tail["kind"] = EXIT
    tail["region"] = stack[::-1]
    tail["time"] = ev["time"][-1] if len(ev) else 0.0
    return np.concatenate([ev, tail])


def _sampled_vertices(ev: np.ndarray, samples: np.ndarray, psg, regions: list[Region], region_of) -> np.ndarray:
    """Leaf regions for the vertices the SIGPROF samples saw between two traced events outside MPI:
    the gap is cut at the midpoints between its samples (and at its ends), each piece becomes
    ENTER/EXIT of the sampled vertex, neighbouring pieces of one vertex merge.  A statistical
    reconstruction (resolution = the sampling period, 5 ms at 200 Hz): sg_cur stores are not observable."""
    from scalgraph.model.psg import KINDS
    if len(samples) == 0 or len(ev) == 0:
        return ev
    t = ev["time"]
    # no samples inside MPI calls and OpenMP synchronisation (fork, barriers, locks): time spent there
    # is theirs; inside a parallel region the samples are the thread's work
    is_mpi_region = np.array([r.is_mpi or (r.file == "OMP" and not r.name.startswith("!$omp parallel"))
                              for r in regions] + [False])
    depth = np.cumsum(np.where((ev["kind"] == ENTER) & is_mpi_region[ev["region"]], 1, 0)
                      - np.where((ev["kind"] == EXIT) & is_mpi_region[ev["region"]], 1, 0))
    t_ns = np.round(t * 1e9).astype(np.int64)           # whole nanoseconds, so the cuts survive OTF2
    st = samples["time_ns"].astype(np.int64)
    gap = np.searchsorted(t_ns, st, side="right")          # the sample lies between events gap-1 and gap
    mpi_kind = KINDS.index("MPI")
    verts = samples["vertex"].astype(np.int64)
    ok = (gap > 0) & (gap < len(t_ns)) & (verts < len(psg))
    ok[ok] &= depth[gap[ok] - 1] == 0
    ok[ok] &= np.array([psg.kind[v] != mpi_kind and psg.kind[v] != 0 for v in verts[ok].tolist()], bool)
    ins_at, ins = [], []
    idx = np.flatnonzero(ok)
    for g in np.unique(gap[idx]).tolist():
        mine = idx[gap[idx] == g]
        ts, vs = st[mine], verts[mine].tolist()
        cuts = np.concatenate([[t_ns[g - 1]], (ts[1:] + ts[:-1]) // 2, [t_ns[g]]]) / 1e9
        start = 0
        for i in range(1, len(vs) + 1):
            if i == len(vs) or vs[i] != vs[start]:
                reg = region_of(vs[start])
                ins_at += [g, g]
                ins.append((ENTER, reg, cuts[start]))
                ins.append((EXIT, reg, cuts[i]))
                start = i
    if not ins:
        return ev
    extra = make_events(len(ins))
    extra["kind"] = [k for k, _, _ in ins]
    extra["region"] = [r for _, r, _ in ins]
    extra["time"] = [x for _, _, x in ins]
    return np.insert(ev, ins_at, extra)


def _clock_pairs(ev: np.ndarray, regions: list[Region], prof: dict | None) -> list:
    """[local time, rank 0's clock - local clock] at the end of MPI_Init and the start of MPI_Finalize."""
    if prof is None:
        return []
    region_names = np.array([r.name for r in regions] + [""], dtype=object)
    names = region_names[ev["region"]]          # region -1 -> ""
    pairs = []
    for name, kind, key in (("MPI_Init", EXIT, "clock_offset_init"), ("MPI_Init_thread", EXIT, "clock_offset_init"),
                            ("MPI_Finalize", ENTER, "clock_offset_final")):
        at = np.flatnonzero((names == name) & (ev["kind"] == kind))
        off = float(prof[key])
        if len(at) and np.isfinite(off) and off != 0.0:
            pairs.append([float(ev["time"][at[0]]), -off])
    return pairs


def _comms(profiles: list, nranks: int) -> dict[int, list[int]]:
    comms: dict[int, list[int]] = {0: list(range(nranks))}
    for prof in profiles:
        if prof is None:
            continue
        members = prof["members"]
        for c in prof["comms"]:
            off, size = int(c["offset"]), int(c["size"])
            comms.setdefault(int(c["id"]), [int(m) for m in members[off:off + size]])
    return comms


def _psg_beside(run_dir: pathlib.Path):
    for cand in (run_dir.parent.parent / "psg.json", run_dir / "psg.json"):
        if cand.is_file():
            from scalgraph.io.safe_read import load_json_file, psg_checked
            return psg_checked(load_json_file(cand, "PSG"), cand)
    return None
