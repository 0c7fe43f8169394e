#!/bin/bash
# The two-GPU sweep against one GPU, on the nvidia-h200-x2 machine, from the repository root: the first
# 20 shapes of the held-out list swept on GPU 0 alone, then on GPUs 0 and 1 (`--gpus 0,1`), then on both
# again with each GPU's worker pinned to its own cores (x2_pin.py: is the per-shape slowdown with both
# GPUs busy on the CPU side?), every binary compiled beforehand into one Triton cache so that no run pays
# compiles. x2_summary.py then gives each run's wall time (target: two GPUs >= 1.9x one), its steady-state
# throughput (each GPU's first shape left out), its measuring phases per shape against the one-GPU run,
# and whether the runs agree on each shape's best config: $OUT/x2_check.json.
# usage: bash datasets/h200/gemm/x2_check.sh [SKIP_PIN]
set -u
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/x2-triton}
D=datasets/h200/gemm; W=/tmp/x2work; rm -rf $W; mkdir -p $W
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|Socket|NUMA|MHz"; nvidia-smi topo -m; } > $OUT/x2_host.txt 2>&1
python3 -c "import json; json.dump(json.load(open('$D/shapes_heldout.json'))[:20], open('$W/s20.json', 'w'))"
python3 -m rooftune.kernels.prebuild build --shapes $W/s20.json --gpu h200 --cache $TRITON_CACHE_DIR > $W/prebuild.log 2>&1
echo "prebuild rc=$?: $(tail -1 $W/prebuild.log)"
t0=$SECONDS; rooftune sweep gemm --shapes $W/s20.json --out $W/one --gpu h200 --gpus 0 > $W/one.log 2>&1
rc=$?; one=$((SECONDS - t0)); echo "one GPU: rc=$rc ${one} s"
t0=$SECONDS; rooftune sweep gemm --shapes $W/s20.json --out $W/two --gpu h200 --gpus 0,1 > $W/two.log 2>&1
rc=$?; two=$((SECONDS - t0)); echo "two GPUs: rc=$rc ${two} s"
runs="one=$W/one:$W/one.log:$one two=$W/two:$W/two.log:$two"
if [ -z "${1:-}" ]; then
  t0=$SECONDS; python3 $D/x2_pin.py $W/s20.json $W/pin 0,1 > $W/pin.log 2>&1
  rc=$?; pin=$((SECONDS - t0)); echo "two GPUs, pinned: rc=$rc ${pin} s; $(head -1 $W/pin.log)"
  runs="$runs pin=$W/pin:$W/pin.log:$pin"
fi
python3 $D/x2_summary.py $OUT/x2_check.json $runs
cp $W/*.log $OUT/
tar czf $OUT/x2_work.tgz -C $W one two $( [ -d $W/pin ] && echo pin )
