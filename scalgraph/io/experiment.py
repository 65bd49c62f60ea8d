"""Experiment directories: what `scalgraph run` writes and `scalgraph detect` reads.

  EXP/experiment.json   {"format": "scalgraph-experiment", "version": 1, "command": [...], "scales": [...],
                         "repeat": K, "psg_hash": "...", "mpi_library": "...", "created": iso-time,
                         "runs": [{"scale": p, "rep": k, "status": "ok"|"failed"|"pending",
                                   "wall_time": s, "exit_code": n, "dir": "scale-<p>/rep-<k>",
                                   "command": [...]}]}      (the run's command, {p} {px} {py} {pz} expanded)
  EXP/psg.json          the executable's PSG (PSG.to_dict())
  EXP/scale-<p>/rep-<k>/rank-<r>.sgp   per-rank profile files written by the shim

Only runs with status "ok" are read.  Several repetitions of one scale are merged element-wise by
their median; the dependence rows come from the repetition with the median run time; each
repetition's mean time per vertex is kept (RunProfile.rep_mean_time) for the spread between them.  Profiles are
read lazily, one scale at a time (nothing cached), and checked against the PSG hash so that a profile can never be
analysed against another build's graph.
"""
from __future__ import annotations

import datetime
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from scalgraph.errors import UserError
from scalgraph.io.safe_read import contained, load_json_file, psg_checked
from scalgraph.io.safe_write import write_json_atomic
from scalgraph.model.profile import RunProfile
from scalgraph.model.psg import PSG

FORMAT = "scalgraph-experiment"
VERSION = 1
RERUN = "rerun `scalgraph run -n 2,4,8 -o EXP -- ./app`"


@dataclass
class Experiment:
    path: pathlib.Path
    meta: dict
    psg: PSG
    run_dirs: dict[int, list[pathlib.Path]]           # scale -> directories of its "ok" repetitions
    read_run: Callable[[pathlib.Path], RunProfile]
    warnings: list[str] = field(default_factory=list)   # things the report should mention, found while reading

    @property
    def scales(self) -> list[int]:
        return sorted(self.run_dirs)

    def profile(self, scale: int) -> RunProfile:
        """Read (and check) one scale now, merging its repetitions; nothing is cached."""
        if scale not in self.run_dirs:
            raise UserError(f"{self.path} has no successful run at {scale} processes (scales: {self.scales})")
        return median_of_repetitions([self._read_checked(scale, d) for d in self.run_dirs[scale]])

    def profiles(self) -> "LazyProfiles":
        """scale -> RunProfile, read when looked up, so only one scale is in memory at a time."""
        return LazyProfiles(self)

    def _note_partial(self, where, prof: RunProfile) -> None:
        for note in _partial_notes(where, prof.meta):
            if note not in self.warnings:
                self.warnings.append(note)

    def _read_checked(self, scale: int, run_dir: pathlib.Path) -> RunProfile:
        where = run_dir.relative_to(self.path) if run_dir.is_relative_to(self.path) else run_dir
        if not run_dir.is_dir():
            raise UserError(f"{self.path}: run directory {where} is missing; {RERUN}")
        try:
            prof = self.read_run(run_dir)
        except UserError:
            raise
        except (OSError, ValueError, KeyError, IndexError) as e:
            raise UserError(f"{where}: cannot read the profile files ({e}); the run may have crashed, rerun it") from None
        expected = self.psg.hash()
        if prof.psg_hash != expected:
            raise UserError(f"{where}: profile was recorded with PSG {prof.psg_hash or '(none)'} but {self.path}/psg.json "
                            f"is {expected}: it comes from another build of the program; {RERUN} with the current executable")
        if prof.nvertices != len(self.psg):
            raise UserError(f"{where}: profile has {prof.nvertices} vertices, the PSG has {len(self.psg)}; {RERUN}")
        missing = prof.meta.get("missing_ranks") or []
        if missing:
            shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
            raise UserError(f"{where}: no profile file from rank{'s' if len(missing) > 1 else ''} {shown} "
                            f"(crashed or killed); {RERUN}")
        self._note_partial(where, prof)
        if prof.nranks != scale:
            raise UserError(f"{where}: {prof.nranks} ranks recorded for a run at {scale} processes "
                            f"(a rank crashed or its file is missing); {RERUN}")
        return prof


class LazyProfiles(Mapping):
    def __init__(self, exp: Experiment):
        self._exp = exp

    def __getitem__(self, scale: int) -> RunProfile:
        return self._exp.profile(scale)

    def __iter__(self):
        return iter(self._exp.scales)

    def __len__(self) -> int:
        return len(self._exp.scales)


def _partial_notes(where, meta: dict) -> list[str]:
    notes = []
    written = [w for w in meta.get("written_by") or [] if w not in (None, "finalize")]
    if written:
        notes.append(f"{where}: {len(written)} rank(s) wrote their profile at {'/'.join(sorted(set(written)))}, "
                     "not at MPI_Finalize: their data may be partial")
    if meta.get("sampling_off_ranks"):
        notes.append(f"{where}: sampling was off on ranks {meta['sampling_off_ranks'][:8]}: computation there is not measured")
    if meta.get("sampler") == "itimer":
        notes.append(f"{where}: sampled with the ITIMER_PROF fallback ({meta.get('hz', 0):.0f} samples per CPU second): "
                     "perf events were not available; sampled times are tick-biased")
    if meta.get("deps_dropped"):
        notes.append(f"{where}: {meta['deps_dropped']} communication dependence records were dropped (table full): "
                     "some inter-process edges are missing")
    return notes


def median_of_repetitions(reps: list[RunProfile]) -> RunProfile:
    if len(reps) == 1:
        return reps[0]
    med = lambda name: np.median(np.stack([getattr(r, name) for r in reps]), axis=0)  # noqa: E731
    totals = [float(r.time.sum(axis=1).max()) for r in reps]
    typical = reps[int(np.argsort(totals)[len(totals) // 2])]
    counters = {k: np.median(np.stack([r.counters[k] for r in reps]), axis=0)
                for k in typical.counters if all(k in r.counters for r in reps)}
    return RunProfile(typical.nranks, typical.nvertices, typical.psg_hash, med("time"),
                      np.rint(med("samples")).astype(np.int64), np.rint(med("calls")).astype(np.int64),
                      med("wait"), typical.deps, dict(typical.comm_members), counters,
                      {**typical.meta, "repetitions": len(reps), "wall_time": float(np.median(totals))},
                      comp_wall=med("comp_wall"), comp_cpu=med("comp_cpu"), mpi_cpu=med("mpi_cpu"),
                      rep_mean_time=np.stack([r.time.mean(axis=0) if r.nranks else np.zeros(r.nvertices) for r in reps]),
                      threads=typical.threads)


def _default_read_run(run_dir: pathlib.Path) -> RunProfile:
    from scalgraph.io.profile_file import read_run   # written by the shim side; imported when needed
    return read_run(run_dir)


def _load_json(path: pathlib.Path, what: str) -> dict:
    if not path.exists() and not path.is_symlink():
        raise UserError(f"{path.parent} is not a scalgraph experiment (no {path.name}); {RERUN}")
    data = load_json_file(path, what)
    if not isinstance(data, dict):
        raise UserError(f"{path} does not hold a {what}; {RERUN}")
    return data


def read_experiment(path, read_run: Callable[[pathlib.Path], RunProfile] | None = None) -> Experiment:
    exp = pathlib.Path(path)
    if not exp.exists():
        raise UserError(f"{exp}: no such experiment directory; create one with `scalgraph run -n 2,4,8 -o {exp} -- ./app`")
    if not exp.is_dir():
        raise UserError(f"{exp} is a file, not an experiment directory; pass the directory `scalgraph run -o` wrote")
    meta = _load_json(exp / "experiment.json", "experiment description")
    if meta.get("format") != FORMAT:
        raise UserError(f"{exp}/experiment.json is not a scalgraph experiment description (format tag missing)")
    check_version(meta, exp / "experiment.json")
    psg_data = _load_json(exp / "psg.json", "Program Structure Graph")
    psg = psg_checked(psg_data, exp / "psg.json")
    actual = psg.hash()
    for where, claimed in (("psg.json", psg_data.get("hash")), ("experiment.json", meta.get("psg_hash"))):
        if claimed and claimed != actual:
            raise UserError(f"{exp}/{where} names PSG {claimed} but psg.json holds {actual}: the files come from "
                            f"different builds; {RERUN}")
    run_dirs: dict[int, list[pathlib.Path]] = {}
    runs = meta.get("runs")
    if not isinstance(runs, list):
        raise UserError(f"{exp}/experiment.json has no list of runs; {RERUN}")
    for run in runs:
        try:
            scale, status = _whole(run["scale"]), run["status"]
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{exp}/experiment.json has a malformed run entry {run!r}; {RERUN}") from None
        if status != "ok":
            continue
        d = contained(exp, run["dir"], f"{exp}/experiment.json")
        run_dirs.setdefault(scale, []).append(d)
    if not run_dirs:
        states = ", ".join(sorted({str(r.get("status")) for r in runs if isinstance(r, dict)})) or "none recorded"
        raise UserError(f"{exp} has no successful runs (run states: {states}); {RERUN}")
    return Experiment(exp.resolve(), meta, psg, run_dirs, read_run or _default_read_run)


def check_version(meta: dict, path) -> None:
    version = meta.get("version")
    if type(version) is not int or version != VERSION:
        raise UserError(f"{path} has version {version!r} (a {type(version).__name__}); this scalgraph reads "
                        f"version {VERSION} (the whole number): {RERUN} with this scalgraph")


def _whole(x) -> int:
    """A count from a JSON file: a whole number, never a bool, float or string."""
    if type(x) is not int or x < 1 or x > 1 << 24:
        raise ValueError(x)
    return x


def write_experiment(path, psg: PSG, command: list[str], runs: list[dict], repeat: int = 1,
                     mpi_library: str = "") -> pathlib.Path:
    """Write experiment.json and psg.json (the rank files are written by the shim during the runs)."""
    exp = pathlib.Path(path)
    exp.mkdir(parents=True, exist_ok=True)
    write_json_atomic(exp / "psg.json", psg.to_dict())
    meta = {"format": FORMAT, "version": VERSION, "command": list(command),
            "scales": sorted({int(r["scale"]) for r in runs}), "repeat": repeat, "psg_hash": psg.hash(),
            "mpi_library": mpi_library, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "runs": runs}
    write_json_atomic(exp / "experiment.json", meta)
    return exp


def run_entry(scale: int, rep: int = 0, status: str = "ok", wall_time: float = 0.0, exit_code: int = 0) -> dict:
    return {"scale": scale, "rep": rep, "status": status, "wall_time": wall_time, "exit_code": exit_code,
            "dir": f"scale-{scale}/rep-{rep}"}
