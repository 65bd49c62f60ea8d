"""Default thresholds of the analysis, alone in a module that imports nothing, so that the command
line can show them in --help without loading numpy and scipy (scalgraph/cli.py builds every
command's parser on each call)."""

DEFAULT_ABNORM_THD = 1.3   # AbnormThd of seed 003 §IV-A: a rank above 1.3 x the median rank is abnormal
DEFAULT_MIN_SHARE = 0.05   # report causes costing at least this fraction of the run time
