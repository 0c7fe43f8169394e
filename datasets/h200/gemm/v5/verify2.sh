#!/bin/bash
# After gemm() began keeping its workspaces and launch functions, on one H200, from the repository root:
# the GEMM kernel's and the custom ops' GPU tests, then matmul_fill.py. Logs in $OUT/verify5c.tgz, the
# figures in $OUT/matmul_fill.json. usage: bash datasets/h200/gemm/v5/verify2.sh [TEST_SECONDS]
L=/tmp/verify5c; mkdir -p $L; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout ${1:-150} python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_gemm.py tests/kernels/test_ops.py \
  > $L/gpu_tests-v5-kept.log 2>&1
echo "gpu tests rc=$?: $(tail -1 $L/gpu_tests-v5-kept.log)"
timeout 60 python3 datasets/h200/gemm/v5/matmul_fill.py $OUT/matmul_fill.json 2>&1 | tail -4
tar czf $OUT/verify5c.tgz -C $L .
