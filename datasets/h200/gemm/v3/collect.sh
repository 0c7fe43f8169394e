#!/bin/bash
# One device call of the v3 (persistent tiles) H200 GEMM collection on the nvidia-h200-x2 machine, from the
# repository root: v2/collect.sh's steps (sanity check, prebuild, train then held-out sweep on both GPUs)
# over datasets/h200/gemm/v3/, which holds the shapes carried unchanged from v2 (`python -m
# rooftune.eval.migrate --carry`), so only the shapes where persistent configs are legal are swept.
# usage: bash datasets/h200/gemm/v3/collect.sh [SECONDS]   (results in $OUT/sweep2.tgz: train/ heldout/)
D=datasets/h200/gemm/v3 W=.sweepwork3 exec bash datasets/h200/gemm/v2/collect.sh "$@"
