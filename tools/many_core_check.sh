#!/usr/bin/env bash
# Issue 28's 16-core check, in one script: the machine, the wheels installed, the C++ extensions built,
# topology detect vs lstopo on live sysfs, ResNet50 prepared (fp32, int8, bf16 where the CPU has it), one
# `appliance tune` over card layouts x batch x requests, the card-scaling table, Server max valid / Offline
# at the tuned configuration, and latency from idle with and without --keep-warm. No network needed.
#
#   tools/many_core_check.sh WHEELS [full|tiny]
#
# WHEELS: a folder with the cp312 wheels (openvino, openvino-telemetry, mlcommons-loadgen, pycocotools)
# and hwloc's .debs (hwloc, libhwloc15: `apt-get download hwloc libhwloc15`); the machine's own Python
# must have numpy numba opencv onnx onnxruntime click pyyaml psutil tqdm. Writes into $OUT (default
# /tmp/many_core_check): log.txt (everything, the machine and each step's exit code and seconds
# included), topology.json, tune.json, cpu_server.json, scaling.json, idle.json, tune_bf16.json: seven
# files, the most figures for the least space. Every step has a time bound; a failed step is logged and the
# next runs; the steps run most important first (Server / Offline at the tuned configuration, then the
# scaling table, then the rest). `full` is sized for about 8 minutes on 16 cores; `tiny` is the rehearsal
# on 2 cores (short runs, two layouts). Run from the repository root.
set -u -o pipefail
WHEELS=$(realpath "${1:?usage: tools/many_core_check.sh WHEELS [full|tiny]}")
BUDGET=${2:-full}
OUT=${OUT:-/tmp/many_core_check}
REPO=$(pwd)
SITE=${SITE:-/tmp/many_core_site}
HWLOC=/tmp/many_core_hwloc
DATA=${DATA:-/tmp/many_core_data}
PY=${PYTHON:-python3}
STEPS=$(mktemp)
mkdir -p "$OUT" "$DATA"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH="$REPO:$SITE"

case "$BUDGET" in
  full) SAMPLES=256; COUNTS=1,2,4,8,16; BATCHES=1,2,8; REQUESTS=1,2; SCALE_MS=2000; SCALE_STEPS=2
        SRV_MS=5000; SRV_STEPS=3; IDLE_Q=100; IDLE_MS=3000
        T_PREP=120; T_TUNE=200; T_SRV=100; T_SCALE=180; T_IDLE=60; T_BF16=60 ;;
  tiny) SAMPLES=64; COUNTS=1,2; BATCHES=1,2; REQUESTS=1; SCALE_MS=500; SCALE_STEPS=1
        SRV_MS=500; SRV_STEPS=1; IDLE_Q=10; IDLE_MS=500
        T_PREP=900; T_TUNE=900; T_SRV=900; T_SCALE=900; T_IDLE=600; T_BF16=900 ;;
  *) echo "budget must be full or tiny, not $BUDGET"; exit 2 ;;
esac

# step NAME SECONDS COMMAND...: run with a time bound, log its exit code and wall time
step() {
  local name=$1 limit=$2 start rc
  shift 2
  echo "=== $name (at most ${limit}s): $*" >&2  # stderr: a json_step's stdout is its file
  start=$(date +%s%N)
  timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@"  # bash: the exported functions below too
  rc=$?
  printf '%s\t%s\t%d.%d\n' "$name" "$rc" $(( ($(date +%s%N) - start) / 1000000000 )) \
    $(( ($(date +%s%N) - start) / 100000000 % 10 )) | tee -a "$STEPS" >&2
  return $rc
}
# json_step NAME SECONDS FILE COMMAND...: a step whose stdout is JSON for FILE (also shown in the log)
json_step() {
  local name=$1 limit=$2 file=$3 rc
  shift 3
  step "$name" "$limit" "$@" > "$file"
  rc=$?
  cat "$file"
  return $rc
}
appliance() { "$PY" -c "import sys; from harness.cli.main import main; sys.exit(main(sys.argv[1:]))" "$@"; }
export -f appliance
export PY SITE HWLOC WHEELS

machine() {
  echo "date: $(date -u +%FT%TZ); commit: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
  grep -m1 "model name" /proc/cpuinfo
  echo "nproc: $(nproc); python: $("$PY" --version 2>&1)"
  lscpu 2>/dev/null | grep -E "^(Socket|Core|Thread|NUMA|L3|L2|CPU\(s\)|On-line)"
  for n in /sys/devices/system/node/node[0-9]*; do echo "$(basename "$n"): cpus $(cat "$n/cpulist")"; done
  for c in /sys/devices/system/cpu/cpu[0-9]*/cache/index3/shared_cpu_list; do cat "$c"; done 2>/dev/null \
    | sort -u | sed 's/^/L3 domain: /'
  grep -m1 "^flags" /proc/cpuinfo | tr ' ' '\n' | grep -E "^(avx2|avx512f|avx512_vnni|avx512_bf16|amx_bf16|amx_int8|avx_vnni)$" \
    | tr '\n' ' ' | sed 's/^/vector flags: /'; echo
  command -v nvidia-smi >/dev/null && nvidia-smi -L
  cat /proc/loadavg
}
machine

install_wheels() {
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl
  rm -rf "$HWLOC" && mkdir -p "$HWLOC"
  for f in "$WHEELS"/*.deb; do dpkg -x "$f" "$HWLOC" || return 1; done
  "$PY" -c "import openvino, mlperf_loadgen, pycocotools, onnxruntime, numba, cv2; print('openvino', openvino.__version__, 'onnxruntime', onnxruntime.__version__)"
}
export -f install_wheels
step install 120 install_wheels || { echo "cannot install the wheels: stopping"; exit 1; }

build_ext() {
  command -v g++ >/dev/null || { echo "no g++ on this machine"; return 1; }
  local inc suffix
  inc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  suffix=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
  [ -f "$inc/Python.h" ] || { echo "no Python headers at $inc (python3-dev)"; return 1; }
  for m in _intake _copy; do
    g++ -O2 -std=c++17 -Wall -Wextra -Wno-missing-field-initializers -shared -fPIC -I"$inc" \
      "harness/$m.cpp" -o "harness/$m$suffix" || return 1
  done
  "$PY" -c "from harness import _intake, _copy; print('extensions built:', _intake.__file__, _copy.__file__)"
}
export -f build_ext
step build 120 build_ext || { echo "cannot build the C++ extensions: stopping"; exit 1; }

step topology 60 env LD_LIBRARY_PATH="$HWLOC/usr/lib/x86_64-linux-gnu" \
  "$PY" tools/topology_vs_lstopo.py --lstopo "$HWLOC/usr/bin/lstopo-no-graphics" --json "$OUT/topology.json"

# prepare on every core (onnxruntime's quantisation and OpenVINO's bf16 agreement use the process's CPUs)
BF16=
step prepare-fp32 "$T_PREP" appliance prepare --data-dir "$DATA" --samples "$SAMPLES" -q
step prepare-int8 "$T_PREP" appliance prepare --data-dir "$DATA" --samples "$SAMPLES" --precision int8
if grep -qwE "avx512_bf16|amx_bf16" /proc/cpuinfo; then
  step prepare-bf16 "$T_PREP" appliance prepare --data-dir "$DATA" --samples "$SAMPLES" --precision bf16 && BF16=yes
else
  echo "no avx512_bf16 / amx_bf16 on this CPU: bf16 not prepared"
fi

# one tune over the card layouts this machine can place (N cards of cores/N cores each), int8 (the fastest
# precision that meets ResNet50's target here); bf16 against it on two layouts at the end
CORES=$("$PY" -c "import sys; sys.path.insert(0, 'tools'); from bench_cpu_server import physical_cores; print(physical_cores())")
LAYOUTS=$(echo "$COUNTS" | tr ',' '\n' | awk -v c="$CORES" '$1 <= c {printf "%semulate:%s", s, $1; s=","}')
RECORD=$DATA/tuned/resnet50.json
echo "physical cores: $CORES; layouts: $LAYOUTS"
step tune "$T_TUNE" appliance tune --data-dir "$DATA" --backends openvino --precisions int8 \
  --cards "$LAYOUTS" --batch-sizes "$BATCHES" --requests "$REQUESTS" -s Offline -s Server -o "$RECORD" -q
[ -f "$RECORD" ] && cp "$RECORD" "$OUT/tune.json"

json_step cpu-server "$T_SRV" "$OUT/cpu_server.json" "$PY" tools/bench_cpu_server.py --data-dir "$DATA" \
  --precision int8 --tuned "$RECORD" --duration-ms "$SRV_MS" --server-steps "$SRV_STEPS" --searches 1 --json

json_step scaling "$T_SCALE" "$OUT/scaling.json" "$PY" tools/bench_cpu_scaling.py --data-dir "$DATA" \
  --precision int8 --tuned "$RECORD" --cards "$COUNTS" --duration-ms "$SCALE_MS" --server-steps "$SCALE_STEPS" --json

# a card of a quarter of the cores (at least 1), alone and through the harness at low load
QUARTER=$(( CORES / 4 > 0 ? CORES / 4 : 1 ))
json_step idle "$T_IDLE" "$OUT/idle.json" "$PY" tools/bench_idle_wakeup.py --data-dir "$DATA" --precision int8 \
  --cpus "0-$((QUARTER - 1))" --pauses-ms 0,16 --queries "$IDLE_Q" --cards "emulate:$(( CORES / QUARTER ))" --qps 60 \
  --duration-ms "$IDLE_MS" --rounds 1 --json

if [ -n "$BF16" ]; then
  step tune-bf16 "$T_BF16" appliance tune --data-dir "$DATA" --backends openvino --precisions int8,bf16 \
    --cards "emulate:1,${LAYOUTS##*,}" --batch-sizes 1,8 --requests "$REQUESTS" -s Offline -s Server \
    -o "$DATA/tuned/bf16.json" -q && cp "$DATA/tuned/bf16.json" "$OUT/tune_bf16.json"
fi

echo "=== done; steps (name, exit code, seconds):"
cat "$STEPS"
awk -F'\t' '{s += $3} END {printf "total %.0f s\n", s}' "$STEPS"
