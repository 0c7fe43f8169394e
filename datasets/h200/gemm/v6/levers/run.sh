#!/bin/bash
# On one H200, from the repository root: cntiles.py over shapes.txt (resuming from the committed cntiles.json),
# then the GEMM and custom-op GPU tests at this commit. Results in $OUT.
# usage: bash datasets/h200/gemm/v6/levers/run.sh LEVER_SECONDS [TEST_SECONDS]
D=datasets/h200/gemm/v6/levers; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout $(( ${1:-300} + 90 )) python3 $D/cntiles.py $OUT $1 $D/cntiles.json $(cat $D/shapes.txt) > $OUT/cntiles.log 2>&1
echo "cntiles rc=$?"
if [ -n "$2" ]; then
  timeout $2 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_gemm.py tests/kernels/test_gemm_v2.py \
    tests/kernels/test_ops.py tests/kernels/test_live.py tests/kernels/test_check.py > $OUT/gpu_tests.log 2>&1
  echo "gpu tests rc=$?: $(tail -1 $OUT/gpu_tests.log)"
fi
sed -n '/^all shapes:/,$p' $OUT/cntiles.log | cut -c1-250; grep -c FAIL $OUT/cntiles.log; grep FAIL $OUT/cntiles.log | head -5 | cut -c1-200
