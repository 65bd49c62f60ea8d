"""Source excerpts for the page, read only from files under the source roots.

A report is a file people mail: a PSG (or a trace) could name any path on the machine, so a file is
read only when it resolves (symbolic links followed) to a place inside one of the roots the user gave
(--source-dir, by default the current directory and the experiment's parent)."""
from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

CONTEXT_LINES = 4
MAX_BYTES = 20 * 1024 * 1024      # a source file larger than this is not a source file


@dataclass
class Excerpt:
    path: str = ""                                          # the file shown, relative to its root when inside one
    lines: list[tuple[int, str, bool]] = field(default_factory=list)   # (number, text, is one of the cause's lines)
    note: str = ""                                          # why nothing is shown


def _inside(path: pathlib.Path, roots: list[pathlib.Path]) -> pathlib.Path | None:
    """The root `path` lies in (after resolving links), or None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    for root in roots:
        if real.is_relative_to(root):
            return root
    return None


def find_source(file: str, roots: list[pathlib.Path]) -> tuple[pathlib.Path | None, pathlib.Path | None]:
    """(the file, the root it is under) or (None, None).  An absolute path is taken as it is, then by
    its name in each root; a relative one below each root, then by its name."""
    real_roots = []
    for r in roots:
        try:
            real_roots.append(pathlib.Path(r).resolve())
        except (OSError, RuntimeError):
            continue
    p = pathlib.Path(file)
    candidates = ([p] if p.is_absolute() else [r / p for r in real_roots]) + [r / p.name for r in real_roots]
    for c in candidates:
        root = _inside(c, real_roots)
        try:
            ok = root is not None and c.is_file()
        except OSError:
            ok = False
        if ok:
            return c, root
    return None, None


def excerpt(file: str, first: int, last: int, roots: list[pathlib.Path], context: int = CONTEXT_LINES) -> Excerpt:
    """Lines first-context .. last+context of `file`, the cause's lines marked."""
    if not file or first <= 0:
        return Excerpt(note="no source line was recorded for this code")
    path, root = find_source(file, roots)
    if path is None:
        where = ", ".join(str(r) for r in roots) or "(none)"
        return Excerpt(note=f"source file {file} is not under the source roots ({where}); pass "
                            "--source-dir DIR to show it")
    shown = str(path.resolve().relative_to(root)) if root is not None else str(path)
    try:
        if path.stat().st_size > MAX_BYTES:
            return Excerpt(path=shown, note=f"{shown} is larger than {MAX_BYTES >> 20} MB; not shown")
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return Excerpt(path=shown, note=f"cannot read {shown}: {e.strerror}")
    last = max(first, last or first)
    if first > len(lines):
        return Excerpt(path=shown, note=f"{shown} has only {len(lines)} lines: it changed since the build")
    lo, hi = max(1, first - context), min(len(lines), last + context)
    return Excerpt(path=shown, lines=[(n, lines[n - 1], first <= n <= last) for n in range(lo, hi + 1)])
