#!/bin/bash
# The two-GPU sweep against one GPU, on the nvidia-h200-x2 machine, from the repository root: the first
# 20 shapes of the held-out list swept on GPU 0 alone, then on GPUs 0 and 1 (`--gpus 0,1`), every
# binary compiled beforehand into one Triton cache so that neither run pays compiles; then the wall
# times (target: two GPUs >= 1.9x one) and the agreement of the two runs per shape (each shape's best
# config and its time, GPU 0 vs GPU 1 where the second run put it), written to $OUT/x2_check.json.
# usage: bash datasets/h200/gemm/x2_check.sh
set -u
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/x2-triton}
W=/tmp/x2work; rm -rf $W; mkdir -p $W
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -c "import json; json.dump(json.load(open('datasets/h200/gemm/shapes_heldout.json'))[:20], open('$W/s20.json', 'w'))"
python3 -m rooftune.kernels.prebuild build --shapes $W/s20.json --gpu h200 --cache $TRITON_CACHE_DIR > $W/prebuild.log 2>&1
echo "prebuild rc=$?: $(tail -1 $W/prebuild.log)"
t0=$SECONDS; rooftune sweep gemm --shapes $W/s20.json --out $W/one --gpu h200 --gpus 0 > $W/one.log 2>&1
one=$((SECONDS - t0)); echo "one GPU: rc=$? ${one} s"
t0=$SECONDS; rooftune sweep gemm --shapes $W/s20.json --out $W/two --gpu h200 --gpus 0,1 > $W/two.log 2>&1
two=$((SECONDS - t0)); echo "two GPUs: rc=$? ${two} s"
python3 - "$W" "$one" "$two" <<'PY'
import json, os, statistics, sys
from pathlib import Path
from rooftune.eval.dataset import read_manifest, read_shape, shape_files
w, one_s, two_s = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
def best(folder):
    out = {}
    for path in shape_files(folder):
        r = read_shape(path)
        ok = [row for row in r.rows if row.time_us and not row.error]
        b = min(ok, key=lambda row: row.time_us)
        out[path.name] = (str(b.config), b.time_us, {str(row.config): row.time_us for row in ok})
    return out
one, two = best(w / "one"), best(w / "two")
devices = read_manifest(w / "two").get("shape_devices", {})
same_best, ratios = 0, []
for name in sorted(set(one) & set(two)):
    c1, t1, all1 = one[name]
    c2, t2, all2 = two[name]
    same_best += (all1.get(c2, float("inf")) <= 1.01 * t1)  # run 2's best within 1% of run 1's best in run 1's times
    ratios.append(t2 / t1)
summary = {"shapes": len(ratios), "one_gpu_s": one_s, "two_gpus_s": two_s, "speedup": one_s / two_s,
           "best_time_ratio_median": statistics.median(ratios), "best_time_ratio_range": [min(ratios), max(ratios)],
           "second_run_best_within_1pct_in_first": same_best, "shape_devices": devices}
Path(os.environ["OUT"], "x2_check.json").write_text(json.dumps(summary, indent=1))
print(json.dumps({k: v for k, v in summary.items() if k != "shape_devices"}))
PY
tar czf $OUT/x2_work.tgz -C $W one two one.log two.log prebuild.log
