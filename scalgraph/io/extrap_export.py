"""An experiment in Extra-P's input format, so its users can model our measurements with their tool.

Extra-P (https://github.com/extra-p/extrap) reads several formats; we write JSON Lines (one
measurement per line, `extrap --json FILE` or the GUI's "Open JSON input"), its simplest format that
keeps every repetition and a call tree:

    {"params": {"p": 8}, "callpath": "main->loop app.c:12->MPI_Allreduce", "metric": "time", "value": 0.42}

One line per vertex (callpath: its labels from the root, joined by "->"), metric, scale and
repetition.  Metrics are per-rank aggregates of each run: `time` (mean exclusive seconds per rank),
`time_max` (the slowest rank's), `wait` (mean seconds blocked in MPI), `visits` (mean MPI calls per
rank).  Vertices that never ran at any scale are left out.
"""
from __future__ import annotations

import json
import os

import numpy as np

from scalgraph.errors import UserError
from scalgraph.io.experiment import read_experiment
from scalgraph.io.export_hatchet import vertex_label
from scalgraph.io.export_write import check_destination, write_new
from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import PSG

METRICS = ("time", "time_max", "wait", "visits")


def callpaths(psg: PSG) -> list[str]:
    """Unique "->"-joined labels from the root to every vertex (Extra-P builds its call tree from them)."""
    out: list[str] = []
    seen: set[str] = set()
    for v in range(len(psg)):        # ids are a pre-order: a parent's path exists before its children's
        label = vertex_label(psg, v).replace("->", "- >")
        p = psg.parent[v]
        path = label if p < 0 else f"{out[p]}->{label}"
        if path in seen:               # unrolled or inlined copies with the same label
            path = f"{path} #{v}"
        seen.add(path)
        out.append(path)
    return out


def _aggregates(prof: RunProfile) -> dict[str, np.ndarray]:
    if not prof.nranks:
        z = np.zeros(prof.nvertices)
        return {m: z for m in METRICS}
    return {"time": prof.time.mean(axis=0), "time_max": prof.time.max(axis=0),
            "wait": prof.wait.mean(axis=0), "visits": prof.calls.mean(axis=0)}


def extrap_lines(experiment_dir) -> list[str]:
    """The JSON Lines text, one measurement per line (reads every repetition of every scale once)."""
    exp = read_experiment(experiment_dir)
    paths = callpaths(exp.psg)
    runs = []                          # (scale, {metric: [V]}) per repetition
    for scale in exp.scales:
        for run_dir in exp.run_dirs[scale]:
            runs.append((scale, _aggregates(exp._read_checked(scale, run_dir))))   # checked like detect's reads
    ran = np.zeros(len(exp.psg), dtype=bool)
    for _, agg in runs:
        ran |= (agg["time"] != 0) | (agg["visits"] != 0) | (agg["wait"] != 0)
    if not ran.any():
        raise UserError(f"{experiment_dir}: no vertex has a measured time or call at any scale; nothing to model")
    lines = []
    for v in np.flatnonzero(ran):
        for metric in METRICS:
            for scale, agg in runs:
                value = float(agg[metric][v])
                if not np.isfinite(value):
                    continue
                lines.append(json.dumps({"params": {"p": scale}, "callpath": paths[v], "metric": metric,
                                         "value": value}))
    return lines


def write_extrap(experiment_dir: str | os.PathLike, out_path: str | os.PathLike, force: bool = False) -> None:
    """Write EXP's measurements to out_path in Extra-P's JSON Lines format.  An existing file is
    replaced only with force; nothing is written when the experiment cannot be read."""
    check_destination(out_path, force)
    exp_scales = read_experiment(experiment_dir).scales
    if len(exp_scales) < 2:
        raise UserError(f"{experiment_dir} has one scale ({exp_scales[0]}); Extra-P models need several "
                        "(run e.g. `scalgraph run -n 2,4,8,16,32`)")
    write_new(out_path, "\n".join(extrap_lines(experiment_dir)) + "\n", force)
