"""Turn off numpy's transparent-huge-page advice while a replay pass runs.

numpy calls madvise(MADV_HUGEPAGE) on every array of 4 MiB or more.  With the kernel's THP defrag
setting at its usual default ("madvise"), each page fault in such an array may then compact memory
synchronously; once memory is fragmented (after a few large runs) that system time can exceed the
replay's own work at 1e7 events (measured: 3.4 s of system time with the advice, 1.3 s without, same
result).  The replay touches each big array a few times, so 4 KiB pages cost little.  The previous
setting is restored afterwards, so other numpy users in the process are unaffected.
"""
from __future__ import annotations

import functools

import numpy as np


def _setter():
    core = getattr(np, "_core", None) or getattr(np, "core", None)
    return getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)


def without_hugepage_advice(func):
    """Decorator: run `func` with numpy's huge-page advice off (a no-op where numpy lacks the switch)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        setter = _setter()
        if setter is None:
            return func(*args, **kwargs)
        previous = setter(False)
        try:
            return func(*args, **kwargs)
        finally:
            setter(previous)
    return wrapper
