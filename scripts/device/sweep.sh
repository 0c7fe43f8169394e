#!/bin/bash
# One device call of a resumable sweep: `rooftune sweep KERNEL` over datasets/h200/KERNEL/shapes_LIST.json
# (or DATASET_ROOT/KERNEL/shapes_LIST.json where that exists) into DATASET_ROOT/KERNEL/LIST, stopping in
# time to pack the folder into $OUT/KERNEL_LIST.tgz for the next call's commit. A shape already there is
# skipped, so each call goes on where the last stopped. The console log is $OUT/sweep_KERNEL_LIST.log.
# usage (repository root, on the GPU machine): [GPU=NAME|PATH SMS=N] bash scripts/device/sweep.sh KERNEL LIST SECONDS [DATASET_ROOT]
#   e.g. bash scripts/device/sweep.sh gemm heldout 540      (KERNEL: gemm, attention or moe; LIST: train, heldout)
#        GPU=hwprofiles/h200_sm66.json SMS=66 bash scripts/device/sweep.sh gemm heldout 540 datasets/h200-sm66
# GPU: the profile for legality (default h200); SMS: sweep inside a green context of that many SMs;
# INTO: the dataset folder's name when it is not LIST (e.g. INTO=train with LIST train_half: a seeded subset of
#   the training list swept into the training folder, which a later call with the whole list completes);
# LISTS: the folder holding KERNEL/shapes_LIST.json when it is not DATASET_ROOT (e.g. LISTS=datasets/h200/releases
#   with DATASET_ROOT datasets/h200/releases/triton-3.9: one committed list swept under each release);
# PREBUILT: prebuild archives to unpack first, space-separated (e.g. PREBUILT=".tcache/r39_gemm_train.tar.xz
#   .tcache/r39_moe_train.tar.xz", carried with the call), each once per machine;
# GPUS: sweep on these GPUs at once (e.g. GPUS=0,1 on a machine of two H200s: `rooftune sweep --gpus`);
# BACKFILL: instead of sweeping, backfill the finished shapes (legal, extras or routes: `--backfill-legal`, ...), e.g.
#   BACKFILL=legal GPU=h200-sm66 SMS=66 bash scripts/device/sweep.sh gemm heldout 240 datasets/h200-sm66
set -u
K=$1; L=$2; T=$3; ROOT=${4:-datasets/h200}; end=$((SECONDS + T))
GPU=${GPU:-h200}; DEVICE_ARGS=(); [ -n "${SMS:-}" ] && DEVICE_ARGS=(--sms "$SMS")
[ -n "${GPUS:-}" ] && DEVICE_ARGS+=(--gpus "$GPUS")
[ -n "${BACKFILL:-}" ] && DEVICE_ARGS+=("--backfill-$BACKFILL")
F=${K//-/_}   # the kernel's folder (moe-fp8 -> moe_fp8)
if [ -n "${LISTS:-}" ]; then S=$LISTS/$F/shapes_$L.json   # never the full list in its stead
else S=$ROOT/$F/shapes_$L.json; [ -f "$S" ] || S=datasets/h200/$F/shapes_$L.json; fi
[ -f "$S" ] || { echo "sweep $K $L: no list $S"; exit 2; }
D=$ROOT/$F/${INTO:-$L}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
# PREBUILT: `prebuild build --tar` archives carried with the call (their binaries then cost no GPU time), each
# unpacked once per machine (a second call on a warm machine finds it; the mark names the archive and its size);
# unpack warns where this Triton, ptxas or environment keys binaries otherwise than the build did
for archive in ${PREBUILT:-}; do
  [ -f "$archive" ] || { echo "no prebuild archive $archive: its binaries compile here"; continue; }
  mark=${TMPDIR:-/tmp}/.prebuilt_$(basename "$archive")_$(stat -c %s "$archive")
  [ -f "$mark" ] && continue
  python3 -m rooftune.kernels.harness.prebuild unpack "$archive" | tail -1
  [ "${PIPESTATUS[0]}" -eq 0 ] && touch "$mark"
done
# the list's shapes, and how many of them the folder holds (it may hold other lists' too: INTO)
progress() { python3 -c "import sys; from rooftune.candidates import KERNELS, shape_id
from rooftune.eval.datasets.format import finished_ids
ids = {shape_id(s) for s in KERNELS[sys.argv[1]].load_list(sys.argv[2])}
print(len(ids & finished_ids(sys.argv[3])), len(ids))" "$K" "$S" "$D"; }
read -r done_ listed < <(progress)
if [ -z "${BACKFILL:-}" ] && [ "$done_" -ge "$listed" ]; then
  echo "sweep $K $L: all $listed shapes there"
else
  l=$(( end - SECONDS - 20 ))   # leave time to pack
  timeout $l rooftune sweep "$K" --shapes "$S" --out "$D" --gpu "$GPU" "${DEVICE_ARGS[@]}" \
    --max-minutes "$(python3 -c "print(($l - 25) / 60)")" > "$OUT/sweep_${F}_$L.log" 2>&1
  echo "sweep $K $L rc=$? (3: a config killed the CUDA context, quarantined: call again)"
  grep -v "measuring" "$OUT/sweep_${F}_$L.log" | tail -2
  echo "$(progress | cut -d' ' -f1) of $listed shapes done"
fi
if [ -d "$D" ]; then tar czf "$OUT/${F}_${INTO:-$L}.tgz" --exclude='*.tmp' --exclude='.manifest.lock' "$D"; fi
