#!/bin/bash
# On one H200, from the repository root: sktiles.py (stream-K beside space 7's best configs and cuBLAS) over
# shapes.txt, resuming from the committed sktiles.json. Results in $OUT.
# usage: bash datasets/h200/gemm/v7/streamk/run.sh SECONDS
D=datasets/h200/gemm/v7/streamk; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout $(( ${1:-240} + 90 )) python3 $D/sktiles.py $OUT $1 $D/sktiles.json $(cat $D/shapes.txt) > $OUT/sktiles.log 2>&1
echo "sktiles rc=$?"
sed -n '/^all shapes:/,$p' $OUT/sktiles.log | cut -c1-250; grep -c FAIL $OUT/sktiles.log; grep FAIL $OUT/sktiles.log | head -5 | cut -c1-200
