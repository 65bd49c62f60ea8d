"""The scaling model a result states as text ("0.00269 + 0.402 * p^(-1)", "0.0685 + 0.0622 * p^7/4",
"1.2 - 0.3 * log2(p)^2", the form of scalgraph.analysis.scaling's model_text), evaluated over p for
the plots.  The page draws the model detect reported, not a fit of its own.

A small recursive-descent parser: numbers, p, log2(...), + - * / ^ and parentheses; an exponent
written as a fraction (p^7/4) is one number, as model_text writes it.  Nothing is evaluated as code."""
from __future__ import annotations

import re

import numpy as np

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)|(log2|p)|(.))")


class ModelSyntaxError(ValueError):
    pass


def _tokens(text: str) -> list[str]:
    out = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ModelSyntaxError(text)
        tok = m.group(1) or m.group(2) or m.group(3)
        if tok.strip():
            out.append(tok)
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, p: np.ndarray):
        self.toks = _tokens(text)
        self.i = 0
        self.p = p

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise ModelSyntaxError(f"expected {want or 'more'} at token {self.i}")
        self.i += 1
        return tok

    def expr(self) -> np.ndarray:
        val = self.term()
        while self.peek() in ("+", "-"):
            val = val + self.term() if self.take() == "+" else val - self.term()
        return val

    def term(self) -> np.ndarray:
        val = self.unary()
        while self.peek() in ("*", "/"):
            val = val * self.unary() if self.take() == "*" else val / self.unary()
        return val

    def unary(self) -> np.ndarray:
        if self.peek() == "-":
            self.take()
            return -self.unary()
        base = self.atom()
        if self.peek() == "^":
            self.take()
            return base ** self.exponent()
        return base

    def exponent(self):
        if self.peek() == "(":
            self.take("(")
            val = self.expr()
            self.take(")")
            return val
        val = float(self.number())
        if self.peek() == "/":
            self.take()
            val /= float(self.number())
        return val

    def number(self) -> str:
        tok = self.take()
        if not re.fullmatch(r"[\d.eE+-]+", tok):
            raise ModelSyntaxError(f"expected a number, got {tok!r}")
        return tok

    def atom(self) -> np.ndarray:
        tok = self.peek()
        if tok == "p":
            self.take()
            return self.p
        if tok == "log2":
            self.take()
            self.take("(")
            val = self.expr()
            self.take(")")
            return np.log2(val)
        if tok == "(":
            self.take()
            val = self.expr()
            self.take(")")
            return val
        return np.full_like(self.p, float(self.number()))


def evaluate(text: str, p) -> np.ndarray:
    """The model at each p; ModelSyntaxError when the text is not such a model."""
    parser = _Parser(text, np.asarray(p, dtype=float))
    with np.errstate(all="ignore"):
        val = parser.expr()
    if parser.peek() is not None:
        raise ModelSyntaxError(f"unexpected {parser.peek()!r} in {text!r}")
    return np.broadcast_to(val, parser.p.shape).astype(float)


def model_curve(cause: dict, scales: list[int], points: int = 48) -> dict | None:
    """The cause's model over p0 .. 4P as plot data, when its text parses and agrees with the
    predictions the result states (the text rounds to 3 digits); else None."""
    text = cause.get("model")
    if not text or len(scales) < 2:
        return None
    grid = np.geomspace(scales[0], 4 * scales[-1], points)
    try:
        t = evaluate(text, grid)
        pred = cause.get("predicted") or {}
        at = np.array([float(q) for q in pred], dtype=float)
        check = evaluate(text, at) if len(at) else np.zeros(0)
    except (ModelSyntaxError, ValueError, ZeroDivisionError):
        return None
    want = np.array([float(v) for v in pred.values()], dtype=float)
    scale = max(float(np.max(np.abs(t))) if t.size else 0.0, 1e-12)
    if not np.all(np.isfinite(t)) or (len(at) and not np.allclose(np.maximum(check, 0), want, rtol=0.02,
                                                                    atol=0.02 * scale)):
        return None
    return {"p": [float(x) for x in grid], "t": [float(max(x, 0.0)) for x in t]}
