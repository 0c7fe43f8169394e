#!/bin/bash
# On one H200, from the repository root: probe.py (a lever on rule-drawn shapes beside space 7's model-ranked
# configs and cuBLAS), resuming from the round's committed results. Results in $OUT.
# usage: [PROBE_ROUND=2|3|4|5] [PROBE_SET=family|train] bash datasets/h200/gemm/v7/skfirst/probe.sh SECONDS
D=datasets/h200/gemm/v7/skfirst; export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${PROBE_ROUND:-1}; N=probe$([ $R = 1 ] || echo $R); export PROBE_ROUND=$R
[ "$PROBE_SET" = train ] && N=train$R
[ "$PROBE_SET" = family ] && N=family$([ $R = 4 ] || echo $R)
timeout $(( ${1:-240} + 150 )) python3 $D/probe.py $OUT $1 $D/$N.json > $OUT/$N.log 2>&1
echo "probe rc=$?"
sed -n '/^all shapes:/,$p' $OUT/$N.log | cut -c1-250; grep -c FAIL $OUT/$N.log; grep FAIL $OUT/$N.log | head -5 | cut -c1-200
