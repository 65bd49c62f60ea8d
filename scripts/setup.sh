#!/usr/bin/env bash
# Installs everything scalgraph needs into ./.venv (idempotent; fast when already done).
# PyPI gives MPI (mpich), mpi4py and a clang (ziglang) with no root.  Fortran needs Debian's
# flang-19 and MPICH (mpich libmpich-dev), installed here when we are root with apt-get; otherwise
# Fortran support is skipped with a message (set SCALGRAPH_FC / MPIFC to your own instead).
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
  # Extra-P (reads `scalgraph export --extrap`; bench_models.py compares with it): its API needs only
  # the test extra's deps, its metadata pins a GUI and numpy<2, hence --no-deps
  .venv/bin/python -m pip install -q --no-deps "extrap==4.2.5"
  touch "$stamp"
fi
# Fortran: flang-19 emits the LLVM IR, and Debian's MPICH has the Fortran bindings (mpif.h,
# libmpichfort) that PyPI's mpich lacks; it shares libmpi's ABI with PyPI's MPICH.
need=()
if ! command -v flang-new-19 >/dev/null 2>&1 && [ -z "${SCALGRAPH_FC:-}" ]; then need+=(flang-19); fi
if ! command -v mpif90.mpich >/dev/null 2>&1 && [ -z "${SCALGRAPH_MPIFC:-}${MPIFC:-}" ]; then
  need+=(mpich libmpich-dev)
fi
# Open MPI beside MPICH: the end-to-end tests run under both (MPICC=mpicc.openmpi ...).
new_openmpi=no
if ! command -v mpicc.openmpi >/dev/null 2>&1; then need+=(openmpi-bin libopenmpi-dev); new_openmpi=yes; fi
# A system clang compiles the bitcode about 3x faster than zig's; one of llvmlite's LLVM version (22)
# also does the instrumented code generation, 1.7x faster than llvmlite's (docs/mpi-and-builds.md).
clang_pkg=""
if ! command -v clang-22 >/dev/null 2>&1 && [ -z "${SCALGRAPH_CC:-}" ]; then clang_pkg=clang-22; fi
# otf2-print (Debian otf2-tools) is an independent OTF2 reader the tests check our archives with.
if ! command -v otf2-print >/dev/null 2>&1; then need+=(otf2-tools); fi
# a real browser for the HTML report's tests (Selenium drives headless chromium through chromedriver)
if ! command -v chromium >/dev/null 2>&1; then need+=(chromium); fi
if ! command -v chromedriver >/dev/null 2>&1; then need+=(chromium-driver); fi
if [ ${#need[@]} -gt 0 ] || [ -n "$clang_pkg" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "scalgraph setup: installing ${need[*]} (Debian) for Fortran support and OTF2 checks ..."
    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    if [ ${#need[@]} -gt 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null; fi
    if [ -n "$clang_pkg" ]; then     # clang-22 comes from Debian's security updates; else clang-19 (bookworm)
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$clang_pkg" >/dev/null 2>&1 ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang-19 >/dev/null || true
    fi
    if [ "$new_openmpi" = yes ] && command -v mpicc.mpich >/dev/null 2>&1; then
      # Open MPI's higher priority would take over mpicc, mpirun and libmpi.so: keep MPICH the default
      update-alternatives --quiet --set mpi /usr/bin/mpicc.mpich || true
      update-alternatives --quiet --set mpirun /usr/bin/mpirun.mpich || true
      update-alternatives --quiet --set "mpi-$(uname -m)-linux-gnu" "/usr/include/$(uname -m)-linux-gnu/mpich" || true
    fi
  else
    echo "scalgraph setup: ${need[*]} missing and not root: Fortran (sgfort) or otf2-print will be unavailable" \
         "(or set SCALGRAPH_FC to a flang and MPIFC to an MPI Fortran wrapper)" >&2
  fi
fi
# OpenMP (sgcc -fopenmp): LLVM's runtime libomp, which implements OMPT (docs/openmp.md), of the newest
# clang-N here (the one sgcc uses); Debian's libomp-N-dev packages conflict, so only that one
omp_v=$(ls /usr/bin 2>/dev/null | sed -n 's/^clang-\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1)
if [ -n "$omp_v" ] && [ ! -e "/usr/lib/llvm-$omp_v/lib/libomp.so" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "libomp-$omp_v-dev" >/dev/null 2>&1 ||
      { DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "libomp-$omp_v-dev" >/dev/null; } ||
      echo "scalgraph setup: libomp-$omp_v-dev could not be installed: sgcc -fopenmp will not link" >&2
  else
    echo "scalgraph setup: libomp-$omp_v-dev missing and not root: sgcc -fopenmp will not link" >&2
  fi
fi
