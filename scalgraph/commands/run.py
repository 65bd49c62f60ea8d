"""`scalgraph run -n 2,4,8 [--repeat K] [-o EXP] -- ./app args`: run an instrumented program at several
process counts into an experiment directory (layout in scalgraph/io/experiment.py).

Each run is started under the mpiexec of the MPI the program is linked with, with SCALGRAPH_OUT
pointing at EXP/scale-<p>/rep-<k>; the shim writes one rank-<r>.sgp per rank there.  experiment.json
is rewritten after every run, so running the same command again resumes where it stopped.
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

from scalgraph.errors import UserError, os_failure, printable
from scalgraph.io.safe_read import check_regular, contained, read_regular
from scalgraph.io.safe_write import write_atomic

OUTPUT_FILES = ("stdout.txt", "stderr.txt")
LOCK = ".scalgraph-run.lock"        # pid of the scalgraph run writing the experiment


def add_arguments(p) -> None:
    inp = p.add_argument_group("what to run")
    inp.add_argument("-n", "--scales", required=True, metavar="P,P,...",
                     help="process counts to run at, e.g. 2,4,8,16")
    inp.add_argument("--repeat", "--reps", dest="repeat", type=int, default=1, metavar="K",
                     help="runs per scale; detect takes the median (default %(default)s)")
    inp.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS]",
                     help="the program built with sgcc/sgcxx/sgfort and its arguments; in the arguments {p} is "
                          "the process count of each run and {px} {py} {pz} the process grid MPI_Dims_create "
                          "gives for it (2-D if {py} is the highest used, 3-D with {pz}: p=8 -> 2 2 2), "
                          "{{ and }} are literal braces; the expanded command is recorded per run in "
                          "experiment.json")
    run = p.add_argument_group("how to run")
    run.add_argument("--trace", action="store_true",
                     help="also record event traces (SCALGRAPH_TRACE=1); each run's trace.sgtrace is what "
                          "`scalgraph trace EXP/scale-P/rep-K` analyses")
    run.add_argument("--trace-filter", default=None, metavar="FILE",
                     help="with --trace: vertices whose ENTER/EXIT are not recorded (vertex ids, function "
                          "names or kind@file:line, one per line; see scalgraph/io/trace_filter.py)")
    run.add_argument("--hz", type=float, default=None, metavar="N",
                     help="samples per CPU second of each thread, up to 10000 (SCALGRAPH_HZ; default: the "
                          "shim's, 1000; 0 = no sampling); perf task-clock events, or the biased ITIMER_PROF "
                          "fallback where they are not allowed")
    run.add_argument("--mpiexec", default=None, metavar="PATH",
                     help="launcher to use (default: the one installed with the program's MPI library)")
    run.add_argument("--mpiexec-args", default="", metavar="'ARGS'",
                     help="extra launcher options placed after -n P, e.g. --mpiexec-args='-f hosts'")
    run.add_argument("--timeout", type=float, default=1800.0, metavar="S",
                     help="give up on a run after S seconds (default %(default)s)")
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", default=None, metavar="EXP",
                     help="experiment directory (default scalgraph-<program>-<date>); an existing one is resumed")
    out.add_argument("--force", action="store_true", help="discard an existing experiment in EXP and start again")


MAX_SCALE = 1 << 20        # process counts beyond this are typing mistakes
MAX_REPEAT = 1000


def parse_scales(text: str) -> list[int]:
    words = [s for s in text.replace(" ", "").split(",") if s]
    if not all(w.isascii() and w.isdigit() for w in words):
        raise UserError(f"-n {text!r}: give process counts as whole numbers separated by commas, e.g. -n 2,4,8")
    scales = [int(w) for w in words]
    if not scales or min(scales) < 1 or max(scales) > MAX_SCALE:
        raise UserError(f"-n {text!r}: give at least one process count of 1 or more (up to {MAX_SCALE}), e.g. -n 2,4,8")
    twice = sorted({p for p in scales if scales.count(p) > 1})
    if twice:
        raise UserError(f"-n {text!r}: p={twice[0]} is given twice; list each process count once "
                        "(more runs per scale: --repeat K)")
    return sorted(scales)


def check_options(args) -> None:
    """Numbers are finite and in range before anything runs (NaN passes every range check)."""
    from scalgraph.io.safe_read import finite
    if not 1 <= args.repeat <= MAX_REPEAT:
        raise UserError(f"--repeat must be from 1 to {MAX_REPEAT} (got {args.repeat})")
    if args.hz is not None and not 0 <= finite(args.hz, "--hz") <= 10000:
        raise UserError(f"--hz must be 0 (no sampling) or up to 10000 (got {args.hz:g})")
    if finite(args.timeout, "--timeout") < 0:
        raise UserError(f"--timeout must be 0 (no limit) or a number of seconds (got {args.timeout:g})")


def run(args) -> int:
    scales = parse_scales(args.scales)
    check_options(args)
    command = list(args.program[1:] if args.program[:1] == ["--"] else args.program)
    if not command:
        raise UserError("no program given; usage: scalgraph run -n 2,4,8 -- ./app args")
    from scalgraph.runtime.placeholders import placeholders_in
    placeholders_in(command[1:])             # an unknown {name} is refused before anything runs
    program = resolve_program(command[0])
    psg = read_program_psg(program)
    if getattr(args, "trace_filter", None):
        if not args.trace:
            raise UserError("--trace-filter needs --trace")
        from scalgraph.io.trace_filter import resolve_filter
        check_regular(args.trace_filter, "trace filter file")      # a FIFO would block the read
        args.trace_filter_ids = resolve_filter(args.trace_filter, psg)   # checked before anything runs
    from scalgraph.runtime.launch import find_launcher   # runtime: subprocess probing, at the edge
    launcher = find_launcher(program, args.mpiexec)
    try:
        launcher.extra_args = shlex.split(args.mpiexec_args)
    except ValueError as e:
        raise UserError(f"--mpiexec-args {args.mpiexec_args!r}: {e}") from None
    exp = pathlib.Path(args.output or default_name(program))
    check_not_in_use(exp)
    desc = open_experiment(exp, command, scales, args.repeat, psg, launcher, args)
    lock = exp / LOCK
    write_atomic(lock, str(os.getpid()))
    previous = signal.signal(signal.SIGTERM, _terminate)   # `kill` must stop the ranks too, as Ctrl-C does
    try:
        return run_all(exp, desc, command, launcher, args, scales)
    finally:
        signal.signal(signal.SIGTERM, previous)
        lock.unlink(missing_ok=True)


def _terminate(signum, frame):
    raise KeyboardInterrupt


def check_not_in_use(exp: pathlib.Path) -> None:
    """Two `scalgraph run` writing one experiment would overwrite each other's runs."""
    try:
        pid = int(read_regular(exp / LOCK, "lock file", 64).strip())
    except (UserError, ValueError):
        return
    if pid != os.getpid() and _alive(pid):
        raise UserError(f"{exp} is being written by another scalgraph run (pid {pid}); wait for it to finish, "
                        "or choose another -o directory")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def resolve_program(name: str) -> str:
    path = name if os.sep in name else shutil.which(name)
    if not path or not os.path.exists(path):
        raise UserError(f"no such program: {name}")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise UserError(f"{name} is not an executable program")
    return path


def read_program_psg(program: str):
    from scalgraph.static import read_psg_from_executable
    try:
        return read_psg_from_executable(program)
    except (UserError, OSError, ValueError) as e:
        raise UserError(f"{program} was not built with sgcc/sgcxx/sgfort (no Program Structure Graph in it: {e}); "
                        "rebuild it with the wrapper, e.g. sgcc -O2 -g -o app app.c") from None


def default_name(program: str) -> str:
    return f"scalgraph-{pathlib.Path(program).name}-{datetime.date.today().isoformat()}"


def open_experiment(exp: pathlib.Path, command, scales, repeat, psg, launcher, args) -> dict:
    """A new experiment, or the existing one to resume.  Never replaces one without --force."""
    from scalgraph.io import experiment_write as ew   # reads numpy: only when the command runs
    if exp.exists() and not exp.is_dir():
        raise UserError(f"{exp} is a file; choose another -o directory")
    is_experiment = (exp / "experiment.json").exists()
    if exp.exists() and args.force:
        if exp.is_symlink():
            raise UserError(f"{exp} is a symbolic link; --force does not delete through links: give the directory "
                            f"it points to ({exp.resolve()}) or another -o")
        if not is_experiment and any(exp.iterdir()):
            raise UserError(f"{exp} is not a scalgraph experiment and not empty; refusing to delete it even with --force")
        try:
            shutil.rmtree(exp)
        except OSError as e:
            raise os_failure(e, f"--force cannot delete {exp}", "remove it yourself or choose another -o") from None
    elif is_experiment:
        desc = ew.load_for_resume(exp)
        if desc.get("command") != command:
            raise UserError(f"{exp} holds an experiment of another command ({' '.join(map(str, desc.get('command', [])))}); "
                            "choose another -o directory, or pass --force to replace it")
        if desc.get("psg_hash") != psg.hash():
            raise UserError(f"{exp} was recorded with another build of {command[0]} (PSG {desc.get('psg_hash')}, now "
                            f"{psg.hash()}); pass --force to start again, or another -o")
        ew.extend_runs(desc, scales, repeat)
        wanted = [r for r in desc["runs"] if int(r["scale"]) in scales and int(r["rep"]) < repeat]
        todo = sum(r["status"] != ew.OK for r in wanted)
        print(f"scalgraph run: resuming {exp}: {len(wanted) - todo} of the runs asked for are done, {todo} to do",
              file=sys.stderr)
        ew.save(exp, desc)
        return desc
    elif exp.exists() and any(exp.iterdir()):
        raise UserError(f"{exp} exists and is not a scalgraph experiment; choose another -o directory")
    make_directory(exp)
    extra = {"mpiexec": launcher.mpiexec, "mpiexec_args": launcher.extra_args, "mpi_flavour": launcher.flavour,
             "host": socket.gethostname(), "cores": os.cpu_count(), "hz": args.hz}
    library = ", ".join(x for x in (launcher.version, launcher.library) if x) or launcher.mpiexec
    desc = ew.new_description(command, scales, repeat, psg, library, extra)
    ew.write_psg(exp, psg)
    ew.save(exp, desc)
    return desc


def make_directory(exp: pathlib.Path) -> None:
    try:
        exp.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise os_failure(e, f"cannot create the experiment directory {exp}", "choose another -o", {
            FileExistsError: "a file is in the way", NotADirectoryError: "part of its path is a file"}) from None
    if not os.access(exp, os.W_OK | os.X_OK):
        raise UserError(f"cannot write into the experiment directory {exp}: permission denied; choose another -o")


def run_all(exp: pathlib.Path, desc: dict, command, launcher, args, scales: list[int]) -> int:
    """Run what is asked for (-n, --repeat) and not done yet; runs of other scales stay as they are."""
    from scalgraph.io import experiment_write as ew
    wanted = [r for r in desc["runs"] if int(r["scale"]) in scales and int(r["rep"]) < args.repeat]
    todo = [r for r in wanted if r["status"] != ew.OK]
    note_oversubscription(todo, launcher)
    total = len(wanted)
    done = total - len(todo)
    for entry in todo:
        progress(done, total, entry, "running")
        try:
            run_one(exp, entry, command, launcher, args)
        finally:
            ew.save(exp, desc)   # also when interrupted: the entry is then "pending" and resumes later
        done += 1
        progress(done, total, entry, entry["status"])
    failed = [r for r in wanted if r["status"] != ew.OK]
    if failed:
        which = "; ".join(f"p={r['scale']} rep {r['rep']}: {r.get('error', 'failed')}" for r in failed)
        print(printable(f"scalgraph run: {len(failed)} of {total} runs failed ({which}); their output is in "
                        f"{exp}/scale-<p>/rep-<k>/stderr.txt; run the same command again to retry them"), file=sys.stderr)
        return 1
    from scalgraph.io.profile_file import fallback_note
    if note := fallback_note(exp / r["dir"] for r in wanted):
        print(f"scalgraph run: note: {note}", file=sys.stderr)
    print(f"scalgraph run: {total} run{'' if total == 1 else 's'} ok in {exp}; next: scalgraph detect {exp}",
          file=sys.stderr)
    return 0


def note_oversubscription(todo: list[dict], launcher) -> None:
    cores = os.cpu_count() or 1
    over = sorted({int(r["scale"]) for r in todo if int(r["scale"]) > cores})
    if not over:
        return
    from scalgraph.runtime.launch import oversubscription_env
    asked = ", ".join(f"{k}={v}" for k, v in oversubscription_env(launcher.flavour).items()) or "nothing"
    print(f"scalgraph run: note: p={','.join(map(str, over))} run more ranks than the {cores} cores; waiting ranks "
          f"are asked to yield ({asked}, unless set already); wall times will not shrink with p, per-rank CPU times still do",
          file=sys.stderr)


def progress(done: int, total: int, entry: dict, state: str) -> None:
    from scalgraph.io import experiment_write as ew
    width = 20
    filled = width * done // max(total, 1)
    tail = f" {entry['wall_time']:.2f} s" if state != "running" else ""
    if state == ew.FAILED:
        tail += f" ({entry.get('error')})"
    print(printable(f"scalgraph run: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}  "
                    f"p={entry['scale']} rep {entry['rep']}: {state}{tail}"), file=sys.stderr, flush=True)


def run_one(exp: pathlib.Path, entry: dict, command, launcher, args) -> None:
    """Run one scale/repetition; fill in status, exit code, wall time (and error) in `entry`."""
    from scalgraph.io import experiment_write as ew
    p = int(entry["scale"])
    out_dir = contained(exp, entry["dir"], f"{exp}/experiment.json")
    clear_run_dir(out_dir)
    env = launcher.environment(p)
    env["SCALGRAPH_OUT"] = str(out_dir)
    if args.hz is not None:
        env["SCALGRAPH_HZ"] = f"{args.hz:g}"
    if getattr(args, "trace", False):
        env["SCALGRAPH_TRACE"] = "1"
        if getattr(args, "trace_filter_ids", None) is not None:
            from scalgraph.io.trace_filter import write_id_file
            write_id_file(args.trace_filter_ids, out_dir / "trace-filter.ids")
            env["SCALGRAPH_TRACE_FILTER"] = str(out_dir / "trace-filter.ids")
    from scalgraph.runtime.placeholders import expand
    argv = command[:1] + expand(command[1:], p)
    entry.update(status=ew.PENDING, exit_code=None, wall_time=0.0, started=_now(), command=argv)
    entry.pop("error", None)
    start = time.monotonic()
    with _new_file(out_dir / "stdout.txt") as out, _new_file(out_dir / "stderr.txt") as err:
        proc = subprocess.Popen(launcher.command(p, argv), stdout=out, stderr=err, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = proc.wait(timeout=args.timeout if args.timeout > 0 else None)
        except subprocess.TimeoutExpired:
            stop(proc)
            code = None
        except BaseException:        # Ctrl-C: stop the ranks, leave the run pending for a resume
            stop(proc)
            entry["wall_time"] = round(time.monotonic() - start, 3)
            raise
    entry["wall_time"] = round(time.monotonic() - start, 3)
    entry["exit_code"] = code
    written = len(list(out_dir.glob("rank-*.sgp")))
    if code is None:
        entry.update(status=ew.FAILED, error=f"timed out after {args.timeout:g} s")
    elif code != 0:
        entry.update(status=ew.FAILED, error=f"exit code {code}{last_line(out_dir / 'stderr.txt')}")
    elif written != p:
        entry.update(status=ew.FAILED, error=f"{written} of {p} rank files written (a rank crashed, or the "
                                             "program was not linked with the scalgraph shim)")
    else:
        entry["status"] = ew.OK
        if getattr(args, "trace", False):
            convert_trace(out_dir, entry)


TRACE_FILE = "trace.sgtrace"


def convert_trace(out_dir: pathlib.Path, entry: dict) -> None:
    """The ranks' raw traces (rank-*.sgt) -> one checked trace file beside the profiles."""
    from scalgraph.io import experiment_write as ew
    from scalgraph.io.trace_shim import convert_shim_trace
    try:
        trace = convert_shim_trace(out_dir, out_dir / TRACE_FILE)   # removes the raw files: one copy
        m = trace.meta
        print(f"scalgraph run: p={entry['scale']} rep {entry['rep']}: trace of {m['raw_events']} events, "
              f"{m['raw_bytes'] / max(m['raw_events'], 1):.1f} bytes per event as recorded", file=sys.stderr)
    except UserError as e:
        entry.update(status=ew.FAILED, error=f"trace: {e}")


def clear_run_dir(out_dir: pathlib.Path) -> None:
    """Remove what an earlier, unfinished attempt of this run left (only files this tool writes)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise os_failure(e, f"cannot create the run directory {out_dir}") from None
    for f in (list(out_dir.glob("rank-*.sgp*")) + list(out_dir.glob("rank-*.sgt*")) +
              [out_dir / n for n in OUTPUT_FILES + ("trace.sgtrace", "trace-filter.ids")]):
        if f.is_symlink() or f.is_file():       # a link is removed, never followed
            f.unlink()


def _new_file(path: pathlib.Path):
    """A file this run creates (cleared before): never through a link planted since."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise os_failure(e, f"cannot create {path}") from None
    return os.fdopen(fd, "wb")


def stop(proc: subprocess.Popen) -> None:
    """Stop mpiexec and every rank it started (its own session)."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def last_line(path: pathlib.Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f": {lines[-1][:200]}" if lines else ""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
