#!/bin/bash
# The new-GPU sequence of the README, end to end, as a user meets it, on a GPU rooftune has no profile for: the
# H200's SM partition (SMS SMs, default 66) under a profile name the project does not ship. Every command and
# its output go to $OUT/new_gpu/transcript.txt (the profile, the small dataset and the tune cache beside it);
# `rooftune fit` on that dataset runs on a CPU afterwards (docs/results.md says how).
# usage (repository root, on the GPU machine): bash scripts/device/new_gpu.sh [SMS]
set -u
SMS=${1:-66}; W=$OUT/new_gpu; mkdir -p "$W"; T=$W/transcript.txt
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
step() {  # one command of the sequence, echoed, its output and wall seconds kept
  echo "\$ $*" | sed "s#$W#my#g" >> "$T"; local t0=$SECONDS
  "$@" 2>&1 | sed "s#$W#my#g" | grep -v "━" >> "$T"; echo "[exit ${PIPESTATUS[0]}, $((SECONDS - t0)) s]" >> "$T"
}
python3 -m rooftune.eval.shapelists.subset datasets/h200/gemm/shapes_heldout.json --count 6 --seed 7 --out "$W/my_shapes.json" >/dev/null
step rooftune hwprobe --sms "$SMS" --name my-gpu --out "$W/my_gpu.json"
step rooftune tune gemm --shape 4096x4096x4096 --layout nk --gpu "$W/my_gpu.json" --sms "$SMS" --cache "$W/tune.json"
step rooftune tune gemm --shape 4096x4096x4096 --layout nk --gpu "$W/my_gpu.json" --sms "$SMS" --cache "$W/tune.json"
step rooftune tune attention --shape 2x32x4096x128x8 --gpu "$W/my_gpu.json" --sms "$SMS" --cache "$W/tune.json"
step rooftune sweep gemm --shapes "$W/my_shapes.json" --out "$W/my_data" --gpu "$W/my_gpu.json" --sms "$SMS" --max-minutes 2.5
step rooftune eval gemm --data "$W/my_data" --budget 5 --gpu "$W/my_gpu.json"
step rooftune eval gemm --data "$W/my_data" --budget 20 --gpu "$W/my_gpu.json"
tail -40 "$T"
