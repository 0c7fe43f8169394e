#!/bin/bash
# A packed Triton (../shared/tools/pack-triton.sh) without what compiling and running kernels never loads: the
# CUPTI libraries of its profiler (proton; `import triton` does not load them), its disassemblers (the call's
# environment points TRITON_CUOBJDUMP_PATH and TRITON_NVDISASM_PATH at the machine's CUDA) and LLVM's FileCheck.
# Triton 3.9.0: 52.8 MB packed, 39.9 MB slimmed (checked on a CPU: it imports and compiles for sm_90); the
# repository's ~13 MB beside the full pack came near the 64 MiB a device call carries.
# usage: bash scripts/device/slim-triton-pack.sh .triton39/triton.tar.xz   (rewritten in place, xz -9e)
set -euo pipefail
pack=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar xJf "$pack" -C "$work"
rm -rf "$work"/triton/backends/nvidia/lib/cupti* "$work"/triton/backends/nvidia/bin/nvdisasm \
  "$work"/triton/backends/nvidia/bin/cuobjdump "$work"/triton/FileCheck
before=$(du -b "$pack" | cut -f1)
(cd "$work" && tar cf - triton triton-*.dist-info | xz -9e -T0 > "$work/slim.tar.xz")
mv "$work/slim.tar.xz" "$pack"
echo "$pack: $before -> $(du -b "$pack" | cut -f1) bytes"
