"""The analysis' small C helpers (io/otf2_events.c, trace/kernels.c): built once with the system C
compiler into the cache (SCALGRAPH_CACHE, runtime/shim.cache_dir) and loaded with ctypes by their
modules, which keep a numpy fallback for machines without a compiler."""
from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile


def build_shared_library(source: pathlib.Path, cache_name: str, lib_name: str,
                         flags: list[str]) -> pathlib.Path | None:
    """`source` compiled with `flags` (plus -fPIC -shared) to <cache>/<cache_name>-<key>/<lib_name>,
    the key hashing the source, the compiler and the flags; None without a compiler or when it fails."""
    from scalgraph.runtime.shim import cache_dir
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None or not source.is_file():
        return None
    key = hashlib.sha256(source.read_bytes() + cc.encode() + " ".join(flags).encode()).hexdigest()[:16]
    out_dir = cache_dir() / f"{cache_name}-{key}"
    lib = out_dir / lib_name
    if lib.is_file():
        return lib
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=out_dir) as tmp:
            res = subprocess.run([cc, *flags, "-fPIC", "-shared", str(source), "-o", os.path.join(tmp, "out")],
                                 capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                return None
            os.replace(os.path.join(tmp, "out"), lib)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return lib
