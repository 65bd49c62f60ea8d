"""Event traces: one numpy structured array of events per location (= world rank), plus definitions.

Every format reader (own binary, OTF2, JSON) returns a Trace; every analysis takes one.  Ranks,
peers and roots are **world ranks** (readers translate from communicator ranks).  Times are seconds.
Event sequences follow Scalasca/OTF2 (docs: shared/notes/otf2-for-scalasca.md):
  blocking send     ENTER(MPI_Send)  SEND            EXIT
  blocking recv     ENTER(MPI_Recv)  RECV            EXIT      (RECV just before EXIT)
  isend ... wait    ENTER(MPI_Isend) ISEND(req) EXIT ... ENTER(MPI_Wait) ISEND_COMPLETE(req) EXIT
  irecv ... wait    ENTER(MPI_Irecv) IRECV_REQUEST(req) EXIT ... ENTER(MPI_Wait) IRECV(req) EXIT
  collective        ENTER(MPI_X) COLL_BEGIN COLL_END(comm, root, bytes, bytes_recv) EXIT
  RMA               ENTER(MPI_Put) RMA_PUT(peer=target, win, bytes) EXIT, etc.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

EVENT_KINDS = ("ENTER", "EXIT", "SEND", "RECV", "ISEND", "ISEND_COMPLETE", "IRECV_REQUEST", "IRECV",
               "COLL_BEGIN", "COLL_END", "RMA_PUT", "RMA_GET", "RMA_ACC", "RMA_SYNC",
               "REQUEST_CANCELLED")
(ENTER, EXIT, SEND, RECV, ISEND, ISEND_COMPLETE, IRECV_REQUEST, IRECV, COLL_BEGIN, COLL_END,
 RMA_PUT, RMA_GET, RMA_ACC, RMA_SYNC, REQUEST_CANCELLED) = range(len(EVENT_KINDS))

EVENT_DTYPE = np.dtype([
    ("time", "<f8"),
    ("kind", "u1"),
    ("region", "<i4"),      # ENTER/EXIT: index into Trace.regions; -1 otherwise
    ("peer", "<i4"),        # p2p partner / RMA target / collective root (world rank); -1 if none
    ("tag", "<i4"),
    ("comm", "<i4"),        # communicator id (Trace.comms) or window id for RMA events
    ("bytes", "<i8"),       # bytes sent (collectives: sent)
    ("bytes_recv", "<i8"),  # collectives: bytes received
    ("request", "<i8"),     # non-blocking request id; -1 if none
])


@dataclass
class Region:
    name: str                 # "MPI_Send", "main", "loop@cg.c:42", ...
    file: str = ""            # "MPI" for MPI routines (Scalasca's rule)
    line: int = 0
    vertex: int = -1          # PSG vertex id when the trace came from a scalgraph run

    @property
    def is_mpi(self) -> bool:
        """Scalasca's rule (source file "MPI"); a region without a file counts by its MPI_ name.
        A user function such as `mpi_commpattern_sendrecv` in app.c is not MPI."""
        return self.file == "MPI" or (not self.file and self.name.startswith("MPI_"))


@dataclass
class Trace:
    regions: list[Region]
    comms: dict[int, list[int]]              # communicator id -> member world ranks in comm-rank order
    events: list[np.ndarray]                 # per world rank, EVENT_DTYPE, time non-decreasing
    windows: dict[int, int] = field(default_factory=dict)   # RMA window id -> communicator id
    meta: dict = field(default_factory=dict)  # clock offsets, timer resolution, program, psg hash...
    # OTF2 ProgramBegin / ProgramEnd per world rank (seconds, same clock as the events), when the
    # trace has them (Score-P writes them; the program runs before MPI_Init and after MPI_Finalize)
    program_begin: dict[int, float] = field(default_factory=dict)
    program_end: dict[int, float] = field(default_factory=dict)
    # (rank, thread) of each location (events[i]) when the trace has OpenMP threads: the ranks'
    # MPI threads are locations 0..P-1 (thread 0), worker threads follow (docs/openmp.md).  Empty:
    # one location per rank.  Communicator members, peers and roots are location indices.
    locations: list[tuple[int, int]] = field(default_factory=list)

    @property
    def nranks(self) -> int:
        return len(self.events)


# OpenMP synchronisation is recorded on one "team" communicator per rank with this id plus the rank
# (scalgraph/io/trace_omp.py); a message on it is a lock hand-over, not an MPI message
OMP_TEAM_BASE = 1 << 30


def location_of(trace: Trace, loc: int) -> tuple[int, int]:
    """(rank, thread) of a location."""
    return trace.locations[loc] if trace.locations else (loc, 0)


def mpi_locations(trace: Trace) -> list[int]:
    """The locations that make MPI calls (thread 0 of each rank)."""
    if not trace.locations:
        return list(range(len(trace.events)))
    return [i for i, (_, th) in enumerate(trace.locations) if th == 0]


def location_label(trace: Trace, loc: int) -> str:
    """'rank 2' or 'rank 2 thread 1'."""
    r, th = location_of(trace, loc)
    return f"rank {r}" if not trace.locations else f"rank {r} thread {th}"


def make_events(n: int) -> np.ndarray:
    ev = np.zeros(n, dtype=EVENT_DTYPE)
    for f in ("region", "peer", "comm", "request"):
        ev[f] = -1
    return ev
