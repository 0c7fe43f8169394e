#!/bin/bash
# One device call on one H200, from the repository root, after the residual's refit on v7/train: the held-out
# shapes still to sweep (resuming .sweepwork7/heldout, or the committed v7/heldout), then the live check (20
# held-out shapes tuned cold with `rooftune tune gemm` and the shipped residual, each winner re-timed beside
# the shape's exhaustive best). Results: $OUT/sweep3.tgz, $OUT/livecheck20-v7{,.log}.
# usage: bash datasets/h200/gemm/v7/verify.sh [SWEEP_SECONDS] [LIVE_SECONDS]
export PYTHONUNBUFFERED=1
W=.sweepwork7 D=datasets/h200/gemm/v7 S=${1:-170}
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
mkdir -p $W/heldout; cp -rn $D/heldout/. $W/heldout/ 2>/dev/null
timeout $S rooftune sweep gemm --shapes datasets/h200/gemm/shapes_heldout.json --out $W/heldout --gpu h200 --gpus 0 \
  --max-minutes $(python3 -c "print(($S - 15) / 60)") > $W/sweep_heldout3.log 2>&1
echo "sweep rc=$?: $(tail -1 $W/sweep_heldout3.log)"
tar czf $OUT/sweep3.tgz --exclude='*.tmp' -C $W heldout sweep_heldout3.log
timeout ${2:-280} python3 -m rooftune.tuner.livecheck --data $W/heldout --count 20 --cold 20 \
  --out $OUT/livecheck20-v7 > $OUT/livecheck20-v7.log 2>&1
echo "livecheck rc=$?: $(tail -1 $OUT/livecheck20-v7.log)"
tail -8 $OUT/livecheck20-v7.log
