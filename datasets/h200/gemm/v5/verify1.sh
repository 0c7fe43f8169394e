#!/bin/bash
# The space-5 checks that need the GPU, on one H200 (one after the other), from the repository root: the
# GEMM kernels' GPU tests (every load path over the space, the launchers, gemm()'s per-stream FIXUP
# workspace, the custom ops), then `rooftune tune model` for the shipped model configs
# (datasets/h200/models/collect.sh), with matmul_fill.py between them. Logs in $OUT/verify5b.tgz,
# matmul_fill's figures in $OUT/matmul_fill.json, the models in $OUT/models.tgz.
# usage: bash datasets/h200/gemm/v5/verify1.sh [TEST_SECONDS] [MODEL_SECONDS]
L=/tmp/verify5b; mkdir -p $L; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout ${1:-220} python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_gemm.py tests/kernels/test_gemm_v2.py \
  tests/kernels/test_ops.py tests/kernels/test_live.py tests/kernels/test_check.py > $L/gpu_tests-v5.log 2>&1
echo "gpu tests rc=$?: $(tail -1 $L/gpu_tests-v5.log)"
tar czf $OUT/verify5b.tgz -C $L .
timeout 60 python3 datasets/h200/gemm/v5/matmul_fill.py $OUT/matmul_fill.json 2>&1 | tail -4
bash datasets/h200/models/collect.sh ${2:-300}
