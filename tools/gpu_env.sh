# Sourced by tools/gpu_bench.sh: the lent GPU machine's Python environment, as tools/gpu_check.sh makes it
# (the same steps, the same places): the wheels tools/gpu_wheels.sh cut into loads, joined from
# /tmp/gpu-wheels and installed into /tmp/site (NVIDIA's CUDA wheels the machine already has linked beside
# them for onnxruntime.preload_dlls), then the C++ extensions built for this interpreter.
# gpu_env_setup PYTHON OUTDIR [WHEELS]; WHEELS=0 (a rehearsal) uses the interpreter's own packages; exports PYTHONPATH.
# Bounded: the install stopped at WHEELS_S (30 s), the build at 20 s (here, 2 loaded vCPUs: unzipping the
# onnxruntime-gpu wheel 3.6 s, building both extensions 3.4 s). PLAN=1: nothing installed or built.
gpu_env_setup() {
  local py=$1 out=$2 use_wheels=${3:-1} wheels=/tmp/gpu-wheels
  if [ "${PLAN:-0}" = 1 ]; then export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}; return 0; fi
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
      timeout "${WHEELS_S:-30}" "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
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
    timeout 20 "$py" -c 'from setuptools import setup; setup()' build_ext --inplace -q >"$out/build_ext.log" 2>&1 \
      || { tail -20 "$out/build_ext.log"; return 1; }
  fi
}

# step NAME SECONDS COMMAND...: COMMAND (a function too) in a process group of its own, stopped with everything it
# started when it passes its SECONDS (its stated budget: each script's sum fits one device call), so one slow or
# hung step costs its own budget, never the rows after it; BUDGET_SCALE (a CPU rehearsal's) multiplies it. Its row goes to $out/steps.txt: "done (N s)",
# "failed, exit C (N s)" or "over budget (N s)"; the step's own lines stay in the log. PLAN=1 (--plan): the row
# "planned", nothing run. Needs $out and say.
step() {
  local name=$1 budget=$(($2 * ${BUDGET_SCALE:-1})) t0=$SECONDS rc=0 pid dog row
  shift 2
  if [ "${PLAN:-0}" = 1 ]; then printf '%-44s budget %4s s  planned\n' "$name" "$budget" >>"$out/steps.txt"; return 0; fi
  say "$name (budget $budget s)"
  set -m  # background jobs get their own process group: the watchdog stops the step's children too
  ( set +m; "$@" ) </dev/null &
  pid=$!
  ( sleep "$budget"; kill -TERM -- "-$pid"; sleep 5; kill -KILL -- "-$pid" ) >/dev/null 2>&1 </dev/null &
  dog=$!
  set +m
  # the step's group does not get the terminal's Ctrl-C: the script passes an interrupt or a stop on to it
  trap 'kill -TERM -- "-$pid" "-$dog" 2>/dev/null; exit 130' INT TERM
  wait "$pid" || rc=$?
  trap - INT TERM
  kill -- "-$dog" 2>/dev/null || true
  local took=$((SECONDS - t0))
  if [ "$rc" != 0 ] && [ "$took" -ge "$budget" ]; then row="over budget ($took s)"
  elif [ "$rc" != 0 ]; then row="failed, exit $rc ($took s)"
  else row="done ($took s)"; fi
  printf '%-44s budget %4s s  %s\n' "$name" "$budget" "$row" >>"$out/steps.txt"
  say "$name: $row"
  return 0
}
