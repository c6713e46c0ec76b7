#!/usr/bin/env bash
# Full-length (600 s) submission rehearsal of an edge system with several benchmarks (default resnet50,
# yolo-99 and yolo-95): for each benchmark and edge scenario (Offline, SingleStream, MultiStream) the
# accuracy run, the performance run and the compliance tests its record asks for (resnet50: TEST01 and
# TEST04; yolo: TEST01), then `appliance submission build` and `appliance submission check`, and the
# official MLCommons checker when CHECKER names a checkout of mlcommons/inference.
#
#   tools/rehearse_edge_submission.sh DATA_DIR RESULTS_DIR [CARDS] [BENCHMARKS]
#       CARDS default simulate:rehearsal-200:1, BENCHMARKS default "resnet50 yolo-99 yolo-95"
#   CHECKER=/tmp/inference CHECKER_PYTHON=/tmp/venv/bin/python tools/rehearse_edge_submission.sh ...
#
# The data must be prepared first, e.g. `appliance prepare -b resnet50 --data-dir D` and
# `appliance prepare -b yolo-99 --samples 64 --data-dir D`. Durations and query counts are mlperf.conf's
# (no overrides). Two waves run side by side: every performance run (about 13 minutes), then every
# compliance test (each takes a reference run, the test run and another reference run, one after the
# other: about 46 minutes, Offline's the longest). That is fine for simulated cards, which sleep; with real
# cards run them one after another. Side by side, all test runs of a wave share one window: on a shared
# machine a burst of other work then hits the test runs and not their references (see
# docs/submission-rehearsal.md). Each run's output goes to RESULTS_DIR/logs/.
set -euo pipefail
data=$1 results=$2 cards=${3:-simulate:rehearsal-200:1} benchmarks=${4:-resnet50 yolo-99 yolo-95}
sys=rehearsal
logs=$results/logs
mkdir -p "$logs"
run() { appliance run --data-dir "$data" --results "$results" --cards "$cards" --system "$sys" -q "$@"; }
tests_of() { python -c "from harness.data.benchmarks import get; print(' '.join(get('$1').compliance_tests))"; }
scenarios="Offline SingleStream MultiStream"

stamp() { echo "$(date -u +%H:%M:%S) $*"; }
wave() {  # wait for the background runs; fail if any failed
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  pids=()
  [ "$failed" = 0 ] || { stamp "a run failed: see $logs"; exit 1; }
}

pids=()
stamp "accuracy runs"
for b in $benchmarks; do
  (for s in $scenarios; do run -b "$b" -s "$s" --mode accuracy > "$logs/$b-$s-accuracy.log" 2>&1; done) &
  pids+=($!)
done; wave
stamp "performance runs, side by side"
for b in $benchmarks; do
  for s in $scenarios; do run -b "$b" -s "$s" > "$logs/$b-$s-performance.log" 2>&1 & pids+=($!); done
done; wave
stamp "compliance tests, side by side"
for b in $benchmarks; do
  for t in $(tests_of "$b"); do
    for s in $scenarios; do run -b "$b" -s "$s" --mode "$t" > "$logs/$b-$s-$t.log" 2>&1 & pids+=($!); done
  done
done; wave
stamp "submission tree"
appliance submission build --submitter Rehearsal --system "$sys" "$results" -o "$results/submission"
appliance submission check "$results/submission" || true
if [ -n "${CHECKER:-}" ]; then
  stamp "official checker, mlcommons/inference $(git -C "$CHECKER" rev-parse --short HEAD 2>/dev/null || echo '(no git)')"
  (cd "$CHECKER/tools/submission" &&
   "${CHECKER_PYTHON:-python3}" -m submission_checker.main --input "$(realpath "$results/submission")" --version v6.1) || true
fi
stamp "done"
