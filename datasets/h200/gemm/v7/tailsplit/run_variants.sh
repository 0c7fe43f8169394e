#!/bin/bash
# On one H200, from the repository root: tailvariants.py (the tail summed in the GEMM kernel, and the tail on a
# second stream, beside tailsplit.py's plain tail plans, space 7's best configs and cuBLAS) over shapes.txt,
# resuming from the committed tailvariants.json. Results in $OUT.
# usage: bash datasets/h200/gemm/v7/tailsplit/run_variants.sh SECONDS
D=datasets/h200/gemm/v7/tailsplit; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout $(( ${1:-240} + 120 )) env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc \
  python3 $D/tailvariants.py $OUT $1 $D/tailvariants.json $(cat $D/shapes.txt) > $OUT/tailvariants.log 2>&1
echo "tailvariants rc=$?"
sed -n '/^all shapes:/,$p' $OUT/tailvariants.log | cut -c1-250; grep -c FAIL $OUT/tailvariants.log; grep FAIL $OUT/tailvariants.log | head -5 | cut -c1-200
