"""Notes on how far the sampled evidence can be trusted, so a thin run is said to be thin instead of
being read as a clean bill of health or a guess.

* Resolution: a rank's sampled time from n samples at hz is known to sqrt(n)/hz.  When the
  reporting floor is below 3 such errors at the typical (median) rank's sample count, a cause of
  floor size cannot be told from noise: the run is too short, or the rate too low.
(That a run was sampled with the biased ITIMER_PROF fallback is said by the experiment reader, for
every run: scalgraph/io/experiment.py.)
"""
from __future__ import annotations

import numpy as np

from scalgraph.analysis.abnormal import sampling_error
from scalgraph.model.profile import RunProfile


def typical_samples(profile: RunProfile) -> float:
    """Median over ranks of a rank's samples."""
    return float(np.median(profile.samples.sum(axis=1))) if profile.nranks else 0.0


def thin_evidence(profile: RunProfile, floor: float) -> tuple[bool, float, float]:
    """(thin, median samples per rank, 3 sampling errors in seconds at that count)."""
    hz = float(profile.meta.get("hz") or 0.0)
    n = typical_samples(profile)
    if hz <= 0:
        return False, n, 0.0
    err = float(sampling_error(n, hz))
    return bool(floor < err), n, err


def evidence_notes(profile: RunProfile, floor: float, scale: int,
                   evidence: tuple[bool, float, float] | None = None) -> list[str]:
    """`evidence`: thin_evidence(profile, floor) if the caller has it already."""
    notes = []
    hz = float(profile.meta.get("hz") or 0.0)
    thin, n, err = evidence or thin_evidence(profile, floor)
    if thin:
        notes.append(f"thin evidence: at p={scale} the ranks had a median of {n:.0f} samples ({hz:g} Hz), so a "
                     f"rank's sampled time is known to +-{err * 1e3:.0f} ms (3 sampling errors), more than the "
                     f"reporting floor ({floor * 1e3:.0f} ms); computation costs below that cannot be told from "
                     "noise and are not reported: run longer (more iterations) or raise `scalgraph run --hz`; on a "
                     "shared machine also repeat (`scalgraph run --repeat 3`: the median of the runs, rank by "
                     "rank, since identical work's thread-CPU varies from run to run)")
    return notes
