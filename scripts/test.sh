#!/usr/bin/env bash
# The whole test suite, after installing what it needs.  Usage: bash scripts/test.sh [pytest args]
# SCALGRAPH_TEST_WORKERS=N runs it on N pytest-xdist workers (a file stays on one worker, so its module
# fixtures are made once; the longest files start first, tests/conftest.py).  The default, 0, runs it in
# this one process: on 2 cores two workers were 1.7x slower (probably because the MPI tests' ranks
# already fill both cores and poll while they wait; docs/testing.md).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$top/scripts/setup.sh"
cd "$top"
# In CI every optional tool is installed, so a skip is a failure there.
if [ "${CI:-}" = "true" ]; then export SCALGRAPH_NO_SKIP=1; fi
exec .venv/bin/python -m pytest -n "${SCALGRAPH_TEST_WORKERS:-0}" --dist loadfile --no-loadscope-reorder "$@"
