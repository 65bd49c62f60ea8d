"""Empirical scaling models per vertex, in Extra-P's performance model normal form.

Extra-P (Calotoiu et al., SC'13) models a metric as f(p) = c0 + c1 * p^i * log2(p)^j with (i, j) from
a small hypothesis set.  We search the same form, and choose differently (docs/scaling-models.md):

* Every hypothesis is fitted by weighted least squares.  The weights are 1/sigma^2 of each measured
  value: from the spread between repetitions (pooled as a relative spread over the scales, since
  timing noise grows with the time) and the Poisson error of sampled times, whichever is larger.
  With neither known the noise is assumed relative (weights 1/y^2) and its size is estimated from
  the residuals of the best fit, or, where that says less, the median of it over the experiment's
  vertices (one run's machine noise is shared; 3 or 4 scales leave one vertex 1 or 2 degrees of
  freedom).  Everything is relative, so the choice does not depend on units.
* The simplest model the data cannot reject wins: hypotheses are grouped by complexity (constant;
  plain powers and log2(p); one log factor; two log factors).  A group's best fit is taken unless
  a more complex group fits significantly better: a likelihood-ratio test at SIGNIFICANCE with
  SHAPE_DOF degrees of freedom, chi^2 with known noise (scaled up when the best fit is worse than
  the noise says), F with noise estimated from one vertex alone.  So a difference within the noise
  never becomes growth, and a log factor is taken with 3 or 4 scales only when the data ask for it.
* No hypothesis that rises then falls between the smallest scale and 4x the largest (p^-i * log^j).
* Per vertex we keep how sure the model is: the interval of the predicted value at 2x the largest
  scale (prediction error of the chosen fit and the range of every model not rejected), and flags:
  scales that cannot tell candidate models apart, non-finite / negative / zero values, one or two
  scales (notes() turns them into text).

Everything is vectorised over vertices: `y` is [vertices x scales]; each hypothesis costs a few
[V x n] array operations, so thousands of vertices take milliseconds.

Scaling loss (our definition, stated in docs/how-detection-works.md): for per-rank time T(p) measured at scales
p0 < ... < pn, the ideal strong-scaling share at p is T(p0) * p0 / p (the same total work spread
over more ranks); the loss at p is max(0, T(p) - T(p0) * p0 / p) seconds.  With `weak=True` the
ideal is T(p0) itself (constant work per rank).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy import special   # the quantiles below; scipy.stats costs seconds to import

_POSITIVE = ("1/4", "1/3", "1/2", "2/3", "3/4", "1", "5/4", "4/3", "3/2", "5/3", "7/4", "2")
_NEGATIVE = ("1/4", "1/2", "1")        # strong scaling: time falls with p (issue 10's set)
EXPONENTS_I = tuple(sorted({Fraction(0)} | {Fraction(s) for s in _POSITIVE} | {-Fraction(s) for s in _NEGATIVE}))
EXPONENTS_J = (0, 1, 2)
SIGNIFICANCE = 0.05          # a more complex model must beat a simpler one at this level
SHAPE_DOF = 2                # a chosen shape costs its coefficient and its (discrete) exponent
AMBIGUOUS_SPREAD = 0.05      # plausible models whose predictions at 2P differ by less are not "told apart"
POOL_MIN = 8                 # vertices needed to pool their noise
REACH = 4.0                  # hypotheses must be monotone from the smallest scale to REACH x the largest

# per-vertex flags (Fits.flags); notes() says what they mean
NONFINITE, NEGATIVE, ZERO, ONE_SCALE, TWO_SCALES, AMBIGUOUS, NO_FIT, ALL_ZERO, NO_VALUE = (1 << k for k in range(9))
_FLAG_NOTES = (        # in the order notes() says them (ZERO only when not ALL_ZERO)
    (NO_VALUE, "no finite value measured: model set to 0"),
    (ONE_SCALE, "one scale only: constant assumed, the fit needs >= 2 scales"),
    (TWO_SCALES, "two scales only: the exponent comes from two points, any model through both fits them"),
    (NONFINITE, "non-finite values (nan/inf) left out"),
    (NEGATIVE, "negative values (not a time?): fitted as given, predictions not clipped"),
    (ALL_ZERO, "zero at every scale"),
    (ZERO, "zero at some scale (below the measurement's resolution?)"),
    (NO_FIT, "no candidate model fits within the measured noise; the closest is shown"),
)


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

    @property
    def group(self) -> int:
        """Complexity group: 0 constant, 1 plain power or log2(p), 2 one log factor or log2(p)^2, 3 two."""
        if self.is_constant:
            return 0
        if self.j == 0 or (self.i == 0 and self.j == 1):
            return 1
        return 2 if self.j == 1 or self.i == 0 else 3

    def complexity(self) -> tuple:
        """Order used to break exact ties: simpler group, then smaller |i|, then smaller j."""
        return (self.group, abs(self.i), self.j, self.i < 0)

    def monotone(self, lo: float, hi: float) -> bool:
        """True when the term does not turn over on [lo, hi]: p^i * ln(p)^j has its extremum at ln p = -j/i."""
        if self.i >= 0 or self.j == 0:
            return True
        turn = float(np.exp(-self.j / float(self.i)))
        return not lo < turn < hi

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
    hs = [Hypothesis(Fraction(0), j) for j in EXPONENTS_J]
    hs += [Hypothesis(Fraction(s), j) for s in _POSITIVE for j in EXPONENTS_J]
    hs += [Hypothesis(-Fraction(s), j) for s in _NEGATIVE for j in EXPONENTS_J]
    return sorted(hs, key=Hypothesis.complexity)


@dataclass
class Fits:
    """Per-vertex scaling models. Arrays have one entry per vertex."""
    scales: np.ndarray           # [n] measured process counts, increasing
    hypothesis: list[Hypothesis]  # the hypothesis set; `choice` indexes it
    choice: np.ndarray           # [V] index of the chosen hypothesis
    c0: np.ndarray               # [V]
    c1: np.ndarray               # [V]
    cv_error: np.ndarray         # [V] leave-one-out RMS relative prediction error (nan with < 3 scales)
    slope: np.ndarray            # [V] log-log slope d log T / d log p (the paper's changing rate)
    flags: np.ndarray = None     # [V] bit flags (NONFINITE, ... above)
    at: float = float("nan")     # the scale the interval is for: 2x the largest
    predicted: np.ndarray = None  # [V] chosen model's value at `at`
    low: np.ndarray = None       # [V] interval of the value at `at` (nan: not known)
    high: np.ndarray = None
    alternative: np.ndarray = None  # [V] a plausible hypothesis predicting most differently (-1: none)
    noise: np.ndarray = None     # [V] relative noise of one value, as used (nan: unknown)
    known_noise: np.ndarray = None  # [V] bool: noise from repetitions / sampling, not from residuals
    clip: np.ndarray = field(default=None, repr=False)   # [V] predictions clipped at 0 (data never negative)

    def __post_init__(self):
        nv = len(self.choice)
        for name, fill in (("flags", 0), ("predicted", np.nan), ("low", np.nan), ("high", np.nan),
                           ("alternative", -1), ("noise", np.nan), ("known_noise", False), ("clip", True)):
            if getattr(self, name) is None:
                setattr(self, name, np.full(nv, fill))

    def model_text(self, v: int, digits: int = 3) -> str:
        k = int(self.choice[v])
        if k < 0:
            return "needs >= 2 scales"
        h = self.hypothesis[k]
        if h.is_constant or self.c1[v] == 0:
            return f"{self.c0[v]:.{digits}g}"
        sign = "+" if self.c1[v] >= 0 else "-"
        return f"{self.c0[v]:.{digits}g} {sign} {abs(self.c1[v]):.{digits}g} * {h.text()}"

    def notes(self, v: int) -> list[str]:
        """What the reader should know about vertex v's model, one short sentence each."""
        f = int(self.flags[v])
        out = [text for flag, text in _FLAG_NOTES if f & flag and not (flag == ZERO and f & ALL_ZERO)]
        if f & AMBIGUOUS and self.alternative[v] >= 0:
            out.append(f"the scales cannot tell this from {self.hypothesis[int(self.alternative[v])].text()}"
                       f" (as good a fit); measure more or larger scales")
        return out

    def interval(self, v: int) -> tuple[float, float, float]:
        """(scale, low, high): where the predicted value at 2x the largest scale may lie."""
        return self.at, float(self.low[v]), float(self.high[v])

    def predict(self, p: float | np.ndarray) -> np.ndarray:
        """[V] (or [V x len(p)]) predicted values; never negative where the data never were."""
        p_arr = np.atleast_1d(np.asarray(p, dtype=float))
        out = np.zeros((len(self.choice), len(p_arr)))
        for k in np.unique(self.choice):
            if k < 0:
                continue
            rows = self.choice == k
            out[rows] = self.c0[rows, None] + self.c1[rows, None] * self.hypothesis[k].term(p_arr)[None, :]
        out = np.where(self.clip[:, None], np.maximum(out, 0.0), out)
        return out[:, 0] if np.ndim(p) == 0 else out


@lru_cache(maxsize=64)
def _critical(dof: int, known: bool) -> float:
    """chi^2 difference (in units of the noise) a more complex model must exceed: a likelihood-ratio
    test with SHAPE_DOF degrees of freedom, chi^2 with known noise, F with the noise estimated from
    `dof` residual degrees of freedom."""
    if known:
        return float(special.chdtri(SHAPE_DOF, SIGNIFICANCE))
    return SHAPE_DOF * float(special.fdtri(SHAPE_DOF, dof, 1 - SIGNIFICANCE))


@lru_cache(maxsize=64)
def _t(dof: int) -> float:
    return float(special.stdtrit(dof, 0.975)) if dof > 0 else np.inf


def _noise(y: np.ndarray, valid: np.ndarray, reps: np.ndarray | None, se: np.ndarray | None):
    """[V x n] sigma of each value (nan: not known) and [V] relative noise of one repetition."""
    nv, n = y.shape
    sigma = np.full((nv, n), np.nan)
    rel = np.full(nv, np.nan)
    if reps is not None:
        reps = np.asarray(reps, dtype=float)
        if reps.ndim == 2:
            reps = reps[None]
        ok = np.isfinite(reps)
        count = ok.sum(axis=2)
        mean = np.where(count > 0, np.where(ok, reps, 0).sum(axis=2) / np.maximum(count, 1), np.nan)
        dev = np.where(ok, reps - mean[:, :, None], 0.0)
        # pooled relative spread: sum of squared relative deviations over (count - 1) degrees of freedom
        scale = np.where(np.abs(mean) > 0, np.abs(mean), np.inf)
        ss = ((dev / scale[:, :, None]) ** 2).sum(axis=2)
        dof = np.where(count > 1, count - 1, 0)
        tot = dof.sum(axis=1)
        rel = np.where(tot > 0, ss.sum(axis=1) / np.maximum(tot, 1), np.nan) ** 0.5
        sigma = np.where(np.isfinite(rel)[:, None], rel[:, None] * np.abs(y) / np.sqrt(np.maximum(count, 1)), np.nan)
    if se is not None:
        se = np.broadcast_to(np.asarray(se, dtype=float), y.shape)
        se = np.where(np.isfinite(se) & (se > 0), se, np.nan)
        sigma = np.fmax(sigma, se)
    known = np.all(np.isfinite(sigma) | ~valid, axis=1) & np.any(valid, axis=1)
    return sigma, rel, known


def fit_models(scales, y: np.ndarray, hyps: list[Hypothesis] | None = None, *, reps: np.ndarray | None = None,
               se: np.ndarray | None = None) -> Fits:
    """Choose, per row of y ([V x n] values at `scales`), the simplest hypothesis the data cannot reject.

    reps: [V x n x R] the repetitions behind y (nan where a repetition is missing), for their spread.
    se:   [V x n] known standard error of y, e.g. the Poisson error of sampled times.
    """
    p = np.asarray(scales, dtype=float)
    y = np.asarray(y, dtype=float)
    if y.ndim == 1:
        y = y[None, :]
    nv, n = y.shape
    hyps = list(hyps or hypotheses())
    if len(p):
        hyps = [h for h in hyps if h.monotone(p.min(), REACH * p.max())]
    hyps.sort(key=Hypothesis.complexity)
    const = next(k for k, h in enumerate(hyps) if h.is_constant) if any(h.is_constant for h in hyps) else None

    valid = np.isfinite(y)
    yv = np.where(valid, y, 0.0)
    count = valid.sum(axis=1)
    flags = np.zeros(nv, dtype=np.int64)
    flags[(count < n) & (count > 0)] |= NONFINITE
    flags[np.any(valid & (y < 0), axis=1)] |= NEGATIVE
    zero = valid & (y == 0)
    flags[np.any(zero, axis=1) & ~np.all(zero | ~valid, axis=1)] |= ZERO
    flags[np.all(zero | ~valid, axis=1) & (count > 0)] |= ALL_ZERO
    flags[count == 0] |= NO_VALUE
    flags[count == 1] |= ONE_SCALE
    flags[count == 2] |= TWO_SCALES
    clip = ~np.any(valid & (y < 0), axis=1)
    slope = log_log_slope(p, y)

    sigma, rel, known = _noise(y, valid, reps, se)
    # weights: 1/sigma^2 where the noise is known, else relative (1/y^2) with a floor so a zero is not
    # an infinitely exact point
    # the size a relative error is taken of: the value itself, but not much below the power-law trend
    # through the row's positive values (a zero or a sign change is a point far off, not an exact one)
    top = np.abs(yv).max(axis=1, initial=0.0)
    floor = np.where(top > 0, 1e-3 * top, 1.0)[:, None]
    rel_scale = np.maximum(np.maximum(np.abs(yv), 0.5 * _trend(p, y)), floor)
    sig = np.where(known[:, None], np.fmax(sigma, 1e-9 * rel_scale), rel_scale)
    w = np.where(valid, 1.0 / sig ** 2, 0.0)
    # known-noise rows with a zero spread are exact to rounding: treat them as having unknown noise
    exact = known & (np.where(valid & np.isfinite(sigma), sigma / rel_scale, 0).max(axis=1, initial=0) <= 1e-9)
    known = known & ~exact
    w = np.where(exact[:, None] & valid, 1.0 / rel_scale ** 2, w)

    at = 2.0 * float(p.max()) if len(p) else float("nan")
    nh = len(hyps)
    chi2 = np.full((nh, nv), np.inf)
    loo = np.full((nh, nv), np.inf)
    c0s = np.zeros((nh, nv))
    c1s = np.zeros((nh, nv))
    pred = np.full((nh, nv), np.nan)
    pvar = np.full((nh, nv), np.inf)
    s0 = w.sum(axis=1)
    s0_safe = np.where(s0 > 0, s0, 1.0)
    ym = (w * yv).sum(axis=1) / s0_safe
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for k, h in enumerate(hyps):
            x = h.term(p)
            if not np.all(np.isfinite(x)):
                continue
            xs = x / max(float(np.abs(x).max()), 1e-300)        # scaled for conditioning
            xat = float(h.term(np.array([at]))[0]) / max(float(np.abs(x).max()), 1e-300)
            if h.is_constant:
                c1 = np.zeros(nv)
                r = np.where(valid, yv - ym[:, None], 0.0)
                lev = w / s0_safe[:, None]
                c0 = ym
                pv = 1.0 / s0_safe
            else:
                xm = (w @ xs) / s0_safe
                dx = xs[None, :] - xm[:, None]
                sdxx = (w * dx * dx).sum(axis=1)
                ok = sdxx > 1e-12 * np.maximum((w * xs * xs).sum(axis=1), 1e-300)
                c1 = np.where(ok, (w * dx * yv).sum(axis=1) / sdxx, 0.0)
                r = np.where(valid, yv - ym[:, None] - c1[:, None] * dx, 0.0)
                lev = w * (1.0 / s0_safe[:, None] + dx * dx / sdxx[:, None])
                c0 = ym - c1 * xm
                pv = np.where(ok, 1.0 / s0_safe + (xat - xm) ** 2 / sdxx, np.inf)
                c1 = c1 / max(float(np.abs(x).max()), 1e-300)
            chi2[k] = (w * r * r).sum(axis=1)
            loo[k] = np.where(lev < 1 - 1e-9, w * (r / (1 - lev)) ** 2, np.where(valid, np.inf, 0.0)).sum(axis=1)
            c0s[k], c1s[k] = c0, c1
            pred[k] = c0 + c1 * float(h.term(np.array([at]))[0])
            pvar[k] = pv
    groups = np.array([h.group for h in hyps])
    dof = count - 2
    best = np.min(chi2, axis=0)
    tiny = 1e-24 * np.maximum(count, 1)
    # the noise scale the comparison uses: the known noise (inflated when even the best fit is worse
    # than it says), else the residual of the best fit
    own = np.maximum(best, tiny) / np.maximum(dof, 1)
    phi = np.where(known, np.maximum(1.0, best / np.maximum(dof, 1)), own)
    crit = np.array([_critical(int(max(d, 1)), bool(kn)) for d, kn in zip(dof, known)]) if nv else np.zeros(0)
    pooled = _pooled_noise(own, dof, ~known & (count >= 3))
    if pooled > 0:
        # the pooled noise is taken as known, scaled up (like known noise) where the vertex's own
        # residual says it is noisier
        use = ~known & (count >= 3)
        phi = np.where(use, np.maximum(pooled, own), phi)
        crit = np.where(use, _critical(1, True), crit)
    excess = (chi2 - best[None, :]) / phi[None, :]
    plausible = (excess <= crit[None, :]) | (chi2 <= tiny[None, :])
    # the simplest group whose best fit is plausible, and in it the best fit (ties: the simplest)
    choice = np.full(nv, -1)
    for g in sorted(set(groups.tolist())):
        ks = np.flatnonzero(groups == g)
        pick = ks[_first_min(chi2[ks])]
        ok = plausible[pick, np.arange(nv)] & (choice < 0)
        choice[ok] = pick[ok]
    fitted = count >= 3
    no_fit = fitted & known & (best / np.maximum(dof, 1) > _critical(1, True) * 2)
    flags[no_fit] |= NO_FIT

    idx = np.arange(nv)
    ch = np.maximum(choice, 0)
    c0, c1 = c0s[ch, idx].copy(), c1s[ch, idx].copy()
    cv = np.sqrt(loo[ch, idx] / np.maximum(count, 1)) if nh else np.full(nv, np.nan)
    tq = np.array([_t(int(d)) for d in dof]) if nv else np.zeros(0)
    half = np.where(known, 2.0, tq) * np.sqrt(pvar * phi[None, :])
    lo_all = np.where(plausible, pred - half, np.inf)
    hi_all = np.where(plausible, pred + half, -np.inf)
    low, high = lo_all.min(axis=0), hi_all.max(axis=0)
    predicted = pred[ch, idx]
    diff = np.where(plausible, np.abs(pred - predicted[None, :]), -1.0)
    alternative = np.argmax(diff, axis=0) if nh else np.full(nv, -1)
    spread = diff[alternative, idx]
    # cannot tell apart: a model as plausible extrapolates beyond the chosen one's own error (and by
    # more than AMBIGUOUS_SPREAD of it, so that trivial differences are not reported)
    own_half = half[ch, idx]
    ambiguous = fitted & (spread > np.maximum(own_half, AMBIGUOUS_SPREAD * np.abs(predicted))) & (alternative != choice)
    flags[ambiguous] |= AMBIGUOUS
    alternative = np.where(ambiguous, alternative, -1)
    rel_sig = np.sort(np.where(valid, sig / rel_scale, np.inf), axis=1)       # median over the valid values
    mid = rel_sig[idx, np.maximum(count - 1, 0) // 2] if n else np.full(nv, np.nan)
    noise = np.where(known, mid, np.sqrt(phi))

    # fewer than three finite values: defined models, said so in flags
    few = ~fitted
    if few.any():
        c0[few], c1[few], choice[few], cv[few] = 0.0, 0.0, const if const is not None else -1, np.nan
        one = count == 1
        c0[one] = (yv.sum(axis=1))[one]
        two = np.flatnonzero(count == 2)
        if len(two):
            _two_point(p, yv, valid, two, hyps, known, sigma, choice, c0, c1)
        predicted[few] = 0.0
        low[few], high[few] = np.nan, np.nan
        for k in np.unique(choice[few]):
            rows = few & (choice == k)
            predicted[rows] = c0[rows] + c1[rows] * hyps[k].term(np.array([at]))[0]
        if len(two):     # every monotone model passes through both points: they all are the interval
            lo2, hi2 = _two_point_range(p, yv, valid, two, hyps, at)
            low[two], high[two] = lo2, hi2
        noise[few] = np.nan
    if len(p):
        predicted = np.where(clip, np.maximum(predicted, 0.0), predicted)
        low = np.where(clip, np.maximum(low, 0.0), low)
    return Fits(p, hyps, choice, c0, c1, cv, slope, flags, at, predicted, low, high, alternative, noise, known, clip)




def _pooled_noise(own: np.ndarray, dof: np.ndarray, rows: np.ndarray) -> float:
    """The experiment's typical relative noise (squared) where no vertex's noise is known: the median
    over vertices of their best fit's residual variance, corrected for the median of chi^2(dof)/dof.
    All vertices of one run share its machine noise; with 3 or 4 scales one vertex's own residuals
    have too few degrees of freedom to tell noise from growth."""
    if rows.sum() < POOL_MIN:
        return 0.0
    d = int(np.median(dof[rows]))
    return float(np.median(own[rows]) / (special.chdtri(max(d, 1), 0.5) / max(d, 1)))


def _first_min(a: np.ndarray) -> np.ndarray:
    """Row index of the smallest value per column; among equal values (relative 1e-9) the first."""
    m = a.min(axis=0)
    near = a <= m[None, :] * (1 + 1e-9) + 1e-300
    return np.argmax(near, axis=0)


def _two_point(p, yv, valid, rows, hyps, known, sigma, choice, c0, c1) -> None:
    """Two scales: constant when the two values agree within their known noise; else the plain power
    nearest to the log-log slope through both points (p^1 when a value is not positive)."""
    plain = [(k, float(h.i)) for k, h in enumerate(hyps) if h.j == 0 and not h.is_constant]
    for v in rows:
        pts = np.flatnonzero(valid[v])
        (pa, pb), (ya, yb) = p[pts], yv[v, pts]
        if known[v] and abs(yb - ya) <= 2.0 * np.hypot(sigma[v, pts[0]], sigma[v, pts[1]]):
            continue          # constant (already set) at the mean
        if ya > 0 and yb > 0:
            b = np.log(yb / ya) / np.log(pb / pa)
            k = min(plain, key=lambda kv: abs(kv[1] - b))[0]
        else:
            k = next(k for k, e in plain if e == 1.0)
        xa, xb = hyps[k].term(np.array([pa, pb]))
        choice[v] = k
        c1[v] = (yb - ya) / (xb - xa)
        c0[v] = ya - c1[v] * xa
    for v in rows:
        if hyps[choice[v]].is_constant:
            c0[v] = yv[v, valid[v]].mean()


def _two_point_range(p, yv, valid, rows, hyps, at) -> tuple[np.ndarray, np.ndarray]:
    lo = np.full(len(rows), np.inf)
    hi = np.full(len(rows), -np.inf)
    for n, v in enumerate(rows):
        pts = np.flatnonzero(valid[v])
        for h in hyps:
            if h.is_constant:
                continue
            xa, xb, xt = h.term(np.array([p[pts[0]], p[pts[1]], at]))
            c1 = (yv[v, pts[1]] - yv[v, pts[0]]) / (xb - xa)
            val = yv[v, pts[0]] + c1 * (xt - xa)
            lo[n], hi[n] = min(lo[n], val), max(hi[n], val)
    return lo, hi


def _log_log_line(p: np.ndarray, y: np.ndarray):
    """Least-squares line log y = my + b (log p - mx) per row through its positive finite values:
    (mask of those values, their count, mx, my, b); b is 0 where fewer than two differ in p."""
    ok = np.isfinite(y) & (y > 0)
    w = ok.astype(float)
    lp = np.broadcast_to(np.log(p)[None, :], y.shape)
    ly = np.log(np.where(ok, y, 1.0))
    count = w.sum(axis=1)
    safe = np.maximum(count, 1.0)
    mx, my = (w * lp).sum(axis=1) / safe, (w * ly).sum(axis=1) / safe
    dx = np.where(ok, lp - mx[:, None], 0.0)
    sxx = (dx * dx).sum(axis=1)
    b = np.where(sxx > 0, (dx * (ly - my[:, None])).sum(axis=1) / np.where(sxx > 0, sxx, 1.0), 0.0)
    return ok, count, mx, my, b


def _trend(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[V x n] power law exp(a) * p^b fitted in log-log space to each row's positive finite values
    (0 where a row has fewer than two)."""
    _, count, mx, my, b = _log_log_line(p, y)
    out = np.exp(my[:, None] + b[:, None] * (np.log(p)[None, :] - mx[:, None]))
    return np.where((count >= 2)[:, None], out, 0.0)


def log_log_slope(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of log T against log p per row over its finite values; 0 where a value is
    not positive or fewer than two are finite."""
    if len(p) < 2:
        return np.zeros(y.shape[0])
    ok, count, _, _, b = _log_log_line(np.asarray(p, dtype=float), y)
    positive = (count == np.isfinite(y).sum(axis=1)) & (count >= 2)
    return np.where(positive, b, 0.0)


def scaling_loss(scales, y: np.ndarray, weak: bool = False) -> np.ndarray:
    """[V x n] seconds beyond the ideal share at each scale (see module docstring)."""
    p = np.asarray(scales, dtype=float)
    y = np.asarray(y, dtype=float)
    base = y[:, :1]
    ideal = base if weak else base * p[0] / p[None, :]
    return np.maximum(y - ideal, 0.0)
