"""The C part of the OTF2 reader (otf2_events.c): built once with the C compiler against the libotf2
that PyPI `otf2` bundles, cached under SCALGRAPH_CACHE like the shim, loaded with ctypes.

    read_location(reader_handle, evt_reader_handle, hint) -> numpy array of NATIVE_DTYPE

Without a C compiler the reader falls back to libotf2's Python callbacks (about 4x slower)."""
from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np

SOURCE = pathlib.Path(__file__).with_name("otf2_events.c")
# mirrors struct sg_otf2_record
NATIVE_DTYPE = np.dtype([("ticks", "<u8"), ("bytes", "<u8"), ("bytes_recv", "<u8"), ("request", "<u8"),
                         ("region", "<u4"), ("peer", "<u4"), ("tag", "<u4"), ("comm", "<u4"), ("kind", "u1"),
                         ("pad", "V7")])
assert NATIVE_DTYPE.itemsize == 56
REQUEST_LOCK, ACQUIRE_LOCK, PROGRAM_BEGIN, PROGRAM_END = 100, 101, 102, 103

_lib = None
_failed = False


def _otf2_library() -> str:
    from _otf2.Config import conf        # the wheel's shared library with libotf2's C API
    return conf.lib._name


def _build() -> pathlib.Path | None:
    from scalgraph.runtime.shim import cache_dir
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None or not SOURCE.is_file():
        return None
    key = hashlib.sha256(SOURCE.read_bytes() + cc.encode()).hexdigest()[:16]
    out_dir = cache_dir() / f"otf2-reader-{key}"
    lib = out_dir / "libsgotf2.so"
    if lib.is_file():
        return lib
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmp:
            res = subprocess.run([cc, "-O2", "-fPIC", "-shared", str(SOURCE), "-o", os.path.join(tmp, "out")],
                                 capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                return None
            os.replace(os.path.join(tmp, "out"), lib)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return lib


def library():
    """The loaded helper, or None when it cannot be built (no C compiler)."""
    global _lib, _failed
    if _lib is None and not _failed:
        path = _build()
        if path is None:
            _failed = True
            return None
        ctypes.CDLL(_otf2_library(), mode=ctypes.RTLD_GLOBAL)   # its libotf2 symbols resolve ours
        lib = ctypes.CDLL(str(path))
        lib.sg_otf2_read_location.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                              ctypes.POINTER(ctypes.c_void_p)]
        lib.sg_otf2_read_location.restype = ctypes.c_int64
        lib.sg_otf2_free.argtypes = [ctypes.c_void_p]
        lib.sg_otf2_free.restype = None
        _lib = lib
    return _lib


def read_location(reader_handle: int, evt_handle: int, hint: int) -> np.ndarray | None:
    """All events of one location as NATIVE_DTYPE records (None: libotf2 reported an error).
    `hint`: the location's event count as its definition says (the first allocation)."""
    lib = library()
    out = ctypes.c_void_p()
    n = lib.sg_otf2_read_location(reader_handle, evt_handle, max(int(hint), 0), ctypes.byref(out))
    if n == -2:
        raise MemoryError
    if n < 0:
        return None
    try:
        rec = np.empty(n, NATIVE_DTYPE)
        ctypes.memmove(rec.ctypes.data, out, n * NATIVE_DTYPE.itemsize)
    finally:
        lib.sg_otf2_free(out)
    return rec
