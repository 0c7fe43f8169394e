#!/bin/bash
# One device call of the v2 (TMA) H200 GEMM collection on the nvidia-h200-x2 machine, from the repository
# root: a correctness check of the TMA kernel (sanity.py; nothing is swept if it fails), every binary
# the shapes still to sweep need compiled into one Triton cache on the machine's cores, then the
# training sweep and the held-out sweep on every GPU of the machine (`--gpus 0,1` on the x2 machine),
# resuming what earlier calls committed under datasets/h200/gemm/v2/. Everything lands in $OUT/sweep2.tgz.
# usage: bash datasets/h200/gemm/v2/collect.sh [SECONDS]   (the device tool's command limit is 600 s)
# D (default datasets/h200/gemm/v2) and W (its work folder) name another version's datasets (v3/collect.sh).
T=${1:-560}; end=$((SECONDS+T)); W=${W:-.sweepwork2}; LISTS=datasets/h200/gemm; D=${D:-$LISTS/v2}
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/v2-triton}
left() { echo $((end-SECONDS)); }
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)  # 0,1 on the two-H200 machine; 0 on one
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
for d in train heldout; do mkdir -p $W/$d; [ -d $D/$d ] && cp -rn $D/$d/. $W/$d/; done  # committed shapes are kept
if ! python3 $LISTS/v2/sanity.py > $W/sanity.log 2>&1; then
  echo "sanity failed:"; tail -20 $W/sanity.log; tar czf $OUT/sweep2.tgz -C $W .; exit 1; fi
tail -1 $W/sanity.log
python3 - $W $LISTS <<'PY'
import json, sys
from pathlib import Path
from rooftune.candidates.shapes import load_shapes
from rooftune.eval.dataset import finished_ids, shape_id
w, lists = Path(sys.argv[1]), Path(sys.argv[2])
todo = []
for d in ("train", "heldout"):
    done = finished_ids(w / d) if (w / d / "manifest.json").exists() else set()
    raw = json.loads((lists / f"shapes_{d}.json").read_text())
    shapes = load_shapes(lists / f"shapes_{d}.json")
    left = [entry for entry, s in zip(raw, shapes) if shape_id(s) not in done]
    (w / f"todo_{d}.n").write_text(str(len(left)))  # sweep() skips a list with nothing left
    todo += left
(w / "todo.json").write_text(json.dumps(todo))
print(f"{len(todo)} shapes to sweep")
PY
s=$SECONDS; python3 -m rooftune.kernels.prebuild build --shapes $W/todo.json --gpu h200 --cache $TRITON_CACHE_DIR \
  > $W/prebuild.log 2>&1; echo "prebuild rc=$? $((SECONDS-s)) s: $(tail -1 $W/prebuild.log)"
sweep() { # sweep LIST: until done, out of time, or an exit other than 3 (quarantine: run again)
  local d=$1
  [ "$(cat $W/todo_$d.n 2>/dev/null || echo 1)" != 0 ] || { echo "sweep $d: nothing left"; return; }
  while :; do local l=$(( $(left) - 25 )); [ $l -gt 45 ] || return
    timeout $l rooftune sweep gemm --shapes $LISTS/shapes_$d.json --out $W/$d --gpu h200 --gpus $GPUS \
      --max-minutes $(python3 -c "print(($l-15)/60)") >> $W/sweep_$d.log 2>&1; local rc=$?
    echo "sweep $d rc=$rc: $(tail -1 $W/sweep_$d.log)"; [ $rc -eq 3 ] || return; done; }
sweep train
sweep heldout
tar czf $OUT/sweep2.tgz --exclude='*.tmp' -C $W .
for d in train heldout; do echo "$d: $(ls $W/$d/shapes 2>/dev/null | wc -l) shapes"; done
