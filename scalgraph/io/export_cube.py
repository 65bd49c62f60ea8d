"""Cube4 files (.cubex), the format Scalasca writes and Cube opens.

A .cubex is an uncompressed tar holding `anchor.xml` (metric tree, regions, call tree, system tree) and,
per metric id, `<id>.index` (the call-tree nodes that have data) and `<id>.data` (one value per node and
location, nodes in index order).  Choices here, all as Scalasca's files do:
- every metric is of type EXCLUSIVE: values are exclusive along the call tree, and rows are in the depth-
  first pre-order of the call tree (cnode ids are given in that order, so row i is cnode i);
- values are exclusive along the metric tree too: a metric stores what its child metrics do not cover
  (Cube adds the children back when a metric is collapsed).  Callers give inclusive values (`values` of
  a metric = the metric with all its children), and the writer subtracts;
- the system tree is machine > node (host) > process (MPI rank) > thread, one location per rank.

Two builders map scalgraph results onto Scalasca's metric names (docs/exports.md lists them):
`cube_from_profile` (an experiment's scale: time, MPI time, blocked time, visits of MPI calls) and
`cube_from_replay` (a trace: the wait-state patterns of the forward replay and the delay costs).
"""
from __future__ import annotations

import io
import re
import tarfile
import time
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import PSG

CUBE_VERSION = "4.4"


@dataclass
class CubeMetric:
    uniq: str
    disp: str
    descr: str = ""
    uom: str = "sec"
    dtype: str = "DOUBLE"
    values: np.ndarray | None = None      # [cnodes x locations], inclusive of child metrics; None = their sum
    children: list["CubeMetric"] = field(default_factory=list)


@dataclass
class CubeData:
    metrics: list[CubeMetric]
    regions: list[dict]                   # name, file, begin, end, paradigm, role
    cnode_region: list[int]
    cnode_parent: list[int]               # -1 for the root (exactly one)
    hosts: list[str]                      # per location (= MPI rank)
    attrs: dict = field(default_factory=dict)
    cnode_line: list[int] | None = None   # call site (Cube shows it beside a callee called from several places)
    cnode_mod: list[str] | None = None


# --- the generic writer --------------------------------------------------------------------------

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(s) -> str:
    """XML 1.0 text: characters it cannot carry (controls from hostile names) become U+FFFD."""
    return escape(_XML_BAD.sub("\ufffd", str(s)))


def _attr(s) -> str:
    return quoteattr(_XML_BAD.sub("\ufffd", str(s)))


def _preorder(parent: list[int]) -> list[int]:
    kids: dict[int, list[int]] = {}
    for c, p in enumerate(parent):
        kids.setdefault(p, []).append(c)
    roots = kids.get(-1, [])
    if len(roots) != 1:
        raise ValueError(f"a Cube call tree needs exactly one root, got {len(roots)}")
    order, stack = [], [roots[0]]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(kids.get(v, [])))
    return order


def _inclusive(m: CubeMetric, shape) -> np.ndarray:
    if m.values is not None:
        return np.asarray(m.values, dtype=float)
    total = np.zeros(shape)
    for c in m.children:
        total += _inclusive(c, shape)
    return total


def cubex_bytes(data: CubeData) -> bytes:
    order = _preorder(data.cnode_parent)
    new_id = {old: i for i, old in enumerate(order)}
    shape = (len(order), len(data.hosts))
    files: list[tuple[str, bytes]] = []
    metric_xml: list[str] = []
    counter = iter(range(10 ** 9))

    def metric(m: CubeMetric, depth: int) -> None:
        mid = next(counter)
        incl = _inclusive(m, shape)
        own = incl - sum((_inclusive(c, shape) for c in m.children), np.zeros(shape))
        own[np.abs(own) < 1e-12 * max(1.0, float(np.abs(incl).max(initial=0.0)))] = 0.0
        own = own[order]                                         # rows in call-tree pre-order
        values = np.rint(np.maximum(own, 0)).astype("<u8") if m.dtype == "UINT64" else own.astype("<f8")
        index = (b"CUBEX.INDEX" + np.array([1], "<i4").tobytes() + np.array([0], "<i2").tobytes() + b"\x01"
                 + np.array([len(order)], "<i4").tobytes() + np.arange(len(order), dtype="<i4").tobytes())
        files.append((f"{mid}.index", index))
        files.append((f"{mid}.data", b"CUBEX.DATA" + values.tobytes()))
        pad = " " * depth
        metric_xml.append(f'{pad}<metric id="{mid}" type="EXCLUSIVE">\n'
                          f"{pad} <disp_name>{_text(m.disp)}</disp_name>\n{pad} <uniq_name>{_text(m.uniq)}</uniq_name>\n"
                          f"{pad} <dtype>{m.dtype}</dtype>\n{pad} <uom>{_text(m.uom)}</uom>\n{pad} <val></val>\n"
                          f"{pad} <url></url>\n{pad} <descr>{_text(m.descr)}</descr>\n")
        for c in m.children:
            metric(c, depth + 1)
        metric_xml.append(f"{pad}</metric>\n")

    for m in data.metrics:
        metric(m, 1)
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n', f'<cube version="{CUBE_VERSION}">\n']
    for k, v in {"Creator": "scalgraph", "CUBE_CT_AGGR": "SUM", **data.attrs}.items():
        out.append(f" <attr key={_attr(k)} value={_attr(v)}/>\n")
    out.append(" <metrics>\n")
    out.extend(metric_xml)
    out.append(" </metrics>\n <program>\n")
    for i, r in enumerate(data.regions):
        out.append(f' <region id="{i}" mod={_attr(r.get("file", ""))} begin="{int(r.get("begin", -1))}" '
                   f'end="{int(r.get("end", -1))}">\n  <name>{_text(r["name"])}</name>\n'
                   f'  <mangled_name>{_text(r["name"])}</mangled_name>\n  <paradigm>{_text(r.get("paradigm", "user"))}'
                   f'</paradigm>\n  <role>{_text(r.get("role", "function"))}</role>\n  <url></url>\n'
                   f'  <descr>{_text(r.get("descr", ""))}</descr>\n </region>\n')
    kids: dict[int, list[int]] = {}
    for c, p in enumerate(data.cnode_parent):
        kids.setdefault(p, []).append(c)

    def cnode(v: int, depth: int) -> None:
        pad = " " * depth
        site = ""
        if data.cnode_line is not None and data.cnode_line[v] > 0:
            site = f' line="{int(data.cnode_line[v])}" mod={_attr(data.cnode_mod[v] if data.cnode_mod else "")}'
        out.append(f'{pad}<cnode id="{new_id[v]}"{site} calleeId="{data.cnode_region[v]}">\n')
        for c in kids.get(v, []):
            cnode(c, depth + 1)
        out.append(f"{pad}</cnode>\n")

    cnode(order[0], 1)
    out.append(" </program>\n <system>\n")
    out.append(' <systemtreenode Id="0">\n  <name>machine</name>\n  <class>machine</class>\n')
    # ranks in document order = location ids = data columns (readers such as pycubexr rely on the
    # order): a node element per run of consecutive ranks on one host
    runs: list[tuple[str, list[int]]] = []
    for r, host in enumerate(data.hosts):
        if runs and runs[-1][0] == host:
            runs[-1][1].append(r)
        else:
            runs.append((host, [r]))
    for h, (host, ranks) in enumerate(runs, start=1):
        out.append(f'  <systemtreenode Id="{h}">\n   <name>{_text(host)}</name>\n   <class>node</class>\n')
        for r in ranks:
            out.append(f'   <locationgroup Id="{r}">\n    <name>MPI Rank {r}</name>\n    <rank>{r}</rank>\n'
                       f'    <type>process</type>\n    <location Id="{r}">\n     <name>Master thread</name>\n'
                       f'     <rank>0</rank>\n     <type>thread</type>\n    </location>\n   </locationgroup>\n')
        out.append("  </systemtreenode>\n")
    out.append(" </systemtreenode>\n </system>\n</cube>\n")
    files.insert(0, ("anchor.xml", "".join(out).encode("utf-8")))
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, blob in files:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(blob), now, 0o644
            tar.addfile(info, io.BytesIO(blob))
    return buf.getvalue()


# --- an experiment's profile ---------------------------------------------------------------------

_ROLE = {"FUNCTION": "function", "LOOP": "loop", "BRANCH": "code", "CALL": "function", "INDIRECT": "function",
         "MPI": "function", "COMP": "code"}


def _psg_regions(psg: PSG) -> tuple[list[dict], list[int]]:
    from scalgraph.io.export_hatchet import vertex_label
    regions, index, of = [], {}, []
    for v in range(len(psg)):
        kind = psg.kind_name(v)
        key = (vertex_label(psg, v), psg.file[v] if kind != "MPI" else "MPI", psg.line_first[v], psg.line_last[v], kind)
        if kind in ("FUNCTION", "CALL", "MPI"):      # a function is one region wherever it is called
            key = (key[0], key[1] if kind == "MPI" else "", 0, 0, "FUNCTION" if kind == "CALL" else kind)
        if key not in index:
            index[key] = len(regions)
            regions.append({"name": key[0], "file": key[1], "begin": key[2] or -1, "end": key[3] or -1,
                            "paradigm": "mpi" if kind == "MPI" else "user", "role": _ROLE[kind]})
        of.append(index[key])
    return regions, of


def cube_from_profile(psg: PSG, prof: RunProfile, source: str = "") -> CubeData:
    """One scale of an experiment: Time > Execution > MPI > Blocked in MPI, and Visits (MPI calls)."""
    t = prof.time.T.astype(float)                     # [vertices x ranks]
    is_mpi = np.array([psg.kind_name(v) == "MPI" for v in range(len(psg))])
    mpi_t = np.where(is_mpi[:, None], t, 0.0)
    blocked = CubeMetric("scalgraph_mpi_blocked", "Blocked in MPI",
                         "Seconds the profile measured blocked inside MPI calls (waiting evidence; exact wait "
                         "states need a trace)", values=np.minimum(prof.wait.T, mpi_t))
    mpi = CubeMetric("mpi", "MPI", "Time spent in MPI calls", values=mpi_t, children=[blocked])
    execution = CubeMetric("execution", "Execution", "Execution time (without measurement overhead)", values=t,
                           children=[mpi])
    time_m = CubeMetric("time", "Time", "Total time: computation sampled, MPI calls timed", values=t,
                        children=[execution])
    visits = CubeMetric("visits", "Visits", "Number of MPI calls (other vertices are not counted)", uom="occ",
                        dtype="UINT64", values=prof.calls.T.astype(float))
    regions, region_of = _psg_regions(psg)
    hosts = [str(h or "localhost") for h in (prof.meta.get("hosts") or [])]
    if len(hosts) != prof.nranks:
        hosts = ["localhost"] * prof.nranks
    return CubeData([time_m, visits], regions, region_of, list(psg.parent), hosts,
                    {"scalgraph source": source, "scalgraph psg": psg.hash(), "processes": str(prof.nranks)},
                    cnode_line=[int(x) for x in psg.line_first], cnode_mod=list(psg.file))


# --- a trace's replay ----------------------------------------------------------------------------

# scalgraph pattern key -> Scalasca's metric (uniq name, display name); grouping nodes Scalasca has and
# scalgraph does not are added around them (mpi_communication, mpi_synchronization, mpi_management)
SCALASCA_NAMES = {
    "time": "time", "mpi": "mpi", "init_exit": "mpi_init_exit", "init_completion": "mpi_init_completion",
    "wait_finalize": "mpi_finalize_wait", "p2p": "mpi_point2point", "late_sender": "mpi_latesender",
    "late_sender_wrong_order": "mpi_latesender_wo", "late_sender_wrong_order_different": "mpi_lswo_different",
    "late_sender_wrong_order_same": "mpi_lswo_same", "late_receiver": "mpi_latereceiver",
    "collective": "mpi_collective", "early_reduce": "mpi_earlyreduce", "early_scan": "mpi_earlyscan",
    "late_broadcast": "mpi_latebroadcast", "wait_nxn": "mpi_wait_nxn", "nxn_completion": "mpi_nxn_completion",
    "synchronization": "mpi_sync_collective", "wait_barrier": "mpi_barrier_wait",
    "barrier_completion": "mpi_barrier_completion", "rma_sync": "mpi_rma_synchronization",
    "rma_active": "mpi_rma_sync_active", "rma_late_post": "mpi_rma_sync_late_post",
    "rma_early_wait": "mpi_rma_early_wait", "rma_late_complete": "mpi_rma_late_complete",
    "rma_wait_at_fence": "mpi_rma_wait_at_fence", "rma_early_fence": "mpi_rma_early_fence",
    "rma_passive": "mpi_rma_sync_passive", "rma_lock_contention": "mpi_rma_sync_lock_competition",
    "rma_wait_for_progress": "mpi_rma_sync_wait_for_progress", "rma_window": "mpi_mgmt_win",
    "rma_wait_at_create": "mpi_rma_wait_at_create", "rma_wait_at_free": "mpi_rma_wait_at_free",
    "rma_comm": "mpi_rma_communication", "rma_early_transfer": "mpi_rma_early_transfer",
    "rma_comm_lock_contention": "mpi_rma_comm_lock_competition",
    "rma_comm_wait_for_progress": "mpi_rma_comm_wait_for_progress",
    "rma_pairwise_sync": "mpi_rma_pairsync_count", "rma_unneeded_sync": "mpi_rma_pairsync_unneeded_count",
}
# delay costs: the family of the wait state explained -> Scalasca's delay metric stem
DELAY_FAMILY = {"late_sender": "latesender", "late_receiver": "latereceiver", "wait_barrier": "barrier",
                "wait_nxn": "n2n", "late_broadcast": "12n"}
_DELAY_DISP = {"latesender": "Late Sender", "latereceiver": "Late Receiver", "barrier": "Barrier",
               "n2n": "N x N", "12n": "1 x N"}


def cube_from_replay(patterns: list[dict], cube: np.ndarray, visits: np.ndarray, delay_short: np.ndarray,
                     delay_long: np.ndarray, cp_parent: list[int], cp_region: list[int], regions: list[dict],
                     hosts: list[str], source: str = "", critical_path: np.ndarray | None = None) -> CubeData:
    """patterns: the registry in order ({key, name, parent, description, unit}); cube: [pattern, cp, rank]
    severities; visits: [cp, rank]; delay_short / delay_long: [pattern, cp, rank] by the pattern of the wait
    explained (rows beyond the last pattern with a cost may be missing); critical_path: [cp, rank] time of
    each call path on the critical path, on that rank."""
    ncp, nranks = visits.shape
    keys = [p["key"] for p in patterns]
    value = {k: cube[i] for i, k in enumerate(keys)}
    node: dict[str, CubeMetric] = {}
    for p in patterns:
        if p["key"] in SCALASCA_NAMES:
            node[p["key"]] = CubeMetric(SCALASCA_NAMES[p["key"]], p["name"], p["description"],
                                        uom="occ" if p["unit"] == "occ" else "sec", values=value[p["key"]])
    roots: list[CubeMetric] = []
    for p in patterns:                      # link each to its nearest exported ancestor
        if p["key"] not in node:
            continue
        parent = p["parent"]
        while parent is not None and parent not in node:
            parent = next(q["parent"] for q in patterns if q["key"] == parent)
        (node[parent].children if parent else roots).append(node[p["key"]])
    _scalasca_groups(node)     # scalgraph's One-sided node has no Scalasca name: its classes join the groups
    has_rma = any(float(np.abs(value[k]).sum()) > 0 for k in keys if k.startswith("rma"))
    if not has_rma:
        _drop(roots, {SCALASCA_NAMES[k] for k in keys if k.startswith("rma") and k in SCALASCA_NAMES})
    visit = CubeMetric("visits", "Visits", "Number of visits", uom="occ", dtype="UINT64", values=visits)
    delays = []
    for i, k in enumerate(keys):
        fam = DELAY_FAMILY.get(k)
        if fam is None:
            continue
        s = delay_short[i] if i < len(delay_short) else np.zeros((ncp, nranks))
        lg = delay_long[i] if i < len(delay_long) else np.zeros((ncp, nranks))
        delays.append((fam, s, lg))
    other_s = sum((delay_short[i] for i in range(len(delay_short)) if keys[i] not in DELAY_FAMILY), np.zeros((ncp, nranks)))
    other_l = sum((delay_long[i] for i in range(len(delay_long)) if keys[i] not in DELAY_FAMILY), np.zeros((ncp, nranks)))
    fam_metric = {fam: CubeMetric(f"delay_{fam}_aggr", _DELAY_DISP[fam], f"Delay costs of {_DELAY_DISP[fam]} wait states",
                                  children=[CubeMetric(f"delay_{fam}", "Short-term", "Short-term delay costs", values=s),
                                            CubeMetric(f"delay_{fam}_longterm", "Long-term",
                                                       "Long-term delay costs (waiting propagated further)", values=lg)])
                  for fam, s, lg in delays}
    delay = CubeMetric("delay_mpi", "Delay Costs (MPI)", "Computation and communication that made other ranks wait, "
                       "charged to the causing call path and rank", children=[
                           CubeMetric("delay_p2p", "Point-to-point", "Delay costs of point-to-point wait states",
                                      children=[fam_metric[f] for f in ("latesender", "latereceiver") if f in fam_metric]),
                           CubeMetric("delay_collective", "Collective", "Delay costs of collective wait states",
                                      children=[fam_metric[f] for f in ("barrier", "n2n", "12n") if f in fam_metric]),
                           CubeMetric("scalgraph_delay_other", "Other", "Delay costs of Early Reduce, Early Scan and "
                                      "one-sided wait states (no Scalasca metric), short- plus long-term",
                                      values=other_s + other_l)])
    cp_parent = list(cp_parent)
    cp_line = [int(regions[r].get("begin", -1)) for r in cp_region]
    cp_mod = [regions[cp_region[p]].get("file", "") if p >= 0 else "" for p in cp_parent]
    regions, cp_region = _merge_mpi_regions(regions, list(cp_region))
    tops = [c for c, p in enumerate(cp_parent) if p < 0]
    extra = [m for m in roots if m.uniq not in ("time",)]
    metrics = [m for m in roots if m.uniq == "time"] + [visit, delay] + extra
    if critical_path is not None:
        metrics.append(CubeMetric("critical_path", "Critical path", "Time of each call path on the critical "
                                  "path (the chain of activities that set the run's length), on the rank it ran on",
                                  values=critical_path))
    if len(tops) != 1:                      # Cube wants one root: put the trace's top-level regions under one
        regions.append({"name": "(trace)", "file": "", "paradigm": "user", "role": "artificial"})
        cp_parent = [ncp if p < 0 else p for p in cp_parent] + [-1]
        cp_region = cp_region + [len(regions) - 1]
        cp_line, cp_mod = cp_line + [-1], cp_mod + [""]
        metrics = [_pad(m) for m in metrics]
    return CubeData(metrics, regions, cp_region, cp_parent, hosts,
                    {"scalgraph source": source, "processes": str(nranks)}, cnode_line=cp_line, cnode_mod=cp_mod)


def _merge_mpi_regions(regions: list[dict], cp_region: list[int]) -> tuple[list[dict], list[int]]:
    """A trace has one MPI region per call site; Cube has one per MPI routine, the call site on the cnode."""
    out, index, remap = [], {}, []
    for r in regions:
        key = ("mpi", r["name"]) if r.get("paradigm") == "mpi" else ("user", len(out), id(r))
        if key not in index:
            index[key] = len(out)
            out.append({**r, "begin": -1, "end": -1} if key[0] == "mpi" else r)
        remap.append(index[key])
    return out, [remap[c] for c in cp_region]


def _pad(m: CubeMetric) -> CubeMetric:
    """The metric with a zero row for an added root call path."""
    vals = None if m.values is None else np.vstack([m.values, np.zeros((1, m.values.shape[1]))])
    return CubeMetric(m.uniq, m.disp, m.descr, m.uom, m.dtype, vals, [_pad(c) for c in m.children])


def _scalasca_groups(node: dict[str, CubeMetric]) -> None:
    """Scalasca's tree puts Execution between Time and MPI, and groups MPI's classes into Communication,
    Synchronization and Management; their values are the sums of their children."""
    time_m, mpi = node["time"], node["mpi"]
    time_m.children = [CubeMetric("execution", "Execution", "Execution time", values=time_m.values,
                                  children=[mpi])] + [c for c in time_m.children if c is not mpi]
    by = {c.uniq: c for c in mpi.children}
    groups = [("mpi_management", "Management", "Time in MPI management calls", ["mpi_init_exit", "mpi_mgmt_win"]),
              ("mpi_synchronization", "Synchronization", "Time in MPI synchronisation calls",
               ["mpi_sync_collective", "mpi_rma_synchronization"]),
              ("mpi_communication", "Communication", "Time in MPI communication calls",
               ["mpi_point2point", "mpi_collective", "mpi_rma_communication"])]
    kids = []
    for uniq, disp, descr, members in groups:
        ms = [by.pop(u) for u in members if u in by]
        if ms:
            kids.append(CubeMetric(uniq, disp, descr, children=ms))
    mpi.children = kids + list(by.values())


def _drop(metrics: list[CubeMetric], names: set[str]) -> None:
    metrics[:] = [m for m in metrics if m.uniq not in names]
    for m in metrics:
        _drop(m.children, names)
    metrics[:] = [m for m in metrics if m.values is not None or m.children]
