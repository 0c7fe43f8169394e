#!/bin/bash
# The checks of space 2 that need the GPU, on the nvidia-h200-x2 machine, from the repository root, one
# lane per GPU, each pinned to 16 cores like the one-GPU machine: GPU 0 runs the live check (20 held-out
# shapes of datasets/h200/gemm/v2/heldout tuned cold with `rooftune tune gemm`, each winner re-timed
# beside the shape's exhaustive best); GPU 1 runs the GEMM kernels' GPU tests (every load path over the
# space, the launchers, the custom ops). Logs and the live check's JSON land in $OUT/verify2.tgz.
# usage: bash datasets/h200/gemm/v2/verify.sh [SECONDS]   (D=datasets/h200/gemm/v3: the live check on v3's
# held-out shapes, logs named -v3)
T=${1:-540}; L=/tmp/verify2; mkdir -p $L; D=${D:-datasets/h200/gemm/v2}; V=$(basename $D)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
laneA() {
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout $T python3 -m rooftune.tuner.livecheck \
    --data $D/heldout --count 20 --cold 20 --out $L/livecheck20-$V > $L/livecheck20-$V.log 2>&1
  echo "livecheck rc=$?: $(tail -3 $L/livecheck20-$V.log)"
}
laneB() {
  CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 timeout $T python3 -m pytest -q -m gpu -p no:cacheprovider \
    tests/kernels/test_gemm.py tests/kernels/test_gemm_v2.py tests/kernels/test_ops.py tests/kernels/test_live.py \
    tests/kernels/test_check.py > $L/gpu_tests-$V.log 2>&1
  echo "gpu tests rc=$?: $(tail -1 $L/gpu_tests-$V.log)"
}
laneA & laneB & wait
tar czf $OUT/verify2.tgz -C $L .
