"""Trace mode end to end on the samples with known injected delays: build with the compile wrapper,
`scalgraph run --trace -n 4`, `scalgraph trace --json EXP/scale-4/rep-0`, and check the report names
the injected cause (samples/*/expected.json); the traced run prints what the plain build prints; an
OTF2 export of the recorded trace gives the identical report.  For cg, zeusmp, stencil2d and
masterworker, traced at 2, 4 and 8 ranks: `scalgraph detect` (with the trace's wait states as
evidence) and `scalgraph trace` (delay costs) both name the planted loop first, and the trace
report names every MPI call path by its own line and PSG vertex."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from test_e2e_samples import build_plain, build_with_wrapper, expected, require_parts, within

P = 4


def scalgraph(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """name -> (work dir, run dir of the traced 4-rank run, plain executable); built and run once."""
    done = {}

    def get(name: str):
        if name not in done:
            require_parts(name)
            out = tmp_path_factory.mktemp(f"trace-{name}")
            exe = build_with_wrapper(name, out)
            exp = out / "exp"
            res = scalgraph("run", "--trace", "-n", str(P), "-o", str(exp), "--", str(exe), cwd=out)
            assert res.returncode == 0, f"scalgraph run --trace failed:\n{res.stderr}"
            done[name] = (out, exp / f"scale-{P}" / "rep-0", exe)
        return done[name]
    return get


def report(run_dir: pathlib.Path, cwd: pathlib.Path, *extra: str) -> dict:
    res = scalgraph("trace", "--json", *extra, str(run_dir), cwd=cwd)
    assert res.returncode == 0, f"scalgraph trace failed:\n{res.stderr}"
    return json.loads(res.stdout)


def line_of(where: str) -> tuple[str, int]:
    """'/path/cg.c:21 [vertex 18]' -> ('cg.c', 21)"""
    loc = where.split(" [")[0]
    file, _, line = loc.rpartition(":")
    return pathlib.Path(file).name, int(line)


def user_code(cause: dict) -> bool:
    """A root cause in the program's own code: the innermost region is not an MPI routine."""
    return not cause["callpath"].rsplit("/", 1)[-1].startswith("MPI_")


def test_cg_injected_delay_is_the_top_user_code_root_cause(traced):
    out, run_dir, _ = traced("cg")
    rc = expected("cg")["root_cause"]
    causes = report(run_dir, out)["delay"]["root_causes"]
    assert causes, "no delay root causes in the cg trace"
    mine = [c for c in causes if user_code(c)]
    file, line = line_of(mine[0]["where"])
    listing = "\n".join(f"  {c['callpath']} {c['where']} {c['seconds']:.3f}s" for c in causes[:5])
    assert file == rc["file"] and rc["lines"][0] <= line <= rc["lines"][-1], (
        f"expected {rc['file']}:{rc['line']} as the top root cause in user code, got:\n{listing}")
    assert mine[0]["ranks"]["max_rank"] == P // 2, f"the audit runs on rank {P // 2}:\n{listing}"
    # it is one of the two largest causes overall and explains a large share of all waiting
    assert mine[0] in causes[:2], listing
    assert mine[0]["percent_of_waiting"] > 20.0, listing


def test_rma_late_post_found_on_the_right_rank(traced):
    out, run_dir, _ = traced("rma")
    want = expected("rma")
    tr = want["trace"]
    rep = report(run_dir, out)
    late_posts = [i for i in rep["instances"] if i["pattern"] == "Late Post"]
    assert late_posts, "no Late Post instance in the RMA trace"
    worst = late_posts[0]
    assert worst["rank"] == tr["waiting_rank_at_4"] and worst["causer"] == tr["late_rank_at_4"], worst
    early_waits = [i for i in rep["instances"] if i["pattern"] == "Early Wait"]
    assert early_waits and early_waits[0]["rank"] == tr["early_wait_rank_at_4"], early_waits[:1]
    top = rep["delay"]["root_causes"][0]
    file, line = line_of(top["where"])
    rc = want["root_cause"]
    assert file == rc["file"] and rc["lines"][0] <= line <= rc["lines"][-1], top
    assert top["ranks"]["max_rank"] == tr["late_rank_at_4"], top


def test_traced_output_equals_plain_output(traced):
    out, run_dir, _ = traced("cg")
    plain = build_plain("cg", out)
    from scalgraph.runtime.launch import find_launcher
    launcher = find_launcher(str(plain))
    ref = subprocess.run(launcher.command(P, [str(plain)]), env=launcher.environment(P), capture_output=True,
                         text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    assert (run_dir / "stdout.txt").read_text() == ref.stdout


def test_otf2_export_gives_the_identical_report(traced):
    from conftest import require_tool
    import importlib.util
    require_tool(importlib.util.find_spec("otf2") is not None, "no otf2 (pip install otf2)")
    from scalgraph.io.trace_read import read_trace, write_trace
    out, run_dir, _ = traced("cg")
    anchor = out / "otf2-export" / "traces.otf2"
    anchor.parent.mkdir()
    write_trace(read_trace(run_dir / "trace.sgtrace"), anchor, "otf2")
    a = report(run_dir, out)
    b = report(anchor, out)
    a.pop("source"), b.pop("source")
    assert a == b


def test_detect_uses_the_trace_wait_states(tmp_path):
    """`scalgraph detect` on a traced experiment weights the dependence edges with the replay's wait
    states, says so (text note and JSON field), and still names the injected loop."""
    require_parts("cg")
    rc = expected("cg")["root_cause"]
    exe = build_with_wrapper("cg", tmp_path)
    exp = tmp_path / "exp"
    res = scalgraph("run", "--trace", "-n", "2,4", "-o", str(exp), "--", str(exe), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    det = scalgraph("detect", "--json", str(exp), cwd=tmp_path)
    assert det.returncode == 0, det.stderr
    rep = json.loads(det.stdout)
    assert rep["evidence"]["waiting"] == "trace" and rep["evidence"]["scale"] == 4
    top = rep["root_causes"][0]
    assert pathlib.Path(top["file"]).name == rc["file"] and rc["lines"][0] <= top["line"] <= rc["lines"][-1], top
    assert top["rank"] == 2
    text = scalgraph("detect", str(exp), cwd=tmp_path)
    assert "exact wait states from the trace replay" in text.stdout


def test_detect_without_traces_says_it_used_the_profiles(tmp_path):
    require_parts("cg")
    exe = build_with_wrapper("cg", tmp_path)
    exp = tmp_path / "exp"
    assert scalgraph("run", "-n", "2", "-o", str(exp), "--", str(exe), "2", cwd=tmp_path).returncode == 0
    det = scalgraph("detect", "--json", str(exp), cwd=tmp_path)
    assert json.loads(det.stdout)["evidence"] == {"waiting": "profile"}


# --- the planted loop, named first in both trace-mode analyses -------------------------------------

PLANTED = ["cg", "zeusmp", "stencil2d", "masterworker"]


@pytest.fixture(scope="module")
def traced_scales(tmp_path_factory):
    """name -> (work dir, experiment traced at the sample's scales (2, 4, 8)); built and run once."""
    done = {}

    def get(name: str):
        if name not in done:
            require_parts(name)
            out = tmp_path_factory.mktemp(f"trace-scales-{name}")
            exe = build_with_wrapper(name, out)
            exp = out / "exp"
            scales = ",".join(map(str, expected(name)["scales"]))
            res = scalgraph("run", "--trace", "-n", scales, "-o", str(exp), "--", str(exe), cwd=out)
            assert res.returncode == 0, f"scalgraph run --trace failed:\n{res.stderr}"
            done[name] = (out, exp)
        return done[name]
    return get


def largest_run(exp: pathlib.Path) -> tuple[int, pathlib.Path]:
    p = max(int(d.name.split("-")[1]) for d in exp.glob("scale-*"))
    return p, exp / f"scale-{p}" / "rep-0"


@pytest.mark.parametrize("name", PLANTED)
def test_detect_with_traces_names_the_planted_loop(name, traced_scales):
    out, exp = traced_scales(name)
    rc = expected(name)["root_cause"]
    det = scalgraph("detect", "--json", str(exp), cwd=out)
    assert det.returncode == 0, det.stderr
    rep = json.loads(det.stdout)
    assert rep["evidence"]["waiting"] == "trace", rep["evidence"]
    causes = rep["root_causes"]
    listing = "\n".join(f"  {c['file']}:{c['line']} {c.get('name', '')} rank {c.get('rank')}" for c in causes[:5])
    assert causes and pathlib.Path(causes[0]["file"]).name == rc["file"] and within(causes[0], rc["lines"]), (
        f"{name}: expected {rc['file']}:{rc['lines']} first, got:\n{listing}")


@pytest.mark.parametrize("name", PLANTED)
def test_trace_delay_costs_name_the_planted_loop_first(name, traced_scales):
    """The root cause of waiting with the largest delay cost is the planted computation, on a rank
    that runs it, and it explains most of the waiting; no MPI call is charged as a delay."""
    out, exp = traced_scales(name)
    rc = expected(name)["root_cause"]
    p, run_dir = largest_run(exp)
    causes = report(run_dir, out)["delay"]["root_causes"]
    listing = "\n".join(f"  {c['callpath']} {c['where']} {c['percent_of_waiting']:.0f}%" for c in causes[:5])
    assert causes, f"{name}: no delay root causes"
    file, line = line_of(causes[0]["where"])
    assert file == rc["file"] and rc["lines"][0] <= line <= rc["lines"][-1], f"{name} at p={p}:\n{listing}"
    if p == 8 and "ranks_at_8" in rc:
        assert causes[0]["ranks"]["max_rank"] in rc["ranks_at_8"], listing
    planted = sum(c["percent_of_waiting"] for c in causes
                  if line_of(c["where"])[0] == rc["file"] and rc["lines"][0] <= line_of(c["where"])[1] <= rc["lines"][-1])
    assert planted > 50.0, f"{name}: the planted loop explains only {planted:.0f}% of the waiting:\n{listing}"
    assert all(user_code(c) for c in causes), f"{name}: an MPI call charged as a delay:\n{listing}"


@pytest.mark.parametrize("name", PLANTED)
def test_trace_report_names_mpi_call_paths_by_their_own_line_and_vertex(name, traced_scales):
    from scalgraph.model.psg import psg_from_dict
    out, exp = traced_scales(name)
    psg = psg_from_dict(json.loads((exp / "psg.json").read_text()))
    _, run_dir = largest_run(exp)
    rep = report(run_dir, out)
    mpi = [c for p in rep["patterns"] for c in p["callpaths"] if not user_code(c)]
    mpi += [i for i in rep["instances"]]
    assert mpi, f"{name}: no MPI call path in the report"
    for c in mpi:
        routine = c["callpath"].rsplit("/", 1)[-1]
        vertex = int(c["where"].rsplit("[vertex ", 1)[1].rstrip("]"))
        file, line = line_of(c["where"])
        assert psg.kind_name(vertex) == "MPI" and psg.name[vertex] == routine, (c, psg.location(vertex))
        assert line == psg.line_first[vertex] and file == pathlib.Path(psg.file[vertex]).name, c


@pytest.mark.parametrize("name", PLANTED)
def test_trace_evidence_never_turns_waiting_into_own_time(name, traced_scales):
    """On the real runs: with the trace's wait states every MPI vertex waits at least as long as the
    profile measured, so its own time (time - waiting) is never larger than in profile mode, and each
    (rank, vertex)'s dependence rows keep at least the profile's waiting."""
    from scalgraph.commands.detect import with_trace_evidence
    from scalgraph.io.experiment import read_experiment
    _, exp_dir = traced_scales(name)
    exp = read_experiment(exp_dir)
    merged, evidence = with_trace_evidence(exp)
    assert evidence["waiting"] == "trace" and evidence["traced_scales"] == exp.scales
    assert evidence["wait_states"] > 0
    for p in exp.scales:
        prof, out = exp.profiles()[p], merged[p]
        assert np.all(out.wait >= prof.wait)
        assert np.all(np.maximum(out.time - out.wait, 0) <= np.maximum(prof.time - prof.wait, 0) + 1e-12)
        assert np.array_equal(out.time, prof.time) and np.array_equal(out.deps[["rank", "vertex", "peer"]],
                                                                      prof.deps[["rank", "vertex", "peer"]])
        site = prof.deps["rank"].astype(np.int64) * prof.nvertices + prof.deps["vertex"]
        before = np.bincount(site, weights=prof.deps["wait"])
        after = np.bincount(site, weights=out.deps["wait"])
        assert np.all(after >= before - 1e-9), f"{name} at p={p}: a dependence site lost waiting"
