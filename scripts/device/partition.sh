#!/bin/bash
# One device call of the SM-partition ground truth (issue 27): the H200 split into a green context of SMS SMs
# (default 66), probed once into hwprofiles/h200-sm$SMS.json, then the seeded subsets in datasets/h200-sm$SMS/
# swept inside that partition, each list resuming where the last call stopped. Lists in order: GEMM train,
# attention train, attention held-out, GEMM held-out (train first: it decides whether the full chip's residual
# transfers, before held-out is scored). Comes back in $OUT: the profile (when probed here), one
# KERNEL_LIST.tgz and log per list touched.
# usage (repository root, on the GPU machine): bash scripts/device/partition.sh SECONDS [SMS]
set -u
T=$1; SMS=${2:-66}; end=$((SECONDS + T))
NAME=h200-sm$SMS; PROFILE=hwprofiles/$NAME.json; ROOT=datasets/$NAME
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
if [ ! -f "$PROFILE" ]; then
  rooftune hwprobe --sms "$SMS" --name "$NAME" --out "$PROFILE" > "$OUT/hwprobe_$NAME.log" 2>&1
  echo "hwprobe --sms $SMS rc=$?"; cp "$PROFILE" "$OUT/" 2>/dev/null
fi
for kl in "gemm train" "attention train" "attention heldout" "gemm heldout"; do
  set -- $kl
  left=$(( end - SECONDS - 10 ))
  [ "$left" -lt 60 ] && break
  GPU=$PROFILE SMS=$SMS bash scripts/device/sweep.sh "$1" "$2" "$left" "$ROOT"
done
