#!/bin/bash
# On one H200, from the repository root: tallm.py's tall tiles beside space 7's ranked configs and cuBLAS
# (../skfirst/probe.py, round 5) on the 16 family shapes, the 8 probe shapes and the 10 training shapes of
# ../streamk/shapes.txt, each set resuming from its committed results. Results in $OUT.
# usage: bash datasets/h200/gemm/v7/tallM/run.sh SECONDS_PER_SET
for set in family probe train; do
  PROBE_ROUND=5 PROBE_SET=$set bash datasets/h200/gemm/v7/skfirst/probe.sh ${1:-150} | grep -E "rc=|shapes:" | cut -c1-200
done
