"""Abnormal vertices (seed 003 §IV-A): at one scale, the ranks whose value of a vertex exceeds
AbnormThd x the median of that vertex over all ranks (default 1.3, as in the paper).

Two values are checked: a vertex's own time (for MPI vertices: time minus waiting, i.e. the work
the call itself did) and, for MPI vertices, the waiting time (communication vertices with unusual
synchronisation overhead).  A tiny vertex can be 10x its median by noise alone, so a flagged rank
must also exceed the median by `min_seconds` (the caller derives it from the run time).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalgraph.analysis.defaults import DEFAULT_ABNORM_THD
from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import MPI, PSG


@dataclass
class Abnormal:
    vertex: int
    metric: str              # "time" (own time) or "wait"
    ranks: np.ndarray        # ranks above the threshold, sorted by excess, largest first
    ratio: np.ndarray        # value / median for those ranks (inf when the median is 0)
    excess: np.ndarray       # seconds above the median for those ranks
    median: float

    @property
    def cost(self) -> float:
        return float(self.excess.max()) if len(self.excess) else 0.0


def own_time(psg: PSG, profile: RunProfile) -> np.ndarray:
    """[R x V] time not spent waiting: waiting is an effect of another rank, not this vertex's work."""
    is_mpi = np.asarray(psg.kind) == MPI
    return np.where(is_mpi[None, :], np.maximum(profile.time - profile.wait, 0.0), profile.time)


SAMPLING_SIGMAS = 3.0


def sampling_noise(psg: PSG, profile: RunProfile, sigmas: float = SAMPLING_SIGMAS) -> np.ndarray:
    """[V] seconds of a rank's sampled vertex time that may be sampling error alone.

    A vertex time measured by SIGPROF samples is a Poisson count n at rate hz: its standard error is
    sqrt(n)/hz.  A rank is only unusual when it exceeds the median by `sigmas` such errors (taken at
    the median count).  MPI vertices are timed exactly by their wrappers: no sampling noise."""
    return noise_of_samples(profile.samples, np.asarray(psg.kind) == MPI, float(profile.meta.get("hz") or 0.0), sigmas)


def noise_of_samples(samples: np.ndarray, exact: np.ndarray, hz: float, sigmas: float = SAMPLING_SIGMAS) -> np.ndarray:
    """[N] sampling noise of columns of [R x N] sample counts (vertices or constructs); 0 where exact."""
    if hz <= 0 or samples.shape[0] == 0:
        return np.zeros(samples.shape[1])
    return np.where(exact, 0.0, sampling_error(np.median(samples, axis=0), hz, sigmas))


def sampling_error(n_samples, hz: float, sigmas: float = SAMPLING_SIGMAS):
    """`sigmas` standard errors, in seconds, of a time measured by n Poisson samples at hz: sqrt(n)/hz
    (at least one sample's worth)."""
    return sigmas * np.sqrt(np.maximum(n_samples, 1.0)) / hz


def abnormal_mask(values: np.ndarray, thd: float, min_seconds: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask [R x V], median [V]): rank r is abnormal at v when values > thd*median and
    values - median >= min_seconds (a number, one per vertex, or one per rank and vertex)."""
    med = np.median(values, axis=0)
    floor = np.maximum(np.broadcast_to(np.asarray(min_seconds, dtype=float), values.shape), 1e-12)
    mask = (values > thd * med[None, :]) & (values - med[None, :] >= floor)
    return mask, med


def find_abnormal(psg: PSG, profile: RunProfile, thd: float = DEFAULT_ABNORM_THD,
                  min_seconds: float = 0.0, own: np.ndarray | None = None) -> list[Abnormal]:
    """Abnormal vertices of one run, largest excess first (`own`: own_time() if already computed)."""
    own = own_time(psg, profile) if own is None else own
    return abnormal_columns(own, profile.wait, np.asarray(psg.kind) == MPI, sampling_noise(psg, profile), thd,
                            min_seconds)


def abnormal_columns(own: np.ndarray, wait: np.ndarray, is_mpi: np.ndarray, noise: np.ndarray, thd: float,
                     min_seconds: float) -> list[Abnormal]:
    """Abnormal columns of [R x N] arrays (vertices, or constructs: `Abnormal.vertex` is then the
    construct id), largest excess first."""
    out: list[Abnormal] = []
    floor = np.maximum(min_seconds, noise)
    checks = [("time", own, np.ones(own.shape[1], bool)), ("wait", wait, is_mpi)]
    for metric, values, applies in checks:
        mask, med = abnormal_mask(values, thd, floor)
        mask &= applies[None, :]
        for v in np.flatnonzero(mask.any(axis=0)):
            ranks = np.flatnonzero(mask[:, v])
            excess = values[ranks, v] - med[v]
            order = np.argsort(-excess, kind="stable")
            ranks, excess = ranks[order], excess[order]
            with np.errstate(divide="ignore"):
                ratio = values[ranks, v] / med[v] if med[v] > 0 else np.full(len(ranks), np.inf)
            out.append(Abnormal(int(v), metric, ranks, ratio, excess, float(med[v])))
    out.sort(key=lambda a: -a.cost)
    return out
