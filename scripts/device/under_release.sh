#!/bin/bash
# A command run under a packed Triton release on the GPU machine: the pack (.tritonXY/triton.tar.xz, made by
# ../shared/tools/pack-triton.sh and carried with the call) unpacked once per machine and put first on the path, with
# the machine's CUDA tools (its ptxas keys every binary, prebuilt or not) and TRITON_DEFAULT_FP_FUSION=1 as the sweeps
# and prebuilds use; stops (exit 2, running nothing) where the Triton imported is not RELEASE, a pack that did not load.
# usage (repository root, on the GPU machine):
#   bash scripts/device/under_release.sh RELEASE COMMAND ...   e.g. bash scripts/device/under_release.sh 3.9 \
#       python3 scripts/device/e2e_layers.py --out $OUT/e2e_triton39.json     (carry .triton39)
#   source scripts/device/under_release.sh RELEASE             (release.sh: the environment, then its own sweeps)
R=$1
CUDA_BIN=${CUDA_BIN:-/usr/local/cuda/bin}
PACK=.triton${R//./}/triton.tar.xz
[ -f "$PACK" ] || { echo "no $PACK: pack Triton $R first and carry its folder (scripts/device/README.md)"; exit 2; }
TRI=${TRITON_UNPACK:-/tmp/tri$R}
if [ ! -f "$TRI/.unpacked" ]; then   # once per machine: a warm machine's next call finds it
  mkdir -p "$TRI" && tar xJf "$PACK" -C "$TRI" && touch "$TRI/.unpacked"
fi
export PYTHONPATH=$TRI${PYTHONPATH:+:$PYTHONPATH} TRITON_BACKENDS_IN_TREE=1 \
  TRITON_PTXAS_PATH=$CUDA_BIN/ptxas TRITON_PTXAS_BLACKWELL_PATH=$CUDA_BIN/ptxas \
  TRITON_CUOBJDUMP_PATH=$CUDA_BIN/cuobjdump TRITON_NVDISASM_PATH=$CUDA_BIN/nvdisasm \
  TRITON_DEFAULT_FP_FUSION=1
got=$(python3 -c "import triton; print(triton.__version__)" 2>&1 | tail -1)
case "$got" in
  "$R".*) echo "Triton $got" ;;
  *) echo "Triton $got imported, not $R: nothing run"; exit 2 ;;
esac
if [ $# -gt 1 ]; then
  shift
  exec "$@"
fi
