#!/bin/bash
# One device call of the attention sweep, run from the repository root on the GPU machine: the
# training list, then the held-out list, into datasets/h200/attention/{train,heldout} (resumable: a
# shape already there is skipped, so each call goes on where the last stopped), packed into
# $OUT/attention_data.tgz for the next call's commit.
# usage: bash datasets/h200/attention/collect.sh [SECONDS]   (the device tool's command limit is 600 s)
T=${1:-560}; end=$((SECONDS+T))
export PYTHONUNBUFFERED=1
for list in train heldout; do
  listed=$(python3 -c "import json; print(len(json.load(open('datasets/h200/attention/shapes_$list.json'))))")
  done_=$(ls datasets/h200/attention/$list/shapes 2>/dev/null | grep -c 'csv.gz$')
  [ "$done_" -ge "$listed" ] && { echo "sweep $list: all $listed shapes there"; continue; }
  l=$(( end - SECONDS - 20 ))
  [ $l -gt 30 ] || break
  timeout $l rooftune sweep attention --shapes datasets/h200/attention/shapes_$list.json \
    --out datasets/h200/attention/$list --gpu h200 --max-minutes "$(python3 -c "print(($l - 25) / 60)")" \
    > "$OUT/sweep_$list.log" 2>&1
  echo "sweep $list rc=$?"; grep -v "measuring" "$OUT/sweep_$list.log" | tail -2
done
tar czf "$OUT/attention_data.tgz" --exclude='*.tmp' $(ls -d datasets/h200/attention/train datasets/h200/attention/heldout 2>/dev/null)
