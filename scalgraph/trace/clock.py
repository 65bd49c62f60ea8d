"""Clock-condition violations and their correction (seed 004; formulas and parameters from
shared/notes/trace-analysis-reference.md §7, tagged [EXT] there).

Order, as in seed 004 §V: linear offset interpolation (when the trace carries clock offsets
measured at init and finalize), then the controlled logical clock (CLC):

1. Logical messages (happened-before edges): p2p SEND/ISEND -> RECV/IRECV (matching.py, MPI's
   non-overtaking rule); barrier and MPI_Init/Finalize: every ENTER -> every EXIT; N x N
   (allreduce, allgather(v), alltoall, reduce_scatter(_block)): ENTER of ranks that send bytes ->
   EXIT of ranks that receive bytes; 1-to-N (bcast, scatter(v)): root ENTER -> non-root EXITs;
   N-to-1 (reduce, gather(v)): ENTERs of senders -> root EXIT; scan/exscan: ENTER_k (k <= l) ->
   EXIT_l.  Alltoallv/w, non-blocking and unknown collectives and size-1 communicators are
   internal events.  A logical message is a *sender set* (its max is what the receiver waits for).
2. Forward amortisation: internal events
   C_i = max(t_i, C_{i-1} + delta, C_{i-1} + gamma*(t_i - t_{i-1})), C_0 = t_0;
   a logical receive additionally C_i >= max(C(senders)) + l_min; the jump is
   Delta_i = C_i - C^loc_i.  Per location the recurrence has the closed form
   C_i = A_i + max_{j <= i}(F_j - A_j), A = cumulative sum of the steps max(delta, gamma dt), F_j = t_j
   or, at a receive, max(t_j, need_j): one cumulative maximum per location.  The receives' needs
   depend on other locations' C, so the whole system (a longest-path problem over the
   happened-before graph) is solved by fixed-point iteration from below, every round vectorised:
   round k is exact for every event whose chain of binding corrections has at most k messages,
   and the values only grow, so the first round that changes nothing gives the exact (least)
   solution.  Real traces need a handful of rounds; a trace whose corrections chain through many
   messages falls back to the exact event-by-event pass after MAX_ROUNDS.
3. Backward amortisation, per location, over the corrected receives in forward order: a linear ramp
   of slope `slope` before each jump, made steeper where a logical send would otherwise pass its
   bound (min over its receivers of C(recv) - l_min), recursing on the part before that send.
   Vectorised over independent jumps (ramps that do not reach back past the previous jump of their
   location), with the arithmetic of the one-jump-at-a-time loop (tests/test_trace_clock_vectorised.py).

Guarantees (what tests/test_trace_clock*.py assert): every CLC-corrected time >= the time it had
before the CLC (events only move forward; offset interpolation, a different correction, may move
them either way); times stay strictly increasing per location (delta > 0); every logical message
has C(recv) >= C(send) + l_min (up to rounding, 1e-12 s), so no violation remains.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import matching, mpi_names, native

# Kinds of logical message, for the report.
P2P, BARRIER, NXN, ONE_TO_N, N_TO_ONE, SCAN, INIT_FINALIZE = range(7)
MESSAGE_KINDS = ("point-to-point receive before its send", "collective exit before the last enter",
                 "N x N exit before the last sending enter", "1-to-N exit before the root's enter",
                 "N-to-1 root exit before a sender's enter", "scan exit before a lower rank's enter",
                 "MPI_Init/Finalize exit before the last enter",
                 # OpenMP (clock_hybrid.py: FORK, JOIN, OMP_BARRIER, LOCK)
                 "OpenMP worker started before its fork", "OpenMP join before a worker's region exit",
                 "OpenMP barrier exit before the last enter", "OpenMP lock acquired before its release")

_NXN = {"allreduce", "allgather", "allgatherv", "alltoall", "reduce_scatter", "reduce_scatter_block"}
_ONE_TO_N = {"bcast", "scatter", "scatterv"}
_N_TO_ONE = {"reduce", "gather", "gatherv"}
_SCAN = {"scan", "exscan"}

VIOLATION_DTYPE = np.dtype([
    ("kind", "i1"),            # index into MESSAGE_KINDS
    ("recv_rank", "<i4"), ("recv_index", "<i8"),   # the logical receive (local event index)
    ("send_rank", "<i4"), ("send_index", "<i8"),   # its latest logical sender
    ("amount", "<f8"),         # seconds the receive is early: C(send) + l_min - C(recv) > 0
])


@dataclass(frozen=True)
class ClockParams:
    """Defaults are Scalasca's [EXT] values from the reference note §7 (seconds)."""
    delta: float = 1e-9          # minimum distance of consecutive events on a location
    gamma: float = 0.99999       # interval-preservation factor of forward amortisation (pass 1)
    l_min_p2p: float = 1e-6      # minimum latency of a point-to-point message
    l_min_coll: float = 1e-6     # minimum latency of a collective's logical messages
    slope: float = 0.01          # initial slope of the backward-amortisation ramp
    l_min_omp: float = 1e-8      # minimum latency between threads (fork, join, barrier, lock; shared memory)

    def __post_init__(self):
        if not (self.delta >= 0 and 0 < self.gamma <= 1 and self.l_min_p2p >= 0 and self.l_min_coll >= 0
                and self.slope > 0 and self.l_min_omp >= 0):
            raise UserError("clock correction parameters: need delta >= 0, 0 < gamma <= 1, l_min >= 0, slope > 0")


@dataclass
class LogicalMessages:
    """Happened-before edges over the flat trace (global event indices, see matching.flatten).
    Sender set s has members set_members[set_ptr[s]:set_ptr[s+1]]; receive i waits for set recv_set[i]."""
    set_members: np.ndarray
    set_ptr: np.ndarray
    set_kind: np.ndarray
    set_lmin: np.ndarray
    recv_evt: np.ndarray
    recv_set: np.ndarray

    @property
    def nsets(self) -> int:
        return len(self.set_ptr) - 1


@dataclass
class ClockReport:
    violations: np.ndarray                   # VIOLATION_DTYPE, found in the input (after offset interpolation)
    offsets_applied: bool = False
    corrected: bool = False
    jumps: int = 0                           # receives moved forward by the CLC
    max_jump: float = 0.0
    max_shift: float = 0.0                   # largest total forward move of any event
    params: ClockParams = field(default_factory=ClockParams)
    openmp: dict | None = None               # threaded traces: the hybrid correction's OpenMP messages

    def as_dict(self) -> dict:
        """What the correction found and did, for the JSON report."""
        v = self.violations
        kinds = np.bincount(v["kind"], minlength=len(MESSAGE_KINDS)) if len(v) else np.zeros(len(MESSAGE_KINDS), int)
        p = self.params
        extra = {} if self.openmp is None else {"openmp": self.openmp}
        return {**extra, "violations_before_correction": int(len(v)),
                "violations_by_kind": {MESSAGE_KINDS[k]: int(n) for k, n in enumerate(kinds.tolist()) if n},
                "largest_violation": float(v["amount"].max()) if len(v) else 0.0,
                "offsets_applied": self.offsets_applied, "controlled_logical_clock": self.corrected,
                "receives_moved": self.jumps, "largest_jump": self.max_jump, "largest_shift": self.max_shift,
                "parameters": {"gamma": p.gamma, "delta": p.delta, "min_latency_p2p": p.l_min_p2p,
                               "min_latency_collective": p.l_min_coll, "slope": p.slope,
                               **({"min_latency_openmp": p.l_min_omp} if self.openmp is not None else {})}}

    def summary(self) -> str:
        v = self.violations
        if len(v) == 0:
            head = "clock condition holds: no receive before its send, no collective exit before its enters"
        else:
            kinds = np.bincount(v["kind"], minlength=len(MESSAGE_KINDS))
            parts = ", ".join(f"{n} {MESSAGE_KINDS[k]}" for k, n in enumerate(kinds.tolist()) if n)
            head = f"{len(v)} clock-condition violations ({parts}); largest {v['amount'].max() * 1e6:.3f} us"
        lines = [head]
        for row in v[np.argsort(-v["amount"], kind="stable")[:3]] if len(v) else []:
            lines.append(f"  rank {row['recv_rank']} event {row['recv_index']} is {row['amount'] * 1e6:.3f} us early "
                         f"for rank {row['send_rank']} event {row['send_index']} ({MESSAGE_KINDS[row['kind']]})")
        if self.openmp is not None:
            n = self.openmp["logical_messages"]
            lines.append("hybrid controlled logical clock (seed 004 §V): OpenMP logical messages "
                         + ", ".join(f"{v} {k}" for k, v in n.items()))
        if self.offsets_applied:
            lines.append("timestamps adjusted by linear interpolation of the measured clock offsets")
        if self.corrected:
            lines.append(f"controlled logical clock: {self.jumps} receives moved forward (largest jump "
                         f"{self.max_jump * 1e6:.3f} us, largest event shift {self.max_shift * 1e6:.3f} us)")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------- edges

def logical_messages(trace: tm.Trace, params: ClockParams = ClockParams(), flat=None) -> LogicalMessages:
    flat = flat if flat is not None else matching.flatten(trace)
    # only the regions of the collectives' and MPI_Init/Finalize's events are needed, not the
    # whole nesting of match_regions
    depth = matching.depth_after(flat)
    send_evt, recv_evt_p2p = matching.pair_messages(flat)[:2]
    # p2p messages are the first sets, one sender each; collectives are appended, vectorised over
    # the instances of one kind on one communicator
    np2p = len(send_evt)
    sets: list[np.ndarray] = [send_evt.astype(np.int64)]
    sizes: list[np.ndarray] = [np.ones(np2p, np.int64)]
    kinds: list[np.ndarray] = [np.full(np2p, P2P, np.int8)]
    recv_evt: list[np.ndarray] = [recv_evt_p2p.astype(np.int64)]
    recv_set: list[np.ndarray] = [np.arange(np2p, dtype=np.int64)]
    nsets = [np2p]

    def add_block(kind: int, senders, s_mask, receivers, r_mask) -> None:
        """One set per row: the masked senders -> the masked receivers (rows with none are skipped)."""
        keep = s_mask.any(axis=1) & r_mask.any(axis=1)
        if not keep.any():
            return
        senders, s_mask, receivers, r_mask = senders[keep], s_mask[keep], receivers[keep], r_mask[keep]
        m = len(senders)
        sets.append(senders[s_mask].astype(np.int64))
        sizes.append(s_mask.sum(axis=1).astype(np.int64))
        kinds.append(np.full(m, kind, np.int8))
        recv_evt.append(receivers[r_mask].astype(np.int64))
        recv_set.append(np.repeat(nsets[0] + np.arange(m), r_mask.sum(axis=1)))
        nsets[0] += m

    def add(kind: int, senders, receivers) -> None:
        senders, receivers = np.asarray(senders, np.int64)[None, :], np.asarray(receivers, np.int64)[None, :]
        add_block(kind, senders, np.ones(senders.shape, bool), receivers, np.ones(receivers.shape, bool))

    ev = flat.ev
    op_of_region = np.array([_op_name(trace, i) for i in range(len(trace.regions))] + [""], dtype=object)
    coll_end = np.flatnonzero(ev["kind"] == tm.COLL_END)
    owner = np.full(len(flat.rank), -1, np.int64)
    owner[coll_end] = matching.owner_of(flat, depth, coll_end)
    for inst in matching.match_collectives(flat, SimpleNamespace(owner=owner), trace.comms):
        size = len(inst.members)
        if size < 2 or inst.end_evt.shape[0] == 0:
            continue
        enters = inst.op
        exits = np.where(enters >= 0, matching.exit_of(flat, depth, np.maximum(enters, 0).ravel()).reshape(enters.shape), -1)
        ok = np.all(enters >= 0, axis=1) & np.all(exits >= 0, axis=1)   # COLL_END outside a region: no order
        ends = inst.end_evt
        sent, got = ev["bytes"][ends] > 0, ev["bytes_recv"][ends] > 0
        ops = op_of_region[ev["region"][np.maximum(enters[:, 0], 0)]]
        col = np.arange(size)[None, :]
        root_world = ev["peer"][ends[:, 0]]
        root = np.array([np.flatnonzero(inst.members == r)[0] if np.any(inst.members == r) else -1
                         for r in np.unique(root_world).tolist()], np.int64)
        root_col = root[np.searchsorted(np.unique(root_world), root_world)] if len(root_world) else root_world
        is_root = col == root_col[:, None]
        every = np.ones((len(ops), size), bool)
        for kind, names in ((BARRIER, {"barrier"}), (NXN, _NXN), (ONE_TO_N, _ONE_TO_N), (N_TO_ONE, _N_TO_ONE)):
            sel = ok & np.isin(ops, list(names))
            if kind in (ONE_TO_N, N_TO_ONE):
                sel &= root_col >= 0
            if not sel.any():
                continue
            e, x = enters[sel], exits[sel]
            if kind == BARRIER:
                add_block(BARRIER, e, every[sel], x, every[sel])
            elif kind == NXN:
                add_block(NXN, e, sent[sel], x, got[sel])
            elif kind == ONE_TO_N:
                add_block(ONE_TO_N, e, is_root[sel], x, ~is_root[sel] & got[sel])
            else:
                add_block(N_TO_ONE, e, ~is_root[sel] & sent[sel], x, is_root[sel])
        for k in np.flatnonzero(ok & np.isin(ops, list(_SCAN))).tolist():
            for l in range(1, size):
                add(SCAN, enters[k, :l + 1], exits[k, l:l + 1])
    _add_init_finalize(trace, flat, depth, add)
    size = np.concatenate(sizes)
    return LogicalMessages(
        set_members=np.concatenate(sets), set_ptr=np.concatenate(([0], np.cumsum(size))).astype(np.int64),
        set_kind=np.concatenate(kinds),
        set_lmin=np.where(np.concatenate(kinds) == P2P, params.l_min_p2p, params.l_min_coll),
        recv_evt=np.concatenate(recv_evt), recv_set=np.concatenate(recv_set))


def _op_name(trace: tm.Trace, region: int) -> str:
    name = mpi_names.mpi_function(trace.regions[region].name) if 0 <= region < len(trace.regions) else None
    return name[4:].lower() if name else ""


def _add_init_finalize(trace, flat, depth, add) -> None:
    """MPI_Init(_thread) and MPI_Finalize synchronise all ranks: the k-th call of each, when every rank has it."""
    names = {i for i, r in enumerate(trace.regions) if r.name.lower() in ("mpi_init", "mpi_init_thread")}
    fins = {i for i, r in enumerate(trace.regions) if r.name.lower() == "mpi_finalize"}
    if flat.nranks < 2:
        return
    for group in (names, fins):
        if not group:
            continue
        is_call = (flat.ev["kind"] == tm.ENTER) & np.isin(flat.ev["region"], list(group))
        per_rank = [np.flatnonzero(is_call[flat.offsets[r]:flat.offsets[r + 1]]) + flat.offsets[r]
                    for r in range(flat.nranks)]
        for k in range(min(len(p) for p in per_rank)):
            enters = np.array([p[k] for p in per_rank])
            exits = matching.exit_of(flat, depth, enters)
            if np.all(exits >= 0):
                add(INIT_FINALIZE, enters, exits)


# ------------------------------------------------------------------------------------ detection

def find_violations(trace: tm.Trace, lm: LogicalMessages | None = None, l_min: float = 0.0) -> np.ndarray:
    """Every logical receive that is earlier than `l_min` after its latest sender (default: strictly
    before it).  Vectorised; returns VIOLATION_DTYPE rows sorted by receive rank and index."""
    lm = lm if lm is not None else logical_messages(trace)
    flat = matching.flatten(trace)
    return _violations(flat.ev["time"], flat, lm, l_min)


def _violations(t: np.ndarray, flat, lm: LogicalMessages, l_min: float, tol: float = 0.0) -> np.ndarray:
    if lm.nsets == 0 or len(lm.recv_evt) == 0:
        return np.zeros(0, VIOLATION_DTYPE)
    member_t = t[lm.set_members]
    set_max = np.maximum.reduceat(member_t, lm.set_ptr[:-1])
    # position of each set's latest sender
    set_id = np.repeat(np.arange(lm.nsets), np.diff(lm.set_ptr))
    is_max = member_t == set_max[set_id]
    first_max = np.full(lm.nsets, -1, np.int64)
    idx = np.flatnonzero(is_max)[::-1]
    first_max[set_id[idx]] = lm.set_members[idx]
    need = set_max[lm.recv_set] + l_min
    amount = need - t[lm.recv_evt]
    bad = np.flatnonzero(amount > tol)
    out = np.zeros(len(bad), VIOLATION_DTYPE)
    r, s = lm.recv_evt[bad], first_max[lm.recv_set[bad]]
    out["kind"] = lm.set_kind[lm.recv_set[bad]]
    out["recv_rank"], out["recv_index"] = flat.rank[r], r - flat.offsets[flat.rank[r]]
    out["send_rank"], out["send_index"] = flat.rank[s], s - flat.offsets[flat.rank[s]]
    out["amount"] = amount[bad]
    return out[np.lexsort((out["recv_index"], out["recv_rank"]))]


# ----------------------------------------------------------------------------- offset interpolation

def interpolate_offsets(trace: tm.Trace, times: list[np.ndarray] | None = None) -> bool:
    """Apply meta["clock_offsets"] in place: per rank a list of [local_time, offset] pairs (offset =
    reference clock - local clock, measured e.g. at MPI_Init and MPI_Finalize).  Times become
    t + offset(t), offset(t) linear through the first and last pair (constant with one pair).
    `times`: per rank the time array to correct in place (views of a flat trace's column), instead
    of the events' time fields.  Returns whether anything was applied."""
    offsets = trace.meta.get("clock_offsets")
    if not offsets:
        return False
    items = offsets.items() if isinstance(offsets, dict) else enumerate(offsets)
    applied = False
    for key, pairs in items:
        try:
            rank = int(key)
            pts = np.asarray(pairs, float).reshape(-1, 2)
        except (TypeError, ValueError):
            raise UserError(f"clock_offsets of rank {key!r} must be a list of [local_time, offset] pairs") from None
        if not 0 <= rank < trace.nranks or len(pts) == 0 or not np.isfinite(pts).all():
            raise UserError(f"clock_offsets: rank {key!r} is not a rank of this trace or has no finite pairs")
        t = trace.events[rank]["time"] if times is None else times[rank]
        (t0, o0), (t1, o1) = pts[0], pts[-1]
        slope = (o1 - o0) / (t1 - t0) if t1 != t0 else 0.0
        if slope <= -1:
            raise UserError(f"clock_offsets of rank {rank} would reverse time (drift slope {slope:.3g})")
        if times is None:
            trace.events[rank]["time"] = t + o0 + slope * (t - t0)
        else:
            t[:] = t + o0 + slope * (t - t0)
        applied = True
    return applied


def _check_monotonic(times) -> None:
    for rank, t in enumerate(times):
        if np.any(np.diff(t) < 0):
            raise UserError(f"rank {rank}: clock offset interpolation made time go backwards")


# ----------------------------------------------------------------------------------- correction

def correct_clocks(trace: tm.Trace, params: ClockParams = ClockParams(), force: bool = False,
                   openmp: bool = True) -> tuple[tm.Trace, ClockReport]:
    """Offset interpolation (if the trace has offsets), then, when violations remain (or `force`),
    the controlled logical clock.  Returns a new Trace (the input is not modified) and a report.
    A trace with OpenMP threads as locations gets the hybrid clock of seed 004 §V (clock_hybrid.py:
    fork, join, barrier and lock messages between threads); `openmp=False` corrects it as pure MPI.
    A rank whose times do not change keeps the input's event array (shared, not copied: a copy
    would hold every event twice during the analysis)."""
    shared = list(trace.events)
    out = tm.Trace(regions=trace.regions, comms=trace.comms, events=list(trace.events),
                   windows=trace.windows, meta=dict(trace.meta), program_begin=trace.program_begin,
                   program_end=trace.program_end, locations=trace.locations)
    report = ClockReport(violations=np.zeros(0, VIOLATION_DTYPE), params=params)
    if out.meta.get("clock_offsets"):
        out.events = [e.copy() for e in trace.events]   # interpolation writes in place
    report.offsets_applied = interpolate_offsets(out)
    if report.offsets_applied:
        _check_monotonic([ev["time"] for ev in out.events])
        out.meta.pop("clock_offsets", None)
    flat = matching.flatten(out)
    _logical_clock(out, flat, params, force, openmp, report)
    if not report.corrected:
        return out, report
    for r in range(flat.nranks):
        times = flat.ev["time"][flat.offsets[r]:flat.offsets[r + 1]]
        if out.events[r] is shared[r] and not np.array_equal(times, shared[r]["time"]):
            out.events[r] = shared[r].copy()
        if out.events[r] is not shared[r]:
            out.events[r]["time"] = times
    return out, report


def correct_flat(trace: tm.Trace, flat, params: ClockParams = ClockParams(), force: bool = False,
                 openmp: bool = True) -> ClockReport:
    """correct_clocks on the flat events of `trace` (matching.flatten(trace)), in place: the offset
    interpolation and the controlled logical clock write flat.ev["time"], and `trace` is read for its
    definitions and meta only, so a caller that needs no corrected Trace (the replay context is built
    from `flat`) can drop the trace's events first and hold every event once.  The same times, bit
    for bit, as correct_clocks."""
    report = ClockReport(violations=np.zeros(0, VIOLATION_DTYPE), params=params)
    if trace.meta.get("clock_offsets"):
        col, off = flat.ev["time"], flat.offsets
        times = [col[off[r]:off[r + 1]] for r in range(flat.nranks)]
        report.offsets_applied = interpolate_offsets(trace, times)
        if report.offsets_applied:
            _check_monotonic(times)
    _logical_clock(trace, flat, params, force, openmp, report)
    return report


def _logical_clock(trace: tm.Trace, flat, params: ClockParams, force: bool, openmp: bool,
                   report: ClockReport) -> None:
    """Violations, then (when some remain, or `force`) the controlled logical clock on flat.ev["time"],
    in place; fills `report`."""
    lm = logical_messages(trace, params, flat)
    if any(c >= tm.OMP_TEAM_BASE for c in trace.comms):
        from scalgraph.trace import clock_hybrid
        lm = clock_hybrid.hybrid_messages(trace, flat, lm, params, openmp)
        if openmp:
            report.openmp = {"logical_messages": clock_hybrid.summary(lm)}
    report.violations = _violations(flat.ev["time"], flat, lm, 0.0)
    if len(report.violations) == 0 and not force:
        return
    t = flat.ev["time"].astype(float)
    c, jumps = _forward(t, flat, lm, params)
    _backward(c, flat, lm, jumps, params)
    flat.ev["time"][:] = c
    report.corrected = True
    report.jumps = len(jumps)
    report.max_jump = max((j[1] for j in jumps), default=0.0)
    report.max_shift = float((c - t).max()) if len(t) else 0.0


class _SegmentMax:
    """maximum.reduceat(values, ptr[:-1]) for non-empty segments, cheaper when most segments hold
    one value (p2p messages have one sender, most receives one message): reduceat costs more per
    segment than a gather per element.  The same maxima, so the same bits."""

    def __init__(self, ptr: np.ndarray):
        size = np.diff(ptr)
        self.first = ptr[:-1]
        self.multi = np.flatnonzero(size > 1)
        self.idx = _ranges(ptr[:-1][self.multi], ptr[1:][self.multi])
        self.heads = np.concatenate(([0], np.cumsum(size[self.multi])[:-1])).astype(np.int64)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        out = values[self.first]
        if len(self.multi):
            out[self.multi] = np.maximum.reduceat(values[self.idx], self.heads)
        return out


_VECTOR_SEGMENT = 64     # below this many events a plain loop beats numpy's per-call overhead
MAX_ROUNDS = 32          # fixed-point rounds before the event-by-event forward pass takes over


def _forward(t: np.ndarray, flat, lm: LogicalMessages, p: ClockParams):
    """Forward amortisation: corrected times and the jumps as (event, delta, pre-jump value r*),
    in event order per location.  Vectorised fixed-point rounds (module docstring, step 2); the
    event-by-event pass where they do not settle."""
    out = _forward_rounds(t, flat, lm, p)
    return out if out is not None else _forward_events(t, flat, lm, p)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The indices start..end-1 of every [start, end) range, concatenated."""
    lens = ends - starts
    keep = lens > 0
    starts, lens = starts[keep], lens[keep]
    if len(lens) == 0:
        return np.zeros(0, np.int64)
    out = np.ones(int(lens.sum()), np.int64)
    out[0] = starts[0]
    heads = np.cumsum(lens[:-1])
    out[heads] = starts[1:] - (starts[:-1] + lens[:-1] - 1)
    return np.cumsum(out)


def _forward_rounds(t: np.ndarray, flat, lm: LogicalMessages, p: ClockParams, max_rounds: int = MAX_ROUNDS,
                    use_native: bool = True):
    n = len(t)
    off = flat.offsets
    nonempty = [(int(a), int(b)) for a, b in zip(off[:-1], off[1:]) if b > a]
    step = np.empty(n)
    step[1:] = np.maximum(p.delta, p.gamma * np.diff(t))
    acc = np.empty(n)
    for a, b in nonempty:                              # A: per location, 0 at its first event
        step[a] = 0.0
        np.cumsum(step[a:b], out=acc[a:b])
    # receives sorted by event, so each event's need is one max over its sets
    order = np.argsort(lm.recv_evt, kind="stable")
    r_evt, r_set = lm.recv_evt[order], lm.recv_set[order]
    uniq, first = np.unique(r_evt, return_index=True)
    rank_of_uniq = flat.rank[uniq] if len(uniq) else np.zeros(0, np.int32)
    floor = t.copy()
    c = np.empty(n)
    need = np.full(len(uniq), -np.inf)
    rounds = native.clock_rounds(off, t, acc, floor, c, lm.set_ptr, lm.set_members, lm.set_lmin, uniq,
                                 np.append(first, len(r_set)), r_set, rank_of_uniq, need,
                                 max_rounds) if use_native else None
    if rounds is None:                                 # no C compiler: the same rounds in numpy
        rounds = _rounds_numpy(t, off, acc, floor, c, lm, uniq, first, r_set, rank_of_uniq, need, max_rounds)
    if rounds < 0:
        return None
    # the jumps: receives whose need exceeded the local recurrence C^loc
    if len(uniq) == 0:
        return c, []
    prev = np.maximum(uniq - 1, 0)
    is_first = np.isin(uniq, off[:-1])
    c_loc = np.where(is_first, t[uniq], np.maximum(t[uniq], c[prev] + step[uniq]))
    jump = need > c_loc
    g = uniq[jump]
    return c, list(zip(g.tolist(), (need[jump] - c_loc[jump]).tolist(), c_loc[jump].tolist()))


def _rounds_numpy(t, off, acc, floor, c, lm: LogicalMessages, uniq, first, r_set, rank_of_uniq, need,
                  max_rounds: int) -> int:
    """The fixed-point rounds, in place on floor, c and need: each round recomputes every rank from
    its first receive whose need grew, then every receive's need.  Returns the rounds run, -1 when
    the needs still grew after max_rounds + 1 of them (native.clock_rounds does the same in C)."""
    set_max = _SegmentMax(lm.set_ptr)
    need_max = _SegmentMax(np.append(first, len(r_set)).astype(np.int64))
    start = off[:-1].copy()                            # per rank: first event to recompute (end: clean)
    ends = off[1:]
    for k in range(max_rounds + 1):
        for r in np.flatnonzero(start < ends).tolist():
            a, b = int(start[r]), int(ends[r])
            base = acc[a:b]
            seg = c[a:b]
            np.subtract(floor[a:b], base, out=seg)
            if a > off[r]:                                 # continue from the unchanged prefix
                seg[0] = max(seg[0], c[a - 1] - acc[a - 1])
            np.maximum.accumulate(seg, out=seg)
            seg += base
            np.maximum(seg, floor[a:b], out=seg)           # A + (F - A) can round below F
        if len(uniq) == 0:
            return k + 1
        set_val = set_max(c[lm.set_members]) + lm.set_lmin
        new = need_max(set_val[r_set])
        changed = np.flatnonzero(new > need)
        if len(changed) == 0:
            return k + 1
        need[changed] = new[changed]
        g = uniq[changed]
        floor[g] = np.maximum(t[g], need[changed])
        start = ends.copy()
        np.minimum.at(start, rank_of_uniq[changed], g)   # changed receives are sorted: first per rank wins
    return -1


def _forward_events(t: np.ndarray, flat, lm: LogicalMessages, p: ClockParams):
    """Forward amortisation in happened-before order.  Returns corrected times and the jumps as
    (event, delta, pre-jump value r*), in event order per location.

    Each rank runs until a logical receive whose sender sets are not all computed; it then waits on
    those sets.  A set counts its members not yet computed (registered on the members' ranks the
    first time the set is needed), so every member costs O(log) once, not once per waiting rank."""
    n, nranks = len(t), flat.nranks
    c = np.empty(n)
    tl = t.tolist()
    delta, gamma = p.delta, p.gamma
    order = np.argsort(lm.recv_evt, kind="stable")
    recv_sorted, set_sorted = lm.recv_evt[order], lm.recv_set[order]
    uniq, first = np.unique(recv_sorted, return_index=True)
    bounds = np.append(first, len(recv_sorted)).tolist()
    set_sorted = set_sorted.tolist()
    rank_starts = np.searchsorted(uniq, flat.offsets).tolist()   # receives of rank r: uniq[rank_starts[r]:rank_starts[r+1]]
    uniq_l = uniq.tolist()
    offsets = flat.offsets.tolist()
    set_ptr = lm.set_ptr.tolist()

    def members_of(s: int) -> np.ndarray:
        return lm.set_members[set_ptr[s]:set_ptr[s + 1]]
    lmin = lm.set_lmin.tolist()
    set_value: list[float | None] = [None] * lm.nsets
    pending = [-1] * lm.nsets                   # members not yet computed; -1 = not counted yet
    watch: list[list[tuple[int, int]]] = [[] for _ in range(nranks)]   # heap of (member event, set)
    set_waiters: dict[int, list[int]] = {}
    blocked = [0] * nranks                      # number of unready sets the rank waits for
    done = offsets[:-1].copy()                  # next event to compute, per rank
    ptr = rank_starts[:-1].copy()               # next receive (index into uniq), per rank
    jumps: list[tuple[int, float, float]] = []
    stack = list(range(nranks - 1, -1, -1))
    finished = 0

    def segment(lo: int, hi: int, start: int) -> None:
        if hi <= lo:
            return
        if hi - lo >= _VECTOR_SEGMENT:
            # closed form: C_i = A_i + max(C_prev, cummax_j (t_j - A_j)), A = cumsum of max(delta, gamma dt)
            tt = t[lo:hi]
            if lo == start:
                prev_c, prev_t = tt[0], tt[0]
            else:
                prev_c, prev_t = c[lo - 1], t[lo - 1]
            a = np.maximum(delta, gamma * np.diff(tt, prepend=prev_t))
            if lo == start:
                a[0] = 0.0
            acc = np.cumsum(a)
            c[lo:hi] = np.maximum(acc + np.maximum(prev_c, np.maximum.accumulate(tt - acc)), tt)
            return
        i = lo
        if lo == start:
            c[lo] = prev = tl[lo]
            i += 1
        else:
            prev = float(c[lo - 1])
        for i in range(i, hi):
            step = gamma * (tl[i] - tl[i - 1])
            v = prev + (step if step > delta else delta)
            prev = v if v > tl[i] else tl[i]
            c[i] = prev

    def set_ready(s: int) -> None:
        set_value[s] = float(c[members_of(s)].max())
        for w in set_waiters.pop(s, []):
            blocked[w] -= 1
            if blocked[w] == 0:
                stack.append(w)

    def settle(r: int) -> None:
        """Count down the sets whose members on rank r are now computed."""
        heap = watch[r]
        while heap and heap[0][0] < done[r]:
            _, s = heapq.heappop(heap)
            pending[s] -= 1
            if pending[s] == 0:
                set_ready(s)

    while stack:
        r = stack.pop()
        start, end = offsets[r], offsets[r + 1]
        while True:
            if ptr[r] >= rank_starts[r + 1]:
                segment(done[r], end, start)
                done[r] = end
                settle(r)
                finished += 1
                break
            u = ptr[r]
            g = uniq_l[u]
            segment(done[r], g, start)
            done[r] = g
            settle(r)
            sids = set_sorted[bounds[u]:bounds[u + 1]]
            for s in sids:
                if set_value[s] is not None:
                    continue
                if pending[s] < 0:
                    m = members_of(s)
                    mr = flat.rank[m]
                    todo = np.flatnonzero(m >= np.asarray(done)[mr])
                    pending[s] = len(todo)
                    if pending[s] == 0:
                        set_value[s] = float(c[m].max())
                        continue
                    for e, b in zip(m[todo].tolist(), mr[todo].tolist()):
                        heapq.heappush(watch[b], (e, s))
                set_waiters.setdefault(s, []).append(r)
                blocked[r] += 1
            if blocked[r]:
                break
            if g == start:
                c_loc = tl[g]
            else:
                step = gamma * (tl[g] - tl[g - 1])
                c_loc = max(tl[g], float(c[g - 1]) + (step if step > delta else delta))
            need = max(set_value[s] + lmin[s] for s in sids)
            if need > c_loc:
                c[g] = need
                jumps.append((g, need - c_loc, c_loc))
            else:
                c[g] = c_loc
            done[r] = g + 1
            ptr[r] += 1
    if finished < nranks:
        stuck = [r for r in range(nranks) if done[r] < offsets[r + 1]]
        raise UserError(f"clock correction: ranks {stuck[:8]} wait for each other in a cycle of messages; "
                        f"the trace's message order is inconsistent")
    return c, jumps


def _backward(c: np.ndarray, flat, lm: LogicalMessages, jumps, p: ClockParams) -> None:
    """Backward amortisation in place: a ramp before each jump that keeps every logical send at or
    below its bound = min over its receivers of C(recv) - l_min.

    A location's jumps are applied in forward order, each on the times its predecessors left; a
    jump whose ramp (from its left corner t_L to the jump) cannot reach a predecessor's receive
    does not depend on it.  So the jumps form chains of overlapping ramps; the chains are
    independent and touch disjoint events, and step k of every chain is done at once (vectorised
    over the chains) with exactly the arithmetic of one jump at a time."""
    if not jumps:
        return
    bound = np.full(len(c), np.inf)
    if len(lm.recv_evt):
        set_min_recv = np.full(lm.nsets, np.inf)
        np.minimum.at(set_min_recv, lm.recv_set, c[lm.recv_evt])
        set_id = np.repeat(np.arange(lm.nsets), np.diff(lm.set_ptr))
        np.minimum.at(bound, lm.set_members, set_min_recv[set_id] - lm.set_lmin[set_id])
    is_send = np.isfinite(bound)
    g, delta, r_star = (np.array(x) for x in zip(*jumps))
    order = np.argsort(g, kind="stable")               # by location, forward within each
    g, delta, r_star = g[order].astype(np.int64), delta[order].astype(float), r_star[order].astype(float)
    rank = flat.rank[g]
    lo = flat.offsets[rank].astype(np.int64)
    t_first = c[lo]
    m = np.full(len(g), p.slope)
    t_left = r_star - delta / p.slope
    clamp = t_left < t_first
    t_left[clamp] = t_first[clamp]
    idle = clamp & (r_star - t_left <= 0)               # nothing before the jump to ramp
    m[clamp & ~idle] = delta[clamp & ~idle] / (r_star[clamp & ~idle] - t_left[clamp & ~idle])
    # chains: a jump starts a new one when no later jump of its location reaches back past the
    # previous jump's receive (which no ramp before this jump has moved)
    reach = t_left.copy()
    for a, b in _rank_runs(rank):
        reach[a:b] = np.minimum.accumulate(reach[a:b][::-1])[::-1]
    new_chain = np.ones(len(g), bool)
    same = rank[1:] == rank[:-1]
    new_chain[1:] = ~same | (reach[1:] >= c[g[:-1]])
    chain = np.cumsum(new_chain) - 1
    step = np.arange(len(g)) - np.flatnonzero(new_chain)[chain]
    by_step = np.argsort(step, kind="stable")
    bounds = np.searchsorted(step[by_step], np.arange(int(step.max()) + 2))
    for k in range(len(bounds) - 1):
        items = by_step[bounds[k]:bounds[k + 1]]
        items = items[~idle[items]]
        _ramp_all(c, bound, is_send, lo[items], g[items].copy(), t_left[items], r_star[items].copy(),
                  delta[items].copy(), m[items].copy())
    # Where two ramp pieces meet, equal stamps can come out one rounding step apart (only with
    # delta = 0); keep each location's order exactly.
    for r in range(flat.nranks):
        seg = c[flat.offsets[r]:flat.offsets[r + 1]]
        np.maximum.accumulate(seg, out=seg)


def _rank_runs(rank: np.ndarray):
    """(start, end) of each run of equal values in a sorted array."""
    cut = np.flatnonzero(np.diff(rank)) + 1
    edges = np.concatenate(([0], cut, [len(rank)]))
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def _ramp_all(c, bound, is_send, lo, hi, t_left, r_star, delta, m) -> None:
    """One ramp per item (independent items, disjoint events), each as the loop of one jump:
    ramp [first, hi) at slope m from t_left, unless a send would pass its bound: then raise
    [S*, hi) to keep it there and repeat on the part before S*."""
    live = np.flatnonzero(delta > 0)
    while len(live):
        lo_, hi_, tl = lo[live], hi[live], t_left[live]
        first = _count_upto(c, lo_, hi_, tl)           # searchsorted(c[lo:hi], t_left, "right")
        idx = _ranges(first, hi_)
        owner = np.repeat(np.arange(len(live)), hi_ - first)
        cand = is_send[idx] & (c[idx] < r_star[live][owner])
        ci, co = idx[cand], owner[cand]
        best = np.full(len(live), -1, np.int64)
        best_m = m[live].copy()
        if len(ci):
            slack = bound[ci] - c[ci]
            mi = (delta[live][co] - slack) / (r_star[live][co] - c[ci])
            heads = np.flatnonzero(np.concatenate(([True], co[1:] != co[:-1])))
            top = np.maximum.reduceat(mi, heads)
            at_top = np.flatnonzero(mi == np.repeat(top, np.diff(np.append(heads, len(co)))))
            firsts = at_top[np.concatenate(([True], co[at_top][1:] != co[at_top][:-1]))]
            who = co[firsts]
            better = mi[firsts] > best_m[who]
            best[who[better]] = ci[firsts[better]]
            best_m[who[better]] = mi[firsts[better]]
        plain = best < 0
        sel = plain[owner]                              # no binding send: one ramp from t_left
        e, w = idx[sel], live[owner[sel]]
        c[e] += m[w] * (c[e] - t_left[w])
        keep = np.flatnonzero(~plain)
        if len(keep) == 0:
            break
        b = best[keep]
        s_old = c[b]
        d_star = np.maximum(bound[b] - s_old, 0.0)
        e = _ranges(b, hi_[keep])
        rep = np.repeat(np.arange(len(keep)), hi_[keep] - b)
        c[e] += d_star[rep] + best_m[keep][rep] * (c[e] - s_old[rep])
        go = (d_star > 0) & (s_old > tl[keep])
        nxt = live[keep[go]]
        hi[nxt], r_star[nxt], delta[nxt] = b[go], s_old[go], d_star[go]
        m[nxt] = d_star[go] / (s_old[go] - t_left[nxt])
        live = nxt


def _count_upto(c: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each i: lo_i + the number of c[lo_i:hi_i] <= x_i (c sorted in each range), by a
    binary search run on all ranges at once."""
    a, b = lo.copy(), hi.copy()
    while True:
        open_ = np.flatnonzero(a < b)
        if len(open_) == 0:
            return a
        mid = (a[open_] + b[open_]) // 2
        right = c[mid] <= x[open_]
        a[open_[right]] = mid[right] + 1
        b[open_[~right]] = mid[~right]
