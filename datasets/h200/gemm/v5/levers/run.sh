#!/bin/bash
# On one H200, from the repository root: levers.py over shapes.txt (resuming from the committed levers.json),
# then the GEMM and custom-op GPU tests and matmul_fill.py at this commit. Results in $OUT.
# usage: bash datasets/h200/gemm/v5/levers/run.sh LEVER_SECONDS [TEST_SECONDS]
D=datasets/h200/gemm/v5/levers; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout $(( ${1:-300} + 60 )) python3 $D/levers.py $OUT $1 $D/levers.json $(cat $D/shapes.txt) > $OUT/levers.log 2>&1
echo "levers rc=$?"
if [ -n "$2" ]; then
  timeout $2 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_gemm.py tests/kernels/test_ops.py \
    > $OUT/gpu_tests.log 2>&1
  echo "gpu tests rc=$?: $(tail -1 $OUT/gpu_tests.log)"
  timeout 60 python3 datasets/h200/gemm/v5/matmul_fill.py $OUT/matmul_fill.json 2>&1 | tail -4
fi
sed -n '/^all shapes:/,$p' $OUT/levers.log | cut -c1-230; grep -c FAIL $OUT/levers.log; grep FAIL $OUT/levers.log | head -5 | cut -c1-200
