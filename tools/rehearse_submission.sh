#!/usr/bin/env bash
# Full-length (600 s) submission rehearsal of resnet50 for an edge system (Offline, SingleStream,
# MultiStream) with compliance TEST01 and TEST04, then the tree and both checks.
#
#   tools/rehearse_submission.sh DATA_DIR RESULTS_DIR [CARDS]      (CARDS default simulate:rehearsal-200:1)
#
# The performance runs of one wave run side by side (about 11 minutes a wave, two waves), which is
# fine for simulated cards; with real cards run them one after another.
set -euo pipefail
data=$1 results=$2 cards=${3:-simulate:rehearsal-200:1}
sys=rehearsal
run() { appliance run -b resnet50 --data-dir "$data" --results "$results" --cards "$cards" --system "$sys" -q "$@"; }

for s in Offline SingleStream MultiStream; do run -s "$s" --mode accuracy; done
for s in Offline SingleStream MultiStream; do run -s "$s" & done; wait
for s in Offline SingleStream MultiStream; do
  for t in TEST01 TEST04; do run -s "$s" --mode "$t" & done
done; wait
appliance submission build --submitter Rehearsal --system "$sys" "$results" -o "$results/submission"
appliance submission check "$results/submission"
