#!/usr/bin/env bash
# TEST01 on an honest simulated card, N times in a row, while `stress-ng --cpu LOAD` keeps the machine busy:
# the compliance verdicts must not flip with the machine's load (issue 18, must-show 3).
#
#   tools/compliance_under_load.sh DATA_DIR RESULTS_DIR [N=20] [LOAD=2] [DURATION_MS=1500]
#
# DATA_DIR holds a prepared resnet50 (`appliance prepare`); RESULTS_DIR is made (it must not exist).
# Prints one line per round and "PASSED k/N"; exits non-zero unless every round passed.
set -euo pipefail
data=$1 results=$2 n=${3:-20} load=${4:-2} ms=${5:-1500}
[ ! -e "$results" ] || { echo "$results exists; give a new folder" >&2; exit 2; }
app() { python -m harness.cli run -b resnet50 -s Offline --data-dir "$data" --results "$results" \
          --cards simulate:rehearsal-200:1 --system honest -q "$@"; }
app --mode accuracy >/dev/null
app --duration-ms "$ms" >/dev/null
stress-ng --cpu "$load" --timeout $((n * 60))s >/dev/null 2>&1 &
stress=$!
trap 'kill "$stress" 2>/dev/null || true' EXIT
passed=0
for i in $(seq 1 "$n"); do
  app --duration-ms "$ms" --mode TEST01 >/dev/null || true
  dir="$results/honest/resnet50/Offline/TEST01"
  if [ "$i" -gt 1 ]; then dir="${dir}_$i"; fi
  perf=$(tail -n1 "$dir/verify_performance.txt" 2>/dev/null || echo missing)
  acc=$(tail -n1 "$dir/verify_accuracy.txt" 2>/dev/null || echo missing)
  scores=$(grep -h "score =" "$dir/verify_performance.txt" 2>/dev/null | tr '\n' ' ' || true)
  echo "round $i: performance $perf, accuracy $acc; $scores(load $(cut -d' ' -f1 /proc/loadavg))"
  [ "$perf" = "TEST PASS" ] && [ "$acc" = "TEST PASS" ] && passed=$((passed + 1))
done
echo "PASSED $passed/$n under stress-ng --cpu $load"
[ "$passed" -eq "$n" ]
