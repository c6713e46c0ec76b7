#!/usr/bin/env bash
#SBATCH --job-name=appliance-fleet-collect
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --output=appliance-fleet-collect-%j.out
# After every task of the array, whatever its outcome (submit.sh: --dependency=afterany): one submission tree
# with every system (`appliance submission build --fleet`) and the fleet report (`appliance fleet`), into
# COLLECT_DIR (default: RESULTS/../fleet-<job id>, new each time). Nodes with no complete run are named in both.
# Environment: RESULTS, SUBMITTER (required), NODE_MAP (the fleet's nodes: one not in RESULTS is named
# missing), FLEET_THRESHOLD (0.95), APPLIANCE_RUNTIME / APPLIANCE_IMAGE (runtime.sh).
set -uo pipefail
: "${RESULTS:?set RESULTS: the folder the tasks of the fleet wrote}"
: "${SUBMITTER:?set SUBMITTER: the submitting organisation}"
here=${FLEET_DIR:-${SLURM_SUBMIT_DIR:-.}/compose/slurm}
# shellcheck source=compose/slurm/runtime.sh
. "$here/runtime.sh"

if ! find "$RESULTS" -mindepth 2 -maxdepth 2 -type d ! -name '.*' 2>/dev/null | grep -q .; then
  echo "collect: no results in $RESULTS (no RESULTS/<system>/<node>/ folder): did the array's tasks start? see their logs" >&2
  exit 1
fi
COLLECT_DIR=${COLLECT_DIR:-$(dirname "$RESULTS")/fleet-${SLURM_JOB_ID:-$(date +%Y%m%dT%H%M%S)}}
mkdir -p "$COLLECT_DIR" || exit 1
appliance submission build --submitter "$SUBMITTER" --fleet "$RESULTS" -o "$COLLECT_DIR/submission" || exit 1
appliance fleet "$RESULTS" ${NODE_MAP:+--node-map "$NODE_MAP"} --threshold "${FLEET_THRESHOLD:-0.95}" \
  -o "$COLLECT_DIR/fleet.html" --json >"$COLLECT_DIR/fleet.json"
status=$?
echo "collect: $COLLECT_DIR/submission, $COLLECT_DIR/fleet.html, $COLLECT_DIR/fleet.json"
exit "$status"
