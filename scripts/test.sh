#!/usr/bin/env bash
# The whole test suite, after installing what it needs.  Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$top/scripts/setup.sh"
cd "$top"
# In CI every optional tool is installed, so a skip is a failure there.
if [ "${CI:-}" = "true" ]; then export SCALGRAPH_NO_SKIP=1; fi
exec .venv/bin/python -m pytest "$@"
