"""Give the memory a pass freed back to the system (glibc's malloc_trim), so the next pass's peak
starts from what is held, not from what was once touched.

numpy takes arrays below glibc's mmap threshold from the heap, and that threshold rises to 32 MiB
after the first large array is freed, so after reading a trace nearly every array lives in the heap;
freed, its pages stay resident until something at the heap's top is freed too.  Measured on
`scalgraph trace` of 10^6 OTF2 events: dropping the trace's events (49 bytes per event, flattened)
lowered the resident memory by nothing, trimming by 50 MB.  Trimmed where it lowers the peak: after
reading, while flattening, around the re-timing; a trim after every replay pass lowered nothing
(the next pass reuses the freed pages) and cost their page faults again.  A no-op without glibc."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

_trim = None


def _malloc_trim():
    global _trim
    if _trim is None:
        _trim = False
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _trim = libc.malloc_trim
            _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError):
            pass
    return _trim


def trim() -> None:
    """Return the heap's free pages to the system (a few milliseconds)."""
    f = _malloc_trim()
    if f:
        f(0)


def returns_freed_memory(func=None, *, before: bool = False):
    """Decorator: trim the heap once `func` returns (its temporaries are freed by then); `before`:
    also when it starts (what the caller freed just before, e.g. the delay costs before the what-if)."""
    if func is None:
        return functools.partial(returns_freed_memory, before=before)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if before:
            trim()
        try:
            return func(*args, **kwargs)
        finally:
            trim()
    return wrapper
