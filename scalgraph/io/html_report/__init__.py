"""The HTML report: one self-contained page (styles, scripts, plotly.js and the data embedded) that
opens offline from disk.  A writer like the others in scalgraph/io: it renders result dicts that the
analyses built (scalgraph.analysis.detect.analyse, scalgraph.trace.report.build_report) plus the
per-rank arrays the report command gathered; it computes nothing of its own.

Everything taken from inputs (names, paths, source text) is escaped where the page is built, and the
page's Content-Security-Policy runs only the page's own scripts and allows no network access."""
from scalgraph.io.html_report.experiment_page import experiment_page
from scalgraph.io.html_report.trace_page import trace_page

__all__ = ["experiment_page", "trace_page"]
