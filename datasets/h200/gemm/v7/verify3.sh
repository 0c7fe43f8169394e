#!/bin/bash
# One device call on one H200, from the repository root: the GEMM live check widened to 40 held-out shapes
# (every 5th; the 20 of verify2.sh among them, so they are tuned a second time), then the attention live
# check on 10 held-out shapes with today's tuner. Results: $OUT/livecheck40-v7{,.log}, $OUT/att-livecheck10{,.log}.
# usage: bash datasets/h200/gemm/v7/verify3.sh [GEMM_SECONDS] [ATTENTION_SECONDS]
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
G=${1:-400}
# tuning stops 80 s before the limit, leaving the re-timing pass its time
timeout $G python3 -m rooftune.tuner.livecheck --data datasets/h200/gemm/v7/heldout --count 40 --cold 40 \
  --max-minutes $(python3 -c "print(($G - 80) / 60)") --out $OUT/livecheck40-v7 > $OUT/livecheck40-v7.log 2>&1
echo "gemm livecheck rc=$?: $(tail -1 $OUT/livecheck40-v7.log)"
A=${2:-150}
timeout $A python3 -m rooftune.tuner.livecheck --data datasets/h200/attention/heldout --count 10 --cold 10 \
  --max-minutes $(python3 -c "print(($A - 40) / 60)") --out $OUT/att-livecheck10 > $OUT/att-livecheck10.log 2>&1
echo "attention livecheck rc=$?: $(tail -1 $OUT/att-livecheck10.log)"
rm -f $OUT/livecheck40-v7/tune_* $OUT/att-livecheck10/tune_*
