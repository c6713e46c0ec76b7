#!/bin/bash
# `appliance submission check` against the official MLPerf checker on real published trees, unmodified and
# with faults planted in the accuracy runs' detail logs (the sample count the checker reads).
#
#   tools/planted_faults.sh MIRROR CHECKER_DIR CHECKER_PYTHON [VERSION]
#
# MIRROR: a git copy of published results holding yolo-95 trees (e.g. a fetched mirror of
# inference_results_v6.0); CHECKER_DIR: tools/submission of mlcommons/inference at the round's checker
# commit (v6.0: 6d0cf9dc); CHECKER_PYTHON: a Python with PyYAML and numpy (a venv under /tmp). Neither the
# trees nor the checker are ever committed: both are copied under /tmp. One line per tree and fault.
set -euo pipefail
mirror=$1 checker=$2 py=$3 version=${4:-v6.0}
appliance=${APPLIANCE:-appliance}
work=$(mktemp -d /tmp/planted-faults.XXXXXX)
trap 'rm -rf "$work"' EXIT
systems=$(git -C "$mirror" ls-tree -r --name-only HEAD | grep -E '^closed/[^/]+/results/[^/]+/yolo-95/' \
          | cut -d/ -f2,4 | sort -u)
for sys in $systems; do
  sub=${sys%%/*} name=${sys#*/} tree=$work/$sub-$name
  for f in $(git -C "$mirror" ls-tree -r --name-only HEAD "closed/$sub/systems/$name.json" "closed/$sub/results/$name";
             git -C "$mirror" ls-tree -r --name-only HEAD "closed/$sub/code" "closed/$sub/src" | grep -i yolo); do
    mkdir -p "$tree/$(dirname "$f")"
    git -C "$mirror" show "HEAD:$f" > "$tree/$f" 2>/dev/null || rm -f "$tree/$f"  # blobs a mirror lacks
  done
  for fault in none qsl_reported_total_count=null effective_accuracy_sample_count=null \
               effective_accuracy_sample_count=1000; do
    t=$work/try; rm -rf "$t"; cp -r "$tree" "$t"
    if [ "$fault" != none ]; then
      find "$t" -path '*/accuracy/mlperf_log_detail.txt' -not -path '*TEST0*' -exec \
        sed -i -E "s/(\"key\": \"${fault%%=*}\", \"value\": )[0-9]+/\\1${fault#*=}/" {} +
    fi
    official=0; (cd "$checker" && "$py" -m submission_checker.main --input "$t" --version "$version" \
                  > "$work/official.log" 2>&1) || official=$?
    ours=0; "$appliance" submission check "$t" --version "$version" > "$work/ours.log" 2>&1 || ours=$?
    agree=$([ $((official != 0)) = $((ours != 0)) ] && echo agree || echo DISAGREE)
    echo "$sub/$name $fault: official exit $official, appliance exit $ours: $agree"
  done
done
