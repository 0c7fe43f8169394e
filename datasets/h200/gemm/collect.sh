#!/bin/bash
# One device call of the H200 GEMM collection, run from the repository root on the GPU machine:
# resume both sweeps (held-out first), then, as time allows, `rooftune hwprobe`, the tutorial
# backfill of the held-out set and `pytest -m gpu`; everything lands in $OUT/sweep.tgz.
# usage: bash datasets/h200/gemm/collect.sh [SECONDS]   (the device tool's command limit is 600 s)
# Work goes to .sweepwork/ (git-ignored; seeded from the committed data, kept on a warm machine).
# A Triton cache prebuilt on a CPU machine (python -m rooftune.kernels.prebuild build ... --tar
# .tcache/cache.tar.gz, with the GPU machine's Python and triton) is unpacked first if present.
T=${1:-540}; end=$((SECONDS+T)); W=.sweepwork; LISTS=datasets/h200/gemm
left() { echo $((end-SECONDS)); }
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
for d in train heldout; do [ -d $W/$d ] || { mkdir -p $W/$d; cp -r $LISTS/$d/. $W/$d/; }; done
if [ -f .tcache/cache.tar.gz ] && [ ! -f $W/tcache_done ]; then
  python3 -m rooftune.kernels.prebuild unpack .tcache/cache.tar.gz && touch $W/tcache_done; fi
sweep() { # sweep LIST [extra args]: until done, out of time, or an exit other than 3 (quarantine: run again)
  local d=$1; shift
  while :; do local l=$(( $(left) - 30 )); [ $l -gt 60 ] || return
    timeout $l rooftune sweep gemm --shapes $LISTS/shapes_$d.json --out $W/$d --gpu h200 "$@" \
      --max-minutes $(python3 -c "print(($l-20)/60)") >> $W/sweep_$d$1.log 2>&1; local rc=$?
    echo "sweep $d $* rc=$rc: $(tail -1 $W/sweep_$d$1.log)"; [ $rc -eq 3 ] || return; done; }
sweep heldout
sweep train
if [ $(left) -gt 90 ] && [ ! -f $W/h200_probed.json ]; then
  timeout 80 rooftune hwprobe --out $W/h200_probed.json > $W/hwprobe.log 2>&1; echo "hwprobe rc=$?"; tail -3 $W/hwprobe.log; fi
sweep heldout --backfill-extras
if [ $(left) -gt 150 ] && [ ! -f $W/gpu_tests.log ]; then
  timeout $(( $(left) - 30 )) python3 -m pytest -m gpu -q -p no:cacheprovider > $W/gpu_tests.log 2>&1
  echo "gpu tests rc=$?"; tail -5 $W/gpu_tests.log; fi
tar czf $OUT/sweep.tgz --exclude='*.tmp' -C $W .
for d in heldout train; do echo "$d: $(ls $W/$d/shapes | wc -l) shapes"; done
