"""Merging one vertex's values across ranks (seed 003 §IV-A: mean, median, variance, clustering).

All functions take a [ranks x vertices] array and return per-vertex arrays, so a whole run is
merged in a few numpy reductions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RankStats:
    mean: np.ndarray       # [V]
    median: np.ndarray     # [V]
    max: np.ndarray        # [V]
    min: np.ndarray        # [V]
    argmax: np.ndarray     # [V] rank holding the maximum
    imbalance: np.ndarray  # [V] (max - mean) / max: the share of the slowest rank's time others idle; 0 if max is 0


def merge_ranks(values: np.ndarray) -> RankStats:
    values = np.asarray(values, dtype=float)
    mean = values.mean(axis=0)
    mx = values.max(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        imbalance = np.where(mx > 0, (mx - mean) / np.where(mx > 0, mx, 1.0), 0.0)
    return RankStats(mean, np.median(values, axis=0), mx, values.min(axis=0), values.argmax(axis=0), imbalance)


def cluster_ranks(values: np.ndarray, k: int, iterations: int = 30) -> np.ndarray:
    """k-means over ranks (each rank is a point: its per-vertex times), deterministic: the first
    centre is the slowest rank, each next one the rank farthest from the centres so far.
    Returns [R] labels 0..k'-1 (k' <= k when fewer distinct ranks exist), label 0 = slowest group."""
    x = np.asarray(values, dtype=float)
    nr = x.shape[0]
    k = max(1, min(k, nr))
    centres = [int(np.argmax(x.sum(axis=1)))]
    dist = ((x - x[centres[0]]) ** 2).sum(axis=1)
    while len(centres) < k and dist.max() > 0:
        c = int(np.argmax(dist))
        centres.append(c)
        dist = np.minimum(dist, ((x - x[c]) ** 2).sum(axis=1))
    c = x[centres].copy()
    labels = np.zeros(nr, dtype=int)
    for _ in range(iterations):
        # squared distances via the expansion |x|^2 - 2 x.c + |c|^2 keeps memory at [R x k]
        d = (x * x).sum(axis=1)[:, None] - 2 * x @ c.T + (c * c).sum(axis=1)[None, :]
        new = d.argmin(axis=1)
        if np.array_equal(new, labels) and _ > 0:
            break
        labels = new
        for j in range(len(c)):
            members = labels == j
            if members.any():
                c[j] = x[members].mean(axis=0)
    # renumber: slowest group (largest mean total) first, empty groups dropped
    used = np.unique(labels)
    totals = np.array([x[labels == j].sum(axis=1).mean() for j in used])
    order = used[np.argsort(-totals, kind="stable")]
    remap = np.empty(len(c), dtype=int)
    remap[order] = np.arange(len(order))
    return remap[labels]


def cluster_means(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """[k x V] mean of each cluster's ranks."""
    values = np.asarray(values, dtype=float)
    k = int(labels.max()) + 1 if len(labels) else 0
    return np.stack([values[labels == j].mean(axis=0) for j in range(k)]) if k else np.zeros((0, values.shape[1]))

