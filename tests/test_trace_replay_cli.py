"""`scalgraph trace`: the report on a real trace file (JSON and binary formats), and bad input."""
from __future__ import annotations

import json

import pytest

from scalgraph import cli
from scalgraph.io.trace_read import write_trace
from test_trace_delay import figure3
from tracebuild import Builder


@pytest.fixture
def fig3_file(tmp_path):
    path = tmp_path / "fig3.json"
    write_trace(figure3().build(), path, "json")
    return path


def test_json_report_has_figure3_costs(fig3_file, capsys):
    """Scalasca's numbers in the delay table (R3's non-waiting time is a communication delay of
    MPI_Recv); the verdict names the computation only: g 3.375 and f 1.125 of the 21 s total time
    (3 ranks x 7 s) both reach 5 % (1.05 s); MPI_Recv's 0.5 is communication, never a line cause."""
    assert cli.main(["trace", str(fig3_file), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    causes = {c["callpath"]: (round(c["short_term"], 9), round(c["long_term"], 9)) for c in rep["delay"]["root_causes"]}
    assert causes == {"main/g": (2.25, 1.125), "main/f": (0.75, 0.375), "main/MPI_Recv": (0.5, 0.0)}
    assert [c["callpath"] for c in rep["delay"]["root_causes"]] == ["main/g", "main/f", "main/MPI_Recv"]
    kinds = {c["callpath"]: c["kind"] for c in rep["delay"]["root_causes"]}
    assert kinds == {"main/g": "computation", "main/f": "computation", "main/MPI_Recv": "communication"}
    assert rep["delay"]["classification"]["delays"].startswith("every call path")
    assert all(list(c["by_pattern"]) == ["Late Sender"] for c in rep["delay"]["root_causes"])
    assert rep["problem_found"] is True and rep["min_share"] == 0.05 and rep["cpu_checked"] is False
    verdict = [(c["callpaths"], round(c["seconds"], 9), round(c["share"], 9)) for c in rep["root_causes"]]
    assert verdict == [(["main/g"], 3.375, round(3.375 / 21, 9)), (["main/f"], 1.125, round(1.125 / 21, 9))]
    assert any(n.startswith("no thread-CPU profile used") for n in rep["notes"])
    tree = {p["key"]: p for p in rep["patterns"]}
    assert tree["late_sender"]["seconds"] == pytest.approx(5.0)
    assert tree["late_sender"]["percent"] == pytest.approx(100 * 5.0 / 21.0)
    ls = tree["late_sender"]["callpaths"][0]
    assert ls["callpath"] == "main/MPI_Recv" and ls["per_rank"] == [0.0, 3.0, 2.0]
    assert ls["where"].startswith("app.c:")
    assert rep["critical_path"]["length"] == pytest.approx(7.0)
    assert [i["seconds"] for i in rep["instances"]] == [3.0, 2.0]
    cl = rep["delay"]["classification"]
    assert (cl["direct"], cl["indirect"], cl["propagating"], cl["terminal"]) == pytest.approx((3.5, 1.5, 3.0, 2.0))


def test_min_share_sets_the_verdict_floor(fig3_file, capsys):
    """f's 1.125 s is 5.4 % of the total time: a cause at --min-share 0.05, none at 0.06; g's 3.375 s
    (16 %) goes at 0.2, and then nothing is found although the delay table is unchanged."""
    got = {}
    for share in ("0.05", "0.06", "0.2"):
        assert cli.main(["trace", str(fig3_file), "--json", "--min-share", share]) == 0
        rep = json.loads(capsys.readouterr().out)
        got[share] = ([c["callpaths"][0] for c in rep["root_causes"]], rep["problem_found"],
                      len(rep["delay"]["root_causes"]))
    assert got == {"0.05": (["main/g", "main/f"], True, 3), "0.06": (["main/g"], True, 3), "0.2": ([], False, 3)}


@pytest.mark.parametrize("share", ["1", "-0.1", "nan"])
def test_min_share_must_be_a_fraction(fig3_file, capsys, share):
    assert cli.main(["trace", str(fig3_file), "--min-share", share]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--min-share" in err


def test_text_report_and_binary_format(tmp_path, capsys):
    path = tmp_path / "fig3.sgt"
    write_trace(figure3().build(), path, "binary")
    assert cli.main(["trace", str(path), "--top", "2", "--no-clock-correction"]) == 0
    out = capsys.readouterr().out
    assert "Late Sender" in out and "Delay costs" in out and "Critical path" in out
    assert "main/g" in out and "short 2.250000  long 1.125000" in out
    assert out.index("Root causes (2)") < out.index("Wait states") and "#1 app.c:12  3.375000 s (16.1 %)  main/g" in out


def test_otf2_round_trip_gives_the_same_costs(tmp_path, capsys):
    from conftest import require_tool
    try:
        import otf2  # noqa: F401
        have = True
    except ImportError:
        have = False
    require_tool(have, "PyPI otf2 is not installed")
    anchor = tmp_path / "traces.otf2"
    write_trace(figure3().build(), anchor, "otf2")
    assert cli.main(["trace", str(anchor), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    causes = {c["callpath"]: round(c["seconds"], 9) for c in rep["delay"]["root_causes"]}
    assert causes == {"main/g": 3.375, "main/f": 1.125, "main/MPI_Recv": 0.5}


def test_clock_violation_is_corrected_before_replay(tmp_path, capsys):
    # the receive ends before the send starts (skewed clocks): corrected, then analysed
    b = Builder(2)
    b.enter(0, 0, "main").work(0, 0, 2, "f").send(0, 2, 2.1, dst=1).exit(0, 3, "main")
    b.enter(1, 0, "main").recv(1, 0.5, 1.0, src=0).exit(1, 3, "main")
    path = tmp_path / "skew.json"
    write_trace(b.build(), path, "json")
    assert cli.main(["trace", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert "violation" in rep["clock"] and rep["clock_violations_after_correction"] == 0
    assert cli.main(["trace", str(path), "--json", "--no-clock-correction"]) == 0
    assert json.loads(capsys.readouterr().out)["clock_violations_after_correction"] == 1


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("not a trace at all", "not a trace"),
    ('{"format": "scalgraph-trace", "version": 1, "ranks": [', ""),
])
def test_bad_input_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    code = cli.main(["trace", str(path)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and err.startswith("scalgraph trace:")
    assert message in err and "Traceback" not in err


def test_unmatched_message_is_one_line(tmp_path, capsys):
    b = Builder(2)
    b.send(0, 0, 1, dst=1, tag=3).recv(1, 0, 1, src=0, tag=4)
    from scalgraph.io import trace_json
    path = tmp_path / "unmatched.json"
    trace_json.write_json(b.build(), path)          # the writer itself validates nothing
    code = cli.main(["trace", str(path)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1


def test_top_must_be_positive(fig3_file, capsys):
    assert cli.main(["trace", str(fig3_file), "--top", "0"]) != 0
    assert "--top" in capsys.readouterr().err


def test_call_paths_carry_source_line_and_psg_vertex(tmp_path, capsys):
    tr = figure3().build()
    for r in tr.regions:
        if r.name == "g":
            r.file, r.line, r.vertex = "solver.c", 42, 7
    path = tmp_path / "fig3v.json"
    write_trace(tr, path, "json")
    assert cli.main(["trace", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    g = next(c for c in rep["delay"]["root_causes"] if c["callpath"] == "main/g")
    assert g["where"] == "solver.c:42 [vertex 7]" and g["vertex"] == 7


def _fig3_with_lines(tmp_path, recv_line: int):
    tr = figure3().build()
    for r in tr.regions:
        if r.name == "main":
            r.file, r.line, r.vertex = "app.c", 10, 0
        if r.name == "MPI_Recv":
            r.line, r.vertex = recv_line, 12
    path = tmp_path / f"fig3-{recv_line}.json"
    write_trace(tr, path, "json")
    return path


def test_mpi_call_paths_carry_their_own_line_and_vertex(tmp_path, capsys):
    """An MPI region at a PSG vertex (a scalgraph-recorded trace) is named by the call's own line and
    vertex, in the file of the function around it; one without a line by its caller's place."""
    path = _fig3_with_lines(tmp_path, 31)
    assert cli.main(["trace", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    ls = next(p for p in rep["patterns"] if p["key"] == "late_sender")["callpaths"][0]
    assert ls["callpath"] == "main/MPI_Recv" and ls["where"] == "app.c:31 [vertex 12]" and ls["vertex"] == 12
    assert [i["where"] for i in rep["instances"]] == ["app.c:31 [vertex 12]"] * 2
    assert cli.main(["trace", str(path)]) == 0
    assert "main/MPI_Recv  app.c:31 [vertex 12]" in capsys.readouterr().out
    assert cli.main(["trace", str(_fig3_with_lines(tmp_path, 0)), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [i["where"] for i in rep["instances"]] == ["app.c:10 [vertex 0]"] * 2
