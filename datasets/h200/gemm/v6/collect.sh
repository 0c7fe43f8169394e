#!/bin/bash
# One device call of the v6 H200 GEMM collection (persistent tiles store C through a tensor descriptor in two
# halves along N where C's rows are 16-byte aligned), from the repository root: v2/collect.sh's steps (sanity
# check, prebuild, train then held-out sweep on every GPU of the machine) over datasets/h200/gemm/v6/, which
# holds the shapes carried unchanged from v5 (`python -m rooftune.eval.migrate --carry --rerun PERSISTENT=1`:
# the shapes with no legal persistent config), so only the shapes that have one are swept. Resumes what
# earlier calls committed. usage: bash datasets/h200/gemm/v6/collect.sh [SECONDS]   (results in $OUT/sweep2.tgz)
D=datasets/h200/gemm/v6 W=.sweepwork6 exec bash datasets/h200/gemm/v2/collect.sh "$@"
