"""Parallel trace replay over MPI (seed 000 §5): `python -m scalgraph.trace.parallel TRACE` under
mpiexec, or `scalgraph trace --parallel N TRACE`, which starts it.

Each analysis process reads only its block of application ranks from the trace file (own binary
format and OTF2; a JSON trace is read whole and cut), receives the communication skeleton of the ranks
its own ranks synchronise with (parallel_partial.py), and runs the serial engine's pattern
evaluators, delay arithmetic and critical-path walk on that (parallel_phases.py).  Process 0
gathers the reduced cubes and the few per-wait quantities and prints the report exactly as
`scalgraph trace` does.  Of the clock correction only the per-rank interpolation of measured
clock offsets is done; the controlled logical clock is a global pass that the parallel replay
does not run (the report's clock line says whether violations remain).  OpenMP threads are
locations like ranks (docs/openmp.md): a block may hold part of a team, whose forks, barriers and
lock hand-overs reach the other blocks through the skeleton like any communicator's.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from types import SimpleNamespace

import numpy as np

from scalgraph.errors import UserError
from scalgraph.model import trace as tm
from scalgraph.trace import patterns, parallel_phases as ph
from scalgraph.trace.delay import DelayOptions, DelayResult, has_rooted_collectives
from scalgraph.trace.parallel_partial import (Partial, build_partial, merge_callpaths, rank_blocks,
                                              rank_callpaths)



def read_block(path: str, comm) -> tuple[tm.Trace, np.ndarray, np.ndarray]:
    """This process's block of ranks (other ranks empty), all ranks' event counts, the blocks.
    Binary and OTF2 traces: the counts come from the headers/definitions and only the block's
    events are read (a process holds its own ranks, not the whole trace)."""
    from scalgraph.io.trace_read import read_trace, trace_event_counts
    from scalgraph.trace.validate import check_ranks
    me, nprocs = comm.Get_rank(), comm.Get_size()
    counts = np.asarray(trace_event_counts(path), np.int64)
    bounds = rank_blocks(counts, nprocs)
    mine = range(int(bounds[me]), int(bounds[me + 1]))
    trace = read_trace(path, validate=True, ranks=mine)
    # the checks a block passes on its own (the cross-rank ones need the whole trace: matching
    # messages and collectives is what the skeleton exchange does)
    check_ranks(trace, mine, where=str(path))
    _interpolate_offsets(trace)
    return trace, counts, bounds


def _counts_read(comm, trace: tm.Trace, bounds: np.ndarray) -> np.ndarray:
    """Events per rank as the processes read them: the serial engine's numbering (a definition's
    record count can include records that reading drops, e.g. program begin/end)."""
    me = comm.Get_rank()
    own = [len(trace.events[r]) for r in range(int(bounds[me]), int(bounds[me + 1]))]
    return np.array([n for part in comm.allgather(own) for n in part], np.int64)


def _interpolate_offsets(trace: tm.Trace) -> None:
    """The measured clock offsets are per rank, so their linear interpolation (the first step of the
    serial clock correction) applies to each block alone; the controlled logical clock does not."""
    from scalgraph.trace.clock import interpolate_offsets
    if interpolate_offsets(trace):
        trace.meta["clock_offsets_applied"] = True
        for rank, ev in enumerate(trace.events):
            if np.any(np.diff(ev["time"]) < 0):
                raise UserError(f"rank {rank}: clock offset interpolation made time go backwards")


def _clock_note(offsets: bool, violations: int) -> str:
    lines = ["timestamps adjusted by linear interpolation of the measured clock offsets"] if offsets else []
    if violations:
        lines.insert(0, f"{violations} receives lie before their sends and stay uncorrected: the parallel replay "
                        f"does not run the controlled logical clock; run `scalgraph trace` without --parallel "
                        f"for corrected timestamps")
    else:
        lines.insert(0, "no receive before its send (the parallel replay checks point-to-point messages only and "
                        "does not run the controlled logical clock)")
    return "\n".join(lines)


def _agree(comm, fn, *args):
    """Run fn on every process; if any raised UserError, all raise the first one (no deadlock)."""
    result, err = None, None
    try:
        result = fn(*args)
    except UserError as e:
        err = str(e)
    errors = [e for e in comm.allgather(err) if e]
    if errors:
        raise UserError(errors[0])
    return result


def _sum_to_root(comm, arr: np.ndarray) -> np.ndarray | None:
    from mpi4py import MPI
    arr = np.ascontiguousarray(arr, float)
    out = np.empty_like(arr) if comm.Get_rank() == 0 else None
    comm.Reduce(arr, out, op=MPI.SUM, root=0)
    return out


PHASE_SECONDS: dict[str, float] = {}   # wall time per phase of the last replay in this process


def _phase(name: str) -> None:
    import time
    now = time.perf_counter()
    last = PHASE_SECONDS.pop("_t", None)
    if last is not None:
        PHASE_SECONDS[name] = now - last
    PHASE_SECONDS["_t"] = now


ALL_INSTANCES = 1 << 62     # the JSON lists every wait state (the text shows the top ones)


def replay(comm, path: str, top: int = 10, source: str = "", min_share: float = 0.05,
           options: DelayOptions = DelayOptions()) -> dict | None:
    """The whole parallel replay; returns the report on process 0, None elsewhere."""
    PHASE_SECONDS.clear()
    _phase("")
    trace, counts, bounds = _agree(comm, read_block, path, comm)
    counts = _counts_read(comm, trace, bounds)
    if len(counts) == 0:
        raise UserError("the trace has no locations; nothing to analyse")
    # more analysis processes than ranks: the surplus ones (always the last) sit this one out
    active = np.flatnonzero(np.diff(bounds) > 0)
    if len(active) < comm.Get_size():
        from mpi4py import MPI
        sub = comm.Split(0 if comm.Get_rank() < len(active) else MPI.UNDEFINED, comm.Get_rank())
        if sub == MPI.COMM_NULL:
            return None
        comm, bounds = sub, bounds[:len(active) + 1]
    _phase("read")
    part: Partial = _agree(comm, build_partial, comm, trace, counts, bounds)
    _phase("skeleton")
    ctx = part.ctx
    # call-path ids as the serial engine numbers them
    tables = comm.gather((ctx.nest.cp_parent, ctx.nest.cp_region, rank_callpaths(part)), root=0)
    merged = merge_callpaths(tables) if comm.Get_rank() == 0 else None
    maps, g_parent, g_region = comm.bcast(merged, root=0)
    cpmap = np.append(maps[comm.Get_rank()], -1)      # index -1 (outside every region) stays -1
    _phase("callpaths")
    fwd, waits, forward_out = _forward(comm, part, cpmap, len(g_parent), ALL_INSTANCES)
    sync = waits[patterns.SYNC_PATTERNS[waits["pattern"]]]
    delay_out = _delay(comm, part, sync, cpmap, len(g_parent), options)
    # the verdict's reading (as the serial command): rooted collectives synchronise their root only
    verdict_out = delay_out
    if options.collectives != "root" and comm.allreduce(has_rooted_collectives(ctx), op=_lor()):
        verdict_out = _delay(comm, part, sync, cpmap, len(g_parent), replace(options, collectives="root"))
    path_out = _critical_path(comm, part, fwd, sync, cpmap, len(g_parent))
    if comm.Get_rank() != 0:
        return None
    cube, inst, stats = forward_out
    dl = _delay_result(delay_out, options)
    dl_verdict = dl if verdict_out is delay_out else _delay_result(verdict_out, replace(options, collectives="root"))
    fake_ctx, fake_rows = _report_inputs(ctx.trace.regions, part.nranks, int(counts.sum()), g_parent, g_region,
                                         [x for i in inst for x in i], stats, ctx.trace.locations)
    fake_fwd = SimpleNamespace(ctx=fake_ctx, waits=fake_rows, cube=cube,
                               clock_violations=int(sum(s[0] for s in stats)))
    from scalgraph.trace import report
    clock = _clock_note(bool(ctx.trace.meta.get("clock_offsets_applied")), fake_fwd.clock_violations)
    return report.build_report(fake_fwd, dl, ph.critical_path_result(*path_out), top=top, clock=clock,
                               source=source, min_share=min_share, verdict_delay=dl_verdict)


def _lor():
    from mpi4py import MPI
    return MPI.LOR


def _delay_result(delay_out, options: DelayOptions) -> DelayResult:
    """Process 0's DelayResult from the gathered delay phase."""
    (ids, omega, gamma, _, table), short, long_, sums = delay_out
    dw = np.zeros(len(omega), patterns.WAIT_DTYPE)
    dw["wait"] = omega
    dw["pattern"], dw["rank"], dw["causer"] = table["pattern"], table["rank"], table["causer"]
    s, dist = table["scale"], table["distributed"]
    return DelayResult(waits=dw, short_term=short.sum(axis=0), long_term=long_.sum(axis=0), short_by_pattern=short,
                       long_by_pattern=long_, gamma=gamma.sum(axis=1), direct=dist * s * table["sum_delta"],
                       indirect=dist * s * table["wait_in_interval"], unexplained=float(sums[0]), scale=s,
                       sum_delta=table["sum_delta"], wait_in_interval=table["wait_in_interval"], distributed=dist,
                       options=options, enter=table["enter"])


def _forward(comm, part: Partial, cpmap: np.ndarray, ncp: int, n_inst: int):
    """The serial pattern evaluators on the partial trace; process 0 gets the summed cube, the
    candidate instances and (clock violations, time span) per process."""
    from scalgraph.trace import forward
    ctx = part.ctx
    fwd = _agree(comm, forward.forward_replay, ctx)
    _phase("forward")
    waits = fwd.waits[part.mine(fwd.waits["rank"])]
    cube = _sum_to_root(comm, ph.to_global(fwd.cube, part, cpmap, ncp))
    viol = _clock_violations(ctx, ctx.msgs, part.mine(ctx.msgs.dst))
    own_t = ctx.time[part.mine(ctx.flat.rank)]
    span = (float(own_t.min()), float(-own_t.max())) if len(own_t) else (np.inf, np.inf)
    inst = comm.gather(ph.top_instances(part, waits, cpmap, n_inst), root=0)
    stats = comm.gather((viol, span), root=0)
    _phase("forward_reduce")
    return fwd, waits, (cube, inst, stats)


def _delay(comm, part: Partial, sync: np.ndarray, cpmap: np.ndarray, ncp: int, options: DelayOptions):
    """Delay costs; process 0 gets (ids, ω, Γ) of every wait, the short- and long-term cubes and
    (unexplained, direct, indirect) sums."""
    me = comm.Get_rank()
    dwaits = sync[sync["causer"] >= 0]
    incoming = comm.alltoall(ph.delay_requests(part, dwaits, cpmap, comm.Get_size(), options))
    short, (m_rows, m_cols, m_vals), state = ph.explain_waits(part, dwaits, incoming, ncp, cpmap, options)
    g = comm.gather((ph.wait_ids(part, dwaits), dwaits["wait"].astype(float),
                     part.ctx.time[dwaits["op"]] + dwaits["wait"], m_rows, m_cols, m_vals, state["inc"]["id"],
                     state["dist"], state["inc"]["pattern"], state["inc"]["rank"], state["inc"]["enter"],
                     state["inc"]["d_rank"], state["s"], state["sum_delta"], state["w_d"]), root=0)
    _phase("delay_local")
    solved, err, answers = None, None, None
    if me == 0:
        try:
            solved = ph.solve_gamma(g, options) + (ph.wait_table(g),)
            ids, _, gamma, fams, _ = solved
            answers = [(gamma[np.searchsorted(ids, x[6])], fams) for x in g]
        except UserError as e:
            err = str(e)
    err = comm.bcast(err, root=0)
    if err:
        raise UserError(err)
    gamma_w, fams = comm.scatter(answers, root=0)
    long_, sums = ph.finish_delay(state, gamma_w, fams, ncp, part.nranks)
    out = (solved, _sum_to_root(comm, short), _sum_to_root(comm, long_), _sum_to_root(comm, sums))
    _phase("delay_gamma")
    return out


def _critical_path(comm, part: Partial, fwd, sync: np.ndarray, cpmap: np.ndarray, ncp: int):
    """The path's segments (all processes) and, on process 0, the summed profile and t_l."""
    fin_t, last, busy = ph.end_candidates(part)
    cand = comm.allgather((fin_t, last, busy))
    end_rank, end_time = ph.pick_end_point(*(np.concatenate([c[i] for c in cand]) for i in range(3)))
    tables = comm.gather(ph.jump_table(part, sync), root=0)
    segs = comm.bcast(ph.walk(tables, part.nranks, end_rank, end_time) if comm.Get_rank() == 0 else None, root=0)
    _phase("cp_walk")
    own_segs = [s for s in segs if part.lo <= s[0] < part.hi]
    profile, t_l = ph.path_profiles(part, fwd.excl_time, sync, own_segs, cpmap, ncp)
    out = (segs, _sum_to_root(comm, profile), _sum_to_root(comm, t_l))
    _phase("cp_profiles")
    return out


def _clock_violations(ctx, m, sel) -> int:
    """Messages received on own ranks whose receive lies before their send (each counted once)."""
    from scalgraph.trace import waitops
    return waitops.clock_violations(ctx.time[m.send_evt[sel]], ctx.time[m.recv_evt[sel]])


def _report_inputs(regions, nranks, nevents, g_parent, g_region, inst, stats, locations=()):
    """A stand-in replay context for report.build_report: the merged candidate instances as wait
    rows (in serial row order), with their enter times and call paths, and the run's time span;
    `locations`: (rank, thread) of each location of a trace with OpenMP threads."""
    inst = sorted(inst, key=lambda x: x[0])
    rows = np.zeros(len(inst), patterns.WAIT_DTYPE)
    times = [x[3] for x in inst]
    cps = [x[4] for x in inst]
    for i, (key, wait, rank, _, _, causer) in enumerate(inst):
        rows[i]["pattern"], rows[i]["wait"], rows[i]["rank"] = key[0], wait, rank
        rows[i]["op"], rows[i]["causer"] = i, causer
    t_min = min(s[1][0] for s in stats)
    t_max = -min(s[1][1] for s in stats)
    time = np.array(times + ([t_min, t_max] if np.isfinite(t_min) else []), float)
    nest = SimpleNamespace(cp_parent=g_parent, cp_region=g_region, callpath=np.array(cps + [0, 0], np.int64))
    ctx = SimpleNamespace(nest=nest, trace=SimpleNamespace(regions=regions, locations=list(locations or [])),
                          time=time, nranks=nranks,
                          nevents=nevents, ncallpaths=len(g_parent))
    return ctx, rows


def main(argv=None) -> int:
    from mpi4py import MPI
    from scalgraph.trace import report
    ap = argparse.ArgumentParser(prog="python -m scalgraph.trace.parallel",
                                 description="parallel trace replay; run under mpiexec")
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--min-share", type=float, default=0.05)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--delay-scale", default=DelayOptions.scale)
    ap.add_argument("--delay-family", default=DelayOptions.family)
    ap.add_argument("--sync-points", default=DelayOptions.sync_points)
    ap.add_argument("--source", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    try:
        if args.top < 1:
            raise UserError(f"--top must be at least 1 (got {args.top})")
        result = replay(comm, args.trace, top=args.top, source=args.source or args.trace,
                        min_share=args.min_share, options=DelayOptions(args.delay_scale, args.delay_family, args.sync_points))
    except UserError as e:
        if comm.Get_rank() == 0:
            print(f"scalgraph trace: {e}", file=sys.stderr)
        return 2
    except Exception:                # a bug: the other processes would wait forever in a collective
        import traceback
        traceback.print_exc()
        comm.Abort(1)
    if result is not None:
        if args.json:
            report.write_json(result, sys.stdout)
        else:
            report.write_text(result, sys.stdout, top=args.top)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())


def launch(nprocs: int, trace: str, top: int = 10, as_json: bool = False, min_share: float = 0.05,
           options: DelayOptions = DelayOptions()) -> int:
    """`scalgraph trace --parallel N`: run this module under the venv's mpiexec (argument list, no
    shell); process 0 prints the report to our stdout."""
    import os
    import pathlib
    import shutil
    import subprocess
    if nprocs < 1:
        raise UserError(f"--parallel must be at least 1 (got {nprocs})")
    if not pathlib.Path(trace).exists():
        raise UserError(f"{trace}: no such file or directory")
    import importlib.util
    if importlib.util.find_spec("mpi4py") is None:
        raise UserError("--parallel needs mpi4py (pip install mpich mpi4py into this environment)")
    here = pathlib.Path(sys.executable).parent / "mpiexec"
    mpiexec = str(here) if here.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        raise UserError("--parallel needs mpiexec (pip install mpich mpi4py into this environment), "
                        "or run `python -m scalgraph.trace.parallel TRACE` under your own mpiexec")
    cmd = [mpiexec, "-n", str(nprocs), sys.executable, "-m", "scalgraph.trace.parallel", str(trace),
           "--top", str(top), "--min-share", repr(float(min_share)), "--delay-scale", options.scale,
           "--delay-family", options.family, "--sync-points", options.sync_points] + (["--json"] if as_json else [])
    sys.stdout.flush()
    return subprocess.run(cmd, env=dict(os.environ)).returncode
