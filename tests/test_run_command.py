"""`scalgraph run`: the launcher logic (scales, failures, resume, --force, refusal of uninstrumented
programs) with a tiny stand-in program started under the real mpiexec.  The stand-in is a Python
script that writes one rank-<r>.sgp per rank into SCALGRAPH_OUT, like the shim, and carries its PSG
in <script>.psg.json beside it (the fallback read_psg_from_executable uses for a file without ELF
sections)."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import require_tool
from scalgraph.cli import main
from scalgraph.io.experiment import read_experiment
from scalgraph.model.psg import PSG, FUNCTION

VENV_BIN = pathlib.Path(sys.executable).parent

FAKE_APP = """#!{python}
import os, sys, time, pathlib
rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
size = int(os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
log = os.environ.get("FAKE_LOG")
if log and rank == 0:
    with open(log, "a") as f:
        f.write(f"{{size}} {{' '.join(sys.argv[1:])}}\\n")
if str(size) in os.environ.get("FAKE_FAIL_AT", "").split(","):
    print(f"fake: rank {{rank}} crashes at {{size}} ranks", file=sys.stderr)
    sys.exit(3)
if str(size) in os.environ.get("FAKE_HANG_AT", "").split(","):
    if os.environ.get("FAKE_PIDS"):
        with open(os.environ["FAKE_PIDS"], "a") as f:
            f.write(f"{{os.getpid()}}\\n")
    time.sleep(60)
if str(size) in os.environ.get("FAKE_NO_FILES_AT", "").split(",") and rank == 0:
    sys.exit(0)
out = pathlib.Path(os.environ["SCALGRAPH_OUT"])
out.mkdir(parents=True, exist_ok=True)
(out / f"rank-{{rank}}.sgp").write_bytes(b"SGPROF\\0\\0" + os.environ.get("SCALGRAPH_HZ", "-").encode())
if rank == 0:
    print(f"fake: ranks={{size}} args={{' '.join(sys.argv[1:])}}")
    if "FAKE_TAG" in os.environ:
        print(f"tag={{os.environ['FAKE_TAG']}}")
"""


def tiny_psg(name: str = "main") -> PSG:
    return PSG(kind=[FUNCTION], name=[name], function=[name], file=["app.c"], line_first=[1], line_last=[9],
               parent=[-1], children=[[]], instance=[0], local=[0], loop_depth=[0], recursion_target=[-1],
               functions=[name], func_default_inst=[0], inst_func=[0], inst_vid=[[0]], meta={})


@pytest.fixture
def mpiexec_available():
    require_tool(shutil.which("mpiexec", path=str(VENV_BIN)) is not None or shutil.which("mpiexec") is not None,
                 "no mpiexec (install the bundled extra: pip install mpich)")


@pytest.fixture
def fake_app(tmp_path, mpiexec_available, monkeypatch) -> pathlib.Path:
    app = tmp_path / "bin" / "fakeapp"
    app.parent.mkdir()
    app.write_text(FAKE_APP.format(python=sys.executable))
    app.chmod(0o755)
    (app.parent / "fakeapp.psg.json").write_text(json.dumps(tiny_psg().to_dict()))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    for var in ("FAKE_FAIL_AT", "FAKE_HANG_AT", "FAKE_NO_FILES_AT", "SCALGRAPH_MPIEXEC"):
        monkeypatch.delenv(var, raising=False)
    return app


def calls(tmp_path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def runs_by_scale(exp: pathlib.Path) -> dict:
    desc = json.loads((exp / "experiment.json").read_text())
    return {(r["scale"], r["rep"]): r for r in desc["runs"]}


def test_runs_every_scale_and_repetition_into_the_experiment_layout(fake_app, tmp_path, capsys):
    exp = tmp_path / "exp"
    rc = main(["run", "-n", "3,1,2", "--repeat", "2", "--hz", "97", "-o", str(exp), "--", str(fake_app), "7", "x"])
    assert rc == 0
    desc = json.loads((exp / "experiment.json").read_text())
    assert desc["format"] == "scalgraph-experiment" and desc["version"] == 1
    assert desc["command"] == [str(fake_app), "7", "x"]
    assert desc["scales"] == [1, 2, 3] and desc["repeat"] == 2
    assert desc["psg_hash"] == tiny_psg().hash()
    assert "hydra" in desc["mpi_library"].lower() or "mpi" in desc["mpi_library"].lower()
    assert sorted((r["scale"], r["rep"]) for r in desc["runs"]) == [(p, k) for p in (1, 2, 3) for k in (0, 1)]
    for r in desc["runs"]:
        assert r["status"] == "ok" and r["exit_code"] == 0 and r["wall_time"] > 0
        run_dir = exp / r["dir"]
        assert r["dir"] == f"scale-{r['scale']}/rep-{r['rep']}"
        assert sorted(f.name for f in run_dir.glob("rank-*.sgp")) == [f"rank-{i}.sgp" for i in range(r["scale"])]
        assert (run_dir / "rank-0.sgp").read_bytes().endswith(b"97")            # --hz reached the ranks
        assert (run_dir / "stdout.txt").read_text() == f"fake: ranks={r['scale']} args=7 x\n"
    assert json.loads((exp / "psg.json").read_text()) == tiny_psg().to_dict()
    # the detect side's reader accepts what was written
    e = read_experiment(exp, read_run=lambda d: None)
    assert e.scales == [1, 2, 3] and all(len(v) == 2 for v in e.run_dirs.values())
    err = capsys.readouterr().err
    assert "6/6" in err and "scalgraph detect" in err


def test_one_failing_scale_is_reported_and_the_others_still_run(fake_app, tmp_path, capsys, monkeypatch):
    exp = tmp_path / "exp"
    monkeypatch.setenv("FAKE_FAIL_AT", "2")
    rc = main(["run", "-n", "1,2,3", "-o", str(exp), "--", str(fake_app)])
    assert rc == 1
    runs = runs_by_scale(exp)
    assert runs[(1, 0)]["status"] == "ok" and runs[(3, 0)]["status"] == "ok"
    assert runs[(2, 0)]["status"] == "failed" and runs[(2, 0)]["exit_code"] != 0
    assert "crashes at 2 ranks" in (exp / "scale-2/rep-0/stderr.txt").read_text()
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "1 of 3 runs failed" in last and "p=2 rep 0" in last
    assert [c.split()[0] for c in calls(tmp_path)] == ["1", "2", "3"]


def test_running_again_resumes_only_the_unfinished_runs(fake_app, tmp_path, monkeypatch, capsys):
    exp = tmp_path / "exp"
    monkeypatch.setenv("FAKE_FAIL_AT", "2")
    assert main(["run", "-n", "1,2,3", "-o", str(exp), "--", str(fake_app)]) == 1
    first_ok = runs_by_scale(exp)[(1, 0)]["started"]
    monkeypatch.delenv("FAKE_FAIL_AT")
    capsys.readouterr()
    assert main(["run", "-n", "1,2,3", "-o", str(exp), "--", str(fake_app)]) == 0
    assert "resuming" in capsys.readouterr().err
    assert [c.split()[0] for c in calls(tmp_path)] == ["1", "2", "3", "2"]     # only p=2 ran again
    runs = runs_by_scale(exp)
    assert all(r["status"] == "ok" for r in runs.values())
    assert runs[(1, 0)]["started"] == first_ok
    assert (exp / "scale-2/rep-0/stderr.txt").read_text() == ""                # the old attempt's output is gone
    # a resume may add scales: only the new one runs
    assert main(["run", "-n", "1,2,3,4", "-o", str(exp), "--", str(fake_app)]) == 0
    assert [c.split()[0] for c in calls(tmp_path)][-1:] == ["4"] and len(calls(tmp_path)) == 5
    assert json.loads((exp / "experiment.json").read_text())["scales"] == [1, 2, 3, 4]


def test_an_interrupted_run_stays_pending_and_is_resumed(fake_app, tmp_path, monkeypatch):
    from scalgraph.io import experiment_write as ew
    exp = tmp_path / "exp"
    real_wait = subprocess.Popen.wait
    state = {"n": 0}

    def wait_then_interrupt(self, timeout=None):
        if isinstance(self.args, list) and "-n" in self.args:    # an mpiexec launch, not a probe
            state["n"] += 1
        if state["n"] == 2:                     # Ctrl-C while the second run is going
            state["n"] += 1
            raise KeyboardInterrupt
        return real_wait(self, timeout=timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait_then_interrupt)
    assert main(["run", "-n", "1,2,3", "-o", str(exp), "--", str(fake_app)]) == 130
    monkeypatch.setattr(subprocess.Popen, "wait", real_wait)
    runs = runs_by_scale(exp)
    assert runs[(1, 0)]["status"] == "ok"
    assert runs[(2, 0)]["status"] == "pending" and runs[(3, 0)]["status"] == "pending"
    assert main(["run", "-n", "1,2,3", "-o", str(exp), "--", str(fake_app)]) == 0
    assert all(r["status"] == "ok" for r in runs_by_scale(exp).values())
    assert ew.OK == "ok"


def test_never_overwrites_an_experiment_without_force(fake_app, tmp_path, capsys):
    exp = tmp_path / "exp"
    assert main(["run", "-n", "1", "-o", str(exp), "--", str(fake_app), "a"]) == 0
    before = (exp / "experiment.json").read_text()
    capsys.readouterr()
    assert main(["run", "-n", "1", "-o", str(exp), "--", str(fake_app), "b"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another command" in err and "--force" in err
    assert (exp / "experiment.json").read_text() == before
    assert main(["run", "-n", "1", "-o", str(exp), "--force", "--", str(fake_app), "b"]) == 0
    assert json.loads((exp / "experiment.json").read_text())["command"][-1] == "b"


def test_refuses_to_reuse_an_experiment_of_another_build(fake_app, tmp_path, capsys):
    exp = tmp_path / "exp"
    assert main(["run", "-n", "1", "-o", str(exp), "--", str(fake_app)]) == 0
    (fake_app.parent / "fakeapp.psg.json").write_text(json.dumps(tiny_psg("main2").to_dict()))
    capsys.readouterr()
    assert main(["run", "-n", "1,2", "-o", str(exp), "--", str(fake_app)]) == 2
    assert "another build" in capsys.readouterr().err


def test_force_never_deletes_a_directory_that_is_not_an_experiment(fake_app, tmp_path, capsys):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    assert main(["run", "-n", "1", "-o", str(precious), "--force", "--", str(fake_app)]) == 2
    assert (precious / "thesis.tex").read_text() == "do not delete"
    assert "refusing" in capsys.readouterr().err


def test_exit_zero_without_rank_files_is_a_failed_run(fake_app, tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    monkeypatch.setenv("FAKE_NO_FILES_AT", "2")
    assert main(["run", "-n", "2", "-o", str(exp), "--", str(fake_app)]) == 1
    r = runs_by_scale(exp)[(2, 0)]
    assert r["status"] == "failed" and r["exit_code"] == 0 and "1 of 2 rank files" in r["error"]


def test_a_hanging_run_is_stopped_at_the_timeout(fake_app, tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    monkeypatch.setenv("FAKE_HANG_AT", "2")
    assert main(["run", "-n", "1,2", "--timeout", "6", "-o", str(exp), "--", str(fake_app)]) == 1
    runs = runs_by_scale(exp)
    assert runs[(1, 0)]["status"] == "ok"
    assert runs[(2, 0)]["status"] == "failed" and "timed out" in runs[(2, 0)]["error"]
    assert runs[(2, 0)]["wall_time"] < 20


def test_default_experiment_name_is_program_and_date(fake_app, tmp_path, monkeypatch):
    import datetime
    monkeypatch.chdir(tmp_path)
    assert main(["run", "-n", "1", "--", str(fake_app)]) == 0
    assert (tmp_path / f"scalgraph-fakeapp-{datetime.date.today().isoformat()}" / "experiment.json").exists()


def _cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scalgraph.cli", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("args, message", [
    (["run", "-n", "2,x", "--", "true"], "whole numbers"),
    (["run", "-n", "0", "--", "true"], "at least one process count"),
    (["run", "-n", "2", "--repeat", "0", "--", "true"], "--repeat"),
    (["run", "-n", "2"], "no program given"),
    (["run", "-n", "2", "--", "./no-such-program"], "no such program"),
    (["run", "-n", "2", "--", "true", "--size={q}"], "unknown placeholder {q}"),
])
def test_bad_arguments_give_one_clear_line(tmp_path, args, message):
    res = _cli(*args, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and message in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_program_not_built_with_sgcc_is_refused_with_one_line(tmp_path):
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/sh\necho hi\n")
    plain.chmod(0o755)
    res = _cli("run", "-n", "2", "-o", str(tmp_path / "exp"), "--", str(plain), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and "not built with sgcc" in res.stderr
    assert not (tmp_path / "exp").exists()


def test_a_plain_mpicc_build_is_refused_with_one_line(tmp_path, samples_dir):
    mpicc = shutil.which("mpicc", path=str(VENV_BIN)) or shutil.which("mpicc")
    require_tool(mpicc is not None, "no mpicc (pip install mpich)")
    exe = tmp_path / "cg"
    subprocess.run([mpicc, "-O1", "-o", str(exe), str(samples_dir / "cg" / "cg.c")], check=True)
    res = _cli("run", "-n", "2", "-o", str(tmp_path / "exp"), "--", str(exe), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and "not built with sgcc" in res.stderr
    assert not (tmp_path / "exp").exists()


def test_a_second_run_on_the_same_experiment_is_refused_while_the_first_is_alive(fake_app, tmp_path, capsys):
    exp = tmp_path / "exp"
    assert main(["run", "-n", "1", "-o", str(exp), "--", str(fake_app)]) == 0
    assert not (exp / ".scalgraph-run.lock").exists()                 # released at the end
    other = subprocess.Popen(["sleep", "30"])
    try:
        (exp / ".scalgraph-run.lock").write_text(str(other.pid))
        capsys.readouterr()
        assert main(["run", "-n", "1,2", "-o", str(exp), "--", str(fake_app)]) == 2
        assert f"another scalgraph run (pid {other.pid})" in capsys.readouterr().err
    finally:
        other.kill()
        other.wait()
    # a lock left by a process that is gone does not block
    assert main(["run", "-n", "1,2", "-o", str(exp), "--", str(fake_app)]) == 0


def test_sigterm_stops_the_ranks_and_leaves_the_run_to_resume(fake_app, tmp_path):
    import signal
    import time
    exp = tmp_path / "exp"
    pids = tmp_path / "pids"
    env = dict(os.environ, FAKE_HANG_AT="2", FAKE_PIDS=str(pids))
    proc = subprocess.Popen([sys.executable, "-m", "scalgraph.cli", "run", "-n", "1,2", "-o", str(exp), "--",
                             str(fake_app)], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(pids.read_text().split() if pids.exists() else []) < 2:
        time.sleep(0.1)
    assert len(pids.read_text().split()) == 2, "the hanging ranks did not start"
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130 and "Traceback" not in err
    time.sleep(0.5)
    for pid in map(int, pids.read_text().split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)                                            # no rank left behind
    runs = runs_by_scale(exp)
    assert runs[(1, 0)]["status"] == "ok" and runs[(2, 0)]["status"] == "pending"
    assert not (exp / ".scalgraph-run.lock").exists()


def test_extra_launcher_options_reach_mpiexec(fake_app, tmp_path, monkeypatch):
    monkeypatch.delenv("FAKE_TAG", raising=False)
    exp = tmp_path / "exp"
    assert main(["run", "-n", "2", "--mpiexec-args", "-genv FAKE_TAG 'from launcher'", "-o", str(exp), "--",
                 str(fake_app)]) == 0
    assert "tag=from launcher" in (exp / "scale-2/rep-0/stdout.txt").read_text()
    assert json.loads((exp / "experiment.json").read_text())["mpiexec_args"] == ["-genv", "FAKE_TAG", "from launcher"]


def test_resuming_with_fewer_scales_runs_only_those(fake_app, tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    monkeypatch.setenv("FAKE_FAIL_AT", "2,3")
    assert main(["run", "-n", "1,2,3", "-o", str(exp), "--", str(fake_app)]) == 1
    monkeypatch.delenv("FAKE_FAIL_AT")
    assert main(["run", "-n", "1,2", "-o", str(exp), "--", str(fake_app)]) == 0     # p=3 not asked for now
    assert [c.split()[0] for c in calls(tmp_path)] == ["1", "2", "3", "2"]
    runs = runs_by_scale(exp)
    assert runs[(2, 0)]["status"] == "ok" and runs[(3, 0)]["status"] == "failed"


def test_per_scale_placeholders_reach_the_program_and_are_recorded(fake_app, tmp_path):
    exp = tmp_path / "exp"
    args = ["--n={p}", "{px}x{py}x{pz}", "{{literal}}"]
    assert main(["run", "-n", "4,2", "-o", str(exp), "--", str(fake_app), *args]) == 0
    assert calls(tmp_path) == ["2 --n=2 2x1x1 {literal}", "4 --n=4 2x2x1 {literal}"]
    assert (exp / "scale-4/rep-0/stdout.txt").read_text() == "fake: ranks=4 args=--n=4 2x2x1 {literal}\n"
    desc = json.loads((exp / "experiment.json").read_text())
    assert desc["command"] == [str(fake_app), *args]                   # the template, for resuming
    assert {r["scale"]: r["command"] for r in desc["runs"]} == {
        2: [str(fake_app), "--n=2", "2x1x1", "{literal}"], 4: [str(fake_app), "--n=4", "2x2x1", "{literal}"]}
    assert main(["run", "-n", "2,4,8", "-o", str(exp), "--", str(fake_app), *args]) == 0   # resume: only p=8
    assert calls(tmp_path)[2:] == ["8 --n=8 2x2x2 {literal}"]
