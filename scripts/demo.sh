#!/usr/bin/env bash
# The main job end to end on a sample, after installing what it needs.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$top/scripts/setup.sh"
cd "$top"
out=${SCALGRAPH_DEMO_DIR:-$top/out/demo}
mkdir -p "$out"
# samples/cg: a CG solver where one rank runs a fixed-size audit loop each iteration (cg.c:21);
# its neighbours wait in the halo exchange and everybody in the Allreduce (ScalAna's motivating case).
echo "== build with the compile wrapper: sgcc -O2 -g -o $out/cg samples/cg/cg.c"
.venv/bin/sgcc -O2 -g -o "$out/cg" samples/cg/cg.c
echo "== run at 2, 4 and 8 processes: scalgraph run -n 2,4,8 -o $out/cg-exp -- $out/cg"
.venv/bin/scalgraph run -n 2,4,8 --force -o "$out/cg-exp" -- "$out/cg"
cat "$out/cg-exp/scale-8/rep-0/stdout.txt"
echo "== find the root cause: scalgraph detect $out/cg-exp"
.venv/bin/scalgraph detect --top 3 --source-dir samples/cg "$out/cg-exp"
echo "== the same as a page for the browser: scalgraph report $out/cg-exp -o $out/report.html"
.venv/bin/scalgraph report --source-dir samples/cg -o "$out/report.html" "$out/cg-exp"
echo "open $out/report.html in a browser (it works offline, from disk)"
