"""The page shell and the escaping every section uses.

The document embeds its stylesheet, its script, plotly.js (the "cartesian" partial bundle shipped in
assets/, see assets/README.md) and the figures as JSON.  A Content-Security-Policy with a fresh
nonce runs only these scripts and forbids every network request, so the file opens offline and a
name that slipped through escaping still could not run."""
from __future__ import annotations

import functools
import html
import importlib.resources
import json
import math
import re
import secrets

from scalgraph.errors import UserError

GENERATOR = "scalgraph report"
# C0/C1 controls, and the bidirectional overrides that can make source text read other than it runs
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_TAB = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean(text, keep_tab: bool = False) -> str:
    """Text taken from inputs, with control characters shown as escapes (\\x1b, \\u202e)."""
    return (_CONTROL_KEEP_TAB if keep_tab else _CONTROL).sub(_visible, str(text))


def esc(text, keep_tab: bool = False) -> str:
    """Text taken from inputs, made safe for HTML element content and quoted attributes."""
    return html.escape(clean(text, keep_tab), quote=True)


def plot_text(text) -> str:
    """Text for plotly labels and hover boxes: plotly reads a few HTML tags in them, so entities it
    turns back into the literal characters."""
    return html.escape(clean(text), quote=False)


def _finite(x):
    """NaN and infinities (which JSON lacks) as null: plotly leaves a gap there."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def json_for_script(data) -> str:
    """JSON that cannot end its <script> element or open a comment in it."""
    text = json.dumps(_finite(data), separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


PLOTLY_ASSET = "plotly-cartesian.min.js"


@functools.lru_cache(maxsize=1)
def plotly_bundle() -> tuple[str, str]:
    """(plotly.js version, its code)."""
    code = _asset(PLOTLY_ASSET)
    if "</script" in code.lower():       # would end its <script> element early
        raise UserError(f"the bundled {PLOTLY_ASSET} cannot be embedded (it contains </script); reinstall scalgraph")
    found = re.search(r"plotly\.js \(?[a-z -]*\)? ?v([0-9][0-9A-Za-z.\-]*)", code[:400])
    return (found.group(1) if found else "?"), code


def _asset(name: str) -> str:
    return (importlib.resources.files("scalgraph.io.html_report") / "assets" / name).read_text(encoding="utf-8")


def document(title: str, header: str, nav: list[tuple[str, str]], body: str, figures: dict) -> str:
    """The whole page.  `header` and `body` are HTML built with esc(); `nav` is (anchor, label) of
    the sections; `figures` maps a plot's id (data-fig of its div) to {"data", "layout"}."""
    nonce = secrets.token_urlsafe(18)
    csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src data: blob:; "
           "font-src data:; base-uri 'none'; form-action 'none'")
    version, bundle = plotly_bundle()
    links = "".join(f'<a href="#{esc(a)}">{esc(label)}</a>' for a, label in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="{GENERATOR}">'
        f"<title>{esc(title)}</title>"
        f"<style>{_asset('report.css')}</style></head>\n"
        '<body data-plots="loading">'
        f'<header class="top"><div class="brand">scalgraph</div><nav>{links}</nav></header>\n'
        f'<main>{header}\n{body}</main>\n'
        f'<footer>Written by scalgraph report; plots by plotly.js {esc(version)} (MIT licence), embedded. '
        "This page opens offline and makes no network requests.</footer>\n"
        f'<script type="application/json" id="sg-figures">{json_for_script(figures)}</script>\n'
        f'<script nonce="{nonce}">{bundle}</script>\n'
        f'<script nonce="{nonce}">{_asset("report.js")}</script>\n'
        "</body></html>\n")


def plot_div(fig_id: str, figures: dict, figure: dict, css_class: str = "plot") -> str:
    """A placeholder the page's script fills with the figure when it becomes visible."""
    figures[fig_id] = figure
    return f'<div class="{css_class}" data-fig="{esc(fig_id)}"></div>'
