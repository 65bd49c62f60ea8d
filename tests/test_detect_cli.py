"""`scalgraph detect` end to end on experiment directories written to disk by a helper.

Each run directory holds real per-rank profile files (rank-<r>.sgp) in the shim's binary layout
(scalgraph.io.profile_file: header, per-vertex arrays, dependence rows, communicators, CRC-32),
written here from synthetic RunProfiles and read back by the real reader, so this tests everything
from experiment.json and the rank files to the printed report."""
from __future__ import annotations

import json
import pathlib

import numpy as np

from scalgraph import cli
from scalgraph.analysis import synthetic as syn
from scalgraph.io import experiment as expio
from scalgraph.io import profile_file as pf
from scalgraph.model.profile import RunProfile

HZ = 1e6    # sampled (non-MPI) times are samples / hz: microsecond resolution keeps the synthetic times


def _save_run(run_dir: pathlib.Path, prof: RunProfile, flags: int = pf.FLAG_FINALIZED, deps_dropped: int = 0,
              sampler: str = "task-clock") -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    comms = sorted(prof.comm_members.items())
    members = np.array([m for _, ms in comms for m in ms], dtype="<i4")
    comm_rows = np.zeros(len(comms), dtype=pf.COMM_DTYPE)
    off = 0
    for i, (cid, ms) in enumerate(comms):
        comm_rows[i] = (cid, len(ms), off, 0)
        off += len(ms)
    mpi = prof.calls > 0
    for r in range(prof.nranks):
        deps = prof.deps[prof.deps["rank"] == r]
        sampled = np.where(mpi[r], 0, prof.time[r])
        arrays = {"samples": sampled * HZ, "sample_ns": sampled * 1e9, "calls": prof.calls[r],
                  "time_ns": np.where(mpi[r], prof.time[r] * 1e9, 0), "wait_ns": prof.wait[r] * 1e9}
        pf.write_rank_file(run_dir / f"rank-{r}.sgp", prof.nvertices, arrays, deps=deps, comms=comm_rows,
                           members=members, rank=r, nranks=prof.nranks, flags=flags, hz=HZ, comm_sample=1.0,
                           deps_dropped=deps_dropped, end_time=prof.wall_time, psg_hash=prof.psg_hash.encode(),
                           host=b"test", mpi_library=b"synthetic", sampler=pf.SAMPLERS.index(sampler),
                           hz_delivered=HZ)


def write_synthetic_experiment(path: pathlib.Path, psg, runs: dict, reps: int = 1, disturb=None) -> pathlib.Path:
    entries = []
    for p, prof in runs.items():
        for k in range(reps):
            entry = expio.run_entry(p, k, wall_time=prof.wall_time)
            copy = RunProfile(prof.nranks, prof.nvertices, prof.psg_hash, prof.time.copy(), prof.samples.copy(),
                              prof.calls.copy(), prof.wait.copy(), prof.deps.copy(), prof.comm_members, {}, prof.meta)
            if disturb:
                disturb(p, k, copy)
            _save_run(path / entry["dir"], copy)
            entries.append(entry)
    return expio.write_experiment(path, psg, ["./app"], entries, repeat=reps, mpi_library="synthetic")


def _source(tmp_path: pathlib.Path, name: str, lines: int = 45) -> None:
    (tmp_path / name).write_text("".join(f"statement_{n}();\n" for n in range(1, lines + 1)))


def _detect(capsys, *argv):
    code = cli.main(["detect", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_cg_like_report_names_line_rank_path_and_source(tmp_path, capsys):
    psg, runs, _ = syn.cg_like()
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    _source(tmp_path, "cg.c")
    code, out, err = _detect(capsys, exp, "--source-dir", tmp_path)
    assert code == 0 and err == ""
    first = out.split("\n#2")[0]
    assert "#1 cg.c:12  in main  [COMP comp]  rank 1" in first
    assert "rank 1 (x" in first and "abnormal own time" in first
    assert "MPI_Allreduce@0 (cg.c:20) -[collective]-> MPI_Allreduce@1 (cg.c:20)" in first
    assert "> 12 | statement_12();" in first and "  10 | statement_10();" in first
    assert "cg.c:20  in main  [MPI MPI_Allreduce]  loss " in out.split("non-scalable vertices")[1]
    # the cost says what it is: the waiting it explains, and where that waiting was
    assert "explains that much of the" in first and "at MPI_Allreduce (cg.c:20)" in first
    assert "scaling model of the mean T(p) =" in first and "slowest rank: T(p) =" in first and "predicted p=32:" in first


def _no_nan(name):
    raise AssertionError(f"JSON output holds {name}, which strict JSON readers reject")


def test_json_output_and_top(tmp_path, capsys):
    psg, runs, comp = syn.cg_like()
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    code, out, _ = _detect(capsys, exp, "--json", "--top", "1")
    data = json.loads(out, parse_constant=_no_nan)
    assert code == 0 and data["format"] == "scalgraph-detect" and len(data["root_causes"]) == 1
    assert data["root_causes"][0]["vertex"] == comp and data["root_causes"][0]["file"] == "cg.c"


def test_balanced_experiment_says_no_problem(tmp_path, capsys):
    psg, runs, _ = syn.balanced()
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    code, out, _ = _detect(capsys, exp)
    assert code == 0 and "No scaling problem found" in out and "#1" not in out


def test_missing_source_file_is_said_not_guessed(tmp_path, capsys):
    psg, runs, _ = syn.bad_collective()
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    code, out, _ = _detect(capsys, exp, "--source-dir", tmp_path / "nowhere")
    assert code == 0 and "#1 fft.c:10" in out and "(source file fft.c not found" in out


def test_repetitions_are_merged_by_median(tmp_path, capsys):
    psg, runs, comp = syn.cg_like()
    final = syn.vertex_at(psg, 40)

    def disturb(p, k, prof):           # one repetition of every scale hit by a slow file system
        if k == 1:
            prof.time[:, final] += 5.0

    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs, reps=3, disturb=disturb)
    e = expio.read_experiment(exp)
    assert e.scales == [2, 4, 8, 16] and len(e.run_dirs[8]) == 3
    assert np.allclose(e.profile(8).time, runs[8].time)
    code, out, _ = _detect(capsys, exp, "--json")
    assert json.loads(out)["root_causes"][0]["vertex"] == comp


def _assert_one_clear_line(code, out, err, *fragments):
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scalgraph detect: ") and "Traceback" not in err
    for f in fragments:
        assert f in lines[0]


def test_missing_and_empty_directories(tmp_path, capsys):
    _assert_one_clear_line(*_detect(capsys, tmp_path / "nope"), "no such experiment directory")
    (tmp_path / "empty").mkdir()
    _assert_one_clear_line(*_detect(capsys, tmp_path / "empty"), "not a scalgraph experiment")
    (tmp_path / "file").write_text("x")
    _assert_one_clear_line(*_detect(capsys, tmp_path / "file"), "is a file")


def test_corrupt_experiment_json(tmp_path, capsys):
    psg, runs, _ = syn.cg_like(scales=(2, 4))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    text = (exp / "experiment.json").read_text()
    (exp / "experiment.json").write_text(text[: len(text) // 2])
    _assert_one_clear_line(*_detect(capsys, exp), "not valid JSON")


def test_profile_from_another_build_is_refused(tmp_path, capsys):
    psg, runs, _ = syn.cg_like(scales=(2, 4))
    runs[4].psg_hash = "0123456789abcdef"
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    _assert_one_clear_line(*_detect(capsys, exp), "scale-4/rep-0", "another build")


def test_psg_json_changed_after_the_runs_is_refused(tmp_path, capsys):
    psg, runs, _ = syn.cg_like(scales=(2, 4))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    d = json.loads((exp / "psg.json").read_text())
    d["line_first"][3] = 13
    (exp / "psg.json").write_text(json.dumps(d))
    before = (exp / "psg.json").read_text()
    _assert_one_clear_line(*_detect(capsys, exp), "different builds")
    assert (exp / "psg.json").read_text() == before          # nothing overwritten


def test_crashed_rank_is_reported(tmp_path, capsys):
    psg, runs, _ = syn.cg_like(scales=(2, 4))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    (exp / "scale-4/rep-0/rank-3.sgp").unlink()
    _assert_one_clear_line(*_detect(capsys, exp), "scale-4/rep-0", "rank 3")


def test_truncated_rank_file_and_no_successful_runs(tmp_path, capsys):
    psg, runs, _ = syn.cg_like(scales=(2, 4))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    f = exp / "scale-2/rep-0/rank-1.sgp"
    f.write_bytes(f.read_bytes()[:-10])
    _assert_one_clear_line(*_detect(capsys, exp), "scale-2/rep-0/rank-1.sgp", "truncated")
    meta = json.loads((exp / "experiment.json").read_text())
    for r in meta["runs"]:
        r["status"] = "failed"
    (exp / "experiment.json").write_text(json.dumps(meta))
    _assert_one_clear_line(*_detect(capsys, exp), "no successful runs", "failed")


def test_one_scale_prints_abnormal_ranks_and_says_the_fit_needs_more(tmp_path, capsys):
    psg, runs, _ = syn.imbalanced_stencil(scales=(8,))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    code, out, err = _detect(capsys, exp)
    assert code == 3
    assert "#1 stencil.c:13" in out and "abnormal own time" in out and "needs >= 2 scales" in out
    assert len(err.strip().splitlines()) == 1 and "one scale only" in err


def test_bad_option_values(tmp_path, capsys):
    psg, runs, _ = syn.cg_like(scales=(2, 4))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    _assert_one_clear_line(*_detect(capsys, exp, "--abnorm-thd", "0.9"), "--abnorm-thd must be above 1")


def test_partial_profiles_are_mentioned_in_the_report(tmp_path, capsys):
    psg, runs, comp = syn.cg_like()
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    _save_run(exp / "scale-8/rep-0", runs[8], flags=pf.FLAG_SIGTERM, deps_dropped=12)
    code, out, _ = _detect(capsys, exp)
    assert code == 0 and "#1 cg.c:12" in out
    assert "note: scale-8/rep-0: 8 rank(s) wrote their profile at sigterm" in out
    assert "96 communication dependence records were dropped" in out      # 12 on each of 8 ranks


def test_runs_sampled_with_the_itimer_fallback_are_said_once_each(tmp_path, capsys):
    psg, runs, comp = syn.cg_like()
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    code, out, _ = _detect(capsys, exp)
    assert "ITIMER_PROF" not in out
    _save_run(exp / "scale-8/rep-0", runs[8], sampler="itimer")
    code, out, _ = _detect(capsys, exp)
    assert code == 0 and "#1 cg.c:12" in out
    assert out.count("ITIMER_PROF") == 1 and "scale-8/rep-0: sampled with the ITIMER_PROF fallback" in out


def test_json_of_a_single_scale_is_strict_json(tmp_path, capsys):
    psg, runs, _ = syn.imbalanced_stencil(scales=(8,))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    code, out, _ = _detect(capsys, exp, "--json")
    assert code == 3 and json.loads(out, parse_constant=_no_nan)["root_causes"][0]["model"] is None


def test_no_problem_with_noisy_waiting_says_so_and_lists_the_symptoms(tmp_path, capsys):
    psg, runs, _ = syn.balanced()
    allr = syn.vertex_at(psg, 20)
    for p, prof in runs.items():            # every rank sits a little longer in the Allreduce at scale
        prof.time[:, allr] = prof.wait[:, allr] = 0.005 + 0.035 * p / 16
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    code, out, _ = _detect(capsys, exp)
    assert code == 0 and "No scaling problem found" in out and "#1" not in out
    assert "1 construct loses time at p=16, but to waiting with no computation behind it" in out
    assert "balanced.c:20  in main  [MPI MPI_Allreduce]  loss" in out
