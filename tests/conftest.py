"""Shared fixtures.  Tests that need an optional tool (MPI, clang, flang, otf2) use `require_tool`,
which skips with the reason printed -- except when SCALGRAPH_NO_SKIP=1 (set by CI, where every
tool is installed), where a missing tool fails the test instead."""
from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def samples_dir() -> pathlib.Path:
    return ROOT / "samples"


def require_tool(available: bool, reason: str) -> None:
    """Skip (or fail in CI) when an optional tool is missing."""
    if available:
        return
    if os.environ.get("SCALGRAPH_NO_SKIP") == "1":
        pytest.fail(f"required tool missing in CI: {reason}")
    pytest.skip(reason)
