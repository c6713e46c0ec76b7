#!/usr/bin/env bash
# The cp312 wheels the GPU machine lacks, cut into loads that fit one device call (64 MiB with the tree).
#
# The machine (/work/.library/device/KINDS.md: Python 3.12, numpy, numba, opencv, onnx, click, pyyaml,
# psutil, tqdm, matplotlib, NVIDIA's CUDA 13 and cuDNN 9 wheels, nvidia-ml-py, a CPU-only onnxruntime
# 1.30; no network) needs onnxruntime-gpu 1.31.1 (255 MB), mlcommons-loadgen and pycocotools; nvidia-ml-py
# goes too, at the lock's version. The pins are requirements-gpu.lock's.
#
#   tools/gpu_wheels.sh                 download into .whl-store/ and split: prints how many loads there are
#   tools/gpu_wheels.sh load K          put load K (1..N) into .whl/, the folder a device call carries
#
# Then, one device call per load while the machine stays warm (30 s between calls), carry [".whl"]:
#   loads 1..N-1:  tools/gpu_check.sh --stash        (copies .whl/ to /tmp/gpu-wheels there)
#   load N:        tools/gpu_check.sh                (stashes the last load, joins, installs, checks)
set -euo pipefail
cd "$(dirname "$0")/.."
store=.whl-store
piece=55M
pin() { grep -E "^$1==" requirements-gpu.lock | head -1; }

if [ "${1:-}" = load ]; then
  k=${2:?load number}
  [ -d "$store/load-$k" ] || { echo "tools/gpu_wheels.sh: no load $k in $store (run it without arguments first)" >&2; exit 2; }
  rm -rf .whl && mkdir -p .whl && cp "$store/load-$k"/* .whl/
  echo "load $k of $(ls -d "$store"/load-* | wc -l) in .whl/: $(du -sh .whl | cut -f1)"
  exit 0
fi

grep -qx '/.whl-store/' .git/info/exclude 2>/dev/null || echo '/.whl-store/' >>"$(git rev-parse --git-path info/exclude)"
rm -rf "$store" && mkdir -p "$store/dl"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$store/dl" \
  "$(pin onnxruntime-gpu)" "$(pin mlcommons_loadgen)" "$(pin pycocotools)" "$(pin nvidia-ml-py)"
big=$(ls "$store"/dl/onnxruntime_gpu-*.whl)
(cd "$store" && split -b "$piece" -d -a 2 "dl/$(basename "$big")" "$(basename "$big").part-")
parts=("$store"/onnxruntime_gpu-*.part-*)
n=${#parts[@]}
for i in $(seq 1 "$n"); do
  mkdir -p "$store/load-$i"
  mv "${parts[$((i - 1))]}" "$store/load-$i/"
done
cp "$store"/dl/*.whl "$store/load-$n/" && rm "$store/load-$n/$(basename "$big")"  # the small wheels ride last
(cd "$store/dl" && sha256sum "$(basename "$big")") >"$store/load-$n/SHA256SUMS"
rm -rf "$store/dl"
du -sh "$store"/load-* | sed 's/^/  /'
echo "$n loads; for K in 1..$n: tools/gpu_wheels.sh load K, then a device call (carry .whl)"
