"""Loops of the trace analysis in C (kernels.c): built once with the C compiler, cached under
SCALGRAPH_CACHE like the OTF2 reader's helper, loaded with ctypes.  Each gives its numpy version's
values bit for bit; the numpy versions stay the fallback where no C compiler is found.

- retime_rounds: the re-timing's anchor rounds (retime._rounds_numpy advances every rank by one
  anchor per round, ~8,000 rounds of small array operations at 10^6 events).
- interval_profiles: the delay costs' processing-time profiles (delay._profiles_numpy expands every
  gap of every synchronisation interval into arrays, then sums them by key).
- match_regions: one location's ENTER/EXIT pairs and owners with a stack (matching._match_rank_numpy
  sorts the events by nesting level and searches them).
- split_records: packed event records into columns in one pass (numpy copies one strided field at
  a time, each pass touching every record).
- last_before: the delay costs' interval starts (delay.interval_starts sorts the queries together
  with the synchronisation points; a binary search per query needs only the points sorted).
- clock_rounds: the clock correction's forward fixed-point rounds (clock._forward_rounds recomputes
  each rank with a handful of numpy calls per round, and every sender set and receive)."""
from __future__ import annotations

import ctypes
import functools
import pathlib

import numpy as np

from scalgraph.runtime.native_build import build_shared_library

SOURCE = pathlib.Path(__file__).with_name("kernels.c")
# no -ffast-math and no contraction into fused multiply-adds: every sum rounds as numpy's does
FLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math"]


@functools.lru_cache(maxsize=None)
def library():
    """The loaded kernel, or None when it cannot be built (no C compiler)."""
    path = build_shared_library(SOURCE, "trace-kernels", "libsgtrace.so", FLAGS)
    if path is None:
        return None
    lib = ctypes.CDLL(str(path))
    lib.sg_retime_rounds.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64] + [ctypes.c_void_p] * 11
    lib.sg_retime_rounds.restype = ctypes.c_int64
    lib.sg_interval_bounds.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 7
    lib.sg_interval_bounds.restype = None
    lib.sg_interval_profiles.argtypes = ([ctypes.c_int64] + [ctypes.c_void_p] * 6 + [ctypes.c_int64]
                                         + [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_void_p] * 6)
    lib.sg_interval_profiles.restype = ctypes.c_int64
    lib.sg_match_regions.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64] + \
        [ctypes.c_void_p] * 5
    lib.sg_match_regions.restype = ctypes.c_int64
    lib.sg_split_records.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.sg_split_records.restype = None
    lib.sg_clock_rounds.argtypes = ([ctypes.c_int64] + [ctypes.c_void_p] * 5 + [ctypes.c_int64] + [ctypes.c_void_p] * 3
                                    + [ctypes.c_int64] + [ctypes.c_void_p] * 5 + [ctypes.c_int64]
                                    + [ctypes.c_void_p] * 2)
    lib.sg_clock_rounds.restype = ctypes.c_int64
    lib.sg_last_before.argtypes = [ctypes.c_int64] + [ctypes.c_void_p] * 2 + [ctypes.c_int64] + [ctypes.c_void_p] * 3
    lib.sg_last_before.restype = None
    return lib


def retime_rounds(first_pos, todo, new_a, a_group, a_par, a_entpos, e_lo, e_len, ps_off, ps_group, remaining,
           gval) -> int | None:
    """Solve the anchors in place (new_a, remaining, gval as retime._rounds_numpy leaves them).
    Returns the number of anchors left unsolved (non-zero: a cycle), or None without the kernel."""
    lib = library()
    if lib is None:
        return None
    i64 = [np.ascontiguousarray(a, np.int64) for a in (first_pos, a_group, a_entpos, e_lo, e_len, ps_group)]
    first, group, entpos, lo, length, psg = i64
    par, off = np.ascontiguousarray(a_par, np.float64), np.ascontiguousarray(ps_off, np.float64)
    for a, dt in ((new_a, np.float64), (remaining, np.int64), (gval, np.float64)):   # written in place
        if a.dtype != dt or not a.flags.c_contiguous:
            raise TypeError("retime rounds: the arrays written in place must be contiguous float64/int64")
    ptr = np.empty(len(first), np.int64)
    return int(lib.sg_retime_rounds(len(first), first.ctypes.data, int(todo), new_a.ctypes.data,
                                    group.ctypes.data, par.ctypes.data, entpos.ctypes.data, lo.ctypes.data,
                                    length.ctypes.data, off.ctypes.data, psg.ctypes.data,
                                    remaining.ctypes.data, gval.ctypes.data, ptr.ctypes.data))


def interval_profiles(t, offsets, cp_after, ncp, rank, t0, t1, wi, wc, wa):
    """Processing time per (interval, call path below ncp) of the intervals [t0, t1] on `rank`,
    minus the wait pieces (wi sorted, wc, wa), as delay._profiles_numpy computes it: (ids, cps,
    values), or None without the kernel (or with columns it does not take)."""
    lib = library()
    if (lib is None or cp_after.dtype != np.int32 or t.dtype != np.float64 or not t.flags.c_contiguous
            or not cp_after.flags.c_contiguous or (len(wc) and wc.min() < 0)):
        return None
    rank = np.ascontiguousarray(rank, np.int64)
    t0, t1 = np.ascontiguousarray(t0, np.float64), np.ascontiguousarray(t1, np.float64)
    off = np.ascontiguousarray(offsets, np.int64)
    nint = len(rank)
    lo, hi = np.empty(nint, np.int64), np.empty(nint, np.int64)
    lib.sg_interval_bounds(nint, rank.ctypes.data, t0.ctypes.data, t1.ctypes.data, t.ctypes.data, off.ctypes.data,
                           lo.ctypes.data, hi.ctypes.data)
    wi, wc = np.ascontiguousarray(wi, np.int64), np.ascontiguousarray(wc, np.int64)
    wa = np.ascontiguousarray(wa, np.float64)
    # at most one entry per call path touched: the pieces and waits of an interval, at most ncp + 1
    pieces = np.maximum(hi - lo + 1, 0) + np.bincount(wi, minlength=nint)[:nint]
    cap = int(np.minimum(pieces, ncp + 1).sum())
    acc, touched = np.empty(ncp + 1), np.empty(ncp + 1, np.int64)
    stamp = np.full(ncp + 1, -1, np.int64)
    ids, cps, vals = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap)
    k = lib.sg_interval_profiles(nint, t0.ctypes.data, t1.ctypes.data, lo.ctypes.data, hi.ctypes.data, t.ctypes.data,
                                 cp_after.ctypes.data, ncp, wi.ctypes.data, wc.ctypes.data, wa.ctypes.data, len(wi),
                                 acc.ctypes.data, stamp.ctypes.data, touched.ctypes.data, ids.ctypes.data,
                                 cps.ctypes.data, vals.ctypes.data)
    return ids[:k].copy(), cps[:k].copy(), vals[:k].copy()


def match_regions(kind, enter: int, exit_: int):
    """(partner, owner, parent, level, deepest level or -1 - the first EXIT closing nothing) of one
    location's events (kernels.c, sg_match_regions), or None without the kernel."""
    lib = library()
    if lib is None:
        return None
    kind = np.ascontiguousarray(kind, np.uint8)
    m = len(kind)
    partner, owner, parent, level, stack = (np.empty(m, np.int64) for _ in range(5))
    deepest = lib.sg_match_regions(m, kind.ctypes.data, enter, exit_, partner.ctypes.data, owner.ctypes.data,
                                   parent.ctypes.data, level.ctypes.data, stack.ctypes.data)
    return partner, owner, parent, level, int(deepest)


def split_records(records: np.ndarray, outs: dict) -> bool:
    """Copy each field `name` of the packed records into outs[name] (contiguous, the field's dtype,
    len(records) long) in one pass; False (nothing copied) without the kernel or for other layouts."""
    lib = library()
    fields = records.dtype.fields
    if (lib is None or fields is None or not records.flags.c_contiguous
            or any(o.dtype != fields[k][0] or not o.flags.c_contiguous or len(o) != len(records) for k, o in outs.items())):
        return False
    names = list(outs)
    off = np.array([fields[k][1] for k in names], np.int64)
    size = np.array([fields[k][0].itemsize for k in names], np.int64)
    ptrs = (ctypes.c_void_p * len(names))(*[outs[k].ctypes.data for k in names])
    lib.sg_split_records(len(records), records.ctypes.data, records.dtype.itemsize, len(names), off.ctypes.data,
                         size.ctypes.data, ptrs)
    return True


def clock_rounds(off, t, acc, floor, c, set_ptr, set_members, set_lmin, uniq, first, r_set, rank_of_uniq, need,
                 max_rounds: int) -> int | None:
    """clock._forward_rounds' fixed-point rounds in place on floor, c and need (float64, contiguous):
    the number of rounds run, -1 when they did not settle, or None without the kernel."""
    lib = library()
    if lib is None:
        return None
    for a in (floor, c, need):                       # written in place
        if a.dtype != np.float64 or not a.flags.c_contiguous:
            raise TypeError("clock rounds: floor, c and need must be contiguous float64")
    off, set_ptr, set_members, uniq, first, r_set, rank_of_uniq = (
        np.ascontiguousarray(a, np.int64) for a in (off, set_ptr, set_members, uniq, first, r_set, rank_of_uniq))
    t, acc, set_lmin = (np.ascontiguousarray(a, np.float64) for a in (t, acc, set_lmin))
    nranks, nsets = len(off) - 1, len(set_ptr) - 1
    set_val, start = np.empty(nsets), np.empty(nranks, np.int64)
    return int(lib.sg_clock_rounds(nranks, off.ctypes.data, t.ctypes.data, acc.ctypes.data, floor.ctypes.data,
                                   c.ctypes.data, nsets, set_ptr.ctypes.data, set_members.ctypes.data,
                                   set_lmin.ctypes.data, len(uniq), uniq.ctypes.data, first.ctypes.data,
                                   r_set.ctypes.data, rank_of_uniq.ctypes.data, need.ctypes.data, int(max_rounds),
                                   set_val.ctypes.data, start.ctypes.data))


def last_before(q_group, q_time, p_group, p_time) -> np.ndarray | None:
    """For each query, the position of the last point of its group strictly before its time in the
    points sorted by (group, time), stably; -1 where there is none.  None without the kernel."""
    lib = library()
    if lib is None:
        return None
    qg, pg = np.ascontiguousarray(q_group, np.int64), np.ascontiguousarray(p_group, np.int64)
    qt, pt = np.ascontiguousarray(q_time, np.float64), np.ascontiguousarray(p_time, np.float64)
    out = np.empty(len(qg), np.int64)
    lib.sg_last_before(len(qg), qg.ctypes.data, qt.ctypes.data, len(pg), pg.ctypes.data, pt.ctypes.data,
                       out.ctypes.data)
    return out
