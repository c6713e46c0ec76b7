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
    local have
    have=$(cd "$wheels" && ls -l ./*.whl | md5sum)  # a later call on the warm machine: installed already
    if [ "$(cat /tmp/site/.gpu-wheels 2>/dev/null)" != "$have" ]; then
      "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$wheels"/*.whl
      echo "$have" >/tmp/site/.gpu-wheels
    fi
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

# room SECONDS WHAT: true when SECONDS more fit in this call's budget (BUDGET_S, default 540: the device tool
# stops a call at 600 s, and the table must still be written); otherwise says WHAT is skipped (and adds it to $out/skipped.txt). Needs $start, $out, say.
room() {
  if [ $((SECONDS - start + $1)) -le "${BUDGET_S:-540}" ]; then return 0; fi
  say "skipped, it would not fit in the ${BUDGET_S:-540} s budget ($((SECONDS - start)) s used): $2"
  echo "$2" >>"$out/skipped.txt"  # the table lists them
  return 1
}
# left RESERVE: the seconds left in the budget, less RESERVE (for a `timeout` around a step of unknown length)
left() { echo $(( ${BUDGET_S:-540} - (SECONDS - start) - $1 )); }
