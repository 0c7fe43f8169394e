#!/bin/bash
# One device call of the H100's ground truth under the device's own Triton 3.6 (issue 56): the GPU checked first
# (an H100, else nothing is swept: exit 3), its profile probed once (`rooftune hwprobe`, while the committed
# hwprofiles/h100_sxm.json is still the datasheet's), the prebuilt binaries unpacked, then `sweep.sh` resumed over
# the lists in ORDER into datasets/h100/KERNEL/LIST with legality from the shipped `h100_sxm` profile, each list
# given what time is left. The training lists are the seeded subsamples committed in datasets/h100/KERNEL/
# shapes_train.json; the held-out lists are the H200's own (datasets/h200/KERNEL/shapes_heldout.json), so every
# held-out shape compares across the two GPUs. Everything that comes back is one archive, $OUT/h100.tgz (the
# dataset folders, the probe and the logs), repacked after each step so that a call cut short still returns its
# finished shapes; a short table is printed last. On an H200 the call reruns the end-to-end layers there instead
# (scripts/device/e2e_layers.py, resumed from datasets/h200/e2e/layers_rerun.json) and sweeps nothing.
# usage (repository root, on the GPU machine): [ORDER="KERNEL LIST ..."] [PREBUILT="ARCHIVE ..."] bash scripts/device/h100.sh SECONDS
#   e.g. PREBUILT=".tcache/h100_attention.tar.xz" ORDER="attention heldout attention train" bash scripts/device/h100.sh 540
#   ORDER="e2e own": scripts/device/e2e_layers.py with the H100's own residuals and routes, resumed from and written to
#   datasets/h100/e2e/layers_own.json.
# Here, after the call: tar xzf FETCHED/h100.tgz (from the repository root), then
#   python -m rooftune.eval.datasets.recompress --slim datasets/h100/KERNEL/LIST   and commit (scripts/device/README.md).
set -u
T=${1:?usage: bash scripts/device/h100.sh SECONDS}; end=$((SECONDS + T))
ORDER=${ORDER:-attention heldout attention train gemm train gemm heldout}
REAL_OUT=$OUT; WORK=${TMPDIR:-/tmp}/h100_call; mkdir -p "$WORK/logs"; export PYTHONUNBUFFERED=1
pack() { tar czf "$REAL_OUT/h100.tgz" --exclude='*.tmp' --exclude='.manifest.lock' -C "$WORK" . 2>/dev/null \
           && [ -d datasets/h100 ] && tar czf "$REAL_OUT/h100_data.tgz" --exclude='*.tmp' --exclude='.manifest.lock' \
           datasets/h100; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "GPU: ${gpu:-none}"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
case "$gpu" in
  *H100*) ;;
  *H200*)  # nothing is swept into the H100's folders; the call's time goes to the H200's end-to-end rerun (issue 56, 4)
    cp datasets/h200/e2e/layers_rerun.json "$REAL_OUT/e2e_h200.json" 2>/dev/null
    python3 scripts/device/e2e_layers.py --out "$REAL_OUT/e2e_h200.json" --seconds $((T - 60))
    echo "an H200: datasets/h200/e2e/layers_rerun.json from \$OUT/e2e_h200.json"; exit 0 ;;
  *) echo "not an H100 ($gpu): nothing swept into datasets/h100"; exit 3 ;;
esac
triton=$(python3 -c 'import triton; print(triton.__version__)')
case "$triton" in 3.6.*) ;; *) echo "Triton $triton, not 3.6: the H100's datasets hold 3.6's measurements"; exit 3 ;; esac
if ! grep -q '"kind": "probed"' hwprofiles/h100_sxm.json; then
  t0=$SECONDS
  rooftune hwprobe --name "NVIDIA H100 80GB HBM3 (SXM)" --out "$WORK/h100_probed.json" > "$WORK/logs/hwprobe.log" 2>&1
  echo "hwprobe rc=$? ($((SECONDS - t0)) s)"; pack
fi
for list_pair in $(echo $ORDER | xargs -n2 | tr ' ' ':'); do
  K=${list_pair%%:*}; L=${list_pair##*:}; left=$((end - SECONDS))
  [ $left -lt 90 ] && { echo "$K $L: $left s left, not started"; continue; }
  if [ "$K" = e2e ]; then  # ORDER's "e2e own": the end-to-end layers with the H100's own residuals and routes, resumed
    python3 scripts/device/e2e_layers.py --out datasets/h100/e2e/layers_own.json --seconds $((left - 30)) \
      > "$WORK/logs/e2e_own.log" 2>&1; echo "e2e rc=$?"; tail -16 "$WORK/logs/e2e_own.log"; pack; continue
  fi
  OUT=$WORK/logs GPU=h100_sxm bash scripts/device/sweep.sh "$K" "$L" "$left" datasets/h100
  rm -f "$WORK"/logs/*.tgz; pack
done
pack
echo "--- datasets/h100 (shapes finished per folder) ---"
for d in datasets/h100/*/*/; do if [ -d "$d/shapes" ]; then echo "$d $(ls "$d/shapes" | wc -l)"; fi; done
