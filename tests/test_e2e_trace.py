"""Trace mode end to end on the samples with known injected delays: build with the compile wrapper,
`scalgraph run --trace` at the sample's scales (each sample built and run once per module),
`scalgraph trace --json EXP/scale-4/rep-0`, and check the report names the injected cause
(samples/*/expected.json); the traced run prints what the plain build prints; an OTF2 export of the
recorded trace gives the identical report.  For cg, zeusmp, stencil2d, masterworker and sweep
(Fortran), traced at 2, 4 and 8 ranks: `scalgraph detect` (with the trace's wait states as evidence)
and `scalgraph trace` (its verdict, `root_causes`) both name the planted loop first, and the trace
report names every MPI call path by its own line and PSG vertex.  The balanced sample, traced at 2, 4
and 8 ranks on this (oversubscribed) machine, waits and so has delay costs, but its verdict is empty
at every scale."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from test_e2e_samples import build_plain, expected, within

P = 4


def scalgraph(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def traced_scales(tmp_path_factory, wrapped_sample):
    """name -> (work dir, experiment traced at the sample's scales (2, 4, 8), executable); run once
    per module, shared by every test of the sample."""
    done = {}

    def get(name: str):
        if name not in done:
            exe = wrapped_sample(name)
            out = tmp_path_factory.mktemp(f"trace-{name}")
            exp = out / "exp"
            scales = ",".join(map(str, expected(name)["scales"]))
            res = scalgraph("run", "--trace", "-n", scales, "-o", str(exp), "--", str(exe), cwd=out)
            assert res.returncode == 0, f"scalgraph run --trace failed:\n{res.stderr}"
            done[name] = (out, exp, exe)
        return done[name]
    return get


@pytest.fixture(scope="module")
def traced(traced_scales):
    """name -> (work dir, run dir of the traced 4-rank run, plain executable)."""
    def get(name: str):
        out, exp, exe = traced_scales(name)
        return out, exp / f"scale-{P}" / "rep-0", exe
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


def verdict_listing(rep: dict) -> str:
    rows = [f"  verdict {c['where']} {c['seconds']:.3f}s ({c['percent']:.1f} %, rank {c['rank']}, "
            + (f"grows with p: {c['scaling']})" if c.get("kind") == "communication" else f"real work {c['real_work']:.2f})")
            for c in rep["root_causes"][:5]]
    rows += [f"  table {c['kind']} {c['callpath']} {c['where']} {c['seconds']:.3f}s"
             for c in rep["delay"]["root_causes"][:5]]
    return "\n".join(rows + [f"  note: {n}" for n in rep["notes"]])


def on_lines(cause: dict, rc: dict) -> bool:
    return pathlib.Path(cause["file"]).name == rc["file"] and rc["lines"][0] <= cause["line"] <= rc["lines"][-1]


def test_cg_injected_delay_is_the_verdict(traced):
    """The verdict names the audit loop, on the rank that runs it, checked against the run's thread-CPU
    profile; the delay table under it also lists communication, marked as such."""
    out, run_dir, _ = traced("cg")
    rc = expected("cg")["root_cause"]
    rep = report(run_dir, out)
    listing = verdict_listing(rep)
    assert rep["problem_found"] and rep["cpu_checked"], listing
    top = rep["root_causes"][0]
    assert on_lines(top, rc), f"expected {rc['file']}:{rc['line']} as the first root cause:\n{listing}"
    assert top["rank"] == P // 2, f"the audit runs on rank {P // 2}:\n{listing}"
    assert top["share"] >= rep["min_share"] and top["seconds"] <= top["delay_seconds"] + 1e-9, listing
    kinds = {c["kind"] for c in rep["delay"]["root_causes"]}
    assert kinds <= {"computation", "communication"} and all(
        (c["kind"] == "communication") == (not user_code(c)) for c in rep["delay"]["root_causes"]), listing


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
    rc = want["root_cause"]
    assert rep["root_causes"], verdict_listing(rep)
    top = rep["root_causes"][0]
    assert on_lines(top, rc), verdict_listing(rep)
    assert top["rank"] == tr["late_rank_at_4"], verdict_listing(rep)


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
    # the run directory has the profiles that check the verdict for real work; the export alone has not
    assert a.pop("cpu_checked") is True and b.pop("cpu_checked") is False
    assert any(n.startswith("no thread-CPU profile used") for n in b["notes"])
    verdicts = {k: (a.pop(k), b.pop(k)) for k in ("root_causes", "problem_found", "notes")}
    checked, unchecked = ({c["where"]: c["seconds"] for c in v} for v in verdicts["root_causes"])
    # capping only lowers
    assert checked and all(w in unchecked and x <= unchecked[w] + 1e-9 for w, x in checked.items())
    assert a == b


def test_detect_uses_the_trace_wait_states(tmp_path, wrapped_sample):
    """`scalgraph detect` on a traced experiment weights the dependence edges with the replay's wait
    states, says so (text note and JSON field), and still names the injected loop."""
    rc = expected("cg")["root_cause"]
    exe = wrapped_sample("cg")
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


def test_detect_without_traces_says_it_used_the_profiles(tmp_path, wrapped_sample):
    exe = wrapped_sample("cg")
    exp = tmp_path / "exp"
    assert scalgraph("run", "-n", "2", "-o", str(exp), "--", str(exe), "2", cwd=tmp_path).returncode == 0
    det = scalgraph("detect", "--json", str(exp), cwd=tmp_path)
    assert json.loads(det.stdout)["evidence"] == {"waiting": "profile"}


# --- the planted loop, named first in both trace-mode analyses -------------------------------------

PLANTED = ["cg", "zeusmp", "stencil2d", "masterworker", "sweep"]   # sweep: Fortran


def largest_run(exp: pathlib.Path) -> tuple[int, pathlib.Path]:
    p = max(int(d.name.split("-")[1]) for d in exp.glob("scale-*"))
    return p, exp / f"scale-{p}" / "rep-0"


@pytest.mark.parametrize("name", PLANTED)
def test_detect_with_traces_names_the_planted_loop(name, traced_scales):
    out, exp, _ = traced_scales(name)
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
def test_trace_verdict_names_the_planted_loop_first(name, traced_scales):
    """At the largest traced scale (8 ranks), the first root cause of the verdict is the planted
    computation, on a rank that runs it, checked against the thread-CPU profile; at the smaller
    scales the planted delay may stay below 5 % of the total time (zeusmp's at 2 ranks), but whatever
    the verdict names first is the planted loop.  No MPI call is a verdict cause; the delay table keeps
    the communication delays, marked as such, and adds up to the waiting time."""
    out, exp, _ = traced_scales(name)
    rc = expected(name)["root_cause"]
    scales = expected(name)["scales"]
    for p in scales:
        rep = report(exp / f"scale-{p}" / "rep-0", out)
        listing = f"{name} at p={p}:\n{verdict_listing(rep)}"
        assert rep["cpu_checked"], listing
        if p == max(scales):
            assert rep["problem_found"], listing
        if rep["root_causes"]:
            top = rep["root_causes"][0]
            assert on_lines(top, rc), listing
            if p == 8 and "ranks_at_8" in rc:
                assert top["rank"] in rc["ranks_at_8"], listing
        # an MPI call is a verdict cause only as communication whose own cost grows with p (detect's rule)
        assert all(c["callpaths"][0].rsplit("/", 1)[-1].startswith("MPI_") == (c.get("kind") == "communication")
                   for c in rep["root_causes"]), listing
        assert all((c["kind"] == "communication") == (not user_code(c)) for c in rep["delay"]["root_causes"]), listing
        total = sum(c["seconds"] for c in rep["delay"]["root_causes"]) + rep["delay"]["classification"]["unexplained"]
        assert total == pytest.approx(rep["delay"]["classification"]["waiting_time"], rel=1e-6), listing


def test_trace_verdict_names_a_collective_that_grows_with_p(traced_scales):
    """samples/alltoall: the MPI_Alltoall whose bytes per rank double with p.  One trace cannot tell
    growth with p, so at the largest scale of a traced experiment the verdict judges the experiment's
    profiles by detect's rule: the Alltoall is the first cause, as communication, with the bytes per
    rank measured at each scale; at a smaller scale (not the experiment's largest) nothing is judged
    so, and a lone trace file outside an experiment gets no such cause either."""
    out, exp, _ = traced_scales("alltoall")
    rc = expected("alltoall")["root_cause"]
    scales = expected("alltoall")["scales"]
    rep = report(exp / f"scale-{max(scales)}" / "rep-0", out)
    listing = f"alltoall at p={max(scales)}:\n{verdict_listing(rep)}"
    assert rep["problem_found"] and rep["root_causes"], listing
    top = rep["root_causes"][0]
    assert on_lines(top, rc) and top["kind"] == "communication", listing
    assert top["callpaths"][0].endswith("MPI_Alltoall") and top["scaling"]["scales"] == scales, listing
    per = [top["scaling"]["per_rank"]["bytes"][str(p)] for p in scales]
    assert per[1] == pytest.approx(2 * per[0]) and per[2] == pytest.approx(4 * per[0]), listing
    assert top["seconds"] == pytest.approx(top["share"] * rep["total_time"]), listing
    assert any("communication that grows with p" in n for n in rep["notes"]), listing
    smaller = report(exp / f"scale-{min(scales)}" / "rep-0", out)
    assert all(c.get("kind") != "communication" for c in smaller["root_causes"]), verdict_listing(smaller)
    text = scalgraph("trace", str(exp), cwd=out)
    assert text.returncode == 0 and "its own cost grows with p: bytes per rank" in text.stdout, text.stderr
    alone = out / "alone.sgtrace"                    # the same trace outside its experiment
    alone.write_bytes((exp / f"scale-{max(scales)}" / "rep-0" / "trace.sgtrace").read_bytes())
    lone = report(alone, out)
    assert all(c.get("kind") != "communication" for c in lone["root_causes"]), verdict_listing(lone)


def test_traced_balanced_control_has_no_verdict(traced_scales):
    """samples/balanced traced at 2, 4 and 8 ranks: every rank waits a bit, so the delay table has
    costs at every scale; at the largest scale (8 ranks on this 2-core machine, the scale the
    accuracy runner reads) none is a verdict cause, though scheduling makes ranks wait there most.
    The ranks' thread-CPU for the identical kernel differs by up to 10-15 % here (cache and core
    sharing), a few hundredths of a second per rank at 8 ranks: below the verdict's floor on extra
    work (5 % of the run time).  (At 2 ranks the kernel is the whole run, so the same spread can
    reach the floor; that is not asserted either way.)"""
    out, exp, _ = traced_scales("balanced")
    scales = expected("balanced")["scales"]
    for p in scales:
        rep = report(exp / f"scale-{p}" / "rep-0", out)
        assert rep["cpu_checked"] and rep["delay"]["root_causes"], f"balanced at p={p}:\n{verdict_listing(rep)}"
    run_dir = exp / f"scale-{max(scales)}" / "rep-0"
    rep = report(run_dir, out)
    listing = f"balanced at p={max(scales)}:\n{verdict_listing(rep)}"
    assert rep["root_causes"] == [] and rep["problem_found"] is False, listing
    text = scalgraph("trace", str(run_dir), cwd=out)
    assert text.returncode == 0 and "No root cause" in text.stdout, text.stderr


@pytest.mark.parametrize("name", PLANTED)
def test_trace_report_names_mpi_call_paths_by_their_own_line_and_vertex(name, traced_scales):
    from scalgraph.model.psg import psg_from_dict
    out, exp, _ = traced_scales(name)
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
    _, exp_dir, _ = traced_scales(name)
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
