#!/usr/bin/env bash
#SBATCH --job-name=appliance-fleet
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --exclusive
#SBATCH --output=appliance-fleet-%A_%a.out
# One node of the fleet (one task of the job array; whole node, --exclusive): the appliance runs there with
# the node's own detected card map, each benchmark x scenario a performance run then an accuracy run, into
# RESULTS/<system>/<node>/ on shared storage. submit.sh submits it (docs/fleet.md).
#
# Environment (sbatch passes the submitter's): RESULTS (required), DATA (a prepared data dir on shared
# storage; unset: the image's embedded data or the appliance's default), NODE_MAP (lines "NODE SYSTEM
# [CARDS]"; a node not in it is named by its detected hardware, cards auto), BENCHMARKS (resnet50),
# SCENARIOS (Offline), MODES (the runs of each benchmark x scenario, in order: "performance accuracy"; a
# submission's compliance tests: "accuracy performance TEST01 TEST04", accuracy first), APPLIANCE_RUN_ARGS (more `appliance run` options for every run, e.g.
# "--duration-ms 60000"), APPLIANCE_RUNTIME / APPLIANCE_IMAGE (runtime.sh), FLEET_NODE (the node's name;
# default SLURMD_NODENAME, the name SLURM knows it by).
#
# Nothing is overwritten: each run claims the next run_N in its folder, so the array run again into the same
# RESULTS adds runs beside the earlier ones. A run cut short (scancel, a node fault) is left as
# run_N.incomplete or a hidden staging folder, never taken by the collect job.
set -uo pipefail
: "${RESULTS:?set RESULTS: the shared folder the fleet writes into (RESULTS/<system>/<node>/)}"
here=${FLEET_DIR:-${SLURM_SUBMIT_DIR:-.}/compose/slurm}
# shellcheck source=compose/slurm/runtime.sh
. "$here/runtime.sh"

node=${FLEET_NODE:-${SLURMD_NODENAME:-$(hostname -s)}}
read -r system cards <<<"$(fleet_system_of "$node")"
out="$RESULTS/$system/$node"
mkdir -p "$out"
echo "fleet task ${SLURM_ARRAY_TASK_ID:-?}: node $node, system $system, cards $cards, results $out"
case "$cards" in  # the node's card map, in this task's log (simulated cards have none: the machine's)
  simulate:*) appliance topology detect || exit 1 ;;
  *) appliance topology detect --cards "$cards" || exit 1 ;;
esac

# SLURM stops a task (scancel, the time limit) by SIGTERM to all its processes, then SIGKILL to whatever is left
# once this shell has exited. So the shell waits for the run, which stops itself on SIGTERM and keeps its logs as
# run_N.incomplete, and only then ends (143). A trap that does nothing keeps a shell alive until its foreground
# command returns; the run itself gets SIGTERM's default handling back when it starts.
stopped=0
trap 'stopped=1' TERM INT
run() {
  ( trap ':' TERM INT; appliance "$@" ) &
  local child=$! rc
  wait "$child"; rc=$?
  while [ "$rc" -gt 128 ] && kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
  return "$rc"
}

failed=0
for bench in ${BENCHMARKS:-resnet50}; do
  for scenario in ${SCENARIOS:-Offline}; do
    for mode in ${MODES:-performance accuracy}; do
      # shellcheck disable=SC2086  # APPLIANCE_RUN_ARGS is a list of options
      if ! run run -b "$bench" -s "$scenario" --mode "$mode" --cards "$cards" --results "$out" \
          ${DATA:+--data-dir "$DATA"} ${APPLIANCE_RUN_ARGS:-} -q; then
        echo "fleet task: node $node: $bench $scenario $mode failed" >&2
        [ "$stopped" = 1 ] && exit 143
        failed=1
        break
      fi
    done
  done
done
exit "$failed"
