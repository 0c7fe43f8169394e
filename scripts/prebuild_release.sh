#!/bin/bash
# A Triton release's sweep binaries for one release list built here, on a CPU, before the device calls (issue 43):
# the packed Triton RELEASE that release.sh carries (.tritonXY/triton.tar.xz) unpacked and put first on the path as
# on the GPU machine, in a Python of the GPU machine's version, under the environment release.sh sets there
# (TRITON_DEFAULT_FP_FUSION=1 and a ptxas of the same CUDA), so that each binary's cache key is the one the device's
# launch looks up (kernels/harness/prebuild.py); then `prebuild build` over datasets/h200/releases/KERNEL/
# shapes_LIST.json into the cache CACHE (kept: a second run loads what is there) packed, xz, into
# .tcache/rXY_KERNEL_LIST.tar.xz (ignored; the device call carries it: datasets/h200/releases/README.md).
# usage (repository root): [PY=PYTHON PTXAS=PATH CACHE=DIR WORKERS=N] bash scripts/prebuild_release.sh RELEASE KERNEL LIST
#   e.g. PY=/work/venv39/bin/python bash scripts/prebuild_release.sh 3.9 gemm train
# PY: a Python of the GPU machine's version (DEVICE_PYTHON, default 3.12: its triton wheel's key differs from
#   another Python's) with this checkout's rooftune installed (`pip install --no-deps -e .` and `pip install rich "numpy<2.4" scipy typer`; torch is not needed);
# PTXAS: the ptxas to compile with, whose `--version` is part of every key: the device's is CUDA 13.0's
#   (/usr/local/cuda/bin/ptxas, printed by each release.sh call); default the nvidia-cuda-nvcc package's in PY's
#   environment (`pip install nvidia-cuda-nvcc==13.0.88`). The archive's PREBUILD.json records it, and the
#   device's unpack warns where its own differs (the binaries then recompile there, as without a prebuild);
# CACHE: the Triton cache to build into (default /tmp/rooftune_prebuild/rXY_KERNEL_LIST; not under .tcache, which
#   travels); WORKERS: compile processes (default one per core); LISTS: where KERNEL/shapes_LIST.json is.
set -u
usage="usage: [PY=PYTHON PTXAS=PATH CACHE=DIR] bash scripts/prebuild_release.sh RELEASE KERNEL LIST  (e.g. 3.9 gemm train)"
[ $# -eq 3 ] || { echo "$usage"; exit 2; }
R=$1; K=$2; L=$3; F=${K//-/_}; TAG=r${R//./}_${F}_$L
PY=${PY:-python3}; S=${LISTS:-datasets/h200/releases}/$F/shapes_$L.json
[ -f "$S" ] || { echo "no list $S"; exit 2; }
PACK=.triton${R//./}/triton.tar.xz
[ -f "$PACK" ] || { echo "no $PACK: pack Triton $R first (scripts/device/README.md)"; exit 2; }
[ -n "${PTXAS:-}" ] || PTXAS=$("$PY" -c 'import glob, nvidia
print(min((p for d in nvidia.__path__ for p in glob.glob(d + "/*/bin/ptxas")), default=""))' 2>/dev/null)
[ -x "$PTXAS" ] || { echo "no ptxas: PTXAS=PATH, or pip install nvidia-cuda-nvcc==13.0.88 into $PY's environment"; exit 2; }

TRI=${TRITON_UNPACK:-/tmp/rooftune_tri$R}
stamp=$(stat -c '%s %Y' "$PACK")   # unpacked anew when the pack is rebuilt: its library is in every key
if [ "$(cat "$TRI/.unpacked" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$TRI" && mkdir -p "$TRI" && tar xJf "$PACK" -C "$TRI" && echo "$stamp" > "$TRI/.unpacked" || exit 2
fi
export PYTHONPATH=$TRI${PYTHONPATH:+:$PYTHONPATH} TRITON_BACKENDS_IN_TREE=1 TRITON_DEFAULT_FP_FUSION=1 \
  TRITON_PTXAS_PATH=$PTXAS TRITON_PTXAS_BLACKWELL_PATH=$PTXAS
probe=$("$PY" -c 'import os, sys, triton, rooftune.kernels as k
tree = os.path.dirname(os.path.dirname(os.path.realpath(k.__file__)))
print("%d.%d" % sys.version_info[:2], triton.__version__, tree)' 2>&1) \
  || { echo "$PY cannot import triton and rooftune: $(tail -1 <<< "$probe")"; exit 2; }
read -r python triton tree <<< "$(tail -1 <<< "$probe")"
want=${DEVICE_PYTHON:-3.12}
[ "$python" = "$want" ] || { echo "$PY is Python $python, not the GPU machine's $want: nothing built"; exit 2; }
case "$triton" in "$R".*) ;; *) echo "Triton $triton imported, not $R: nothing built"; exit 2 ;; esac
[ "$tree" = "$(pwd -P)" ] || { echo "$PY imports rooftune from $tree, not this checkout (pip install --no-deps -e .)"; exit 2; }
version=$("$PTXAS" --version | grep -E '^(Cuda compilation|Build )' | paste -sd';' | sed 's/;/; /')
echo "Triton $triton ($TRI), Python $python, ptxas $PTXAS: $version"

mkdir -p .tcache
OUT_TAR=.tcache/$TAG.tar.xz
TIMEFORMAT="CPU time: %U s user + %S s system, %R s wall"
time "$PY" -m rooftune.kernels.harness.prebuild build --kernel "$K" --shapes "$S" --gpu h200 \
  --cache "${CACHE:-/tmp/rooftune_prebuild/$TAG}" --tar "$OUT_TAR" ${WORKERS:+--workers "$WORKERS"} || exit $?
echo "$OUT_TAR: $(stat -c %s "$OUT_TAR") bytes; the device call carries it:" \
  "PREBUILT=$OUT_TAR bash scripts/device/release.sh $R 540"
