#!/usr/bin/env bash
# The whole test suite, after installing what it needs.  Usage: bash scripts/test.sh [pytest args]
# It runs on SCALGRAPH_TEST_WORKERS workers (pytest-xdist; default 2, 0 = in this one process): one
# worker compiles or analyses while the other's MPI ranks wait.  A test file stays on one worker
# (--dist loadfile), so its module fixtures (builds, traced runs) are made once, and the files start
# longest first (tests/conftest.py; --no-loadscope-reorder keeps that order).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$top/scripts/setup.sh"
cd "$top"
# In CI every optional tool is installed, so a skip is a failure there.
if [ "${CI:-}" = "true" ]; then export SCALGRAPH_NO_SKIP=1; fi
exec .venv/bin/python -m pytest -n "${SCALGRAPH_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
