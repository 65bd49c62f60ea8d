"""Default thresholds of the analysis, alone in a module that imports nothing, so that the command
line can show them in --help without loading numpy and scipy (scalgraph/cli.py builds every
command's parser on each call)."""

DEFAULT_ABNORM_THD = 1.3   # AbnormThd of seed 003 §IV-A: a rank above 1.3 x the median rank is abnormal
DEFAULT_MIN_SHARE = 0.05   # report causes costing at least this fraction of the run time

# Time-sharing: where ranks outnumber cores, identical work's thread-CPU differs between ranks of one run
# and between runs (caches shared with whatever else runs on the core).  Measured on 2 cores with 8 ranks
# and other jobs (load 10-16, docs/status.md): up to 1.52x between ranks of one run (77 runs of
# samples/balanced and a PRK Stencil control), up to 1.23x between the runs at the smallest and the largest
# scale.  Beyond these a computation's excess or scaling loss is the program's, not the scheduler's.
SHARED_CORE_ABNORM_THD = 1.6
SHARED_CORE_DRIFT = 1.25


def abnorm_thd_for(abnorm_thd: float, cores_shared: bool) -> float:
    """The AbnormThd a computation's excess is judged by (detect and the trace verdict alike)."""
    return max(abnorm_thd, SHARED_CORE_ABNORM_THD) if cores_shared else abnorm_thd
