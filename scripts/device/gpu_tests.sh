#!/bin/bash
# Every GPU-marked test (`pytest -m gpu`), verbose, into $OUT/gpu_tests.log. Resumable: DONE_LOG (a previous
# call's log) lists tests already passed, skipped or failed, and those are deselected.
# usage (repository root, on the GPU machine): bash scripts/device/gpu_tests.sh SECONDS [DONE_LOG]
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
args=()
if [ -n "${2:-}" ]; then
  for id in $(grep -E "^tests/.* (PASSED|SKIPPED|FAILED|ERROR)" "$2" | awk '{print $1}'); do args+=(--deselect "$id"); done
fi
echo "deselected ${#args[@]} tests (done before)"
timeout "$1" python3 -m pytest -v -m gpu -p no:cacheprovider -rs --durations=15 tests "${args[@]}" \
  > "$OUT/gpu_tests.log" 2>&1
echo "pytest rc=$?"; grep -cE " PASSED" "$OUT/gpu_tests.log"; grep -E " FAILED| ERROR" "$OUT/gpu_tests.log" | head
tail -n 4 "$OUT/gpu_tests.log"
