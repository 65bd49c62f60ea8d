"""Per-scale program arguments of `scalgraph run` ({p}, {px} {py} {pz}, {{ }}): the grid factorisation
against the real MPI_Dims_create (mpi4py), the expansion, and the refusal of unknown placeholders."""
from __future__ import annotations

import importlib.util

import pytest

from conftest import require_tool
from scalgraph.errors import UserError
from scalgraph.runtime.placeholders import dims_create, expand, grid_dims, placeholders_in


@pytest.mark.parametrize("p, ndims, want", [
    (8, 3, [2, 2, 2]), (4, 3, [2, 2, 1]), (8, 2, [4, 2]), (12, 3, [3, 2, 2]), (2, 2, [2, 1]),
    (1, 3, [1, 1, 1]), (7, 2, [7, 1]), (16, 3, [4, 2, 2]), (360, 3, [10, 6, 6]), (36, 2, [6, 6]), (6, 1, [6]),
])
def test_known_grids(p, ndims, want):
    assert dims_create(p, ndims) == want


def test_grids_agree_with_mpi_dims_create():
    require_tool(importlib.util.find_spec("mpi4py") is not None, "no mpi4py (pip install mpi4py)")
    from mpi4py import MPI
    for ndims in (1, 2, 3):
        for p in range(1, 513):
            assert dims_create(p, ndims) == MPI.Compute_dims(p, ndims), (p, ndims)


def test_expansion_per_scale():
    args = ["-n", "{p}", "--grid={px}x{py}x{pz}", "{{literal}}", "plain"]
    assert expand(args, 8) == ["-n", "8", "--grid=2x2x2", "{literal}", "plain"]
    assert expand(args, 12) == ["-n", "12", "--grid=3x2x2", "{literal}", "plain"]
    assert expand(["{px}", "{py}"], 8) == ["4", "2"]          # 2-D: py is the highest used
    assert expand(["{px}"], 8) == ["8"]
    assert expand(["{p}{p}", "}}{{"], 3) == ["33", "}{"]
    assert expand([], 4) == [] and expand(["a b"], 4) == ["a b"]


def test_dimensionality_is_the_highest_grid_name_used():
    assert grid_dims(placeholders_in(["{pz}"])) == 3
    assert grid_dims(placeholders_in(["{px}", "{py}"])) == 2
    assert grid_dims(placeholders_in(["{p}", "{{pz}}"])) == 0


@pytest.mark.parametrize("arg, message", [
    ("{q}", "unknown placeholder {q}"), ("{p*16}", "unknown placeholder {p*16}"), ("{}", "unknown placeholder {}"),
    ("a{b", "lone '{'"), ("x}", "lone '}'"), ("{P}", "unknown placeholder {P}"),
])
def test_bad_placeholders_are_refused(arg, message):
    with pytest.raises(UserError) as e:
        placeholders_in(["ok", arg])
    assert message in str(e.value) and "\n" not in str(e.value)
