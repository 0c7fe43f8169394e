#!/bin/bash
# On one H200, from the repository root: tailsplit.py (data-parallel waves + a split-K tail beside space 7's best
# configs and cuBLAS) over shapes.txt, resuming from the committed tailsplit.json. Results in $OUT.
# usage: bash datasets/h200/gemm/v7/tailsplit/run.sh SECONDS
D=datasets/h200/gemm/v7/tailsplit; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
# The device host's Python compiles torch's sources in every process unless its bytecode is kept.
timeout $(( ${1:-240} + 120 )) env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc \
  python3 $D/tailsplit.py $OUT $1 $D/tailsplit.json $(cat $D/shapes.txt) > $OUT/tailsplit.log 2>&1
echo "tailsplit rc=$?"
sed -n '/^all shapes:/,$p' $OUT/tailsplit.log | cut -c1-250; grep -c FAIL $OUT/tailsplit.log; grep FAIL $OUT/tailsplit.log | head -5 | cut -c1-200
