"""Forward replay: match the trace once, then run every registered pattern over all instances.

This is a sequential, global-view port of Scalasca's parallel replay: instead of re-enacting each
message, the matching (matching.py) pairs every synchronisation with its partners up front, and each
pattern evaluates all its instances at once over numpy arrays.  Results go into a
[pattern, call path, rank] cube of inclusive severities, in seconds.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import matching, mpi_names, patterns, waitops
from scalgraph.trace.hugepages import without_hugepage_advice


@dataclass
class ReplayContext:
    trace: tm.Trace
    flat: matching.Flat
    nest: matching.Nesting
    msgs: matching.Messages
    colls: list[matching.CommInstances]
    time: np.ndarray            # event times (flat)
    exit_time: np.ndarray | ExitTimes   # [events] for an ENTER: the time of its EXIT (or of the rank's last event)
    region_is_test: np.ndarray  # per region: MPI_Test* (never waits)
    region_coll_kind: np.ndarray  # per region: index into patterns.COLL_KINDS
    region_class: list[str]     # per region: patterns.region_class

    @property
    def ev(self) -> np.ndarray:
        return self.flat.ev

    # The gaps and cp_after_ext are computed where read, not held: whole for the passes that read
    # every event (exclusive time, the re-timing), gathered for the delay costs' pieces (12 bytes per
    # event less held through the replay; the same subtraction, the same values).
    @property
    def gap(self) -> np.ndarray:
        """Time from each event to the next one on its rank (0 after a rank's last event); a new array."""
        return self.gap_into(np.empty(len(self.time)))

    def gap_into(self, dt: np.ndarray) -> np.ndarray:
        """The gaps written into `dt` (one float64 per event)."""
        np.subtract(self.time[1:], self.time[:-1], out=dt[:-1])     # no full-size temporary
        off = self.flat.offsets
        dt[off[1:][off[1:] > off[:-1]] - 1] = 0.0      # each non-empty rank's last event
        return dt

    def gap_within(self, g: np.ndarray) -> np.ndarray:
        """gap[g] for events g that are not their rank's last."""
        return self.time[g + 1] - self.time[g]

    @property
    def cp_after_ext(self) -> np.ndarray:
        """cp_after with time outside every region booked to call path `ncallpaths`; a new array."""
        return self.cp_after_ext_at(slice(None))

    def cp_after_ext_at(self, g) -> np.ndarray:
        cp = self.nest.cp_after[g]
        return np.where(cp >= 0, cp, self.ncallpaths)

    @property
    def nranks(self) -> int:
        return self.flat.nranks

    @property
    def nevents(self) -> int:
        return len(self.time)

    @property
    def ncallpaths(self) -> int:
        return self.nest.ncallpaths


class ExitTimes:
    """The exit time of each event, gathered where indexed (exit_times[idx], any integer index array)
    instead of held (8 bytes per event): for an ENTER the time of its EXIT, for any other event and an
    unclosed ENTER the time of its rank's last event."""

    def __init__(self, t: np.ndarray, partner: np.ndarray, flat: matching.Flat):
        self.t, self.partner, self.rank = t, partner, flat.rank
        self.last = np.maximum(flat.offsets[1:] - 1, 0)

    def __getitem__(self, idx) -> np.ndarray:
        idx = np.asarray(idx)
        p = self.partner[idx]
        out = np.array(self.t[np.maximum(p, 0)])
        unpaired = p < 0
        if unpaired.any():
            out[unpaired] = self.t[self.last[self.rank[idx[unpaired]]]]
        return out


@dataclass
class ForwardResult:
    ctx: ReplayContext
    waits: np.ndarray           # patterns.WAIT_DTYPE, every wait state found
    cube: np.ndarray            # [pattern, call path, rank] inclusive severity in seconds
    excl_time: np.ndarray       # [call path, rank] exclusive time
    clock_violations: int
    _sync_waits: np.ndarray | None = None

    @property
    def sync_waits(self) -> np.ndarray:
        """The wait states with a causer (delay analysis and the critical path use these)."""
        if self._sync_waits is None:            # computed once: several passes ask for it
            self._sync_waits = self.waits[patterns.SYNC_PATTERNS[self.waits["pattern"]]]
        return self._sync_waits


# event fields only the matching reads (request ids; a collective's byte counts travel in its
# CommInstances): the context's flat columns drop them once matched, 24 of 49 bytes per event
MATCHING_ONLY = ("request", "bytes", "bytes_recv")
# read after the matching only by the one-sided analysis (rma_epochs: windows, lock ids): dropped
# from traces without one-sided events, 8 more bytes per event
ONE_SIDED_ONLY = ("tag", "comm")


@without_hugepage_advice
def build_context(trace: tm.Trace, allow_unmatched: bool = False, flat: matching.Flat | None = None
                  ) -> ReplayContext:
    """The replay context of a trace; `flat`: its events already flattened (matching.flatten, as the
    clock correction left them), whose columns it takes over, so `trace.events` may be empty."""
    if trace.nranks == 0:
        raise UserError("the trace has no locations; nothing to analyse")
    flat = flat if flat is not None else matching.flatten(trace)
    if len(flat.ev) == 0:
        raise UserError(f"the trace has {trace.nranks} locations but no events; nothing to analyse")
    nest = matching.match_regions(flat)
    msgs = matching.match_messages(flat, nest)
    flat.pairs = None                   # Messages holds what the replay needs of them
    if not allow_unmatched and (len(msgs.unmatched_send) or len(msgs.unmatched_recv)):
        side, g = (("send", msgs.unmatched_send[0]) if len(msgs.unmatched_send)
                   else ("receive", msgs.unmatched_recv[0]))
        r = int(flat.rank[g])
        raise UserError(f"{len(msgs.unmatched_send)} sends and {len(msgs.unmatched_recv)} receives have no "
                        f"partner (first: a {side} on rank {r} at t={flat.ev['time'][g]:.9g}, tag "
                        f"{int(flat.ev['tag'][g])}); the trace is incomplete or a rank's file is missing")
    colls = matching.match_collectives(flat, nest, trace.comms)
    kind = flat.ev["kind"]
    one_sided = bool(((kind >= tm.RMA_PUT) & (kind <= tm.RMA_SYNC)).any())
    for name in MATCHING_ONLY + (() if one_sided else ONE_SIDED_ONLY):
        del flat.ev[name]
    t = flat.ev["time"].astype(np.float64, copy=False)
    exit_time = ExitTimes(t, nest.partner, flat)
    return ReplayContext(trace=trace, flat=flat, nest=nest, msgs=msgs, colls=colls, time=t,
                         exit_time=exit_time, **region_tables(trace.regions))


def region_tables(regions: list[tm.Region]) -> dict:
    """Per region (plus one entry for "outside every region"): MPI_Test*, collective kind, class;
    MPI routines recognised by name (mpi_names.py), whatever their spelling."""
    names = [mpi_names.canonical_name(r.name) for r in regions]
    return dict(
        region_is_test=np.array([n.startswith("MPI_Test") for n in names] + [False], bool),
        region_coll_kind=np.array([patterns.COLL_KINDS.index(patterns.collective_kind(n))
                                   for n in names] + [0], np.int64),
        region_class=[patterns.region_class(n) for n in names])


def exclusive_time(ctx: ReplayContext) -> np.ndarray:
    """[call path, rank]: time between each event and the next, booked to the innermost open region."""
    c, p = ctx.ncallpaths, ctx.nranks
    # time outside every region goes to the extra row `c`, which is dropped (no boolean-mask copies)
    key = ctx.cp_after_ext.astype(np.int64)
    key *= p
    key += ctx.flat.rank
    return waitops.segment_sum(key, ctx.gap, (c + 1) * p)[:c * p].reshape(c, p)


@without_hugepage_advice
def forward_replay(ctx: ReplayContext) -> ForwardResult:
    found: dict[str, np.ndarray] = {}
    for pat in patterns.PATTERNS:
        if pat.evaluate is not None:
            found[pat.key] = pat.evaluate(ctx, found)
    waits = np.concatenate([found[p.key] for p in patterns.PATTERNS
                            if p.evaluate is not None and p.unit == "sec"])     # counts are no wait states

    c, p = ctx.ncallpaths, ctx.nranks
    excl = exclusive_time(ctx)
    cube = np.zeros((len(patterns.PATTERNS), c, p))
    for i, pat in enumerate(patterns.PATTERNS):
        if pat.evaluate is not None:
            rows = found[pat.key]
            key = ctx.nest.callpath[rows["op"]].astype(np.int64) * p + rows["rank"]
            cube[i] = waitops.segment_sum(key, rows["wait"], c * p).reshape(c, p)
        elif pat.region_class == "all":
            cube[i] = excl
        else:
            regions = ctx.nest.cp_region
            cls = np.array([ctx.region_class[r] if r >= 0 else "user" for r in regions.tolist()], dtype=object)
            wanted = patterns.CLASS_MEMBERS.get(pat.region_class, {pat.region_class})
            mask = np.array([x in wanted for x in cls], bool) if c else np.zeros(0, bool)
            cube[i] = np.where(mask[:, None], excl, 0.0)
    m = ctx.msgs
    violations = waitops.clock_violations(ctx.time[m.send_evt], ctx.time[m.recv_evt])
    return ForwardResult(ctx=ctx, waits=waits, cube=cube, excl_time=excl, clock_violations=violations)
