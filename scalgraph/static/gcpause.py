"""The static pass and the PSG link build 10^5 small objects that all stay alive until the step
ends; Python's cyclic collector would walk them again and again while they are made (0.3-0.4 s of
a 5 s pass on a 20,000-line file) and find nothing to free.  Paused for those steps only."""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
