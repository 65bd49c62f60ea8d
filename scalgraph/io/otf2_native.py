"""The C part of the OTF2 reader (otf2_events.c): built once with the C compiler against the libotf2
that PyPI `otf2` bundles, cached under SCALGRAPH_CACHE like the shim, loaded with ctypes.

    read_location(reader_handle, evt_reader_handle, room, zero, resolution, region_map)
        -> (EVENT_DTYPE array of room events, number of events in the location)

Without a C compiler the reader falls back to libotf2's Python callbacks (about 4x slower)."""
from __future__ import annotations

import ctypes
import functools
import pathlib

import numpy as np

from scalgraph.runtime.native_build import build_shared_library

SOURCE = pathlib.Path(__file__).with_name("otf2_events.c")
# the records are EVENT_DTYPE events (struct sg_otf2_record); kinds beyond EVENT_KINDS:
REQUEST_LOCK, ACQUIRE_LOCK, PROGRAM_BEGIN, PROGRAM_END = 100, 101, 102, 103
# OpenMP lock records (Score-P ThreadAcquireLock / ThreadReleaseLock): request = lock id, tag =
# acquisition order; io/trace_omp.py turns them into lock hand-overs
THREAD_ACQUIRE_LOCK, THREAD_RELEASE_LOCK = 104, 105
THREAD_FORK = 106        # OpenMP fork (Score-P ThreadFork), bytes = the number of threads requested


def _otf2_library() -> str:
    from _otf2.Config import conf        # the wheel's shared library with libotf2's C API
    return conf.lib._name


@functools.lru_cache(maxsize=None)
def library():
    """The loaded helper, or None when it cannot be built (no C compiler)."""
    path = build_shared_library(SOURCE, "otf2-reader", "libsgotf2.so", ["-O2"])
    if path is None:
        return None
    ctypes.CDLL(_otf2_library(), mode=ctypes.RTLD_GLOBAL)   # its libotf2 symbols resolve ours
    lib = ctypes.CDLL(str(path))
    lib.sg_otf2_read_location.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                          ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_uint32]
    lib.sg_otf2_read_location.restype = ctypes.c_int64
    return lib


def read_location(reader_handle: int, evt_handle: int, room: int, zero: int, resolution: int,
                  region_map: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The events of one location as EVENT_DTYPE records with region indices, times in seconds, and
    OTF2's peers/communicator references (None: libotf2 reported an error).  Only `room` are stored;
    the second value is how many the location has (more than room: read it again with that room)."""
    from scalgraph.model.trace import EVENT_DTYPE
    lib = library()
    ev = np.empty(max(int(room), 1), EVENT_DTYPE)
    region_map = np.ascontiguousarray(region_map, np.int32)
    n = lib.sg_otf2_read_location(reader_handle, evt_handle, ev.ctypes.data, len(ev), int(zero), float(resolution),
                                  region_map.ctypes.data, len(region_map))
    if n < 0:
        return None
    return (ev[:n] if n < len(ev) else ev), n
