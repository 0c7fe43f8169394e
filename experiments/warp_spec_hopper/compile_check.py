"""What the sm_90 warp-specialization pass makes of the probe's GEMM, on a CPU (no GPU: kernels/harness/offline.py):
each variant compiled for sm_90 with and without `warp_specialize=True`, and the two PTX bodies compared.

    TRITON_PTXAS_PATH=PTXAS TRITON_PTXAS_BLACKWELL_PATH=PTXAS TRITON_DEFAULT_FP_FUSION=1 \\
        python3 experiments/warp_spec_hopper/compile_check.py            # under each Triton to compare

PTXAS: a CUDA 13.0 ptxas (`pip install nvidia-cuda-nvcc==13.0.88`). A line per variant: for each of plain and
warp-specialized, the PTX body's digest, the warps the binary runs, `setmaxnreg` count (register hand-over between warp
groups) and shared memory; FAIL where the compiler refuses. Variants: tensor descriptors made on the device (the
probe's kernel, `probe._persistent`) or on the host, the tile loop flattened or not, 4 or 8 warps.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from rooftune.hwprofiles import load_profile
from rooftune.kernels.harness.offline import offline_target

sys.path.insert(0, str(Path(__file__).parent))
import probe  # noqa: E402  (the experiment's own module beside this one)


@triton.jit
def _variant(a_ptr, b_ptr, c_ptr, a_host, b_host, c_host, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr, WS: tl.constexpr, FLAT: tl.constexpr,
             HOST: tl.constexpr):
    if HOST:
        a_desc, b_desc, c_desc = a_host, b_host, c_host
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_n = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * num_n, NUM_SMS, flatten=FLAT, warp_specialize=WS):
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([(tile // num_n) * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([(tile % num_n) * BLOCK_N, ki * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([(tile // num_n) * BLOCK_M, (tile % num_n) * BLOCK_N], acc.to(tl.bfloat16))


def summary(kernel) -> str:
    ptx = kernel.asm["ptx"]
    body = ptx[ptx.index(".entry"):]
    return (f"{hashlib.sha1(body.encode()).hexdigest()[:8]} warps {kernel.metadata.num_warps} "
            f"setmaxnreg {body.count('setmaxnreg')} smem {kernel.metadata.shared}")


def main():
    m, n, k = 777, 3584, 4096
    sms = load_profile("h100_sxm").sm_count  # a program an SM, as the probe launches it (the H200's is the same)
    a, w, c = (torch.empty(*s, dtype=torch.bfloat16) for s in ((m, k), (n, k), (m, n)))
    print(f"Triton {triton.__version__}, sm_90, {m}x{n}x{k}, 128xBNx64 tiles, 3 stages")
    for host in (False, True):
        for flat in (False, True):
            for bn in (128, 256):
                host_descs = (TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(w, [bn, 64]),
                              TensorDescriptor.from_tensor(c, [128, bn]))
                for warps in (4, 8):
                    got = []
                    for ws in (False, True):
                        try:
                            with offline_target(90):
                                if host or flat:
                                    kernel = _variant.warmup(a, w, c, *host_descs, m, n, k, 128, bn, 64, sms, ws, flat,
                                                             host, num_stages=3, num_warps=warps, grid=(1,))
                                else:  # the probe's own kernel
                                    kernel = probe._persistent.warmup(a, w, c, m, n, k, 128, bn, 64, 8, sms, ws,
                                                                      num_stages=3, num_warps=warps, grid=(1,))
                            got.append(summary(kernel))
                        except Exception as exc:  # the pass refusing a variant is the finding
                            got.append(f"FAIL {type(exc).__name__}")
                    same = " (the same PTX)" if got[0].split()[0] == got[1].split()[0] else ""
                    print(f"{'host' if host else 'device'} descriptors, flatten={flat!s:5} BN {bn:3} {warps} warps: "
                          f"plain {got[0]} | warp-specialized {got[1]}{same}", flush=True)


if __name__ == "__main__":
    main()
