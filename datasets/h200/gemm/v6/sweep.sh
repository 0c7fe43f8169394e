#!/bin/bash
# One device call, from the repository root: v6/collect.sh's sweep of the shapes still to sweep (resuming what
# earlier calls committed), then the GEMM kernel's GPU tests (every load path and epilogue over the space).
# Results: $OUT/sweep2.tgz and $OUT/gpu_tests-v6.log. usage: bash datasets/h200/gemm/v6/sweep.sh [SWEEP_SECONDS] [TEST_SECONDS]
bash datasets/h200/gemm/v6/collect.sh ${1:-420}
if [ -n "$2" ]; then
  timeout $2 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_gemm.py > $OUT/gpu_tests-v6.log 2>&1
  echo "gpu tests rc=$?: $(tail -1 $OUT/gpu_tests-v6.log)"
fi
