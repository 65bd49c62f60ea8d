"""Per-scale program arguments for `scalgraph run`: `{p}` is the process count of the run, `{px} {py}
{pz}` a process grid for it, `{{`/`}}` literal braces.

The grid is the factorisation MPI_Dims_create chooses for p with as many dimensions as the highest of
px/py/pz used: balanced (smallest difference between the largest and smallest factor), non-increasing.
Among equally balanced grids MPICH takes the one with the larger first factor (p=360, 3-D: 10 6 6, not
9 8 5); `dims_create` does the same and agrees with MPICH's MPI_Dims_create for every p up to 3000 in
2 and 3 dimensions (tests/test_run_placeholders.py checks it against mpi4py's MPI.Compute_dims).
"""
from __future__ import annotations

import re

from scalgraph.errors import UserError

GRID = ("px", "py", "pz")
NAMES = ("p",) + GRID
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def dims_create(p: int, ndims: int) -> list[int]:
    """The ndims factors of p that MPI_Dims_create(p, ndims, all zero) returns."""
    if p < 1 or ndims < 1:
        raise ValueError(f"dims_create needs p >= 1 and ndims >= 1 (got {p}, {ndims})")
    return list(min(_factorisations(p, ndims, p), key=lambda d: (d[0] - d[-1], -d[0], [-x for x in d])))


def _factorisations(p: int, ndims: int, largest: int) -> list[tuple[int, ...]]:
    """All non-increasing tuples of ndims factors whose product is p and whose first factor <= largest."""
    if ndims == 1:
        return [(p,)] if p <= largest else []
    out = []
    for f in _divisors(p):
        if f <= largest:
            out += [(f,) + rest for rest in _factorisations(p // f, ndims - 1, f)]
    return out


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def placeholders_in(args: list[str]) -> set[str]:
    """The placeholder names used in args; a malformed or unknown one is a UserError naming the argument."""
    used: set[str] = set()
    for arg in args:
        for m in _TOKEN.finditer(arg):
            tok = m.group(0)
            if tok in ("{{", "}}"):
                continue
            name = m.group(1)
            if name is None:
                raise UserError(f"program argument {arg!r}: a lone {tok!r}; write {tok * 2!r} for a literal brace")
            if name not in NAMES:
                raise UserError(f"program argument {arg!r}: unknown placeholder {{{name}}}; the known ones are "
                                "{p} (process count) and {px} {py} {pz} (process grid); write {{ and }} for literal braces")
            used.add(name)
    return used


def grid_dims(used: set[str]) -> int:
    """Dimensions of the grid the arguments ask for: the highest of px/py/pz used (0 if none)."""
    return max((i + 1 for i, n in enumerate(GRID) if n in used), default=0)


def values_for(p: int, ndims: int) -> dict[str, int]:
    values = {"p": p}
    if ndims:
        values.update(zip(GRID, dims_create(p, ndims)))
    return values


def expand(args: list[str], p: int) -> list[str]:
    """args with the placeholders replaced for a run with p processes."""
    values = values_for(p, grid_dims(placeholders_in(args)))

    def one(m: re.Match) -> str:
        tok = m.group(0)
        return tok[0] if tok in ("{{", "}}") else str(values[m.group(1)])

    return [_TOKEN.sub(one, arg) for arg in args]
