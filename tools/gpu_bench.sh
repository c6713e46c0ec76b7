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
#   TF32 where the GPU computes it: YOLO11l prepared at tf32 too (`prepare --precision tf32`), tuned over fp32 and
#     tf32 (tune's table times both) and judged in an accuracy run at tf32.
# Everything goes to $OUT (bench.log, table.txt, table.json, versions.json), what the device tool brings back.
#
# Budget (issue 43): every step runs under its own budget (`step`, tools/gpu_env.sh) and is stopped there, its row
# then reading "over budget (N s)"; the rows after it still run, so every row of the table is always printed.
# On a GPU, after tools/gpu_check.sh on the same warm machine (wheels installed, ResNet50 and YOLO11l's 16 images
# prepared, its $HANDOVER): environment 5 (a cold machine: the wheels, up to 50), versions 0 (gpu_check's),
# prepare ResNet50 fp32 + fp16 10 (prepare re-checks what is prepared and intact: 3 s on the H100), tune ResNet50
# (coarse, refined, --server-search) 90, its runs: Offline 15, the default command 0 (gpu_check's fp16 Offline is
# that command), onnxruntime's own loop, the PyTorch peer, Server, SingleStream, Server again 5 x 15, YOLO11l
# prepare fp32 10 (gpu_check's) + tf32 15, tune YOLO11l (fp32, tf32; --card-outputs quantised; sessions kept across
# its batch sizes) 35, its runs: Offline, accuracy, accuracy tf32, SingleStream 4 x 15, accuracy FP32 end to end
# and graphs on one card 2 x 12, host NMS loop 10: steps 344 s + environment 5 s = 349 s (the table after). Alone
# (no gpu_check before it) versions, prepare and the default command run: 5 + 40 + 15 and YOLO's prepare 30.
# With gpu_check, the wheel-stash calls, the start and the idle gaps: tools/gpu_loan_plan.sh, 838 s of 900.
#   tools/gpu_bench.sh --stash                  a load of wheels (.whl/) to /tmp/gpu-wheels, nothing else
#   tools/gpu_bench.sh                          the last load, then the whole check (349 s of step budgets)
#   tools/gpu_bench.sh --plan                   every step's row and budget, nothing run (the sum checked in tests)
#   tools/gpu_bench.sh --backend onnxruntime    the rehearsal without a GPU: the same steps on CPU-emulated cards
#                                               through the IO-binding card (APPLIANCE_IO_BINDING=1), small sizes,
#                                               each budget x BUDGET_SCALE (default 3); tf32's run is refused there
# Environment: SAMPLES (ResNet50 images, default 300), YOLO_SAMPLES (default 16, gpu_check's), DURATION_MS (per performance
# run, default 3000), DATA (default /tmp/gpu-check-data, gpu_check's), WORK (default /tmp/gpu-bench), PRECISIONS (tuned,
# default fp16 on a GPU), BATCHES (a GPU: unset, tune's coarse grid refined around the best), LAYOUTS (default cuda:allx1,cuda:allx2),
# YOLO_BATCHES (16,32), YOLO_LAYOUTS (cuda:allx1,cuda:allx2), YOLO_PRECISIONS (fp32,tf32: fp16 misses yolo-99's 99%),
# YOLO_CARDS (cuda:allx2) and YOLO_BATCH (16) without a YOLO record, PEER_BATCHES (256,512), BUDGET_SCALE (1 on a GPU), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=${BACKEND:-onnxruntime-cuda}
while [ $# -gt 0 ]; do
  case "$1" in
    --stash) exec tools/gpu_check.sh --stash ;;
    --plan) export PLAN=1 ;;
    --backend) backend=$2; shift ;;
    *) echo "tools/gpu_bench.sh: unknown argument $1 (use --stash, --plan or --backend NAME)" >&2; exit 2 ;;
  esac
  shift
done
out=${OUT:-/tmp/gpu-bench-out}
work=${WORK:-/tmp/gpu-bench}  # run summaries ($work-NAME.json) and the results tree ($work-results)
data=${DATA:-/tmp/gpu-check-data}
duration=${DURATION_MS:-3000}
py=${PYTHON:-python3}
mkdir -p "$out"
rm -f "$out/steps.txt"
exec > >(tee -a "$out/bench.log") 2>&1
start=$SECONDS
say() { printf '\n== gpu_bench [%4ss]: %s\n' "$((SECONDS - start))" "$*"; }

if [ "$backend" = onnxruntime ]; then  # the rehearsal: small, on the CPU, through the same IO-binding card
  samples=${SAMPLES:-32}; yolo_samples=${YOLO_SAMPLES:-1}; precisions=${PRECISIONS:-fp32}
  batches=${BATCHES:-1,2,4}; layouts=${LAYOUTS:-auto}; device=cpu; duration=${DURATION_MS:-1000}
  ybatches=${YOLO_BATCHES:-1}; ylayouts=${YOLO_LAYOUTS:-auto}; peer_batches=${PEER_BATCHES:-2}
  yprecisions=${YOLO_PRECISIONS:-fp32}  # tf32 is the CUDA provider's: prepared here, its run refused (a row)
  export BUDGET_SCALE=${BUDGET_SCALE:-3}
  yolo_count=(--count 4)  # YOLO11l takes seconds an image on a small CPU: a few queries (INVALID: min queries)
  export APPLIANCE_IO_BINDING=1
else
  samples=${SAMPLES:-300}; yolo_samples=${YOLO_SAMPLES:-16}; precisions=${PRECISIONS:-fp16}
  batches=${BATCHES:-}; layouts=${LAYOUTS:-cuda:allx1,cuda:allx2}; device=cuda  # no BATCHES: tune's coarse grid
  ybatches=${YOLO_BATCHES:-16,32}; ylayouts=${YOLO_LAYOUTS:-cuda:allx1,cuda:allx2}
  yprecisions=${YOLO_PRECISIONS:-fp32,tf32}
  peer_batches=${PEER_BATCHES:-256,512}
  yolo_count=()
fi

# 1. Wheels, C++ extensions: as tools/gpu_check.sh does (the same /tmp/gpu-wheels and /tmp/site).
# shellcheck source=tools/gpu_env.sh
source tools/gpu_env.sh
gpu_env_setup "$py" "$out" "$( [ "$backend" = onnxruntime ] && echo 0 || echo 1 )"
printf '%-44s budget %4s s  %s\n' "environment (wheels, extensions)" 5 \
  "$( [ "${PLAN:-0}" = 1 ] && echo planned || echo "done ($((SECONDS - start)) s)")" >>"$out/steps.txt"
appliance() { "$py" -m harness.cli "$@"; }

# 2. The GPU and its software.
versions() {
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
}
# What tools/gpu_check.sh left on this machine (its `handover`), taken rather than done again: a row of budget 0.
# --plan lists the loan's path (after gpu_check); alone, these steps run (5 + 40 + 15 s, within the loan's margin).
handover=${HANDOVER:-/tmp/gpu-check-handover}
handed() {  # NAME WHAT: the row of a step gpu_check did
  printf '%-44s budget %4s s  %s\n' "$1" 0 "$( [ "${PLAN:-0}" = 1 ] && echo planned || echo "$2")" >>"$out/steps.txt"
}
if [ "${PLAN:-0}" = 1 ] || [ -s "$handover/versions.json" ]; then
  [ "${PLAN:-0}" = 1 ] || cp "$handover/versions.json" "$out/versions.json"
  handed "GPU, driver, CUDA, cuDNN, onnxruntime" "gpu_check's (same machine)"
else
  step "GPU, driver, CUDA, cuDNN, onnxruntime" 5 versions
fi

# 3. ResNet50: prepare, tune (precision x batch x cards per GPU, the Server search), run the choice, the baselines.
# A step's variables stay in its process group: what later steps need passes through files ($work-*).
results="$work-results"
rm -rf "$results" "$work"-*.json "$work-nograph"  # a table of this invocation's runs only
rprepare() {  # fp32, then each precision tuned; prepare itself keeps what is prepared and intact (its checks)
  appliance prepare --benchmark resnet50 --data-dir "$data" --samples "$samples" -q
  for p in ${precisions//,/ }; do
    [ "$p" = fp32 ] || appliance prepare --benchmark resnet50 --data-dir "$data" --samples "$samples" --precision "$p" -q
  done
}
# after gpu_check (its data dir holds these records) prepare only re-checks them: 3 s on the H100 (2026-11-27);
# alone, it makes them
prepared=1
rprecisions=$(echo "fp32,$precisions" | tr , '\n' | awk '!seen[$0]++' | paste -sd, -)  # fp32 and each tuned
for p in ${rprecisions//,/ }; do
  r=resnet50; [ "$p" = fp32 ] || r=resnet50-$p
  [ -s "$data/models/$r.json" ] || prepared=0
done
if [ "$prepared" = 1 ] || [ "${PLAN:-0}" = 1 ]; then
  step "prepare resnet50 $rprecisions (gpu_check's)" 10 rprepare
else
  step "prepare resnet50 $rprecisions ($samples images)" 40 rprepare
fi
tuned=$data/tuned/resnet50-bench.json
rm -f "$tuned"
last_batch=${batches##*,}; last_batch=${last_batch:-512}  # without a tuned record, the runs' batch
grid=(); [ -n "$batches" ] && grid=(--batch-sizes "$batches")  # none: coarse (8, 64, 512), refined around the best
tune_resnet() {  # tune's stdout (its table) to tune.txt; tune routes its native lines itself (native-tune.log)
  local tune=("$py" -m harness.cli tune --data-dir "$data" --backends "$backend" --precisions "$precisions" \
              "${grid[@]}" --cards "$layouts" -s Offline -s Server -s SingleStream --server-search -o "$tuned" -q)
  "${tune[@]}" >"$out/tune.txt" && { cat "$out/tune.txt"; return; }
  cat "$out/tune.txt"  # one more try without CUDA graphs, which every later step then uses
  echo "gpu_bench: tune failed; again without CUDA graphs (APPLIANCE_CUDA_GRAPH=0)"
  touch "$work-nograph"
  APPLIANCE_CUDA_GRAPH=0 "${tune[@]}" >"$out/tune.txt"; cat "$out/tune.txt"
}
step "tune resnet50 (--server-search)" 90 tune_resnet
graph=()
if [ -f "$work-nograph" ]; then export APPLIANCE_CUDA_GRAPH=0; graph=(--no-graph); fi
if [ -f "$tuned" ]; then
  choice=(--tuned "$tuned")
else  # no tuned record: the first precision, the largest batch, two cards per GPU (one on the CPU)
  choice=(--backend "$backend" --precision "${precisions%%,*}" --batch-size "$last_batch"
          --cards "$( [ "$device" = cuda ] && echo cuda:allx2 || echo auto )")
  say "no tuned record: the runs use ${choice[*]}"
fi
rrun() {  # scenario, name, extra args...
  local s=$1 name=$2; shift 2
  appliance run --data-dir "$data" --results "$results" "$@" -s "$s" --duration-ms "$duration" --json -q \
    >"$work-$name.json"
}
valid() { "$py" -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))[0]["perf"]["valid"] else 1)' \
  "$work-$1.json" 2>/dev/null; }
step "resnet50 Offline (tuned)" 15 rrun Offline offline "${choice[@]}"
# the GPU image's default command: no tuned record, no batch (harness/run/gpu_defaults.py); >= 0.8 of the tuned Offline.
# gpu_check ran exactly it (fp16 Offline, one card per GPU, no batch): its run is the row where it is at hand
if [ "${PLAN:-0}" = 1 ] || { [ -s "$handover/default.json" ] \
   && [ "$(cat "$handover/default.key")" = "$backend ${APPLIANCE_IO_BINDING:-0} $data" ]; }; then
  [ "${PLAN:-0}" = 1 ] || cp "$handover/default.json" "$work-default.json"
  handed "resnet50 Offline (the default command)" "gpu_check's fp16 Offline (the same command)"
else
  step "resnet50 Offline (the default command)" 15 rrun Offline default --backend "$backend"
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
baseline() {
  "$py" tools/gpu_baseline.py --data-dir "$data" --precision "$choice_precision" --batch "$choice_batch" \
    --sessions "$per_gpu" --device "$device" --seconds 4 "${graph[@]}" | tee "$work-baseline.json"
}
step "onnxruntime's own loop ($choice_precision, batch $choice_batch)" 15 baseline
peer() { "$py" tools/torch_peer.py --batches "$peer_batches" --device "$device" --seconds 4 | tee "$work-peer.json"; }
step "PyTorch eager peer (batches $peer_batches)" 15 peer
step "resnet50 Server (tuned target)" 15 rrun Server server "${choice[@]}"
step "resnet50 SingleStream" 15 rrun SingleStream single "${choice[@]}"
# Server once more: at 0.92 x Offline when the tuned target was VALID and lower, at 80% of it when INVALID
server_again() {
  local qps
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
  if [ -z "$qps" ]; then echo "gpu_bench: no second Server run (the tuned target was VALID at 0.92 x Offline or more)"
  elif valid server; then rrun Server server-hi "${choice[@]}" --target-qps "$qps"
  else rrun Server server-80 "${choice[@]}" --target-qps "$qps"; fi
}
step "resnet50 Server again" 15 server_again

# 4. YOLO11l: fp32 and tf32 (the GPU's TensorFloat-32; fp16 misses yolo-99's 99%), fp16 outputs (a GPU card's),
# host NMS on each card's completion thread.
ydata=$data-yolo
ytuned=$ydata/tuned/yolo-99-bench.json
rm -f "$ytuned" "$work-yolo-ready"
yprepare() {  # fp32, then each other precision tuned (tf32: its agreement with FP32 measured on the CPU)
  appliance prepare --benchmark yolo-99 --data-dir "$ydata" --samples "$yolo_samples" -q
  touch "$work-yolo-ready"
}
if [ "${PLAN:-0}" = 1 ] || [ -s "$ydata/models/yolo-99.json" ]; then  # gpu_check's graph row prepared it
  step "prepare yolo-99 fp32 (gpu_check's)" 10 yprepare
else
  step "prepare yolo-99 fp32 ($yolo_samples images)" 30 yprepare
fi
yprep=${yprecisions//,/ }; [[ " $yprep " = *" tf32 "* ]] || yprep="$yprep tf32"  # tf32 prepared on a CPU too
for p in $yprep; do
  [ "$p" = fp32 ] || step "prepare yolo-99 $p" 15 appliance prepare --benchmark yolo-99 --data-dir "$ydata" \
    --samples "$yolo_samples" --precision "$p" -q
done
ycards=${YOLO_CARDS:-$( [ "$backend" = onnxruntime ] && echo auto || echo cuda:allx2 )}
ybatch=${YOLO_BATCH:-$( [ "$backend" = onnxruntime ] && echo 1 || echo 16 )}
# the same grid: batch, cards per GPU, NHWC (the CUDA provider's), fp32 against tf32; the outputs the YOLO runs
# below return (quantised: fp16), so tune times the configuration they run
step "tune yolo-99 ($yprecisions)" 35 appliance tune --benchmark yolo-99 --data-dir "$ydata" --backends "$backend" \
  --precisions "$yprecisions" --batch-sizes "$ybatches" --cards "$ylayouts" --card-outputs quantised \
  -s Offline -s SingleStream -o "$ytuned" -q
[ -f "$ytuned" ] && cp "$ytuned" "$work-yolo-tune.json"  # the table's fp32 / tf32 row
if [ -f "$ytuned" ]; then ychoice=(--tuned "$ytuned"); ybatchopt=(); else
  say "no tuned YOLO record: the runs use --cards $ycards, batch $ybatch, fp32"
  ychoice=(--backend "$backend" --cards "$ycards" --precision fp32); ybatchopt=(--batch-size "$ybatch"); fi
yrun() {  # scenario, name, extra args
  local s=$1 name=$2; shift 2
  [ -f "$work-yolo-ready" ] || { echo "gpu_bench: yolo-99 not prepared"; return 1; }
  appliance run --benchmark yolo-99 --data-dir "$ydata" --results "$results" "${ychoice[@]}" \
    --card-outputs quantised -s "$s" --json -q "$@" >"$work-$name.json"
}
yrun_graphs() { APPLIANCE_CUDA_GRAPH="$1" yrun "${@:2}"; }
step "yolo-99 Offline" 15 yrun Offline yolo-offline "${ybatchopt[@]}" --duration-ms "$duration" "${yolo_count[@]}"
step "yolo-99 accuracy (tuned)" 15 yrun Offline yolo-accuracy "${ybatchopt[@]}" --mode accuracy
# tf32 judged by the accuracy rule alone (MLPerf's): its golden mAP beside FP32's below
ytf32() {  # the untuned choice at tf32 (a CPU refuses it in one line: the row says so)
  appliance run --benchmark yolo-99 --data-dir "$ydata" --results "$results" --backend "$backend" --cards "$ycards" \
    --batch-size "$ybatch" --precision tf32 --card-outputs quantised --mode accuracy --json -q \
    >"$work-yolo-accuracy-tf32.json"
}
step "yolo-99 accuracy tf32" 15 ytf32
step "yolo-99 SingleStream" 15 yrun SingleStream yolo-single --duration-ms "$duration" "${yolo_count[@]}"
# the data path alone: the FP32 model with FP32 outputs against the FP32 golden detections (100% when the GPU path
# loses nothing), without CUDA graphs (the 2026-11-27 H100 abort: this combination under graphs, 2 cards, batch 16)
step "yolo-99 accuracy FP32 end to end" 12 yrun_graphs 0 Offline yolo-accuracy-fp32 "${ybatchopt[@]}" \
  --mode accuracy --precision fp32 --card-outputs fp32
nms_loop() {
  [ -f "$work-yolo-ready" ] || { echo "gpu_bench: yolo-99 not prepared"; return 1; }
  "$py" tools/gpu_baseline.py --data-dir "$ydata" --benchmark yolo-99 --precision fp32 --card-outputs quantised \
    --batch "$ybatch" --device "$device" --seconds 2 "${graph[@]}" | tee "$work-yolo-baseline.json"
}
step "yolo-99 host NMS (own loop, batch $ybatch)" 10 nms_loop

# 5. On a GPU, last (it may abort): the FP32 YOLO11l under CUDA graphs on one card, to tell "two sessions capturing
# on one GPU" from "this graph" (forced: the card's rule keeps graphs off for it since issue 43). On the CPU: its
# row says so.
if [ "$device" = cuda ]; then
  step "yolo-99 FP32 graphs, one card" 12 yrun_graphs 1 Offline yolo-fp32-graphs-1card --batch-size "$ybatch" \
    --cards cuda:allx1 --mode accuracy --precision fp32 --card-outputs fp32
else
  printf '%-44s budget %4s s  %s\n' "yolo-99 FP32 graphs, one card" 12 "a GPU's only (no graphs on a CPU)" \
    >>"$out/steps.txt"
fi

# 6. The table; native log lines that reached the terminal (issue 34: they belong in each run's native.log).
grep -c -E '\[(E|W):onnxruntime' "$out/bench.log" >"$out/native-on-terminal.txt" || true
say "table"
timeout 5 "$py" tools/gpu_bench_table.py "$work" "$out" "$backend"
say "done"
