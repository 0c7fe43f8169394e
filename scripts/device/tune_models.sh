#!/bin/bash
# One device call: `rooftune tune model` for the two shipped model configs on the H200, each token
# count tuned like `rooftune tune` (20 configs), into datasets/h200/models/<model>/ (vLLM-format GEMM
# tables, <model>.report.json and .md: every layer's time beside torch's, and the forward pass's
# total). Resumable: the tune cache (datasets/h200/models/tune.json) keeps every tuned shape, so a
# second call tunes only what the first did not reach. Packed into $OUT/models.tgz, logs in $OUT.
# usage (repository root, on the GPU machine): bash scripts/device/tune_models.sh [SECONDS]
T=${1:-560}; end=$((SECONDS+T)); D=datasets/h200/models
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
for model in llama-3-8b qwen2.5-7b; do
  l=$(( end - SECONDS - 20 )); [ $l -gt 60 ] || break
  timeout $l rooftune tune model --config $model --batch 1,16,256,2048 --gpu h200 --cache $D/tune.json \
    --out $D/$model > $OUT/$model.log 2>&1
  echo "$model rc=$?"; tail -4 $OUT/$model.log
done
tar czf $OUT/models.tgz $D
