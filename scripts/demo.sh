#!/usr/bin/env bash
# The main job end to end on a sample, after installing what it needs.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$top/scripts/setup.sh"
cd "$top"
out=${SCALGRAPH_DEMO_DIR:-$top/out/demo}
mkdir -p "$out"
.venv/bin/sgcc -O2 -o "$out/fig3" samples/fig3/fig3.c
.venv/bin/scalgraph psg "$out/fig3"
