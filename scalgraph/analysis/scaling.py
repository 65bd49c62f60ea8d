"""Empirical scaling models per vertex, in Extra-P's performance model normal form.

Extra-P (Calotoiu et al., "Using automated performance modeling to find scalability bugs in complex
codes", SC'13) models a metric as f(p) = c0 + c1 * p^i * log2(p)^j with (i, j) taken from a small
hypothesis set, and chooses the hypothesis by cross-validation.  We do the same with one term:
every hypothesis is fitted by least squares, and the one with the smallest leave-one-out prediction
error wins (ties go to the simpler model).  With fewer than five scales only plain powers p^i with
|i| <= 2 compete (too few points to tell a log factor from noise).  Because strong scaling makes per-rank times *fall*
with p, the exponent set also holds the negative exponents -i (Extra-P's strong-scaling mode).

Everything is vectorised over vertices: `y` is [vertices x scales], one least-squares solve per
hypothesis for all vertices at once, so 60,000 vertices take milliseconds.

Scaling loss (our definition, stated in the README): for per-rank time T(p) measured at scales
p0 < ... < pn, the ideal strong-scaling share at p is T(p0) * p0 / p (the same total work spread
over more ranks); the loss at p is max(0, T(p) - T(p0) * p0 / p) seconds.  With `weak=True` the
ideal is T(p0) itself (constant work per rank).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

_POSITIVE = ("0", "1/4", "1/3", "1/2", "2/3", "3/4", "1", "5/4", "4/3", "3/2", "5/3", "7/4", "2",
             "9/4", "7/3", "5/2", "8/3", "11/4", "3")
EXPONENTS_I = tuple(sorted({Fraction(s) for s in _POSITIVE} | {-Fraction(s) for s in _POSITIVE}))
EXPONENTS_J = (0, 1, 2)
FULL_SET_MIN_SCALES = 5      # Extra-P's advice: at least five measurement points per parameter


@dataclass(frozen=True)
class Hypothesis:
    i: Fraction
    j: int

    @property
    def is_constant(self) -> bool:
        return self.i == 0 and self.j == 0

    def term(self, p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        return p ** float(self.i) * np.log2(p) ** self.j

    def complexity(self) -> tuple:
        """Order used to break ties: constant first, then smaller |i|, then smaller j."""
        return (abs(self.i), self.j, self.i < 0)

    def text(self) -> str:
        if self.is_constant:
            return "1"
        parts = []
        if self.i != 0:
            parts.append("p" if self.i == 1 else f"p^{self.i}" if self.i > 0 else f"p^({self.i})")
        if self.j:
            parts.append("log2(p)" if self.j == 1 else f"log2(p)^{self.j}")
        return " * ".join(parts)


def hypotheses() -> list[Hypothesis]:
    hs = [Hypothesis(i, j) for i in EXPONENTS_I for j in EXPONENTS_J]
    return sorted(hs, key=Hypothesis.complexity)


@dataclass
class Fits:
    """Per-vertex scaling models. Arrays have one entry per vertex."""
    scales: np.ndarray           # [n] measured process counts, increasing
    hypothesis: list[Hypothesis]  # the hypothesis set; `choice` indexes it
    choice: np.ndarray           # [V] index of the chosen hypothesis (-1: not fitted, too few scales)
    c0: np.ndarray               # [V]
    c1: np.ndarray               # [V]
    cv_error: np.ndarray         # [V] leave-one-out RMS prediction error (nan with < 3 scales)
    slope: np.ndarray            # [V] log-log slope d log T / d log p (the paper's changing rate)

    def model_text(self, v: int, digits: int = 3) -> str:
        k = int(self.choice[v])
        if k < 0:
            return "needs >= 2 scales"
        h = self.hypothesis[k]
        if h.is_constant or abs(self.c1[v]) < 1e-300:
            return f"{self.c0[v]:.{digits}g}"
        sign = "+" if self.c1[v] >= 0 else "-"
        return f"{self.c0[v]:.{digits}g} {sign} {abs(self.c1[v]):.{digits}g} * {h.text()}"

    def predict(self, p: float | np.ndarray) -> np.ndarray:
        """[V] (or [V x len(p)]) predicted values, never negative (a time cannot be)."""
        p_arr = np.atleast_1d(np.asarray(p, dtype=float))
        out = np.zeros((len(self.choice), len(p_arr)))
        for k in np.unique(self.choice):
            if k < 0:
                continue
            rows = self.choice == k
            out[rows] = self.c0[rows, None] + self.c1[rows, None] * self.hypothesis[k].term(p_arr)[None, :]
        out = np.maximum(out, 0.0)
        return out[:, 0] if np.ndim(p) == 0 else out


def _lsq_two_params(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least squares y = c0 + c1*x for every row of y ([V x n]) with one shared x ([n])."""
    xm = x.mean()
    dx = x - xm
    sxx = float(dx @ dx)
    ym = y.mean(axis=1)
    if sxx <= 0.0:
        return ym, np.zeros_like(ym)
    c1 = (y @ dx) / sxx
    return ym - c1 * xm, c1


def fit_models(scales, y: np.ndarray, hyps: list[Hypothesis] | None = None) -> Fits:
    """Choose, per row of y ([V x n] values at `scales`), the hypothesis with the smallest
    leave-one-out error.  With 2 scales no cross-validation is possible: the log-log power law
    through both points is used (Extra-P also needs more points than parameters)."""
    p = np.asarray(scales, dtype=float)
    y = np.asarray(y, dtype=float)
    if y.ndim == 1:
        y = y[None, :]
    nv, n = y.shape
    hyps = hyps or hypotheses()
    slope = log_log_slope(p, y)
    if n < 2:
        nan = np.full(nv, np.nan)
        return Fits(p, hyps, np.full(nv, -1), nan.copy(), nan.copy(), nan.copy(), nan)
    if n == 2:
        return _two_point_fit(p, y, hyps, slope)
    if n < FULL_SET_MIN_SCALES:
        # with 3 or 4 points a log factor or a steep exponent fits noise: only plain powers, |i| <= 2
        hyps = [h for h in hyps if h.j == 0 and abs(h.i) <= 2]
    best_err = np.full(nv, np.inf)
    choice = np.zeros(nv, dtype=int)
    y_t = np.ascontiguousarray(y.T)       # [n x V]: each hypothesis costs one small matmul
    tolerance = 1e-10 * (1 + np.abs(y).max(axis=1))
    for k, h in enumerate(hyps):
        x = h.term(p)
        if not np.all(np.isfinite(x)):
            continue
        err = np.sqrt(((loo_residual_matrix(x) @ y_t) ** 2).mean(axis=0))
        # strictly better by a relative margin, so noiseless ties resolve to the simpler model
        better = err < best_err * (1 - 1e-6) - tolerance
        choice[better] = k
        best_err[better] = err[better]
    c0 = np.empty(nv)
    c1 = np.empty(nv)
    for k in np.unique(choice):
        rows = choice == k
        c0[rows], c1[rows] = _lsq_two_params(hyps[k].term(p), y[rows])
    return Fits(p, hyps, choice, c0, c1, best_err, slope)


def loo_residual_matrix(x: np.ndarray) -> np.ndarray:
    """[n x n] matrix A such that A @ y are the leave-one-out prediction errors of y = c0 + c1*x.

    For least squares the error at a left-out point k is r_k / (1 - h_kk), with r = (I - H) y the
    residual of the fit on all points and H the hat matrix.  x is shared by all vertices, so A is
    built once per hypothesis.  A point that alone determines the slope (h_kk = 1) has no such
    shortcut; its row is built by refitting without it."""
    n = len(x)
    design = np.stack([np.ones(n), x], axis=1)
    hat = design @ np.linalg.pinv(design)
    lev = np.diag(hat)
    if np.all(1.0 - lev > 1e-9):
        return (np.eye(n) - hat) / (1.0 - lev)[:, None]
    a = np.zeros((n, n))
    for out in range(n):
        keep = np.arange(n) != out
        a[out, keep] = -(design[out] @ np.linalg.pinv(design[keep]))
        a[out, out] = 1.0
    return a


def _two_point_fit(p, y, hyps, slope) -> Fits:
    """Two scales: T(p) = c1 * p^b exactly through both points, expressed as the nearest hypothesis."""
    nv = y.shape[0]
    exps = np.array([float(h.i) if h.j == 0 else np.nan for h in hyps])
    b = np.nan_to_num(slope)
    choice = np.array([int(np.nanargmin(np.abs(exps - bi))) for bi in b]) if nv else np.zeros(0, int)
    c0 = np.empty(nv)
    c1 = np.empty(nv)
    for k in np.unique(choice):
        rows = choice == k
        c0[rows], c1[rows] = _lsq_two_params(hyps[k].term(p), y[rows])
    return Fits(p, hyps, choice, c0, c1, np.full(nv, np.nan), slope)


def log_log_slope(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of log T against log p per row; 0 where T is 0 anywhere."""
    if len(p) < 2:
        return np.zeros(y.shape[0])
    lp = np.log(p)
    positive = np.all(y > 0, axis=1)
    ly = np.log(np.where(y > 0, y, 1.0))
    _, c1 = _lsq_two_params(lp, ly)
    return np.where(positive, c1, 0.0)


def scaling_loss(scales, y: np.ndarray, weak: bool = False) -> np.ndarray:
    """[V x n] seconds beyond the ideal share at each scale (see module docstring)."""
    p = np.asarray(scales, dtype=float)
    y = np.asarray(y, dtype=float)
    base = y[:, :1]
    ideal = base if weak else base * p[0] / p[None, :]
    return np.maximum(y - ideal, 0.0)
