#!/bin/bash
# One device call of fixup_bench.py (on the nvidia-h200-x2 machine, or on one H200), from the repository root: its binaries
# compiled on the machine's cores, then the shapes split over both GPUs (one process each, pinned to
# half of the cores; with one GPU, one process). Results: $OUT/fixup_bench_{0,1}.json and .log.
# usage: bash datasets/h200/gemm/v3/fixup_bench.sh [SECONDS]
T=${1:-300}; B=datasets/h200/gemm/v3/fixup_bench.py
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/fixup-triton
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
s=$SECONDS; python3 $B --build $TRITON_CACHE_DIR 2>&1 | tail -3; echo "build $((SECONDS-s)) s"
left=$((T-(SECONDS-s)-20))
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python3 $B $OUT $left 0 2 > $OUT/fixup_bench_0.log 2>&1 &
  CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 python3 $B $OUT $left 1 2 > $OUT/fixup_bench_1.log 2>&1 &
  wait
else  # one GPU: every shape in one process
  python3 $B $OUT $left 0 1 > $OUT/fixup_bench_0.log 2>&1; : > $OUT/fixup_bench_1.log
fi
cat $OUT/fixup_bench_0.log $OUT/fixup_bench_1.log | grep -v "^\s*$" | tail -70
