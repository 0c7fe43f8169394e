#!/bin/bash
# One device call of a Triton release's ground truth (issue 43): the packed Triton RELEASE (.tritonXY/triton.tar.xz,
# made by ../shared/tools/pack-triton.sh and carried with the call) put first on the path, then the committed
# subsamples of datasets/h200/releases/KERNEL/shapes_LIST.json swept under it into
# datasets/h200/releases/triton-RELEASE/KERNEL/LIST, each list resuming where the last call stopped (sweep.sh). Lists
# in order: GEMM train, MoE train (the fits read them first), GEMM held-out, MoE held-out; ORDER="gemm heldout" (pairs
# of KERNEL LIST) sweeps others. Stops, sweeping nothing, where the Triton imported is not RELEASE (a pack that did not
# load: the sweep would file the machine's own Triton's times as RELEASE's), or the GPU is not an H200 (exit 3: another
# GPU's times would be filed as the H200's). Comes back in $OUT: one KERNEL_LIST.tgz
# (the dataset folder) and sweep log per list touched, at most 8 files. PREBUILT (archives of
# scripts/prebuild_release.sh, space-separated, carried) is passed to sweep.sh, which unpacks each once per machine.
# usage (repository root, on the GPU machine): [PREBUILT="ARCHIVE ..."] bash scripts/device/release.sh RELEASE SECONDS
#   e.g. bash scripts/device/release.sh 3.9 540        (carry .triton39; 3.7: .triton37)
#        PREBUILT=.tcache/r39_gemm_train.tar.xz bash scripts/device/release.sh 3.9 540   (carry that archive too)
set -u
R=$1; T=$2; end=$((SECONDS + T))
source scripts/device/under_release.sh "$R"   # the packed Triton first on the path; exit 2 where it is not R
# the lists and folders are the H200's: another GPU's times filed there would be read as the H200's
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$gpu" in
  *H200*) echo "GPU $gpu" ;;
  *) echo "GPU ${gpu:-not found}, not an H200: nothing swept (datasets/h200/releases holds the H200's times)"; exit 3 ;;
esac
# what a prebuild must have used for its binaries to be hits here (scripts/prebuild_release.sh)
ptxas=$("$CUDA_BIN/ptxas" --version 2>/dev/null | grep -E '^(Cuda compilation tools|Build )' | paste -sd';' | sed 's/;/; /')
echo "ptxas $CUDA_BIN/ptxas: ${ptxas:-not found}"
LISTS=datasets/h200/releases; ROOT=$LISTS/triton-$R
set -- ${ORDER:-gemm train moe train gemm heldout moe heldout}
while [ $# -ge 2 ]; do
  left=$(( end - SECONDS - 10 ))
  [ "$left" -lt 90 ] && break
  LISTS=$LISTS bash scripts/device/sweep.sh "$1" "$2" "$left" "$ROOT"
  shift 2
done
