"""Read the shim's per-rank profile files (rank-<r>.sgp, layout in instrument/scalgraph.h) into a
RunProfile.  Files are checked (magic, version, size, CRC-32 checksum) before anything is trusted;
a damaged file is a UserError naming it, never a traceback."""
from __future__ import annotations

import os
import pathlib
import re
import stat
import zlib

import numpy as np

from scalgraph.errors import UserError
from scalgraph.io.safe_read import read_regular
from scalgraph.model.profile import DEP_DTYPE, RunProfile
from scalgraph.model.threads import ROW_DTYPE, THREAD_DTYPE, ThreadProfile, concatenate

MAGIC = b"SGPROF\0\0"
VERSION = 3
READABLE = (2, 3)          # format 2 is format 3 without the OpenMP thread section
SAMPLERS = ("off", "task-clock", "itimer")   # sg_file_header.sampler (SG_SAMPLER_*)
VERTEX_ARRAYS = ("samples", "calls", "time_ns", "wait_ns")            # before the counters
VERTEX_ARRAYS_2 = ("sample_ns", "comp_wall_ns", "comp_cpu_ns", "mpi_cpu_ns")   # after them (format 2)
FLAG_FINALIZED, FLAG_AT_EXIT, FLAG_SIGTERM, FLAG_ABORT, FLAG_SAMPLING_OFF, FLAG_DEPS_DROPPED, FLAG_TSC = (
    1, 2, 4, 8, 16, 32, 64)
WRITTEN_BY = ((FLAG_FINALIZED, "finalize"), (FLAG_AT_EXIT, "exit"), (FLAG_SIGTERM, "sigterm"),
              (FLAG_ABORT, "abort"))

# struct sg_file_header, field for field (tests/test_shim_layout.py checks it against the C compiler)
HEADER_DTYPE = np.dtype([
    ("magic", "S8"), ("version", "<u4"), ("header_size", "<u4"), ("checksum", "<u8"),
    ("file_size", "<u8"), ("rank", "<i4"), ("nranks", "<i4"), ("nvertices", "<u4"),
    ("ncounters", "<u4"), ("ndeps", "<u4"), ("ncomms", "<u4"), ("nmembers", "<u4"), ("flags", "<u4"),
    ("deps_dropped", "<u8"), ("hz", "<f8"), ("comm_sample", "<f8"), ("start_time", "<f8"),
    ("end_time", "<f8"), ("clock_offset_init", "<f8"), ("clock_offset_final", "<f8"),
    ("clock_rtt_init", "<f8"), ("clock_rtt_final", "<f8"), ("psg_hash", "S32"), ("host", "S64"),
    ("mpi_library", "S256"), ("counter_names", "S32", (4,)), ("sampler", "<u4"), ("signo", "<i4"),
    ("cores", "<u4"), ("ranks_on_host", "<u4"), ("hz_delivered", "<f8"), ("sampled_cpu", "<f8"),
])
COMM_DTYPE = np.dtype([("id", "<i4"), ("size", "<i4"), ("offset", "<u4"), ("reserved", "<u4")])
# format 3's thread section (struct sg_thread_section, sg_thread_info, sg_thread_row)
THREAD_MAGIC = b"SGTHRD\0\0"
THREAD_SECTION_DTYPE = np.dtype([("magic", "S8"), ("nthreads", "<u4"), ("nrows", "<u4")])
THREAD_INFO_DTYPE = np.dtype([("slot", "<i4"), ("role", "<u4"), ("team_index", "<i4"), ("reserved", "<u4"),
                              ("tasks", "<u8"), ("idle_ns", "<u8"), ("spin_ns", "<u8")])
THREAD_ROW_DTYPE = np.dtype([("thread", "<u4"), ("vertex", "<u4"), ("samples", "<u8"), ("cpu_ns", "<u8"),
                             ("mpi_ns", "<u8"), ("barrier_ns", "<u8")])
_CHECKSUM_AT = HEADER_DTYPE.fields["checksum"][1]
_RANK_FILE = re.compile(r"rank-(\d+)\.sgp$")


def read_rank_file(path) -> dict:
    """One rank file -> dict of the header fields and numpy arrays; UserError if it is damaged."""
    path = pathlib.Path(path)
    data = read_regular(path, "profile file")
    if data[:8] != MAGIC:
        raise UserError(f"{path} is not a scalgraph profile (wrong magic); remove it and rerun the program")
    version = int.from_bytes(data[8:12], "little") if len(data) >= 12 else VERSION
    if version not in READABLE:   # checked first: an older header is shorter
        raise UserError(f"{path} has profile format version {version}; this scalgraph reads "
                        f"versions {READABLE[0]}-{READABLE[-1]}: rerun the program with this scalgraph's shim")
    if len(data) < HEADER_DTYPE.itemsize:
        raise UserError(f"{path} is truncated ({len(data)} bytes, shorter than its header); rerun the program")
    h = np.frombuffer(data, HEADER_DTYPE, count=1)[0]
    if int(h["header_size"]) != HEADER_DTYPE.itemsize:
        raise UserError(f"{path} has a header of {int(h['header_size'])} bytes, not {HEADER_DTYPE.itemsize} as "
                        f"format version {version} says; rerun the program with this scalgraph's shim")
    if int(h["file_size"]) != len(data):
        raise UserError(f"{path} is truncated ({len(data)} of {int(h['file_size'])} bytes); rerun the program")
    zeroed = data[:_CHECKSUM_AT] + bytes(8) + data[_CHECKSUM_AT + 8:]
    if zlib.crc32(zeroed) != int(h["checksum"]):
        raise UserError(f"{path} is corrupt (checksum mismatch); rerun the program")
    nv, nc = int(h["nvertices"]), int(h["ncounters"])
    nd, ncm, nm = int(h["ndeps"]), int(h["ncomms"]), int(h["nmembers"])
    expected = (HEADER_DTYPE.itemsize + nv * 8 * (len(VERTEX_ARRAYS + VERTEX_ARRAYS_2) + nc) + nd * DEP_DTYPE.itemsize
                + ncm * COMM_DTYPE.itemsize + nm * 4)
    section = None
    if version >= 3 and len(data) >= expected + THREAD_SECTION_DTYPE.itemsize:
        section = np.frombuffer(data, THREAD_SECTION_DTYPE, count=1, offset=expected)[0]
        if section["magic"] != THREAD_MAGIC.rstrip(b"\0"):
            raise UserError(f"{path} is inconsistent (no thread section where format 3 has it); rerun the program")
        expected += (THREAD_SECTION_DTYPE.itemsize + int(section["nthreads"]) * THREAD_INFO_DTYPE.itemsize
                     + int(section["nrows"]) * THREAD_ROW_DTYPE.itemsize)
    elif version >= 3:
        expected += THREAD_SECTION_DTYPE.itemsize
    if expected != len(data):
        raise UserError(f"{path} is inconsistent (its counts do not add up to its size); rerun the program")
    off = HEADER_DTYPE.itemsize

    def take(dtype, count):
        nonlocal off
        arr = np.frombuffer(data, dtype, count=count, offset=off)
        off += arr.nbytes
        return arr

    rec = {name: h[name] for name in HEADER_DTYPE.names if name not in ("counter_names",)}
    rec = {k: (v.decode(errors="replace").rstrip("\0") if isinstance(v, bytes) else v.item())
           for k, v in rec.items()}
    rec["counter_names"] = [n.decode(errors="replace").rstrip("\0") for n in h["counter_names"][:nc]]
    for name in VERTEX_ARRAYS:
        rec[name] = take("<u8", nv)
    rec["counters"] = take("<u8", nv * nc).reshape(nc, nv)
    for name in VERTEX_ARRAYS_2:
        rec[name] = take("<u8", nv)
    rec["deps"] = take(DEP_DTYPE, nd)
    rec["comms"] = take(COMM_DTYPE, ncm)
    rec["members"] = take("<i4", nm)
    rec["threads"] = None
    if section is not None:
        off += THREAD_SECTION_DTYPE.itemsize
        rec["threads"] = _threads(take(THREAD_INFO_DTYPE, int(section["nthreads"])),
                                  take(THREAD_ROW_DTYPE, int(section["nrows"])), int(h["rank"]), nv, path)
    if not 1 <= rec["nranks"] <= MAX_RANKS or rec["nranks"] * nv > MAX_CELLS:
        raise UserError(f"{path} claims {rec['nranks']} ranks of {nv} vertices, more than any run has; "
                        "the file is damaged or forged: rerun the program")
    _check_deps(rec["deps"], rec["nranks"], nv, path)
    for name in ("hz", "comm_sample", "start_time", "end_time"):
        if not np.isfinite(rec[name]) or abs(rec[name]) > 1e15:
            raise UserError(f"{path} has {name} = {rec[name]!r}; the file is damaged: rerun the program")
    rec["sampler_name"] = SAMPLERS[rec["sampler"]] if rec["sampler"] < len(SAMPLERS) else "unknown"
    rec["path"] = str(path)
    return rec


MAX_RANKS = 1 << 22
MAX_CELLS = 1 << 31           # ranks x vertices: the [ranks x vertices] arrays must fit in memory


def _check_deps(deps: np.ndarray, nranks: int, nv: int, path) -> None:
    """Dependence rows name ranks and vertices that exist, and count nothing negative."""
    if len(deps) == 0:
        return
    bad = ((deps["rank"] < 0) | (deps["rank"] >= nranks) | (deps["vertex"] < 0) | (deps["vertex"] >= nv)
           | (deps["peer"] >= nranks) | (deps["count"] < 0) | (deps["bytes"] < 0)
           | ~np.isfinite(deps["wait"]) | (deps["wait"] < 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise UserError(f"{path}: communication record {i} names rank {int(deps['rank'][i])}, vertex "
                        f"{int(deps['vertex'][i])}, peer {int(deps['peer'][i])} outside the run; the file is damaged: "
                        "rerun the program")


def _threads(info: np.ndarray, rows: np.ndarray, rank: int, nv: int, path) -> ThreadProfile | None:
    """The thread section of one rank file as a ThreadProfile in seconds (None: no OpenMP thread)."""
    if len(info) == 0:
        return None
    if len(rows) and (int(rows["thread"].max()) >= len(info) or int(rows["vertex"].max()) >= nv):
        raise UserError(f"{path}: a thread row names a thread or vertex the file does not have; the file is "
                        "damaged: rerun the program")
    threads = np.zeros(len(info), THREAD_DTYPE)
    threads["rank"] = rank
    for name in ("slot", "role", "team_index", "tasks"):
        threads[name] = info[name]
    threads["idle"], threads["spin"] = info["idle_ns"] * 1e-9, info["spin_ns"] * 1e-9
    used = rows[(rows["samples"] | rows["cpu_ns"] | rows["mpi_ns"] | rows["barrier_ns"]) != 0]
    out = np.zeros(len(used), ROW_DTYPE)
    out["thread"], out["vertex"], out["samples"] = used["thread"], used["vertex"], used["samples"]
    out["cpu"], out["mpi"], out["barrier"] = used["cpu_ns"] * 1e-9, used["mpi_ns"] * 1e-9, used["barrier_ns"] * 1e-9
    return ThreadProfile(threads, out)


def write_rank_file(path, nvertices: int, arrays: dict, *, deps=None, comms=None, members=None,
                    threads: ThreadProfile | None = None, version: int = VERSION, **header) -> None:
    """Write one rank file in this format (synthetic experiments and tests; the shim writes its own).
    arrays: name -> [nvertices] integers for the names of VERTEX_ARRAYS and VERTEX_ARRAYS_2 (missing
    ones are 0); threads: this rank's threads (format 3; their `rank` field is ignored); version 2
    writes the older format without the thread section; header: HEADER_DTYPE fields (rank, nranks, hz,
    flags, psg_hash as bytes, ...)."""
    deps = np.zeros(0, DEP_DTYPE) if deps is None else np.asarray(deps, DEP_DTYPE)
    comms = np.zeros(0, COMM_DTYPE) if comms is None else np.asarray(comms, COMM_DTYPE)
    members = np.zeros(0, "<i4") if members is None else np.asarray(members, "<i4")

    def column(name):
        return np.rint(np.asarray(arrays.get(name, np.zeros(nvertices)), dtype="f8")).astype("<u8")

    body = b"".join([*(column(n).tobytes() for n in VERTEX_ARRAYS), *(column(n).tobytes() for n in VERTEX_ARRAYS_2),
                     deps.tobytes(), comms.tobytes(), members.tobytes()])
    if version >= 3:
        body += _thread_section(threads)
    h = np.zeros(1, HEADER_DTYPE)
    h["magic"], h["version"], h["header_size"] = MAGIC, version, HEADER_DTYPE.itemsize
    h["nvertices"], h["ndeps"], h["ncomms"], h["nmembers"] = nvertices, len(deps), len(comms), len(members)
    h["file_size"] = HEADER_DTYPE.itemsize + len(body)
    for key, value in header.items():
        h[key] = value
    h["checksum"] = zlib.crc32(h.tobytes() + body)
    pathlib.Path(path).write_bytes(h.tobytes() + body)


def _thread_section(threads: ThreadProfile | None) -> bytes:
    n = 0 if threads is None else len(threads.threads)
    rows = np.zeros(0, ROW_DTYPE) if threads is None else threads.rows
    sec = np.zeros(1, THREAD_SECTION_DTYPE)
    sec["magic"], sec["nthreads"], sec["nrows"] = THREAD_MAGIC, n, len(rows)
    info = np.zeros(n, THREAD_INFO_DTYPE)
    out = np.zeros(len(rows), THREAD_ROW_DTYPE)
    if n:
        for name in ("slot", "role", "team_index", "tasks"):
            info[name] = threads.threads[name]
        info["idle_ns"] = np.rint(threads.threads["idle"] * 1e9)
        info["spin_ns"] = np.rint(threads.threads["spin"] * 1e9)
        out["thread"], out["vertex"], out["samples"] = rows["thread"], rows["vertex"], rows["samples"]
        for ns, sec_name in (("cpu_ns", "cpu"), ("mpi_ns", "mpi"), ("barrier_ns", "barrier")):
            out[ns] = np.rint(rows[sec_name] * 1e9)
    return sec.tobytes() + info.tobytes() + out.tobytes()


def written_by(flags: int) -> str:
    return next((name for bit, name in WRITTEN_BY if flags & bit), "unknown")


def read_run(directory) -> RunProfile:
    """All rank files of one run directory -> RunProfile ([ranks x vertices] arrays, deps, comms, meta).

    Ranks whose file is missing (killed) keep zero rows and are listed in meta["missing_ranks"],
    with meta["incomplete"] = True."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        raise UserError(f"profile directory {directory} does not exist; run the program with SCALGRAPH_OUT "
                        "pointing there")
    files = sorted((int(m.group(1)), p) for p in directory.iterdir() if (m := _RANK_FILE.search(p.name)))
    if not files:
        raise UserError(f"{directory} has no rank-<r>.sgp files: was the program linked with the scalgraph "
                        f"shim and run with SCALGRAPH_OUT={directory}?")
    recs = [read_rank_file(p) for _, p in files]
    first = recs[0]
    nranks, nv, psg_hash = first["nranks"], first["nvertices"], first["psg_hash"]
    for (r, p), rec in zip(files, recs):
        if rec["rank"] != r or not 0 <= r < nranks:
            raise UserError(f"{p} says it is rank {rec['rank']} of {rec['nranks']}; the file was renamed or "
                            "belongs to another run")
        for key, want in (("nranks", nranks), ("nvertices", nv), ("psg_hash", psg_hash)):
            if rec[key] != want:
                raise UserError(f"{p} has {key}={rec[key]!r} but {first['path']} has {want!r}: the directory "
                                "mixes files of different runs or programs; rerun into an empty directory")

    def stack(key, dtype):
        out = np.zeros((nranks, nv), dtype=dtype)
        for rec in recs:
            out[rec["rank"]] = rec[key]
        return out

    samples, calls = stack("samples", "i8"), stack("calls", "i8")
    mpi_time, wait = stack("time_ns", "f8") * 1e-9, stack("wait_ns", "f8") * 1e-9
    # sampled vertices: the CPU time the samples were charged (not samples/hz, which a biased or
    # capped sampler gets wrong); MPI vertices: the exact time inside their calls
    time = np.where(calls > 0, mpi_time, stack("sample_ns", "f8") * 1e-9)
    comp_wall, comp_cpu = stack("comp_wall_ns", "f8") * 1e-9, stack("comp_cpu_ns", "f8") * 1e-9
    mpi_cpu = stack("mpi_cpu_ns", "f8") * 1e-9

    counters: dict[str, np.ndarray] = {}
    for rec in recs:
        for i, name in enumerate(rec["counter_names"]):
            arr = counters.setdefault(name, np.full((nranks, nv), np.nan))
            arr[rec["rank"]] = rec["counters"][i]

    deps = np.concatenate([rec["deps"] for rec in recs]) if recs else np.zeros(0, DEP_DTYPE)
    comm_members: dict[int, list[int]] = {}
    for rec in recs:
        for c in rec["comms"]:
            members = rec["members"][c["offset"]:c["offset"] + c["size"]].tolist()
            comm_members.setdefault(int(c["id"]), members)

    present = sorted(rec["rank"] for rec in recs)
    missing = sorted(set(range(nranks)) - set(present))
    starts = [rec["start_time"] for rec in recs]
    ends = [rec["end_time"] for rec in recs]
    by_rank = lambda key: [next((rec[key] for rec in recs if rec["rank"] == r), None)  # noqa: E731
                           for r in range(nranks)]
    flags = by_rank("flags")
    samplers = by_rank("sampler_name")
    meta = {
        "format_version": max(rec["version"] for rec in recs),
        **sampler_meta(recs),
        "samplers": samplers,
        "cores": by_rank("cores"),
        "ranks_on_host": by_rank("ranks_on_host"),
        "comm_sample": first["comm_sample"],
        "mpi_library": first["mpi_library"],
        "hosts": by_rank("host"),
        "start": min(starts), "end": max(ends), "wall_time": max(ends) - min(starts),
        "clock_offset_init": by_rank("clock_offset_init"),
        "clock_offset_final": by_rank("clock_offset_final"),
        "clock_rtt_init": by_rank("clock_rtt_init"),
        "clock_rtt_final": by_rank("clock_rtt_final"),
        "written_by": [None if f is None else written_by(f) for f in flags],
        "timer": [None if f is None else ("tsc" if f & FLAG_TSC else "clock") for f in flags],
        "sampling_off_ranks": [r for r, f in enumerate(flags) if f is not None and f & FLAG_SAMPLING_OFF],
        "deps_dropped": int(sum(rec["deps_dropped"] for rec in recs)),
        "missing_ranks": missing,
        "incomplete": bool(missing),
        "directory": str(directory),
    }
    return RunProfile(nranks, nv, psg_hash, time, samples, calls, wait, deps, comm_members, counters, meta,
                      comp_wall=comp_wall, comp_cpu=comp_cpu, mpi_cpu=mpi_cpu,
                      threads=concatenate([rec["threads"] for rec in recs]))


def sampler_meta(recs: list[dict]) -> dict:
    """meta["sampler"]: "itimer" if any rank fell back to ITIMER_PROF, else "task-clock" if any rank
    sampled, else "off"; meta["hz"]: the delivered rate (samples per CPU second, mean over the ranks
    that sampled); meta["hz_requested"]: the rate asked for."""
    on = [rec for rec in recs if rec["sampler_name"] != "off"]
    names = {rec["sampler_name"] for rec in on}
    sampler = "itimer" if "itimer" in names else ("task-clock" if on else "off")
    delivered = [rec["hz_delivered"] for rec in on if rec["hz_delivered"] > 0]
    return {"sampler": sampler, "hz": float(np.mean(delivered)) if delivered else 0.0,
            "hz_requested": float(max((rec["hz"] for rec in on), default=0.0))}


def fallback_note(run_dirs) -> str | None:
    """One line when ranks of these run directories were sampled with the ITIMER_PROF fallback (None
    otherwise).  Reads the headers only; files it cannot read are left to `scalgraph detect`."""
    rates, runs = [], 0
    for d in run_dirs:
        found = [h for h in map(_peek_header, pathlib.Path(d).glob("rank-*.sgp"))
                 if h is not None and h["sampler"] == SAMPLERS.index("itimer")]
        rates += [float(h["hz_delivered"]) for h in found]
        runs += bool(found)
    if not runs:
        return None
    return (f"{runs} run(s) sampled with the ITIMER_PROF fallback (perf events not available, or "
            f"SCALGRAPH_SAMPLER=itimer): {np.mean(rates):.0f} samples per CPU second delivered; sampled times "
            "are tick-biased")


def _peek_header(path: pathlib.Path):
    """The header of a rank file of this version, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)   # a FIFO must not block us
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, HEADER_DTYPE.itemsize)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) < HEADER_DTYPE.itemsize or data[:8] != MAGIC:
        return None
    h = np.frombuffer(data, HEADER_DTYPE, count=1)[0]
    return h if int(h["version"]) in READABLE else None
