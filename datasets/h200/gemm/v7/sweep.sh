#!/bin/bash
# One device call, from the repository root: v7/collect.sh's sweep of the shapes still to sweep (resuming what
# earlier calls committed), then the GEMM kernel's GPU tests. Results: $OUT/sweep2.tgz and $OUT/gpu_tests-v7.log.
# usage: bash datasets/h200/gemm/v7/sweep.sh [SWEEP_SECONDS] [TEST_SECONDS]
bash datasets/h200/gemm/v7/collect.sh ${1:-420}
if [ -n "$2" ]; then
  timeout $2 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_gemm.py -k "composite or tma" \
    > $OUT/gpu_tests-v7.log 2>&1
  echo "gpu tests rc=$?: $(tail -1 $OUT/gpu_tests-v7.log)"
fi
