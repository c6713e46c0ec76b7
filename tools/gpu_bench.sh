#!/usr/bin/env bash
# The fast-GPU check (issue 27, must-show 2), for the lent GPU machine: an H100, 16 cores, Python 3.12 with
# NVIDIA's CUDA 13 / cuDNN 9 wheels, a CPU-only onnxruntime 1.30, no network, TensorRT absent. The wheels it
# needs travel as tools/gpu_wheels.sh cuts them (loads 1..N-1: `tools/gpu_bench.sh --stash`, which is
# tools/gpu_check.sh --stash; load N: this script). It prints one table:
#   GPU model, driver, CUDA, cuDNN, onnxruntime versions;
#   ResNet50 Offline through the appliance at the precision / batch / cards per GPU / CUDA provider options
#     (prefer_nhwc) `appliance tune` chose, every card of a layout timed at once (tune's figure beside the run's),
#     against onnxruntime at its best options (tools/gpu_baseline.py: IO binding, CUDA graph, prefer_nhwc=1,
#     EXHAUSTIVE conv search, same model, precision and batch, no LoadGen) and a PyTorch eager peer
#     (tools/torch_peer.py: torchvision resnet50, fp16, channels_last; skipped where torch is absent) on the same
#     GPU, as ratios;
#   Server max valid QPS / Offline: tune searches batches down to 1 by the ideal queue, and `--server-search`
#     confirms its choice with short LoadGen runs; the tuned target (the Server run reads it from the record), then once
#     more at 0.92 x Offline if the target was VALID and lower, or at 80% of it if INVALID; SingleStream p90;
#   per-GPU Offline as a fraction of NVIDIA's TensorRT figure for the GPU (H200: 94,620 samples/s, v4.1; H100:
#     87,970, DGX-H100 v4.0), every figure labelled with the GPU's name;
#   YOLO11l (yolo-99) tuned on the same grid (batch, cards per GPU, NHWC; SingleStream: one card, batch 1 in its own
#     CUDA graph), Offline / SingleStream (fp16 outputs, host NMS on each card's completion thread), its golden
#     mAP in accuracy mode (tuned precision with fp16 outputs, and FP32 end to end: the data path's fidelity), the
#     host NMS share measured inside the run (manifest host_postprocess); joules per sample from NVML.
# Everything goes to $OUT (bench.log, table.txt, table.json, versions.json), what the device tool brings back.
#
#   tools/gpu_bench.sh --stash                  a load of wheels (.whl/) to /tmp/gpu-wheels, nothing else
#   tools/gpu_bench.sh                          the last load, then the whole check (about 8 minutes)
#   tools/gpu_bench.sh --backend onnxruntime    the rehearsal without a GPU: the same steps on CPU-emulated cards
#                                               through the IO-binding card (APPLIANCE_IO_BINDING=1), small sizes
# Environment: SAMPLES (ResNet50 images, default 500), YOLO_SAMPLES (default 64), DURATION_MS (per performance
# run, default 6000), DATA (default /tmp/gpu-bench-data), WORK (default /tmp/gpu-bench), PRECISIONS (tuned,
# default fp16 on a GPU), BATCHES (a GPU: unset, tune's coarse grid refined around the best), LAYOUTS (default cuda:allx1,cuda:allx2),
# YOLO_BATCHES (1,16,32), YOLO_LAYOUTS (cuda:allx1,cuda:allx2), YOLO_PRECISIONS (fp32: fp16 misses yolo-99's 99%),
# YOLO_CARDS (cuda:allx2) and YOLO_BATCH (16) without a YOLO record, PEER_BATCHES (256,512), BUDGET_S (seconds this call may take, default 540 of the device
# tool's 600: steps that would not fit are skipped, most needed first, and the table is always written), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${BACKEND:-onnxruntime-cuda}
while [ $# -gt 0 ]; do
  case "$1" in
    --stash) exec tools/gpu_check.sh --stash ;;
    --backend) backend=$2; shift ;;
    *) echo "tools/gpu_bench.sh: unknown argument $1 (use --stash or --backend NAME)" >&2; exit 2 ;;
  esac
  shift
done
out=${OUT:-/tmp/gpu-bench-out}
work=${WORK:-/tmp/gpu-bench}  # run summaries ($work-NAME.json) and the results tree ($work-results)
data=${DATA:-/tmp/gpu-bench-data}
duration=${DURATION_MS:-6000}
py=${PYTHON:-python3}
mkdir -p "$out"
rm -f "$out/skipped.txt"
exec > >(tee -a "$out/bench.log") 2>&1
start=$SECONDS
say() { printf '\n== gpu_bench [%4ss]: %s\n' "$((SECONDS - start))" "$*"; }

if [ "$backend" = onnxruntime ]; then  # the rehearsal: small, on the CPU, through the same IO-binding card
  samples=${SAMPLES:-64}; yolo_samples=${YOLO_SAMPLES:-2}; precisions=${PRECISIONS:-fp32}
  batches=${BATCHES:-1,2,4}; layouts=${LAYOUTS:-auto}; device=cpu; duration=${DURATION_MS:-3000}
  ybatches=${YOLO_BATCHES:-1}; ylayouts=${YOLO_LAYOUTS:-auto}; peer_batches=${PEER_BATCHES:-2}
  yolo_count=(--count 8)  # YOLO11l takes seconds an image on a small CPU: a few queries (INVALID: min queries)
  export APPLIANCE_IO_BINDING=1
else
  samples=${SAMPLES:-500}; yolo_samples=${YOLO_SAMPLES:-64}; precisions=${PRECISIONS:-fp16}
  batches=${BATCHES:-}; layouts=${LAYOUTS:-cuda:allx1,cuda:allx2}; device=cuda  # no BATCHES: tune's coarse grid
  ybatches=${YOLO_BATCHES:-1,16,32}; ylayouts=${YOLO_LAYOUTS:-cuda:allx1,cuda:allx2}
  peer_batches=${PEER_BATCHES:-256,512}
  yolo_count=()
fi

# 1. Wheels, C++ extensions: as tools/gpu_check.sh does (the same /tmp/gpu-wheels and /tmp/site).
# shellcheck source=tools/gpu_env.sh
source tools/gpu_env.sh
gpu_env_setup "$py" "$out" "$( [ "$backend" = onnxruntime ] && echo 0 || echo 1 )"
appliance() { "$py" -m harness.cli "$@"; }

# 2. The GPU and its software.
say "GPU, driver, CUDA, cuDNN, onnxruntime"
"$py" - "$backend" <<'PY' | tee "$out/versions.json"
import json, sys
import onnxruntime as ort
from harness.hw import gpu
from harness.records import engine_cache
from harness.run.cards import backends
from harness.run.cards.onnxruntime_card import cuda_build
info = {"onnxruntime": ort.__version__, "onnxruntime_providers": ort.get_available_providers(),
        "onnxruntime_cuda_build": cuda_build(), "nvidia": gpu.host_facts(),
        "tensorrt": engine_cache.tensorrt_version() or "not installed"}
if backends.on_gpu(sys.argv[1]):
    backends.get(sys.argv[1]).check_libraries()
    info.update(gpu.libraries())
print(json.dumps(info, indent=2))
PY

# 3. ResNet50: prepare, tune (precision x batch x cards per GPU), run the choice, and the baseline. Every step after
# prepare is guarded by the call's budget (room / left, tools/gpu_env.sh), most needed first, so the table is
# always written: what did not fit says so in bench.log and is "no run" in the table.
say "prepare resnet50 ($samples images): fp32$( [ "$precisions" = fp32 ] || echo ", $precisions" )"
appliance prepare --benchmark resnet50 --data-dir "$data" --samples "$samples" -q
for p in ${precisions//,/ }; do
  [ "$p" = fp32 ] || appliance prepare --benchmark resnet50 --data-dir "$data" --samples "$samples" --precision "$p" -q
done
tuned=$data/tuned/resnet50-bench.json
rm -f "$tuned"
search=()  # Server confirmed by short LoadGen runs, when the budget has room for them after tune
room 420 "tune --server-search" && search=(--server-search)
last_batch=${batches##*,}; last_batch=${last_batch:-512}  # without a tuned record, the runs' batch
grid=(); [ -n "$batches" ] && grid=(--batch-sizes "$batches")  # none: coarse (8, 64, 512), refined around the best
say "tune resnet50: --precisions $precisions ${grid[*]:-(coarse, then refined)} --cards $layouts ${search[*]}"
tune=("$py" -m harness.cli tune --data-dir "$data" --backends "$backend" --precisions "$precisions" "${grid[@]}"
      --cards "$layouts" -s Offline -s Server -s SingleStream "${search[@]}" -o "$tuned" -q)
graph=()
limit() { local s; s=$(left "${1:-240}"); echo $(( s < 30 ? 30 : s )); }  # tune's share: all but $1 s of the budget
# tune's stdout (its table) to tune.txt and shown; its stderr straight to the terminal: tune routes the native
# lines itself (native-tune.log beside the record), so this log counts only those that escaped it
rc=0; timeout "$(limit)" "${tune[@]}" >"$out/tune.txt" || rc=$?; cat "$out/tune.txt"
if [ "$rc" = 124 ]; then
  say "tune ran out of its share of the budget"
elif [ "$rc" != 0 ] && room 400 "tune again without CUDA graphs"; then  # one shot: without graphs rather than nothing
  say "tune failed; again without CUDA graphs (APPLIANCE_CUDA_GRAPH=0), which every later step then uses"
  export APPLIANCE_CUDA_GRAPH=0; graph=(--no-graph)
  timeout "$(limit)" "${tune[@]}" >"$out/tune.txt" || true; cat "$out/tune.txt"
fi
if [ -f "$tuned" ]; then
  choice=(--tuned "$tuned")
else  # no tuned record: the first precision, the largest batch, two cards per GPU (one on the CPU)
  choice=(--backend "$backend" --precision "${precisions%%,*}" --batch-size "$last_batch"
          --cards "$( [ "$device" = cuda ] && echo cuda:allx2 || echo auto )")
  say "no tuned record: the runs use ${choice[*]}"
fi
results="$work-results"
rm -rf "$results" "$work"-*.json  # a table of this invocation's runs only
run() {  # scenario, name, extra args...
  local s=$1 name=$2; shift 2
  room $((duration / 1000 + 45)) "resnet50 $s ($name)" || return 0
  say "resnet50 $s ($name)"
  appliance run --data-dir "$data" --results "$results" "${choice[@]}" -s "$s" --duration-ms "$duration" \
    --json -q "$@" >"$work-$name.json" || echo "gpu_bench: resnet50 $s ($name) failed; the table says so"
}
valid() { "$py" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))[0]["perf"]["valid"] else 1)' \
  "$work-$1.json" 2>/dev/null; }
run Offline offline
# the GPU image's default command: no tuned record, no batch (harness/run/gpu_defaults.py); >= 0.8 of the tuned Offline
if room $((duration / 1000 + 45)) "resnet50 Offline (the default command)"; then
  say "resnet50 Offline (the default command: --backend $backend, no tuned record)"
  appliance run --data-dir "$data" --results "$results" --backend "$backend" -s Offline --duration-ms "$duration" \
    --json -q >"$work-default.json" || echo "gpu_bench: resnet50 Offline (default) failed; the table says so"
fi
# what Offline ran (precision, batch, cards per GPU): the baseline runs the same
read -r choice_precision choice_batch per_gpu <<<"$("$py" - "$work-offline.json" "${precisions%%,*}" \
  "$last_batch" <<'PY'
import json, pathlib, re, sys
try:
    m = json.loads((pathlib.Path(json.load(open(sys.argv[1]))[0]["path"]) / "manifest.json").read_text())
    per_gpu = re.search(r"x([0-9]+)$", m["card_map"]["spec"] or "")
    print(m["precision"], m["batch_size"], per_gpu.group(1) if per_gpu else 1)
except (OSError, ValueError, LookupError, TypeError):
    print(sys.argv[2], sys.argv[3], 1)
PY
)"
if room 60 "onnxruntime's own loop"; then
  say "onnxruntime's own loop: $choice_precision, batch $choice_batch, $per_gpu session(s)"
  "$py" tools/gpu_baseline.py --data-dir "$data" --precision "$choice_precision" --batch "$choice_batch" \
    --sessions "$per_gpu" --device "$device" --seconds 4 "${graph[@]}" | tee "$work-baseline.json" || true
fi
if room 40 "the PyTorch eager peer"; then
  say "PyTorch eager peer: torchvision resnet50, batches $peer_batches"
  "$py" tools/torch_peer.py --batches "$peer_batches" --device "$device" --seconds 4 | tee "$work-peer.json" || true
fi
run Server server
run SingleStream single

# 4. YOLO11l: fp16 outputs (a GPU card's), host NMS on each card's completion thread.
ydata=$data-yolo
yp=fp32
yolo=0  # prepared
if room 150 "YOLO11l (prepare and runs)"; then
  say "prepare yolo-99 ($yolo_samples images): fp32$( [ "$precisions" = fp32 ] || echo ", fp16" )"
  appliance prepare --benchmark yolo-99 --data-dir "$ydata" --samples "$yolo_samples" -q
  if [ "$precisions" != fp32 ]; then
    appliance prepare --benchmark yolo-99 --data-dir "$ydata" --samples "$yolo_samples" --precision fp16 -q; yp=fp16
  fi
  yolo=1
fi
ycards=${YOLO_CARDS:-$( [ "$backend" = onnxruntime ] && echo auto || echo cuda:allx2 )}
ybatch=${YOLO_BATCH:-$( [ "$backend" = onnxruntime ] && echo 1 || echo 16 )}
ytuned=$ydata/tuned/yolo-99-bench.json
rm -f "$ytuned"
if [ "$yolo" = 1 ] && room 200 "tune yolo-99"; then  # the same grid: batch, cards per GPU, NHWC (the CUDA provider's)
  ytp=${YOLO_PRECISIONS:-fp32}
  say "tune yolo-99: --precisions $ytp --batch-sizes $ybatches --cards $ylayouts --card-outputs quantised"
  # the outputs the YOLO runs below return (quantised: fp16), so tune times the configuration they run
  timeout "$(limit 120)" "$py" -m harness.cli tune --benchmark yolo-99 --data-dir "$ydata" --backends "$backend" \
    --precisions "$ytp" --batch-sizes "$ybatches" --cards "$ylayouts" --card-outputs quantised \
    -s Offline -s SingleStream -o "$ytuned" -q \
    >"$out/yolo-tune.txt" || echo "gpu_bench: tune yolo-99 failed; the runs use --cards $ycards, batch $ybatch"
  cat "$out/yolo-tune.txt"
fi
if [ -f "$ytuned" ]; then ychoice=(--tuned "$ytuned"); ybatchopt=(); else
  ychoice=(--backend "$backend" --cards "$ycards" --precision "$yp"); ybatchopt=(--batch-size "$ybatch"); fi
yrun() {  # scenario, name, seconds it needs, extra args
  local s=$1 name=$2 need=$3; shift 3
  [ "$yolo" = 1 ] || return 0
  room "$need" "yolo-99 $s ($name)" || return 0
  say "yolo-99 $s ($name)"
  appliance run --benchmark yolo-99 --data-dir "$ydata" --results "$results" "${ychoice[@]}" \
    --card-outputs quantised -s "$s" --json -q "$@" >"$work-$name.json" \
    || echo "gpu_bench: yolo-99 $s ($name) failed; the table says so"
}
yperf=$((duration / 1000 + 45))
yrun Offline yolo-offline "$yperf" "${ybatchopt[@]}" --duration-ms "$duration" "${yolo_count[@]}"
yrun Offline yolo-accuracy 60 "${ybatchopt[@]}" --mode accuracy
yrun SingleStream yolo-single "$yperf" --duration-ms "$duration" "${yolo_count[@]}"
# the data path alone: the FP32 model with FP32 outputs (TF32 off) against the FP32 golden detections (100% when
# the GPU path loses nothing); the run above measures what fp16 compute and fp16 outputs cost (yolo-99: >= 99%)
# Without CUDA graphs: on the first H100 run (2026-11-27) this combination under graphs (2 cards, batch 16) aborted the
# process with an illegal address in a graph replay; the row measures the data path, which graphs do not change.
(export APPLIANCE_CUDA_GRAPH=0
 yrun Offline yolo-accuracy-fp32 60 "${ybatchopt[@]}" --mode accuracy --precision fp32 --card-outputs fp32)

# Server once more: at 0.92 x Offline when the tuned target was VALID and lower, at 80% of it when INVALID
if [ -f "$work-server.json" ]; then
  qps=$("$py" - "$work-server.json" "$work-offline.json" "$(valid server && echo up || echo down)" <<'PY'
import json, sys
def metric(path):
    try:
        return float(json.load(open(path))[0]["perf"]["metric"])
    except (OSError, ValueError, LookupError, TypeError):
        return 0.0
target, offline = metric(sys.argv[1]), metric(sys.argv[2])
up = sys.argv[3] == "up"
print(round(0.92 * offline, 1) if up and 0.92 * offline > target else "" if up or not target else round(0.8 * target, 1))
PY
)
  if [ -n "$qps" ]; then
    if valid server; then run Server server-hi --target-qps "$qps"; else run Server server-80 --target-qps "$qps"; fi
  fi
fi
if [ "$yolo" = 1 ] && room 40 "yolo-99 host NMS in onnxruntime's own loop"; then
  say "yolo-99 host NMS per image (onnxruntime's own loop, batch $ybatch)"
  "$py" tools/gpu_baseline.py --data-dir "$ydata" --benchmark yolo-99 --precision "$yp" --card-outputs quantised \
    --batch "$ybatch" --device "$device" --seconds 2 "${graph[@]}" | tee "$work-yolo-baseline.json" || true
fi

# 5. On a GPU, last (it may abort): the FP32 YOLO11l under CUDA graphs on one card, to tell "two sessions capturing
# on one GPU" from "this graph"; the card now checks each bound buffer and a replay against a regular run at load.
# Graphs forced (APPLIANCE_CUDA_GRAPH=1): the card's rule keeps them off for this configuration since issue 43.
if [ "$device" = cuda ]; then
  (export APPLIANCE_CUDA_GRAPH=1
   yrun Offline yolo-fp32-graphs-1card 60 --batch-size "$ybatch" --cards cuda:allx1 --mode accuracy --precision fp32 \
     --card-outputs fp32)
fi

# 6. The table; native log lines that reached the terminal (issue 34: they belong in each run's native.log).
grep -c -E '\[(E|W):onnxruntime' "$out/bench.log" >"$out/native-on-terminal.txt" || true
say "table"
"$py" tools/gpu_bench_table.py "$work" "$out" "$backend"
say "done"
