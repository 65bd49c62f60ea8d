"""Writing experiment directories as `scalgraph run` goes, so that an interrupted experiment can resume.

The layout and the reader are in scalgraph/io/experiment.py; this module keeps experiment.json up to
date after every run (write-then-rename, so a crash never leaves half a file) and reopens an
experiment for resuming.
"""
from __future__ import annotations

import datetime
import json
import pathlib

from scalgraph.errors import UserError
from scalgraph.io.experiment import FORMAT, VERSION, write_json_atomic
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
    """The description of an existing experiment, checked enough to continue it safely."""
    path = exp / "experiment.json"
    try:
        desc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{exp} exists but is not a scalgraph experiment (no experiment.json); "
                        "choose another -o directory, or pass --force to replace it") from None
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{path} cannot be read ({e}); pass --force to start the experiment again") from None
    if not isinstance(desc, dict) or desc.get("format") != FORMAT or not isinstance(desc.get("runs"), list):
        raise UserError(f"{path} is not a scalgraph experiment description; pass --force to start again")
    if desc.get("version") != VERSION:
        raise UserError(f"{path} has version {desc.get('version')}, this scalgraph writes {VERSION}; pass --force to start again")
    for r in desc["runs"]:
        if not isinstance(r, dict) or not {"scale", "rep", "status", "dir"} <= r.keys():
            raise UserError(f"{path} has a malformed run entry {r!r}; pass --force to start again")
    return desc
