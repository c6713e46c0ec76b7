# Sourced by tools/gpu_bench.sh: the lent GPU machine's Python environment, as tools/gpu_check.sh makes it
# (the same steps, the same places): the wheels tools/gpu_wheels.sh cut into loads, joined from
# /tmp/gpu-wheels and installed into /tmp/site (NVIDIA's CUDA wheels the machine already has linked beside
# them for onnxruntime.preload_dlls), then the C++ extensions built for this interpreter.
# gpu_env_setup PYTHON OUTDIR [WHEELS]; WHEELS=0 (a rehearsal) uses the interpreter's own packages; exports PYTHONPATH.
gpu_env_setup() {
  local py=$1 out=$2 use_wheels=${3:-1} wheels=/tmp/gpu-wheels
  mkdir -p "$wheels"
  if [ "$use_wheels" = 0 ]; then wheels=/nonexistent; fi
  if compgen -G ".whl/*" >/dev/null; then cp .whl/* "$wheels/"; fi
  if compgen -G "$wheels/*.part-*" >/dev/null; then
    echo "gpu_env: joining onnxruntime-gpu and installing the wheels into /tmp/site"
    local first whl
    first=$(ls "$wheels"/*.part-* | head -1)
    whl="$wheels/$(basename "${first%.part-*}")"
    cat "$wheels"/*.part-* >"$whl" && rm "$wheels"/*.part-*
    (cd "$wheels" && sha256sum -c SHA256SUMS)
  fi
  if compgen -G "$wheels/*.whl" >/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$wheels"/*.whl
    local nv
    nv=$("$py" -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
    if [ -n "$nv" ] && [ ! -e /tmp/site/nvidia ]; then ln -s "$nv" /tmp/site/nvidia; fi
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  if ! "$py" -c 'import harness._copy, harness._intake' 2>/dev/null; then
    echo "gpu_env: building the C++ extensions (harness/_intake.cpp, _copy.cpp)"
    "$py" -c 'from setuptools import setup; setup()' build_ext --inplace -q >"$out/build_ext.log" 2>&1 \
      || { tail -20 "$out/build_ext.log"; return 1; }
  fi
}
