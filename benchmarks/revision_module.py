"""One module of scalgraph as it was at a git revision, imported beside the current one (--against)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_at(rev: str, path: str):
    """The file `path` (e.g. scalgraph/trace/clock.py) at git revision `rev`, imported as its own module."""
    src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    name = f"{os.path.splitext(os.path.basename(path))[0]}_{rev}"
    file = os.path.join(tempfile.mkdtemp(prefix="bench-rev-"), f"{name}.py")
    with open(file, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod                 # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod
