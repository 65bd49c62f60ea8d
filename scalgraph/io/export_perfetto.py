"""A trace as Chrome trace-event JSON, which ui.perfetto.dev and chrome://tracing open.

One track per rank (pid 0, tid = rank, named "rank R"); every region visit is a complete ("X") slice,
MPI calls in category "mpi", the program's regions in "region"; every message is a flow arrow ("s" on the
sender's call, "f" bound to the receiver's call); every wait state is a slice nested in the waiting
call, named after its pattern (category "wait_state", args: seconds, causer rank), with a flow arrow
from the causer's call (category "wait_cause").  Times are microseconds from the trace's first event.

The inputs are plain arrays (the command extracts them from the replay), so this module knows the
format only:
  SLICE_DTYPE  rank, region, t0, t1                      every region visit
  MSG_DTYPE    src, dst, t_send, t_recv, tag, bytes      t_send inside the sender's call, t_recv inside
                                                         the receiver's completing call
  WAIT_DTYPE   rank, pattern, t0, t1, causer, t_causer   t_causer inside the causer's call (causer -1: none)
"""
from __future__ import annotations

import numpy as np

SLICE_DTYPE = np.dtype([("rank", "<i4"), ("region", "<i4"), ("t0", "<f8"), ("t1", "<f8")])
MSG_DTYPE = np.dtype([("src", "<i4"), ("dst", "<i4"), ("t_send", "<f8"), ("t_recv", "<f8"), ("tag", "<i4"),
                      ("bytes", "<i8")])
WAIT_DTYPE = np.dtype([("rank", "<i4"), ("pattern", "<i4"), ("t0", "<f8"), ("t1", "<f8"), ("causer", "<i4"),
                       ("t_causer", "<f8")])
PID = 0


def chrome_trace(nranks: int, region_names: list[str], region_is_mpi: list[bool], slices: np.ndarray,
                 messages: np.ndarray, waits: np.ndarray, pattern_names: list[str], source: str = "") -> dict:
    starts = [float(a.min()) for a in (slices["t0"], messages["t_send"], waits["t0"]) if len(a)]
    t0 = min(starts, default=0.0)
    us = lambda t: np.round((np.asarray(t, dtype=float) - t0) * 1e6, 3).tolist()  # noqa: E731

    def span(a, b):
        ts = np.round((a - t0) * 1e6, 3)
        return ts.tolist(), np.maximum(np.round(np.round((b - t0) * 1e6, 3) - ts, 3), 0.0).tolist()

    ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "MPI ranks"}}]
    for r in range(nranks):
        ev.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": r, "args": {"name": f"rank {r}"}})
        ev.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": r, "args": {"sort_index": r}})
    body: list[tuple] = []      # (ts, -dur, order, event): parents before their children at equal start
    cats = ["mpi" if m else "region" for m in region_is_mpi]
    for rank, region, ts, dur in zip(slices["rank"].tolist(), slices["region"].tolist(), *span(slices["t0"], slices["t1"])):
        body.append((ts, -dur, 0, {"ph": "X", "name": region_names[region], "pid": PID, "tid": rank, "ts": ts,
                                   "dur": dur, "cat": cats[region]}))
    seconds = (waits["t1"] - waits["t0"]).tolist()
    for i, (rank, pat, causer, tc, sec, ts, dur) in enumerate(zip(
            waits["rank"].tolist(), waits["pattern"].tolist(), waits["causer"].tolist(), us(waits["t_causer"]),
            seconds, *span(waits["t0"], waits["t1"]))):
        body.append((ts, -dur, 1, {"ph": "X", "name": pattern_names[pat], "pid": PID, "tid": rank, "ts": ts,
                                   "dur": dur, "cat": "wait_state", "cname": "terrible",
                                   "args": {"seconds": sec, "causer rank": causer}}))
        if causer >= 0:
            fid = f"w{i}"
            body.append((tc, 0.0, 2, {"ph": "s", "name": "caused wait", "cat": "wait_cause", "id": fid,
                                      "pid": PID, "tid": causer, "ts": tc}))
            body.append((ts, 0.0, 3, {"ph": "f", "bp": "e", "name": "caused wait", "cat": "wait_cause", "id": fid,
                                      "pid": PID, "tid": rank, "ts": ts}))
    for i, (src, dst, a, b, tag, nbytes) in enumerate(zip(
            messages["src"].tolist(), messages["dst"].tolist(), us(messages["t_send"]), us(messages["t_recv"]),
            messages["tag"].tolist(), messages["bytes"].tolist())):
        fid = f"m{i}"
        body.append((a, 0.0, 2, {"ph": "s", "name": "message", "cat": "message", "id": fid, "pid": PID,
                                 "tid": src, "ts": a, "args": {"tag": tag, "bytes": nbytes, "to": dst}}))
        body.append((b, 0.0, 3, {"ph": "f", "bp": "e", "name": "message", "cat": "message", "id": fid,
                                 "pid": PID, "tid": dst, "ts": b}))
    body.sort(key=lambda x: x[:3])
    ev.extend(e for *_, e in body)
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"producer": "scalgraph export --perfetto", "source": source, "time_zero_seconds": t0,
                          "ranks": nranks}}
