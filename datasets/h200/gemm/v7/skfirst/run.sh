#!/bin/bash
# On one H200, from the repository root: skfirst.py (stream-K, SK first and fix-up last, beside space 7's best
# configs, skexp's stream-K and cuBLAS) over streamk/shapes.txt, resuming from the committed skfirst.json.
# Results in $OUT.
# usage: bash datasets/h200/gemm/v7/skfirst/run.sh SECONDS
D=datasets/h200/gemm/v7/skfirst; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout $(( ${1:-240} + 120 )) python3 $D/skfirst.py $OUT $1 $D/skfirst.json \
    $(cat datasets/h200/gemm/v7/streamk/shapes.txt) > $OUT/skfirst.log 2>&1
echo "skfirst rc=$?"
sed -n '/^all shapes:/,$p' $OUT/skfirst.log | cut -c1-250; grep -c FAIL $OUT/skfirst.log; grep FAIL $OUT/skfirst.log | head -5 | cut -c1-200
# the phases apart (diag.py), on three of those shapes
[ -n "$DIAG" ] && timeout 300 python3 $D/diag.py $OUT 4096x1280x8192-nk 2300x1520x6080-nk 256x22016x4096-nk \
    > $OUT/diag.log 2>&1; [ -n "$DIAG" ] && { echo "diag rc=$?"; tail -50 $OUT/diag.log; }
