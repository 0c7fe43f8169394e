#!/bin/bash
# One device call on one H200, from the repository root: a GEMM sweep whose process alone is killed mid-shape
# (SIGTERM to its pid, as `kill` or a supervisor sends; `timeout` would signal the whole process group) must
# leave no compile worker behind (kernels/compile.py `_watch_parent`); then a live tune killed with SIGKILL (as
# the OOM killer does); then the GPU tests of the compile, sweep and live paths. Results: $OUT/orphan_check.log.
# usage: bash datasets/h200/orphan_check.sh
export PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=/tmp/pyc
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
workers() { pgrep -f "multiprocessing.spawn" | wc -l; }
{
  echo '[{"m": 4096, "n": 4096, "k": 4096, "layout": "nk"}, {"m": 2048, "n": 8192, "k": 8192, "layout": "nk"}]' > /tmp/orphan_shapes.json
  echo "compile workers before: $(workers)"
  rooftune sweep gemm --shapes /tmp/orphan_shapes.json --out /tmp/orphan_sweep --gpu h200 & pid=$!
  sleep 25; echo "sweep running, workers: $(workers)"; kill -TERM $pid; wait $pid
  echo "sweep rc=$? (143: SIGTERM); workers right after: $(workers)"
  sleep 3; echo "workers 3 s later: $(workers)"
  rooftune tune gemm --shape 3000x5000x3000 --layout nk --gpu h200 --cache none & pid=$!
  sleep 3; echo "tune running, workers: $(workers)"; kill -KILL $pid; wait $pid
  echo "tune rc=$? (137: SIGKILL); workers right after: $(workers)"
  sleep 3; echo "workers 3 s later: $(workers)"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | head -5; echo "(compute apps above, if any)"
  timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider tests/kernels/test_compile.py tests/kernels/test_live.py tests/eval tests/tuner/test_livecheck.py 2>&1 | tail -3
} > $OUT/orphan_check.log 2>&1
cat $OUT/orphan_check.log
