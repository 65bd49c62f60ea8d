"""One run of an instrumented program at one scale: per-rank, per-vertex arrays.

Readers in scalgraph/io build these from the shim's per-rank files; analysis builds them from
literals in tests.  A vertex that did not run is 0, never absent.  Times are exclusive (a sample or
an MPI call is charged to the innermost vertex only); inclusive values are derived by summing
subtrees of the PSG.
"""
from __future__ import annotations

# meta keys the analysis relies on (readers fill what they know):
#   hz            the sampling rate actually delivered (samples per CPU second), 0 when sampling was off
#   sampler       "task-clock" (perf_event per-thread hrtimer), "itimer" (ITIMER_PROF fallback) or "off"
#   cores         [per rank] CPUs the rank's process could run on (its affinity mask)
#   ranks_on_host [per rank] ranks of the run on the same host: more ranks than cores means time-sharing

from dataclasses import dataclass, field

import numpy as np

from scalgraph.model.threads import ThreadProfile

# Communication dependences, one row per distinct (rank, vertex, kind, peer, tag, comm) tuple.
# kind: DEP_SEND / DEP_RECV for point-to-point (peer = world rank, or -1 if never resolved),
#       DEP_COLL for collectives (peer = -1; the group is comm_members[comm]),
#       DEP_RMA for one-sided operations (peer = target world rank).
DEP_SEND, DEP_RECV, DEP_COLL, DEP_RMA = 0, 1, 2, 3
DEP_DTYPE = np.dtype([
    ("rank", "<i4"),      # world rank that recorded the row
    ("vertex", "<i4"),    # PSG vertex id of the MPI call
    ("kind", "<i4"),
    ("peer", "<i4"),      # world rank of the partner
    ("tag", "<i4"),
    ("comm", "<i4"),      # communicator id, key of RunProfile.comm_members
    ("count", "<i8"),     # number of calls/messages
    ("bytes", "<i8"),
    ("wait", "<f8"),      # seconds blocked (waiting evidence) on this tuple
])


@dataclass
class RunProfile:
    nranks: int
    nvertices: int
    psg_hash: str
    time: np.ndarray        # [ranks x vertices] seconds, exclusive (samples/hz, exact for MPI vertices)
    samples: np.ndarray     # [ranks x vertices] SIGPROF samples
    calls: np.ndarray       # [ranks x vertices] MPI call counts (0 for non-MPI vertices)
    wait: np.ndarray        # [ranks x vertices] seconds blocked inside MPI (waiting evidence)
    deps: np.ndarray        # structured, DEP_DTYPE
    comm_members: dict[int, list[int]] = field(default_factory=dict)  # comm id -> world ranks
    counters: dict[str, np.ndarray] = field(default_factory=dict)     # name -> [ranks x vertices]; absent = not measured
    meta: dict = field(default_factory=dict)  # hz, mpi_library, host, start, end, clock offsets, wall time...
    # Exact computation between MPI calls (profile format 2): for an MPI vertex m on rank r, the
    # seconds since that rank's previous MPI call returned, summed over the calls made at m.  They
    # are charged to the MPI call that *ends* the computation; zeros where not measured.
    comp_wall: np.ndarray | None = None   # [ranks x vertices] wall-clock seconds
    comp_cpu: np.ndarray | None = None    # [ranks x vertices] thread-CPU seconds
    mpi_cpu: np.ndarray | None = None     # [ranks x vertices] thread-CPU seconds spent inside the MPI calls
    # Repetitions merged into this profile (io.experiment.median_of_repetitions): each one's mean time
    # over ranks, so the fits can tell growth from the spread between repetitions.  None: one run.
    rep_mean_time: np.ndarray | None = None   # [repetitions x vertices] seconds
    # The thread dimension (profile format 3, model/threads.py): per OpenMP thread its role and per
    # (vertex, thread) CPU, MPI and barrier time.  None: no OpenMP threads were followed.
    threads: ThreadProfile | None = None

    def __post_init__(self) -> None:
        for name in ("comp_wall", "comp_cpu", "mpi_cpu"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros((self.nranks, self.nvertices)))

    @property
    def wall_time(self) -> float:
        return float(self.meta.get("wall_time", 0.0))


def empty_profile(nranks: int, nvertices: int, psg_hash: str = "") -> RunProfile:
    z = lambda dt: np.zeros((nranks, nvertices), dtype=dt)  # noqa: E731
    return RunProfile(nranks, nvertices, psg_hash, z("f8"), z("i8"), z("i8"), z("f8"),
                      np.zeros(0, dtype=DEP_DTYPE))
