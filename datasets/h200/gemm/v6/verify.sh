#!/bin/bash
# After the residual's refit on v6/train, on one H200, from the repository root: the live check (20 held-out
# shapes tuned cold with `rooftune tune gemm` and the shipped residual, each winner re-timed beside the
# shape's exhaustive best), then the persistent GEMM GPU tests. Results in $OUT.
# usage: bash datasets/h200/gemm/v6/verify.sh [LIVE_SECONDS] [TEST_SECONDS]
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout ${1:-330} python3 -m rooftune.tuner.livecheck --data datasets/h200/gemm/v6/heldout --count 20 --cold 20 \
  --out $OUT/livecheck20-v6 > $OUT/livecheck20-v6.log 2>&1
echo "livecheck rc=$?: $(tail -1 $OUT/livecheck20-v6.log)"
timeout ${2:-90} python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_gemm.py -k "persistent or tma" \
  > $OUT/gpu_tests-v6.log 2>&1
echo "gpu tests rc=$?: $(tail -1 $OUT/gpu_tests-v6.log)"
tail -8 $OUT/livecheck20-v6.log
