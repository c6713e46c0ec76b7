#!/usr/bin/env bash
# The whole 15-minute GPU loan, planned (issue 43): the machine's start, the wheel-stash calls, tools/gpu_check.sh,
# tools/gpu_bench.sh, the idle gaps between calls and the margin, each row's seconds and the total against the 900 s
# the device tool lends a task (every start, transfer, idle wait and command counts; /work/.library/device/README.md).
# The scripts' rows are their `--plan` budgets; the rest are estimates, stated here:
#   START_S    a fresh machine's start: 120 s (the tool: "a minute or more")
#   loads      tools/gpu_wheels.sh's pieces: onnxruntime-gpu 1.31.1 cp312 (WHEEL_BYTES, its pip download of
#              2026-11-28) cut in 55 MiB pieces; every load but the last rides a stash call of its own, the last
#              rides gpu_check's call with the small wheels (mlcommons-loadgen, pycocotools, nvidia-ml-py: SMALL_MB)
#   a call     CALL_S of its own (start, return) plus what travels (the working tree, `git ls-files`, and its load)
#              at RATE_MBS megabytes a second
#   gaps       GAP_S between one call's end and the next call (6: after each stash call, after gpu_check, after
#              gpu_bench until give_back); each must stay under the machine's 30 s idle release anyway
#   tails      gpu_check's summary and gpu_bench's table after their steps (the table under `timeout 5`)
# Exit 1 when the margin left is under MARGIN_S (60 s). Nothing is run.
set -euo pipefail
cd "$(dirname "$0")/.."
START_S=120 WHEEL_BYTES=255569273 PIECE_MIB=55 SMALL_MB=1 CALL_S=6 RATE_MBS=10 GAP_S=5 MARGIN_S=60 LOAN_S=900
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
secs() { awk -v m="$1" -v c="$CALL_S" -v r="$RATE_MBS" 'BEGIN { printf "%d", c + m / r + 0.999 }'; }
planned() {  # a script's --plan sum (its steps' budgets)
  local out
  out=$(mktemp -d)
  OUT=$out WORK=$out/w PYTHON=${PYTHON:-python3} bash "tools/$1" --plan >/dev/null 2>&1
  awk -F' budget ' '{ split($2, a, " "); t += a[1] } END { print t }' "$out/steps.txt"
  rm -rf "$out"
}
tree=$(git ls-files -z | xargs -0 cat 2>/dev/null | wc -c)
piece=$((PIECE_MIB * 1048576))
loads=$(( (WHEEL_BYTES + piece - 1) / piece ))
last=$((WHEEL_BYTES - (loads - 1) * piece))
stash=$(secs "$(mb $((tree + piece)))")
check_in=$(secs "$(awk -v a="$(mb $((tree + last)))" -v s="$SMALL_MB" 'BEGIN { print a + s }')")
bench_in=$(secs "$(mb "$tree")")
check=$(planned gpu_check.sh)
bench=$(planned gpu_bench.sh)
gaps=6
rows=(
  "machine start|$START_S"
  "$((loads - 1)) wheel-stash calls (load 1..$((loads - 1)) of $loads: $(mb $((tree + piece))) MB each with the tree)|$(((loads - 1) * stash))"
  "gpu_check call: load $loads and the small wheels in ($(mb $((tree + last))) MB + $SMALL_MB), steps, summary|$((check_in + check + 2))"
  "gpu_bench call: the tree in ($(mb "$tree") MB), steps, table|$((bench_in + bench + 5))"
  "idle gaps: $gaps x $GAP_S s|$((gaps * GAP_S))"
)
total=0
printf '%-92s %5s\n' "part of the loan" "s"
for r in "${rows[@]}"; do
  printf '%-92s %5s\n' "${r%%|*}" "${r##*|}"
  total=$((total + ${r##*|}))
done
printf '%-92s %5s\n' "total (gpu_check's steps $check s, gpu_bench's $bench s)" "$total"
printf '%-92s %5s\n' "margin left of the $LOAN_S s loan (at least $MARGIN_S)" "$((LOAN_S - total))"
[ $((LOAN_S - total)) -ge "$MARGIN_S" ]
