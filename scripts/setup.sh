#!/usr/bin/env bash
# Installs everything scalgraph needs into ./.venv (idempotent; fast when already done).
# PyPI gives MPI (mpich), mpi4py and a clang (ziglang) with no root.  Fortran needs Debian's
# flang-19, installed here when we are root with apt-get; otherwise Fortran support is skipped
# with a message (set SCALGRAPH_FC to a flang of your own instead).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
py=${PYTHON:-python3}
stamp=.venv/.scalgraph-installed
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[bundled,otf2,test]"
  touch "$stamp"
fi
if ! command -v flang-new-19 >/dev/null 2>&1 && [ -z "${SCALGRAPH_FC:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "scalgraph setup: installing flang-19 (Debian) for Fortran support ..."
    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q flang-19 >/dev/null
  else
    echo "scalgraph setup: flang-new-19 not found and not root: Fortran (sgfort) will be unavailable" >&2
  fi
fi
