#!/bin/bash
# On one H200, from the repository root: cmtiles.py (composite-height tiles) over shapes.txt, resuming from the
# committed cmtiles.json. Results in $OUT. usage: bash datasets/h200/gemm/v7/levers/run.sh LEVER_SECONDS
D=datasets/h200/gemm/v7/levers; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout $(( ${1:-240} + 90 )) python3 $D/cmtiles.py $OUT $1 $D/cmtiles.json $(cat $D/shapes.txt) > $OUT/cmtiles.log 2>&1
echo "cmtiles rc=$?"
sed -n '/^all shapes:/,$p' $OUT/cmtiles.log | cut -c1-250; grep -c FAIL $OUT/cmtiles.log; grep FAIL $OUT/cmtiles.log | head -5 | cut -c1-200
