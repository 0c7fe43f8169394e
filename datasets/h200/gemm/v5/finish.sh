#!/bin/bash
# One device call on one H200 (or the x2 machine), from the repository root: v5/collect.sh's sweep of the
# shapes still to sweep (resuming what earlier calls committed), then the live check on the completed
# held-out set: 20 held-out shapes tuned cold with `rooftune tune gemm` and the shipped residual, each
# winner re-timed beside the shape's exhaustive best. Results: $OUT/sweep2.tgz and $OUT/verify5.tgz.
# usage: bash datasets/h200/gemm/v5/finish.sh [SWEEP_SECONDS] [SECONDS]
S=${1:-360}; T=${2:-570}; end=$((SECONDS+T)); L=/tmp/verify5; mkdir -p $L
bash datasets/h200/gemm/v5/collect.sh $S
left=$((end-SECONDS-10))
if [ "$(ls .sweepwork5/heldout/shapes | wc -l)" -eq 200 ] && [ $left -gt 60 ]; then
  timeout $left python3 -m rooftune.tuner.livecheck --data .sweepwork5/heldout --count 20 --cold 20 \
    --out $L/livecheck20-v5 > $L/livecheck20-v5.log 2>&1
  echo "livecheck rc=$?: $(tail -1 $L/livecheck20-v5.log)"
else
  echo "live check skipped: $(ls .sweepwork5/heldout/shapes | wc -l) held-out shapes, $left s left"
fi
tar czf $OUT/verify5.tgz -C $L .
