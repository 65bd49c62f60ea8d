"""The arithmetic that wait-state patterns, delay analysis and the critical path share, as pure
functions over numpy arrays (Scalasca's DelayOps.h plays this role there).  Tested without a replay.

Formulas are the ones of shared/notes/trace-analysis-reference.md §3-§5; all waits are clipped at 0,
and a remote time after the local exit is clamped to the local exit (the clock-safety rule), so a
wait never exceeds the time spent in the call.
"""
from __future__ import annotations

import numpy as np


def wait_until(enter: np.ndarray, exit_: np.ndarray, remote: np.ndarray) -> np.ndarray:
    """Time a call entered at `enter` and left at `exit_` waits for a remote event at `remote`:
    min(remote, exit) - enter, at least 0.  Late Sender, Wait at Barrier/NxN, Late Broadcast,
    Early Reduce and Early Scan are all this with a different `remote`."""
    return np.maximum(np.minimum(remote, exit_) - enter, 0.0)


def late_sender(recv_enter, recv_exit, send_enter):
    """ω = min(En(S), Ex(R)) - En(R)."""
    return wait_until(recv_enter, recv_exit, send_enter)


def late_receiver(send_enter, send_exit, recv_post_enter):
    """ω = En(R) - En(S) when the send was still running when the receive was posted (Ex(S) >= En(R))."""
    return np.where(send_exit >= recv_post_enter, np.maximum(recv_post_enter - send_enter, 0.0), 0.0)


def completion(exit_, min_exit, max_enter):
    """Barrier / NxN Completion: ω = Ex - max(min_k Ex_k, max_k En_k), at least 0."""
    return np.maximum(exit_ - np.maximum(min_exit, max_enter), 0.0)


def clock_violations(remote, local_exit) -> int:
    """Number of remote events that lie after the local exit (a receive before its send, ...)."""
    return int(np.count_nonzero(remote > local_exit))


def keep_largest_per_group(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Boolean mask keeping, per group id, only the row with the largest value (first on ties).
    Multi-completion calls (Waitall, Waitsome) count only the largest wait of the messages they complete."""
    if len(group) == 0:
        return np.zeros(0, bool)
    order = np.lexsort((-value, group))
    first = np.ones(len(order), bool)
    first[1:] = group[order][1:] != group[order][:-1]
    keep = np.zeros(len(group), bool)
    keep[order[first]] = True
    return keep


def difference_profile(p_causer: np.ndarray, p_waiter: np.ndarray) -> np.ndarray:
    """Δ[c] = max(p_causer[c] - p_waiter[c], 0): the call paths where the causer spent more time."""
    return np.maximum(p_causer - p_waiter, 0.0)


def clipped_wait(omega, sum_delta, wait_in_interval, clip):
    """The waiting time a wait state distributes over its causes: ω, or where `clip` is set
    Scalasca's min(ω, ΣΔ + W) -- scout scales a point-to-point wait's short-term costs by
    min(ω / (ΣΔ + W), 1), so a delay never costs more than its own length (reference note §4.3)."""
    return np.where(clip, np.minimum(omega, np.asarray(sum_delta, float) + wait_in_interval), omega)


def delay_scale(sum_delta, wait_in_interval):
    """Seed 000 (Algorithm 1, line 22): s = 1 / (ΣΔ + W), unclipped, so that every wait is divided
    completely over its causes.  Where ΣΔ + W = 0 nothing explains the wait: s = 0 and the caller
    books the wait as unexplained (so totals still balance)."""
    denom = np.asarray(sum_delta, float) + np.asarray(wait_in_interval, float)
    return np.divide(1.0, denom, out=np.zeros_like(denom), where=denom > 0)


def imbalance_indicator(cp_time: np.ndarray, time_per_rank: np.ndarray) -> np.ndarray:
    """Critical-path imbalance ι[c] = max(0, cp[c] - mean_l t_l[c]); time_per_rank is [C, P]."""
    return np.maximum(cp_time - time_per_rank.mean(axis=1), 0.0)


def segment_sum(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Dense sum of `values` per integer key in [0, size)."""
    if not size:
        return np.zeros(0)
    # float even when empty (bincount of no weights is an integer array)
    return np.bincount(keys, weights=values, minlength=size)[:size].astype(float, copy=False)


def overlap(a0, a1, b0, b1):
    """Length of the overlap of intervals [a0, a1] and [b0, b1], at least 0."""
    return np.maximum(np.minimum(a1, b1) - np.maximum(a0, b0), 0.0)
