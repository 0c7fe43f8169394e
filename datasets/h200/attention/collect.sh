#!/bin/bash
# One device call of the attention work, run from the repository root on the GPU machine: the kernel's
# configs vs each SDPA backend (kernel_vs_sdpa.py), the attention GPU tests, then, as time allows, a
# resumable sweep of the training list (.sweepwork/train, packed into $OUT/sweep_train.tgz).
# usage: bash datasets/h200/attention/collect.sh [SECONDS]   (the device tool's command limit is 600 s)
T=${1:-560}; end=$((SECONDS+T)); left() { echo $((end-SECONDS)); }
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout 150 python3 datasets/h200/attention/kernel_vs_sdpa.py "$OUT" 120 > "$OUT/kernel_vs_sdpa.log" 2>&1
echo "kernel_vs_sdpa rc=$?"
timeout 220 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_attention.py \
  tests/eval/test_sweep_attention.py > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; tail -4 "$OUT/gpu_tests.log"
l=$(( $(left) - 25 ))
if [ $l -gt 60 ]; then
  timeout $l rooftune sweep attention --shapes datasets/h200/attention/shapes_train.json --out .sweepwork/train \
    --gpu h200 --max-minutes "$(python3 -c "print(($l - 30) / 60)")" > "$OUT/sweep_train.log" 2>&1
  echo "sweep rc=$?"; tail -3 "$OUT/sweep_train.log"
  tar czf "$OUT/sweep_train.tgz" --exclude='*.tmp' -C .sweepwork train
fi
grep -v -i warn "$OUT/kernel_vs_sdpa.log" | tail -16
