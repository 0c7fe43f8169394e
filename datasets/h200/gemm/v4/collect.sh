#!/bin/bash
# One device call of the v4 (split-K summed in the GEMM kernel for M <= 64) H200 GEMM collection, from the
# repository root: v2/collect.sh's steps (sanity check, prebuild, train then held-out sweep on every GPU
# of the machine) over datasets/h200/gemm/v4/, which holds the shapes carried unchanged from v3 (`python -m
# rooftune.eval.migrate --carry`), so only the shapes with split-K configs and M <= 64 are swept.
# usage: bash datasets/h200/gemm/v4/collect.sh [SECONDS]   (results in $OUT/sweep2.tgz: train/ heldout/)
D=datasets/h200/gemm/v4 W=.sweepwork4 exec bash datasets/h200/gemm/v2/collect.sh "$@"
