"""The fix both what-ifs apply (analysis/whatif.py, trace/retime.py): how far each rank's time in a
cause is brought down at a scale, given what the diagnosis found at the largest scale P.

At P the fix brings every rank's time in the cause down to the typical (lower median) rank's: it
removes the late ranks' extra, the sum over the ranks of their time above the typical rank's, a share
of the cause's time summed over the ranks (all of it where the typical rank does not run the cause:
cg's audit loop, zeusmp's boundary loop).  At a smaller scale p the fix removes the same share.
Where it shows at p as the late ranks' time above p's typical rank, the median rule at p removes it;
where it does not (at p=2 both of zeusmp's ranks hold a boundary, and each one's median hides the
other's loop), the part the median rule misses is taken from every rank alike.  A cause every rank
runs to the same degree at P has no extra there: at p only the ranks above p's typical rank lose
time, however the cause scales between p and P.  (Carrying P's typical rank to p by ideal strong
scaling, as before, took the superlinear part of a loop every rank runs away from every rank: 3.4 s
at p=2 on the balanced control.)
"""
from __future__ import annotations

import numpy as np


def typical(per_rank: np.ndarray) -> float:
    """The typical rank's time: the lower median (with 2 ranks the less busy one; the mean of the
    middle pair would keep half of a lone late rank's excess)."""
    return float(np.quantile(per_rank, 0.5, method="lower")) if per_rank.size else 0.0


def extra_seconds(per_rank: np.ndarray) -> float:
    """Seconds the ranks spent in the cause above the typical rank's, summed over the ranks: what
    the median rule removes at this scale."""
    if per_rank.size == 0:
        return 0.0
    return float(np.maximum(per_rank - typical(per_rank), 0.0).sum())


def extra_share(per_rank: np.ndarray) -> float:
    """The share of the cause's time (summed over the ranks) that is extra_seconds: what a fix
    removes at the diagnosis scale."""
    total = float(per_rank.sum()) if per_rank.size else 0.0
    return extra_seconds(per_rank) / total if total > 0 else 0.0


def fix_level(per_rank: np.ndarray, share_at_diagnosis: float) -> float:
    """The time every rank's time in the cause is brought down to at this scale: the typical rank's,
    lowered by the part of the diagnosed share (`share_at_diagnosis`, extra_share at P) of this
    scale's time that the median rule does not find here, shared out over the ranks.  At P itself:
    the typical rank's."""
    if per_rank.size == 0:
        return 0.0
    missed = max(share_at_diagnosis * float(per_rank.sum()) - extra_seconds(per_rank), 0.0)
    return max(typical(per_rank) - missed / per_rank.size, 0.0)
