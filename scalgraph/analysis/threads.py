"""Thread imbalance inside a rank, and backtracking across OpenMP fork/join and barriers (issue 12).

With the profile's thread dimension (model/threads.py) the OpenMP threads of a rank are compared the
way ranks are (abnormal.py): a compute construct is thread-abnormal on a thread when that thread's CPU
there exceeds AbnormThd x the median of its team and the median by the floor and the sampling error.

Causes, after seed 000 §7 (Scalasca's OpenMP wait states):
* Wait at OpenMP barrier.  The threads that waited at a barrier (a region's join, a loop's implicit
  barrier, an explicit `omp barrier`) waited for the last thread in: the one that waited least there.
  The walk crosses the barrier to that thread and goes back through what it ran in the region before
  the barrier (the fork's subtree, up to the barrier in execution order, which is the PSG's
  pre-order): the construct where that thread exceeds its team's median most is the cause, costing
  min(excess, the longest wait at that barrier beyond the last thread's own).  The excess over the
  team median is what balancing the work would save the rank.
* Idle threads.  While the master runs serial code (outside every parallel region) the workers idle;
  the walk from them goes to the master's serial sections: a compute construct outside every region
  costs what running it on all T threads would save, time x (T-1)/T.  Scalasca's Idle Threads metric,
  time x (T-1), is given beside it (`idle_seconds`).
Costs are in thread-CPU seconds (what the samples measure); waits are wall seconds, which on an
oversubscribed machine are longer than the CPU they wait for.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from scalgraph.analysis.abnormal import sampling_error
from scalgraph.analysis.backtrack import Path, Step
from scalgraph.analysis.causes import Cause
from scalgraph.analysis.constructs import Constructs
from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import CALL, MPI, PSG
from scalgraph.model.threads import ROLE_NAMES, ThreadProfile

# the CALL vertex of a fork (scalgraph/static/openmp.py): the call of an outlined region body,
# clang's <fn>.omp_outlined[...] or flang's <fn>..omp_par[...]
_OUTLINED = re.compile(r"\.omp_outlined|\.\.omp_par")


@dataclass
class ThreadAbnormal:
    construct: int
    vertex: int              # its instance with the most CPU on that thread
    rank: int
    thread: int              # position in ThreadProfile.of_rank(rank): team index order, master first
    team_index: int
    role: str
    cpu: np.ndarray          # [T] CPU seconds of every thread of the rank at the construct
    median: float
    excess: float


@dataclass
class Regions:
    """Parallel regions of the PSG: for each vertex the fork CALL it runs under (-1: serial code) and
    the end of each vertex's subtree in pre-order."""
    region: np.ndarray       # [V] nearest enclosing-or-self fork CALL, -1 outside every region
    end: np.ndarray          # [V] first vertex after v's subtree


def regions(psg: PSG) -> Regions:
    n = len(psg)
    fork = np.array([psg.kind[v] == CALL and bool(_OUTLINED.search(psg.name[v] or "")) for v in range(n)], dtype=bool)
    region = np.full(n, -1)
    for v in range(n):                       # pre-order: a parent comes before its children
        p = psg.parent[v]
        region[v] = v if fork[v] else (region[p] if p >= 0 else -1)
    end = np.arange(1, n + 1)
    for v in range(n - 1, -1, -1):
        if psg.children[v]:
            end[v] = max(end[c] for c in psg.children[v])
    return Regions(region, end)


def _team(threads: ThreadProfile, rank: int) -> np.ndarray:
    return threads.of_rank(rank)


def _thread_excess(cpu: np.ndarray, samples: np.ndarray, hz: float) -> tuple[np.ndarray, np.ndarray]:
    """([T x C] excess over the team median beyond the sampling error (else 0), [C] median)."""
    med = np.median(cpu, axis=0)
    noise = sampling_error(np.median(samples, axis=0), hz) if hz > 0 else np.zeros(cpu.shape[1])
    ex = cpu - med[None, :]
    return np.where(ex > noise[None, :], ex, 0.0), med


def thread_abnormal(psg: PSG, cons: Constructs, prof: RunProfile, thd: float, floor: float,
                    excluded: np.ndarray | None = None) -> list[ThreadAbnormal]:
    """Thread-abnormal compute constructs of every rank with a team of 2 or more, largest excess first."""
    th = prof.threads
    if th is None:
        return []
    hz = float(prof.meta.get("hz") or 0.0)
    comp = np.array([psg.kind[inst[0]] != MPI for inst in cons.instances], dtype=bool)
    if excluded is not None:
        comp &= ~np.array([excluded[inst[0]] for inst in cons.instances], dtype=bool)
    out: list[ThreadAbnormal] = []
    for r in th.ranks():
        idx = _team(th, r)
        if len(idx) < 2:
            continue
        cpu_v = th.dense("cpu", r, prof.nvertices)
        cpu = cons.sum_columns(cpu_v)
        ex, med = _thread_excess(cpu, cons.sum_columns(th.dense("samples", r, prof.nvertices)), hz)
        mask = (cpu > thd * med[None, :]) & (ex >= max(floor, 1e-12)) & comp[None, :]
        for t, c in zip(*np.nonzero(mask)):
            info = th.threads[idx[t]]
            out.append(ThreadAbnormal(int(c), cons.dominant(int(c), cpu_v[t]), int(r), int(t), int(info["team_index"]),
                                      ROLE_NAMES.get(int(info["role"]), "other"), cpu[:, c].copy(), float(med[c]),
                                      float(ex[t, c])))
    out.sort(key=lambda a: -a.excess)
    return out


def thread_causes(psg: PSG, cons: Constructs, prof: RunProfile, floor: float,
                  excluded: np.ndarray | None = None) -> list[Cause]:
    """Causes found from OpenMP barrier waits and idle workers (module doc), of at least `floor` seconds
    of waiting (a barrier) or cost (idle threads)."""
    th = prof.threads
    if th is None or floor <= 0:
        return []
    hz = float(prof.meta.get("hz") or 0.0)
    reg = regions(psg)
    nv = prof.nvertices
    computes = np.array([psg.kind[v] != MPI for v in range(nv)], dtype=bool)
    if excluded is not None:
        computes &= ~np.asarray(excluded, dtype=bool)
    found: list[Cause] = []
    for r in th.ranks():
        idx = _team(th, r)
        if len(idx) < 2:
            continue
        cpu_v = th.dense("cpu", r, nv)
        samples_v = th.dense("samples", r, nv)
        barrier = th.dense("barrier", r, nv)
        found += _barrier_causes(psg, cons, th, idx, r, reg, cpu_v, samples_v, barrier, computes, hz, floor)
        found += _idle_causes(cons, th, idx, r, reg, cpu_v, computes, floor)
    return found


def _barrier_causes(psg, cons, th, idx, r, reg, cpu_v, samples_v, barrier, computes, hz, floor) -> list[Cause]:
    out = []
    for b in np.flatnonzero(barrier.max(axis=0) >= floor):
        last = int(np.argmin(barrier[:, b]))
        waiting = float(barrier[:, b].max() - barrier[last, b])
        f = int(reg.region[b])
        if waiting < floor or f < 0:
            continue
        # what the last thread ran in the region before the barrier (all of it for the join barrier)
        hi = reg.end[f] if b == f else min(b + 1, reg.end[f])
        inside = np.zeros(len(computes), dtype=bool)
        inside[f:hi] = True
        inside &= computes
        ex, _ = _thread_excess(cons.sum_columns(cpu_v * inside), cons.sum_columns(samples_v * inside), hz)
        c = int(np.argmax(ex[last]))
        e = float(ex[last, c])
        if e <= 0:
            continue
        v = cons.dominant(c, cpu_v[last] * inside)
        info = th.threads[idx[last]]
        cost = min(e, waiting)
        steps = [Step(int(b), int(r), "start"), Step(int(v), int(r), "barrier")]
        out.append(Cause(c, int(v), int(r), cost, Path((int(b), int(r)), "OpenMP barrier wait", steps), {
            "what": "thread waiting", "vertex": int(b), "rank": int(r), "waiting": waiting, "seconds": cost,
            "thread": int(info["team_index"]), "role": ROLE_NAMES.get(int(info["role"]), "other"),
            "threads": int(len(idx)), "excess": e,
            "waited": [float(x) for x in barrier[:, b]]}))
    return out


def _idle_causes(cons, th, idx, r, reg, cpu_v, computes, floor) -> list[Cause]:
    """The master's serial compute constructs: time x (T-1)/T each (module doc)."""
    team = len(idx)
    master = 0            # of_rank puts the master first
    serial = computes & (reg.region < 0)
    per_construct = cons.sum_columns((cpu_v[master] * serial)[None, :])[0]
    idle = float(th.threads["idle"][idx[1:]].sum())
    out = []
    for c in np.flatnonzero(per_construct * (team - 1) / team >= floor):
        t = float(per_construct[c])
        cost = t * (team - 1) / team
        v = cons.dominant(int(c), cpu_v[master] * serial)
        steps = [Step(int(v), int(r), "idle threads")]
        out.append(Cause(int(c), int(v), int(r), cost, Path((int(v), int(r)), "idle threads", steps), {
            "what": "idle threads", "vertex": int(v), "rank": int(r), "waiting": idle, "seconds": cost,
            "threads": team, "idle_seconds": t * (team - 1)}))
    return out


def thread_abnormal_entry(psg: PSG, a: ThreadAbnormal) -> dict:
    """One thread-abnormal construct for the report (JSON-ready)."""
    return {"vertex": a.vertex, "location": psg.location(a.vertex), "file": psg.file[a.vertex],
            "line": psg.line_first[a.vertex], "line_last": psg.line_last[a.vertex], "function": psg.function[a.vertex],
            "kind": psg.kind_name(a.vertex), "name": psg.name[a.vertex], "construct": a.construct, "rank": a.rank,
            "thread": a.team_index, "role": a.role, "cpu": [float(x) for x in a.cpu], "median": a.median,
            "excess": a.excess}
