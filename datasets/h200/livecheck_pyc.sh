#!/bin/bash
# The live check (cold Triton caches) on a Python that keeps its bytecode: attention on 10 held-out shapes,
# or with `gemm` the GEMM one on space 7's first 20 held-out shapes (every 10th, as verify2.sh).
# The device host sets PYTHONDONTWRITEBYTECODE=1 and its torch install has no __pycache__, so every
# process there compiles torch's sources again (~2.5 s of each cold tune's start-up; a pip install
# writes the bytecode once). Here the bytecode goes to /tmp/pyc, written by one untimed tune first.
# One device call on one H200, from the repository root. Results: $OUT/{att-livecheck10,livecheck20}-pyc{,.log}, $OUT/imports-pyc.txt.
# usage: bash datasets/h200/livecheck_pyc.sh [SECONDS] [gemm]
export PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pyc
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
for i in 1 2; do python3 -c "
import time; t = time.perf_counter(); import torch; a = time.perf_counter(); import triton, scipy.linalg
print(f'import torch {a - t:.2f} s, triton and scipy {time.perf_counter() - a:.2f} s')"; done | tee $OUT/imports-pyc.txt
TRITON_CACHE_DIR=$(mktemp -d) rooftune tune attention --shape 1x8x512x64 --gpu h200 > $OUT/pyc-warmup.log 2>&1
echo "warm-up tune rc=$?: $(grep 'time:' $OUT/pyc-warmup.log)"
if [ "${2:-}" = gemm ]; then
  TRITON_CACHE_DIR=$(mktemp -d) rooftune tune gemm --shape 512x512x512 --gpu h200 > $OUT/pyc-warmup-gemm.log 2>&1
  echo "warm-up tune rc=$?: $(grep 'time:' $OUT/pyc-warmup-gemm.log)"
fi
A=${1:-150}
if [ "${2:-}" = gemm ]; then D=datasets/h200/gemm/v7/heldout N=20 R=livecheck20-pyc; else
  D=datasets/h200/attention/heldout N=10 R=att-livecheck10-pyc; fi
timeout $A python3 -m rooftune.tuner.livecheck --data $D --count $N --cold $N \
  --max-minutes $(python3 -c "print(($A - 40) / 60)") --out $OUT/$R > $OUT/$R.log 2>&1
echo "livecheck rc=$?: $(tail -1 $OUT/$R.log)"
rm -f $OUT/$R/tune_*
