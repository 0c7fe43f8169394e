#!/bin/bash
# One device call on one H200, from the repository root: tune the two shapes cold into a fresh cache, then
# route_check.py, then the GPU tests of the PyTorch ops. Results: $OUT/route_check.log.
# usage: bash datasets/h200/route_check.sh
export PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pyc ROOFTUNE_CACHE=/tmp/route/tune.json
unset PYTHONDONTWRITEBYTECODE
mkdir -p /tmp/route
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
{
  rooftune tune gemm --shape 256x22016x4096 --layout nk --gpu h200 --cache $ROOFTUNE_CACHE 2>&1 | tail -4
  rooftune tune attention --shape 3x40x3445x128 --gpu h200 --cache $ROOFTUNE_CACHE 2>&1 | tail -4
  python3 datasets/h200/route_check.py
  timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_ops.py tests/tuner/test_ops.py 2>&1 | tail -3
} > $OUT/route_check.log 2>&1
cat $OUT/route_check.log
