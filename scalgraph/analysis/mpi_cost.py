"""When an MPI call is a root cause by itself, not a place where ranks wait.

A collective or p2p call whose *time* grows with p is usually waiting for someone (the cause lies
before it) or, with more ranks than cores, descheduling: a rank waiting in MPI gets the core back
late.  Neither is the call's own cost.  What the scheduler cannot fake is what the call moves: the
bytes and calls per rank recorded in the dependence rows.  So an MPI construct is its own cause when

* its per-rank volume (bytes or calls, median over the ranks that made the call) grows with p at
  least as p^VOLUME_SLOPE over the measured scales and still grows between the two largest (an
  all-to-all with a fixed block per pair moves p blocks per rank; a halo exchange's neighbour count
  saturates; a fixed-size reduction stays constant), or
* the ranks were not oversubscribed at the largest scale and its own time exceeds a log2(p)
  latency model (fitted through the smallest scale) by more than the reporting floor.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from scalgraph.analysis.constructs import Constructs
from scalgraph.model.profile import RunProfile

VOLUME_SLOPE = 0.75      # growth like p^0.75 or faster over the scales: not a saturating neighbour count
LAST_STEP_SLOPE = 0.5    # ... and still growing between the two largest scales


def _per_rank(meta_value, nranks: int) -> np.ndarray | None:
    if meta_value is None:
        return None
    a = np.atleast_1d(np.asarray(meta_value, dtype=float))
    if a.size == 0 or not np.all(np.isfinite(a)):
        return None
    return np.resize(a, nranks)


def oversubscribed(profile: RunProfile, host_cores: int | None = None) -> bool:
    """More ranks on a host than cores it could use: the shim records both per rank; older profiles
    fall back to all ranks on one host with `host_cores` (the experiment's count, else this machine's)."""
    n = profile.nranks
    on_host = _per_rank(profile.meta.get("ranks_on_host"), n)
    cores = _per_rank(profile.meta.get("cores"), n)
    if on_host is not None and cores is not None:
        return bool(np.any(on_host > cores))
    cores_fallback = host_cores or os.cpu_count() or 1
    return n > cores_fallback


def ranks_per_core(profile: RunProfile, host_cores: int | None = None) -> float:
    """How many ranks shared each core of their host (the median rank's; at least 1)."""
    n = profile.nranks
    on_host = _per_rank(profile.meta.get("ranks_on_host"), n)
    cores = _per_rank(profile.meta.get("cores"), n)
    if on_host is not None and cores is not None and n:
        return float(max(np.median(on_host / np.maximum(cores, 1)), 1.0))
    return max(n / (host_cores or os.cpu_count() or 1), 1.0)


def compute_stretch(rank_stretch: np.ndarray) -> float:
    """Wall seconds per thread-CPU second of the median rank's computation (`rank_stretch` [R], 1
    where not measured); at least 1.  A computation cause is
    sampled thread-CPU while the floors are shares of the wall-clock run: where ranks share cores
    (with each other or with other jobs) a rank's extra CPU second costs the run this many wall
    seconds, so the floor for thread-CPU is the wall floor divided by it (8 ranks on 2 cores: a 0.43 s
    loop in miniGhost delayed the others by 2.1 s, 16 % of the run, and was no cause before)."""
    if not len(rank_stretch):
        return 1.0
    return float(max(np.median(rank_stretch), 1.0))


def volume_per_rank(profile: RunProfile, cons: Constructs, is_mpi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([C] bytes, [C] calls): per MPI construct (`is_mpi` [C]), the median over the ranks that
    called it of what one rank moved / how many calls it made (0 where nobody called, and for
    constructs that are not MPI calls)."""
    nc = len(cons)
    cols = np.flatnonzero(is_mpi)
    where = np.full(nc, -1)
    where[cols] = np.arange(len(cols))
    deps = profile.deps
    nbytes = np.zeros((profile.nranks, len(cols)))
    dcol = where[cons.cid[deps["vertex"]]]
    ok = dcol >= 0
    np.add.at(nbytes, (deps["rank"][ok], dcol[ok]), deps["bytes"][ok].astype(float))
    calls = cons.sum_columns(profile.calls)[:, cols]
    called = calls > 0
    out_b, out_c = np.zeros(nc), np.zeros(nc)
    out_b[cols], out_c[cols] = _median_where(nbytes, called), _median_where(calls, called)
    return out_b, out_c


def _median_where(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """[N] median over rows of each column of [R x N], only where mask; 0 for an empty column."""
    if a.shape[0] == 0:
        return np.zeros(a.shape[1])
    med = np.median(a, axis=0)
    partial = np.flatnonzero(~mask.all(axis=0))        # columns some ranks did not call: the slow path
    if len(partial):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)        # all-NaN columns: nobody called
            med[partial] = np.nanmedian(np.where(mask[:, partial], a[:, partial], np.nan), axis=0)
    return np.nan_to_num(med, nan=0.0)


def _grows(scales: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[C] rows of y ([C x S], all positive) that grow like p^VOLUME_SLOPE overall and still grow
    at the last step."""
    if len(scales) < 2:
        return np.zeros(len(y), dtype=bool)
    lp = np.log(scales)
    positive = np.all(y > 0, axis=1)
    ly = np.log(np.where(y > 0, y, 1.0))
    dx = lp - lp.mean()
    slope = (ly - ly.mean(axis=1, keepdims=True)) @ dx / float(dx @ dx)
    last = (ly[:, -1] - ly[:, -2]) / (lp[-1] - lp[-2])
    return positive & (slope >= VOLUME_SLOPE) & (last >= LAST_STEP_SLOPE)


def volume_grows(scales, nbytes: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """[C] constructs whose per-rank bytes or calls ([C x S] each) grow with p (see module doc)."""
    p = np.asarray(scales, dtype=float)
    return _grows(p, nbytes) | _grows(p, calls)


def latency_excess(scales, own: np.ndarray) -> np.ndarray:
    """[C] own time at the largest scale beyond own(p0) * L(P) / L(p0), L(p) = max(1, log2 p)."""
    if len(scales) < 2:
        return np.zeros(len(own))
    lat = lambda p: max(1.0, float(np.log2(p)))  # noqa: E731
    return np.maximum(own[:, -1] - own[:, 0] * lat(scales[-1]) / lat(scales[0]), 0.0)


def own_cause_rules(scales, nbytes: np.ndarray, calls: np.ndarray, own: np.ndarray, floor: float,
                    oversubscribed_at_largest: bool) -> list[str]:
    """[C] which rule makes each construct its own cause: "bytes per rank", "calls per rank",
    "time beyond log2(p) latency", or "" (none; only MPI constructs have volumes)."""
    p = np.asarray(scales, dtype=float)
    by_bytes, by_calls = _grows(p, nbytes), _grows(p, calls)
    by_time = (latency_excess(scales, own) >= floor) & (floor > 0) & (not oversubscribed_at_largest)
    return ["bytes per rank" if b else "calls per rank" if c else "time beyond log2(p) latency" if t else ""
            for b, c, t in zip(by_bytes, by_calls, by_time)]
