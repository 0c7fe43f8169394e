#!/bin/bash
# One device call of the v5 H200 GEMM collection (64-row wgmma tiles for any M on sm_90; split-K summed
# both ways where 32 < M <= 64), from the repository root: v2/collect.sh's steps (sanity check, prebuild,
# train then held-out sweep on every GPU of the machine) over datasets/h200/gemm/v5/, which holds the
# shapes carried unchanged from v4 (`python -m rooftune.eval.migrate --carry`), so only the shapes whose
# legal set changed (M <= 64 with a config the new rules add) are swept. Resumes what earlier calls committed.
# usage: bash datasets/h200/gemm/v5/collect.sh [SECONDS]   (results in $OUT/sweep2.tgz: train/ heldout/)
D=datasets/h200/gemm/v5 W=.sweepwork5 exec bash datasets/h200/gemm/v2/collect.sh "$@"
