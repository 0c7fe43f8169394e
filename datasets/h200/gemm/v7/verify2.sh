#!/bin/bash
# One device call on one H200, from the repository root, for the shipped space-7 fit: the live check (20 held-out
# shapes tuned cold with `rooftune tune gemm`, each winner re-timed beside the shape's exhaustive best), then
# `rooftune tune model` for the shipped model configs on space 7 (datasets/h200/models/collect.sh).
# Results: $OUT/livecheck20-v7b{,.log}, $OUT/models.tgz.
# usage: bash datasets/h200/gemm/v7/verify2.sh [LIVE_SECONDS] [MODEL_SECONDS]
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout ${1:-270} python3 -m rooftune.tuner.livecheck --data datasets/h200/gemm/v7/heldout --count 20 --cold 20 \
  --out $OUT/livecheck20-v7b > $OUT/livecheck20-v7b.log 2>&1
echo "livecheck rc=$?: $(tail -1 $OUT/livecheck20-v7b.log)"
bash datasets/h200/models/collect.sh ${2:-290}
