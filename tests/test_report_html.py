"""`scalgraph report`: the HTML page built from real experiment directories and trace files (written by
the test helpers of detect and trace, read back by the real readers), checked as text: what it says,
what it escapes, which source files it reads, what it refuses.  The page in a real browser:
tests/test_report_html_browser.py."""
from __future__ import annotations

import json
import pathlib
import re

import pytest

from scalgraph import cli
from scalgraph.analysis import synthetic as syn
from scalgraph.io.trace_read import write_trace
from test_detect_cli import write_synthetic_experiment
from test_trace_delay import figure3

HOSTILE = "<script>window.__pwned=1</script>"
HOSTILE_IMG = '<img src=x onerror="window.__pwned=2">'
CONTROL = "\x1b]0;owned\x07\u202e"
SOURCE_LINE = 'x = "</script><script>window.__pwned=3</script>";\t/* \x1b[31m */'


def hostile_experiment(tmp: pathlib.Path, reps: int = 2) -> tuple[pathlib.Path, pathlib.Path]:
    """The synthetic cg-like experiment (root cause: the computation at line 12 on rank 1) with a
    function, a vertex name and the source file's name that hold markup and control characters, and
    a source file whose text does too.  Returns (experiment, source directory)."""
    psg, runs, comp = syn.cg_like(scales=(2, 4, 8))
    src = tmp / "src"
    src.mkdir()
    source = src / "evil<b>name.c"
    source.write_text("".join(SOURCE_LINE + "\n" if n == 12 else f"statement_{n}();\n" for n in range(1, 46)))
    psg.file = [str(source)] * len(psg)
    psg.function = [f"main{HOSTILE}{CONTROL}"] * len(psg)
    psg.name[comp] = f"comp{HOSTILE_IMG}"
    for prof in runs.values():
        prof.psg_hash = psg.hash()

    def disturb(p, k, prof):             # repetitions differ a little, as real ones do
        prof.time *= 1.0 + 0.02 * k

    return write_synthetic_experiment(tmp / "exp", psg, runs, reps=reps, disturb=disturb), src


def hostile_trace(tmp: pathlib.Path) -> pathlib.Path:
    """Seed 000's Figure 3 (known costs: g 3.375 s, f 1.125 s of 21 s; critical path 7 s) with g renamed."""
    trace = figure3().build()
    for r in trace.regions:
        if r.name == "g":
            r.name = f"g{HOSTILE}{CONTROL}"
    path = tmp / "fig3.json"
    write_trace(trace, path, "json")
    return path


def report(tmp: pathlib.Path, target, *extra) -> tuple[int, str, pathlib.Path]:
    out = tmp / "report.html"
    code = cli.main(["report", str(target), "-o", str(out), *map(str, extra)])
    text = out.read_text() if out.exists() else ""
    return code, text, out


def figures(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="sg-figures">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def visible_text(page: str) -> str:
    """The page without its embedded scripts (what escaping has to protect)."""
    return re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.S)


def test_experiment_page_names_the_cause_with_its_source_and_plots(tmp_path, capsys):
    exp, src = hostile_experiment(tmp_path)
    code, page, out = report(tmp_path, exp, "--source-dir", src)
    assert code == 0, capsys.readouterr().err
    assert "wrote" in capsys.readouterr().err
    assert 500_000 < out.stat().st_size < 2_500_000            # plotly.js and the data, well under 5 MB
    body = visible_text(page)
    first = body.split('id="cause1"')[1].split('id="cause2"')[0]
    # the cause, its highlighted source line (line 12) with its neighbours, and the path's start
    assert "cg.c" not in first and 'evil&lt;b&gt;name.c:12' in first
    hits = re.findall(r'<span class="ln hit"><span class="n">(\d+)</span>', first)
    assert hits == ["12"]
    assert '<span class="n">8</span>' in first and '<span class="n">16</span>' in first
    figs = figures(page)
    assert {"headline", "cause1-scaling", "cause1-ranks", "cause1-path"} <= set(figs)
    # headline: every repetition (2 per scale), the median run time, the ideal line from p=2
    head = {t["name"]: t for t in figs["headline"]["data"]}
    assert len(head["each repetition"]["x"]) == 6 and head["run time (median)"]["x"] == [2, 4, 8]
    ideal = head["ideal (strong scaling)"]["y"]
    assert ideal[1] == pytest.approx(ideal[0] / 2) and ideal[2] == pytest.approx(ideal[0] / 4)
    # the cause's time on each rank: rank 1 carries the extra work at every scale
    heat = figs["cause1-ranks"]["data"][0]
    assert [len(row) for row in heat["z"]] == [8, 8, 8]
    assert all(max(range(len(row)), key=lambda r: row[r] or 0) == 1 for row in heat["z"])
    scaling = {t["name"].split(" =")[0]: t for t in figs["cause1-scaling"]["data"]}
    assert len(scaling["each repetition (mean over ranks)"]["y"]) == 6 and "model T(p)" in scaling


def test_model_curve_is_the_model_detect_reported(tmp_path, capsys):
    """The plotted model is the one detect states (its text, evaluated): at 2P and 4P it gives
    detect's predictions, to the 3 digits the text keeps."""
    psg, runs, _ = syn.cg_like()
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    assert cli.main(["detect", "--json", str(exp)]) == 0
    result = json.loads(capsys.readouterr().out)
    from scalgraph.io.html_report.model_text import evaluate, model_curve
    checked = 0
    for c in result["root_causes"] + result["non_scalable"]:
        if not c.get("predicted"):
            continue
        at = [float(q) for q in c["predicted"]]
        assert evaluate(c["model"], at) == pytest.approx(list(c["predicted"].values()), rel=0.01, abs=1e-4)
        curve = model_curve(c, result["scales"])
        assert curve is not None and curve["p"][0] == 2 and curve["p"][-1] == pytest.approx(64)
        checked += 1
    assert checked >= 1
    assert evaluate("0.0685 + 0.0622 * p^7/4", [8]) == pytest.approx([0.0685 + 0.0622 * 8 ** 1.75])
    assert evaluate("1.2 - 0.3 * log2(p)^2 * p^(-1)", [4]) == pytest.approx([1.2 - 0.3 * 4 / 4])
    assert model_curve({"model": "__import__('os')", "predicted": {}}, [2, 4]) is None


def test_names_and_source_text_are_escaped(tmp_path, capsys):
    exp, src = hostile_experiment(tmp_path)
    code, page, _ = report(tmp_path, exp, "--source-dir", src)
    assert code == 0
    # only the page's own three scripts, no element made from data, no raw control character
    assert len(re.findall(r"<script\b", page)) == 3 and "<img" not in page and "<b>name" not in page
    body = visible_text(page)
    data = re.search(r'id="sg-figures">(.*?)</script>', page, re.S).group(1)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", body + data)
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body
    assert "\\x1b]0;owned\\x07\\u202e" in body
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned=3&lt;/script&gt;" in body
    # in the figures' JSON no "<" at all (it could end the data's script element)
    assert "<" not in data and "comp&lt;img" in json.dumps(figures(page))


def test_source_outside_the_roots_is_not_read(tmp_path, capsys):
    """The PSG names a file the user did not offer: its text must not end up in a mailed report."""
    secret = tmp_path / "private" / "cg.c"
    secret.parent.mkdir()
    secret.write_text("".join(f"SECRET_{n}\n" for n in range(1, 50)))
    psg, runs, _ = syn.cg_like(scales=(2, 4), extra=1.0)  # a cause whose excerpt the page would show
    psg.file = [str(secret)] * len(psg)
    for prof in runs.values():
        prof.psg_hash = psg.hash()
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    roots = tmp_path / "roots"
    roots.mkdir()
    (roots / "link.c").symlink_to(secret)          # a link out of the roots does not count either
    code, page, _ = report(tmp_path, exp, "--source-dir", roots)
    assert code == 0 and "SECRET_" not in page and "is not under the source roots" in page
    code, page, _ = report(tmp_path, exp, "--source-dir", secret.parent)
    assert code == 0 and "SECRET_12" in page


def test_trace_page_has_the_papers_costs(tmp_path, capsys):
    code, page, _ = report(tmp_path, hostile_trace(tmp_path))
    assert code == 0, capsys.readouterr().err
    body = visible_text(page)
    first = body.split('id="cause1"')[1].split('id="cause2"')[0]
    assert "g&lt;script&gt;" in first and "3.375 s" in first and "16.1 % of the total time" in first
    assert "Predicted gain.</b> fixing it saves" in first           # the trace re-timing's what-if
    assert "f" in body.split('id="cause2"')[1] and "1.125 s" in body.split('id="cause2"')[1]
    assert "Late Sender" in body and "7 s over" in body          # pattern tree; critical path of 7 s
    figs = figures(page)
    delay = {t["name"]: t for t in figs["delay-plot"]["data"]}
    assert sorted(delay["short-term"]["x"]) == pytest.approx([0.5, 0.75, 2.25])
    timeline = figs["timeline-plot"]
    assert sorted(x for t in timeline["data"] for x in t["x"]) == pytest.approx([2.0, 3.0])
    arrows = [a for a in timeline["layout"]["annotations"] if a.get("showarrow")]
    assert sorted((a["ay"], a["y"]) for a in arrows) == [(0, 1), (1, 2)]    # A made B wait, B made C wait
    assert len(re.findall(r"<script\b", page)) == 3


def test_existing_file_is_replaced_only_when_it_is_a_report(tmp_path, capsys):
    exp, src = hostile_experiment(tmp_path, reps=1)
    mine = tmp_path / "notes.html"
    mine.write_text("<html>my notes</html>")
    assert cli.main(["report", str(exp), "-o", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "is not a scalgraph report" in err and len(err.strip().splitlines()) == 1
    assert mine.read_text() == "<html>my notes</html>"
    out = tmp_path / "r.html"
    assert cli.main(["report", str(exp), "-o", str(out)]) == 0
    first = out.read_bytes()
    assert cli.main(["report", str(exp), "-o", str(out), "--top", "1"]) == 0 and out.read_bytes() != first


@pytest.mark.parametrize("argv, says", [
    (["{tmp}/nowhere"], "no such experiment directory or trace"),
    (["{exp}", "-o", "{tmp}/missing/r.html"], "does not exist"),
    (["{exp}", "-o", "{tmp}"], "is a directory"),
    (["{exp}", "--source-dir", "{tmp}/nowhere"], "not a directory"),
    (["{exp}", "--min-share", "2"], "--min-share must be between 0 and 1"),
    (["{tmp}/exp/psg.json"], "a JSON trace is an object"),
])
def test_bad_input_is_one_clear_line(tmp_path, capsys, argv, says):
    exp, _ = hostile_experiment(tmp_path, reps=1)
    args = [a.format(tmp=tmp_path, exp=exp) for a in argv]
    if "-o" not in args:
        args += ["-o", str(tmp_path / "r.html")]
    code = cli.main(["report", *args])
    err = capsys.readouterr().err
    assert code != 0 and says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_one_scale_and_balanced_experiments_get_a_page(tmp_path, capsys):
    """One scale: the abnormal rank is the cause, no model is drawn; the balanced control: the page
    says no problem was found and has no cause card."""
    psg, runs, _ = syn.cg_like(scales=(8,))
    code, page, _ = report(tmp_path, write_synthetic_experiment(tmp_path / "one", psg, runs))
    assert code == 0 and 'id="cause1"' in page and "needs &gt;= 2 scales" in page
    assert not any(t["name"].startswith("model") for t in figures(page)["cause1-scaling"]["data"])
    psg, runs, _ = syn.balanced()
    code, page, _ = report(tmp_path, write_synthetic_experiment(tmp_path / "bal", psg, runs))
    assert code == 0 and "No scaling problem found" in page and 'id="cause1"' not in page
