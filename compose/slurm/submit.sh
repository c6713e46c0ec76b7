#!/usr/bin/env bash
# The fleet in two sbatch calls: the job array (one task per node of NODE_MAP, whole nodes) and the collect job
# after it (afterany: whatever the tasks' outcome). Extra arguments go to both sbatch calls (-p PARTITION,
# -A ACCOUNT, --time ...).
#
#   NODE_MAP=nodes.txt RESULTS=/shared/fleet/RESULTS DATA=/shared/data SUBMITTER=MyOrg \
#       compose/slurm/submit.sh -p gpu
#
# Prints the two job ids. docs/fleet.md says the rest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${NODE_MAP:?set NODE_MAP: lines NODE SYSTEM [CARDS], one per node of the fleet}"
: "${RESULTS:?set RESULTS: a shared folder every node can write}"
: "${SUBMITTER:?set SUBMITTER: the submitting organisation}"
n=$(grep -cv '^[[:space:]]*\(#\|$\)' "$NODE_MAP" || true)
if [ "$n" -lt 1 ]; then
  echo "submit: $NODE_MAP names no node (lines NODE SYSTEM [CARDS])" >&2
  exit 2
fi
mkdir -p "$RESULTS"
export FLEET_DIR=$here NODE_MAP RESULTS SUBMITTER
array=$(sbatch --parsable --array="0-$((n - 1))" "$@" "$here/fleet-task.sh")
collect=$(sbatch --parsable --dependency="afterany:${array%%;*}" "$@" "$here/collect.sh")
echo "array job ${array%%;*} ($n tasks), collect job ${collect%%;*}"
