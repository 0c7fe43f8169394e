#!/bin/bash
# One device call of the v7 H200 GEMM collection (composite tiles: BLOCK_N + BLOCK_N2 columns, where they fill
# the SMs' waves), from the repository root: v2/collect.sh's steps (sanity check, prebuild, train then held-out
# sweep on every GPU of the machine) over datasets/h200/gemm/v7/, which holds the shapes carried unchanged from
# v6 (`python -m rooftune.eval.migrate --carry`: the shapes with no legal composite config), so only the shapes
# that have one are swept. Resumes what earlier calls committed.
# usage: bash datasets/h200/gemm/v7/collect.sh [SECONDS]   (results in $OUT/sweep2.tgz)
D=datasets/h200/gemm/v7 W=.sweepwork7 exec bash datasets/h200/gemm/v2/collect.sh "$@"
