"""The re-timing's anchor rounds in C (retime_rounds.c): built once with the C compiler, cached under
SCALGRAPH_CACHE like the OTF2 reader's helper, loaded with ctypes.  Same values bit for bit as the
numpy rounds (retime._rounds_numpy), which stay the fallback where no C compiler is found: the numpy
rounds advance every rank by one anchor per round (~8,000 rounds of small array operations at 10^6
events), the C loop one anchor at a time with no per-round cost."""
from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np

SOURCE = pathlib.Path(__file__).with_name("retime_rounds.c")
# no -ffast-math and no contraction into fused multiply-adds: every sum rounds as numpy's does
FLAGS = ["-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math"]

_lib = None
_failed = False


def _build() -> pathlib.Path | None:
    from scalgraph.runtime.shim import cache_dir
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None or not SOURCE.is_file():
        return None
    key = hashlib.sha256(SOURCE.read_bytes() + cc.encode() + " ".join(FLAGS).encode()).hexdigest()[:16]
    out_dir = cache_dir() / f"retime-rounds-{key}"
    lib = out_dir / "libsgretime.so"
    if lib.is_file():
        return lib
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmp:
            res = subprocess.run([cc, *FLAGS, str(SOURCE), "-o", os.path.join(tmp, "out")],
                                 capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                return None
            os.replace(os.path.join(tmp, "out"), lib)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return lib


def library():
    """The loaded kernel, or None when it cannot be built (no C compiler)."""
    global _lib, _failed
    if _lib is None and not _failed:
        path = _build()
        if path is None:
            _failed = True
            return None
        lib = ctypes.CDLL(str(path))
        lib.sg_retime_rounds.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64] + [ctypes.c_void_p] * 11
        lib.sg_retime_rounds.restype = ctypes.c_int64
        _lib = lib
    return _lib


def rounds(first_pos, todo, new_a, a_group, a_par, a_entpos, e_lo, e_len, ps_off, ps_group, remaining,
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
