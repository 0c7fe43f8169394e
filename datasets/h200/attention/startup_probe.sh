#!/bin/bash
# Where a cold `rooftune tune` spends its start-up on the GPU host (one device call, repository root): the host's
# CPUs, torch's import, the CUDA context, triton's import, then a cProfile of cold tunes (fresh Triton cache;
# the main process only: compiles run in worker processes). Results: $OUT/startup/.
# usage: bash datasets/h200/attention/startup_probe.sh
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
O=$OUT/startup; mkdir -p $O
{ nproc; lscpu | grep -E "Model name|^CPU\(s\)|MHz"; } > $O/host.txt
for i in 1 2; do python3 - >> $O/imports.txt <<'PY'
import time
t = time.perf_counter(); import torch; a = time.perf_counter()
torch.zeros(1, device="cuda"); torch.cuda.synchronize(); b = time.perf_counter()
import triton; c = time.perf_counter()
import rooftune.tuner.cli; d = time.perf_counter()
print(f"import torch {a - t:.2f} s, CUDA context {b - a:.2f} s, import triton {c - b:.2f} s, rooftune cli {d - c:.2f} s")
PY
done
cat > $O/prof_main.py <<'PY'
import cProfile
import sys

if __name__ == "__main__":
    prof_path, sys.argv = sys.argv[1], ["rooftune"] + sys.argv[2:]
    from rooftune.tuner.cli import app  # not main(): a GPU command ends there in os._exit, before the dump
    prof = cProfile.Profile()
    try:
        prof.runcall(app)
    except SystemExit:
        pass
    prof.dump_stats(prof_path)
PY
for args in "attention --shape 2x56x8718x128" "attention --shape 28x62x2048x64" "gemm --shape 1024x16384x4096 --layout nk"; do
  name=$(echo $args | tr ' ' '_' | tr -d '-')
  t0=$(date +%s.%N)
  # cProfile through a wrapper file (spawned compile workers re-import __main__, so not stdin): the CLI ends
  # in os._exit (tuner/cli.py main), which `python -m cProfile` does not survive
  TRITON_CACHE_DIR=$(mktemp -d) python3 $O/prof_main.py $O/$name.prof tune $args --gpu h200 > $O/$name.log 2>&1
  echo "$args: wall $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s; $(grep -i "start" $O/$name.log | head -2 | tr '\n' ' ')"
  python3 -c "import pstats; s = pstats.Stats('$O/$name.prof'); s.sort_stats('cumulative').print_stats(70); s.sort_stats('tottime').print_stats(30)" > $O/$name.txt 2>&1
done
cat $O/host.txt $O/imports.txt
# one archive: the device tool brings back only a few files per call
rm -f $O/*.prof; tar czf $OUT/startup.tgz -C $OUT startup && rm -rf $O
