"""An experiment as LLNL Hatchet and Thicket input (PyPI llnl-hatchet, llnl-thicket).

The PSG with its contexts is the call tree: one node per vertex, its frame naming the vertex (kind, name,
file, line, vertex id, so two contexts of one function stay two nodes).  Metrics are the profile's
per-rank arrays: `time` (exclusive seconds), `time (inc)` (summed over the subtree), `visits` (MPI calls),
`wait` (seconds blocked in MPI).

  hatchet_document  {"scales": [{"p", "literal", "graphframe"}]}: per scale, `literal` is the list that
                    hatchet.GraphFrame.from_literal loads (one row per node: the mean over the ranks, with
                    the max and the rank holding it), `graphframe` the spec that hatchet.GraphFrame.from_json
                    loads with a (node, rank) index: every node's metrics on every rank (rows where all
                    are zero, a vertex that did not run on that rank, are left out).
  thicket_document  what thicket.Thicket.from_json loads: one ensemble of all scales, profile = p, the
                    metadata table holding p, the run's wall time and repetitions.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import PSG

FORMAT = "scalgraph-hatchet"
VERSION = 1
EXCLUSIVE = ["time", "visits", "wait"]
INCLUSIVE = ["time (inc)", "visits (inc)", "wait (inc)"]


def vertex_label(psg: PSG, v: int) -> str:
    """What a user calls the vertex: the function or callee name, or the construct and its line."""
    kind = psg.kind_name(v)
    if kind in ("FUNCTION", "CALL", "INDIRECT", "MPI"):
        return psg.name[v] or kind.lower()
    f, a, b = psg.file[v], psg.line_first[v], psg.line_last[v]
    where = f"{os.path.basename(f) or '?'}:{a}" if b in (0, a) else f"{os.path.basename(f) or '?'}:{a}-{b}"
    return f"{kind.lower()} {where}"


def vertex_frame(psg: PSG, v: int) -> dict:
    return {"name": vertex_label(psg, v), "type": psg.kind_name(v).lower(), "file": psg.file[v],
            "line": int(psg.line_first[v]), "function": psg.function[v], "vertex": v}


def inclusive(psg: PSG, values: np.ndarray) -> np.ndarray:
    """[..., vertices] exclusive -> inclusive over the PSG tree (ids are a pre-order: children after parents)."""
    out = np.array(values, dtype=float, copy=True)
    for v in range(len(psg) - 1, 0, -1):
        p = psg.parent[v]
        if p >= 0:
            out[..., p] += out[..., v]
    return out


def _per_rank(psg: PSG, prof: RunProfile) -> dict[str, np.ndarray]:
    """metric -> [ranks x vertices]."""
    exc = {"time": prof.time.astype(float), "visits": prof.calls.astype(float), "wait": prof.wait.astype(float)}
    return {**exc, **{f"{k} (inc)": inclusive(psg, a) for k, a in exc.items()}}


def _roots(psg: PSG) -> list[int]:
    return [v for v in range(len(psg)) if psg.parent[v] < 0]


def _literal(psg: PSG, prof: RunProfile) -> list[dict]:
    per_rank = _per_rank(psg, prof)
    mean = {k: a.mean(axis=0) for k, a in per_rank.items()}
    tmax = per_rank["time"].max(axis=0)
    tmax_inc = per_rank["time (inc)"].max(axis=0)
    argmax = per_rank["time (inc)"].argmax(axis=0)

    def node(v: int) -> dict:
        metrics = {k: float(mean[k][v]) for k in (*EXCLUSIVE, *INCLUSIVE)}
        metrics.update({"time max": float(tmax[v]), "time max (inc)": float(tmax_inc[v]),
                        "rank of max": int(argmax[v]),
                        "imbalance": float(tmax[v] / mean["time"][v]) if mean["time"][v] > 0 else 0.0})
        return {"frame": vertex_frame(psg, v), "metrics": metrics, "children": [node(c) for c in psg.children[v]]}

    return [node(r) for r in _roots(psg)]


def _graph_spec(psg: PSG) -> list[dict]:
    return [{str(v): {"data": vertex_frame(psg, v), "children": list(psg.children[v])} for v in range(len(psg))}]


def _graphframe(psg: PSG, prof: RunProfile) -> dict:
    """Columns, not records: pandas builds the frame from either, and columns are a fraction of the
    size and time at thousands of vertices times ranks."""
    per_rank = _per_rank(psg, prof)
    names = [vertex_label(psg, v) for v in range(len(psg))]
    ran = np.zeros((prof.nranks, len(psg)), bool)          # rows that are all zero are left out (sparse)
    for a in per_rank.values():
        ran |= a != 0
    vv, rr = np.nonzero(ran.T)                             # node-major, ranks ascending
    columns = {"node": vv.tolist(), "rank": rr.tolist(), "name": [names[v] for v in vv.tolist()],
               **{k: a[rr, vv].astype(float).tolist() for k, a in per_rank.items()}}
    return {"graph": _graph_spec(psg), "dataframe": columns, "dataframe_indices": ["node", "rank"],
            "exclusive_metrics": EXCLUSIVE, "inclusive_metrics": INCLUSIVE}


def hatchet_document(psg: PSG, profiles: Mapping[int, RunProfile], source: str = "") -> dict:
    scales = []
    for p in sorted(profiles):
        prof = profiles[p]
        scales.append({"p": p, "literal": _literal(psg, prof), "graphframe": _graphframe(psg, prof)})
    return {"format": FORMAT, "version": VERSION, "experiment": source, "psg_hash": psg.hash(),
            "usage": "hatchet.GraphFrame.from_literal(doc['scales'][i]['literal']) or "
                     "hatchet.GraphFrame.from_json(json.dumps(doc['scales'][i]['graphframe']))",
            "scales": scales}


def thicket_document(psg: PSG, profiles: Mapping[int, RunProfile], source: str = "", meta: dict | None = None) -> dict:
    meta = meta or {}
    rows, metadata = [], []
    names = [vertex_label(psg, v) for v in range(len(psg))]
    for p in sorted(profiles):
        prof = profiles[p]
        per_rank = _per_rank(psg, prof)
        mean = {k: a.mean(axis=0) for k, a in per_rank.items()}
        tmax = per_rank["time (inc)"].max(axis=0)
        for v in range(len(psg)):
            rows.append({"node": v, "profile": p, "name": names[v], **{k: float(a[v]) for k, a in mean.items()},
                         "time max (inc)": float(tmax[v])})
        metadata.append({"profile": p, "p": p, "experiment": source, "wall_time": float(prof.wall_time),
                         "repetitions": int(prof.meta.get("repetitions", 1)),
                         "mpi_library": str(meta.get("mpi_library", "")),
                         "command": " ".join(map(str, meta.get("command", [])))})
    return {"graph": _graph_spec(psg), "dataframe": rows, "dataframe_indices": ["node", "profile"],
            "exclusive_metrics": EXCLUSIVE, "inclusive_metrics": [*INCLUSIVE, "time max (inc)"],
            "profile": sorted(profiles), "profile_idx_name": "profile",
            "profile_mapping": {str(p): f"{source} p={p}" for p in sorted(profiles)}, "metadata": metadata}
