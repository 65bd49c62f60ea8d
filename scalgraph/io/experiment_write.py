"""Writing experiment directories as `scalgraph run` goes, so that an interrupted experiment can resume.

The layout and the reader are in scalgraph/io/experiment.py; this module keeps experiment.json up to
date after every run (write-then-rename, so a crash never leaves half a file) and reopens an
experiment for resuming.
"""
from __future__ import annotations

import datetime
import pathlib

from scalgraph.errors import UserError
from scalgraph.io.experiment import FORMAT, VERSION
from scalgraph.io.safe_read import contained, load_json_file
from scalgraph.io.safe_write import write_json_atomic
from scalgraph.model.psg import PSG

OK, FAILED, PENDING = "ok", "failed", "pending"


def run_dir_name(scale: int, rep: int) -> str:
    return f"scale-{scale}/rep-{rep}"


def new_description(command: list[str], scales: list[int], repeat: int, psg: PSG, mpi_library: str,
                    extra: dict | None = None) -> dict:
    """experiment.json for a new experiment: every run pending."""
    runs = [{"scale": p, "rep": k, "status": PENDING, "wall_time": 0.0, "exit_code": None,
             "dir": run_dir_name(p, k)} for p in scales for k in range(repeat)]
    return {"format": FORMAT, "version": VERSION, "command": list(command), "scales": list(scales),
            "repeat": repeat, "psg_hash": psg.hash(), "mpi_library": mpi_library,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            **(extra or {}), "runs": runs}


def extend_runs(desc: dict, scales: list[int], repeat: int) -> dict:
    """Add pending entries for scale/repetition pairs the description does not have yet (resume with
    more scales or repetitions).  Existing entries, finished or not, are kept."""
    have = {(int(r["scale"]), int(r["rep"])) for r in desc["runs"]}
    for p in scales:
        for k in range(repeat):
            if (p, k) not in have:
                desc["runs"].append({"scale": p, "rep": k, "status": PENDING, "wall_time": 0.0,
                                     "exit_code": None, "dir": run_dir_name(p, k)})
    desc["runs"].sort(key=lambda r: (int(r["scale"]), int(r["rep"])))
    desc["scales"] = sorted({int(r["scale"]) for r in desc["runs"]})
    desc["repeat"] = max(int(desc.get("repeat", 1)), repeat)
    return desc


def save(exp: pathlib.Path, desc: dict) -> None:
    write_json_atomic(exp / "experiment.json", desc)


def write_psg(exp: pathlib.Path, psg: PSG) -> None:
    write_json_atomic(exp / "psg.json", psg.to_dict())


def load_for_resume(exp: pathlib.Path) -> dict:
    """The description of an existing experiment, checked enough to continue it safely: every run
    entry's scale and repetition are whole numbers and its directory is the one this tool names
    (a forged "dir" must never make a resume delete or write files elsewhere)."""
    path = exp / "experiment.json"
    if not path.exists() and not path.is_symlink():
        raise UserError(f"{exp} exists but is not a scalgraph experiment (no experiment.json); "
                        "choose another -o directory, or pass --force to replace it")
    try:
        desc = load_json_file(path, "experiment description")
    except UserError as e:
        raise UserError(f"{e}; pass --force to start the experiment again") from None
    if not isinstance(desc, dict) or desc.get("format") != FORMAT or not isinstance(desc.get("runs"), list):
        raise UserError(f"{path} is not a scalgraph experiment description; pass --force to start again")
    if type(desc.get("version")) is not int or desc.get("version") != VERSION:
        raise UserError(f"{path} has version {desc.get('version')!r}, this scalgraph writes {VERSION}; "
                        "pass --force to start again")
    for r in desc["runs"]:
        if not isinstance(r, dict) or not {"scale", "rep", "status", "dir"} <= r.keys():
            raise UserError(f"{path} has a malformed run entry {str(r)[:80]}; pass --force to start again")
        scale, rep = r["scale"], r["rep"]
        if type(scale) is not int or type(rep) is not int or not 1 <= scale <= 1 << 24 or not 0 <= rep < 1 << 20:
            raise UserError(f"{path} has a run entry with scale {scale!r} and repetition {rep!r} (whole numbers "
                            "expected); pass --force to start again")
        if r["dir"] != run_dir_name(scale, rep):
            raise UserError(f"{path}: the run p={scale} rep {rep} names the directory {str(r['dir'])[:80]!r}, not "
                            f"{run_dir_name(scale, rep)!r}; refusing to write there (pass --force to start again)")
        contained(exp, r["dir"], str(path))
    return desc
