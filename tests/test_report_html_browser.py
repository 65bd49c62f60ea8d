"""The HTML report in a real browser: Debian's chromium, headless, driven by Selenium through
chromedriver.  For the cg sample (built with sgcc, run with --trace at 2 and 4 ranks) and for its
traced run: the page loads with no console error, the #1 cause shows cg.c:21, expanding a cause shows
its source lines, every plot is drawn with data, and a screenshot is written as a test artifact.  A
hostile experiment (markup and control characters in names and source) shows them as text and runs
none of it."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import time

import pytest

from conftest import require_tool
from scalgraph import cli
from test_e2e_samples import scalgraph
from test_report_html import HOSTILE, SOURCE_LINE, hostile_experiment, hostile_trace

SAMPLE_SRC = pathlib.Path(__file__).resolve().parent.parent / "samples" / "cg"
OUR_SCRIPTS = 3          # the figures' JSON, plotly.js, the page's script


@pytest.fixture(scope="session")
def browser():
    require_tool(importlib.util.find_spec("selenium") is not None, "no selenium (pip install selenium)")
    require_tool(shutil.which("chromium") is not None, "no chromium (apt-get install chromium)")
    require_tool(shutil.which("chromedriver") is not None, "no chromedriver (apt-get install chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    opts = Options()
    opts.binary_location = shutil.which("chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
              "--disable-extensions", "--no-first-run"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory) -> pathlib.Path:
    """Where screenshots go: $SCALGRAPH_ARTIFACTS (CI may keep it) or a temporary directory."""
    where = os.environ.get("SCALGRAPH_ARTIFACTS")
    path = pathlib.Path(where) / "report-screenshots" if where else tmp_path_factory.mktemp("report-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def cg_traced(tmp_path_factory, wrapped_sample) -> pathlib.Path:
    """The cg sample built with sgcc and run with --trace at 2 and 4 ranks (once per session)."""
    exe = wrapped_sample("cg")
    out = tmp_path_factory.mktemp("report-cg")
    exp = out / "exp"
    res = scalgraph("run", "--trace", "-n", "2,4", "-o", str(exp), "--", str(exe), cwd=out)
    assert res.returncode == 0, f"scalgraph run --trace failed:\n{res.stderr}"
    return exp


def open_page(driver, path: pathlib.Path, timeout: float = 120.0) -> None:
    driver.get_log("browser")                        # drop what earlier pages logged
    driver.get(path.resolve().as_uri())
    wait_for(driver, "return document.body.dataset.plots === 'ready'", timeout, "the plots to be drawn")


def wait_for(driver, script: str, timeout: float, what: str, *args):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = driver.execute_script(script, *args)
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def console_errors(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


DRAWN = """
var out = [];
document.querySelectorAll(arguments[0] + ' div[data-fig]').forEach(function (d) {
  var hidden = false;
  for (var e = d.parentElement; e; e = e.parentElement) if (e.tagName === 'DETAILS' && !e.open) hidden = true;
  if (hidden) return;
  var r = d.getBoundingClientRect();
  var marks = d.querySelectorAll('.scatterlayer .trace path.js-line, .scatterlayer .point, .barlayer .point path, '
                                 + '.heatmaplayer image, .heatmaplayer .hm').length;
  out.push({fig: d.dataset.fig, state: d.dataset.state || '', w: r.width, h: r.height, marks: marks,
            svg: d.querySelectorAll('svg.main-svg').length});
});
return out;
"""


def assert_plots_drawn(driver, scope: str, expected: set[str]) -> None:
    plots = driver.execute_script(DRAWN, scope)
    got = {p["fig"] for p in plots}
    assert expected <= got, f"plots missing in {scope}: {expected - got}"
    for p in plots:
        assert p["state"] == "drawn" and p["svg"] > 0, f"plot {p['fig']} not drawn: {p}"
        assert p["w"] > 200 and p["h"] > 150 and p["marks"] > 0, f"plot {p['fig']} is empty: {p}"


def screenshot(driver, artifacts: pathlib.Path, name: str) -> pathlib.Path:
    """The top of the page as the reader first sees it (a resize would make plotly redraw everything)."""
    driver.execute_script("window.scrollTo(0, 0)")
    path = artifacts / f"{name}.png"
    assert driver.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000, f"{path}: not a screenshot of the page"
    return path


def click(driver, element) -> None:
    """Click in the middle of the window, clear of the page's sticky header."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def source_lines(driver, card: str) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' pre.source .ln'))"
        ".filter(function (e) { return e.checkVisibility(); }).map(function (e) { return e.textContent; });", card)


def test_cg_experiment_page(browser, cg_traced, artifacts, tmp_path):
    out = tmp_path / "cg.html"
    assert cli.main(["report", str(cg_traced), "-o", str(out), "--source-dir", str(SAMPLE_SRC)]) == 0
    assert out.stat().st_size < 5_000_000
    open_page(browser, out)
    assert console_errors(browser) == []
    from selenium.webdriver.common.by import By
    first = browser.find_element(By.CSS_SELECTOR, "#cause1 > summary")
    assert "cg.c:21" in first.text
    # expanding a cause shows its source: collapse #1, then open it again
    click(browser, first)
    assert source_lines(browser, "#cause1") == []
    click(browser, first)
    wait_for(browser, "return document.querySelector('#cause1').open", 10, "cause #1 to open")
    lines = source_lines(browser, "#cause1")
    hit = browser.execute_script("return Array.from(document.querySelectorAll('#cause1 .ln.hit'))"
                                 ".map(function (e) { return e.textContent; });")
    assert any("s += r[k % n]" in x for x in lines) and any(x.startswith("21") and "AUDIT_WORK" in x for x in hit)
    wait_for(browser, "return Array.from(document.querySelectorAll('#cause1 div[data-fig]'))"
                      ".every(function (d) { return d.dataset.state === 'drawn'; })", 60, "cause #1's plots")
    assert_plots_drawn(browser, "#summary", {"headline"})
    assert_plots_drawn(browser, "#cause1", {"cause1-scaling", "cause1-ranks", "cause1-path"})
    # the experiment was traced: its trace's sections are on the page, with the same cause first
    assert "cg.c:21" in browser.find_element(By.CSS_SELECTOR, "#trace-cause1 > summary").text
    assert_plots_drawn(browser, "#trace-patterns", {"trace-patterns-plot"})
    assert_plots_drawn(browser, "#trace-timeline", {"trace-timeline-plot"})
    # the program tree filters
    search = browser.find_element(By.ID, "tree-search")
    search.send_keys("audit_residual")
    wait_for(browser, "return document.getElementById('tree-count').textContent !== ''", 10, "the tree search")
    matches = browser.execute_script("return Array.from(document.querySelectorAll('#psg-tree li.match'))"
                                     ".filter(function (l) { return l.checkVisibility(); }).length")
    assert matches >= 1
    shot = screenshot(browser, artifacts, "cg-experiment")
    assert console_errors(browser) == []
    print(f"screenshot: {shot}")


def test_cg_trace_page(browser, cg_traced, artifacts, tmp_path):
    out = tmp_path / "cg-trace.html"
    run_dir = cg_traced / "scale-4" / "rep-0"
    assert cli.main(["report", str(run_dir), "-o", str(out), "--source-dir", str(SAMPLE_SRC)]) == 0
    open_page(browser, out)
    assert console_errors(browser) == []
    from selenium.webdriver.common.by import By
    assert "cg.c:21" in browser.find_element(By.CSS_SELECTOR, "#cause1 > summary").text
    assert any("AUDIT_WORK" in x for x in source_lines(browser, "#cause1"))
    for section, fig in (("#patterns", "patterns-plot"), ("#delay", "delay-plot"), ("#critical", "critical-plot"),
                         ("#timeline", "timeline-plot")):
        assert_plots_drawn(browser, section, {fig})
    # the timeline: bars on rank lines, arrows from the causing rank
    arrows = browser.execute_script("return document.querySelectorAll('#timeline .annotation-arrow-g').length")
    assert arrows > 0
    screenshot(browser, artifacts, "cg-trace")
    assert console_errors(browser) == []


def test_hostile_names_render_as_text(browser, artifacts, tmp_path):
    exp, src = hostile_experiment(tmp_path)
    out = tmp_path / "hostile.html"
    assert cli.main(["report", str(exp), "-o", str(out), "--source-dir", str(src)]) == 0
    open_page(browser, out)
    assert console_errors(browser) == []                        # a blocked script would be an error here
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script("return document.scripts.length") == OUR_SCRIPTS
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert not browser.execute_script("return Array.from(document.querySelectorAll('b'))"
                                      ".some(function (b) { return b.textContent.startsWith('name'); })")
    from selenium.webdriver.common.by import By
    text = browser.execute_script("return document.body.innerText")
    assert HOSTILE in text and "\\x1b]0;owned\\x07\\u202e" in text and "evil<b>name.c:12" in text
    lines = source_lines(browser, "#cause1")
    assert any(SOURCE_LINE.split("\t")[0] in x and "\\x1b[31m" in x for x in lines)
    # plotly draws the names as SVG text, never as markup
    labels = browser.execute_script("return Array.from(document.querySelectorAll('#cause1 svg text'))"
                                    ".map(function (t) { return t.textContent; }).join(' ')")
    assert '<img src=x onerror="window.__pwned=2">' in labels
    # a sortable table sorts: largest excess descending, then ascending
    head = browser.find_element(By.CSS_SELECTOR, "#abn-table thead th:nth-child(7)")
    click(browser, head)
    first = [float(v) for v in browser.execute_script(
        "return Array.from(document.querySelectorAll('#abn-table tbody td:nth-child(7)')).map(function (t) "
        "{ return t.dataset.v; });")]
    click(browser, head)
    second = [float(v) for v in browser.execute_script(
        "return Array.from(document.querySelectorAll('#abn-table tbody td:nth-child(7)')).map(function (t) "
        "{ return t.dataset.v; });")]
    assert first == sorted(first, reverse=True) and second == sorted(second) and len(first) >= 2
    screenshot(browser, artifacts, "hostile-experiment")

    out = tmp_path / "hostile-trace.html"
    assert cli.main(["report", str(hostile_trace(tmp_path)), "-o", str(out)]) == 0
    open_page(browser, out)
    assert console_errors(browser) == [] and browser.execute_script("return window.__pwned === undefined")
    assert HOSTILE in browser.find_element(By.CSS_SELECTOR, "#cause1").text
    assert_plots_drawn(browser, "#delay", {"delay-plot"})
