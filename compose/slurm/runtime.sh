# Sourced by fleet-task.sh and collect.sh, not run: `appliance ARGS...` through the site's way of running it.
#
# APPLIANCE_RUNTIME (default: installed):
#   installed  the `appliance` command on the node's PATH (pip install in a venv on shared storage, or the
#              node image's own)
#   podman     podman run of APPLIANCE_IMAGE (e.g. localhost/mlperf-appliance:latest, built from Dockerfile or
#              pulled): the node's cores, memory nodes and devices from `appliance topology detect --format
#              docker` (or APPLIANCE_CONTAINER_FLAGS), the way docs/topology.md says for docker, NVIDIA GPUs as
#              CDI devices (podman_flags); DATA and RESULTS bound. --init needs catatonit (Debian: apt-get install
#              catatonit); --userns keep-id only where podman runs rootless (as root podman refuses it)
#   apptainer  apptainer exec of APPLIANCE_IMAGE (a .sif made with `apptainer build appliance.sif
#              docker-daemon://mlperf-appliance:latest`); --nv where the node has NVIDIA GPUs
#   enroot     enroot start of APPLIANCE_IMAGE (a container made with `enroot import dockerd://mlperf-appliance`
#              then `enroot create`); NVIDIA GPUs through enroot's own hooks
# Bind mounts keep every path the same inside as outside, so the manifests name the shared paths.
appliance() {
  local mounts=()
  [ -n "${DATA:-}" ] && mounts+=("$DATA")
  [ -n "${RESULTS:-}" ] && mounts+=("$RESULTS")
  [ -n "${COLLECT_DIR:-}" ] && mounts+=("$COLLECT_DIR")
  case "${APPLIANCE_RUNTIME:-installed}" in
    installed)
      command appliance "$@" ;;
    podman)
      local flags m userns=()
      flags=$(podman_flags "${APPLIANCE_CONTAINER_FLAGS:-$(podman run --rm "${APPLIANCE_IMAGE:?set APPLIANCE_IMAGE}" \
        topology detect --format docker)}")
      [ "$(id -u)" != 0 ] && userns=(--userns keep-id)  # rootless only: podman as root refuses keep-id
      local binds=()
      for m in "${mounts[@]}"; do binds+=(-v "$m:$m:z"); done
      # shellcheck disable=SC2086  # the flags are words, as `topology detect --format docker` prints them
      podman run --rm --init --network none "${userns[@]}" $flags "${binds[@]}" \
        -e APPLIANCE_IMAGE_DIGEST="$(podman image inspect --format '{{.Digest}}' "$APPLIANCE_IMAGE")" \
        "$APPLIANCE_IMAGE" "$@" ;;
    apptainer)
      local binds=() m nv=()
      for m in "${mounts[@]}"; do binds+=(--bind "$m:$m"); done
      [ -e /proc/driver/nvidia/gpus ] && nv=(--nv)
      apptainer exec --containall --cleanenv "${nv[@]}" "${binds[@]}" "${APPLIANCE_IMAGE:?set APPLIANCE_IMAGE}" \
        appliance "$@" ;;
    enroot)
      local binds=() m
      for m in "${mounts[@]}"; do binds+=(--mount "$m:$m"); done
      enroot start --rw "${binds[@]}" "${APPLIANCE_IMAGE:?set APPLIANCE_IMAGE}" appliance "$@" ;;
    *)
      echo "APPLIANCE_RUNTIME=${APPLIANCE_RUNTIME}: choose installed, podman, apptainer or enroot" >&2
      return 2 ;;
  esac
}

# docker's flags (`topology detect --format docker`) as podman takes them: NVIDIA GPUs (`--gpus="device=0,1"`) as CDI
# devices, `--device nvidia.com/gpu=0 ...` (NVIDIA's way for podman, after `nvidia-ctk cdi generate` on the node;
# podman 4.3's `podman run --help` lists no --gpus), every other flag as it is.
podman_flags() {
  local w ids i out=()
  for w in $1; do
    case "$w" in
      --gpus=*)
        ids=${w#--gpus=}; ids=${ids//\"/}; ids=${ids#device=}
        for i in ${ids//,/ }; do out+=(--device "nvidia.com/gpu=$i"); done ;;
      *) out+=("$w") ;;
    esac
  done
  echo "${out[*]}"
}

# The system a node belongs to: its line in NODE_MAP ("NODE SYSTEM [CARDS]"), else its detected hardware
# (CPU model, CPU count, NVIDIA GPU count: nodes of one configuration get one name).
fleet_system_of() {
  local node=$1 line=""
  if [ -n "${NODE_MAP:-}" ]; then
    line=$(awk -v n="$node" '$1 == n && $1 !~ /^#/ {print $2, ($3 == "" ? "auto" : $3); exit}' "$NODE_MAP")
  fi
  if [ -n "$line" ]; then
    echo "$line"
    return
  fi
  local cpu gpus
  cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo)
  gpus=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  local name
  name=$(printf '%s-%scpus-%sgpus' "$cpu" "$(nproc --all)" "$gpus" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9.' '-')
  echo "${name#-} auto"
}
