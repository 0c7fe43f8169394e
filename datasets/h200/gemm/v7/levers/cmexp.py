"""Composite-height tiles: the mirror of space 7's composite width, for cmtiles.py to time. A program keeps two
accumulators, [BLOCK_M, BLOCK_N] and [BLOCK_M2, BLOCK_N], fed by two A tiles and one B tile per K step, so a
tile can be 96, 160, 192 or 320 rows tall and the tile count of a tall, narrow C (M in the thousands, N of a
few hundred: one column of tiles) can fill the SMs' last wave: 10622x256 at 80 rows would be 133 tiles, at
96 rows 111, where 64 rows make 166 and 128 make 83.

`cm`: one tile per program (as kernels/gemm.py's `_gemm_tma_kernel`, SPLIT_K 1), C by pointer stores.
"""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from rooftune.kernels import gemm as G
from rooftune.kernels import gemm_v2


@triton.jit(do_not_specialize=["M", "GROUP_M"])
def _cm_kernel(a_desc, a2_desc, b_desc, c_ptr, M, N, K, stride_cm, GROUP_M,
               BLOCK_M: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               B_NK: tl.constexpr):
    pid_m, pid_n = G._grouped_tile(tl.program_id(0), M, N, GROUP_M, BLOCK_M + BLOCK_M2, BLOCK_N)
    rm0 = pid_m * (BLOCK_M + BLOCK_M2)
    rn0 = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M2, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        if B_NK:
            b = b_desc.load([rn0, kb * BLOCK_K]).T
        else:
            b = b_desc.load([kb * BLOCK_K, rn0])
        acc = tl.dot(a_desc.load([rm0, kb * BLOCK_K]), b, acc)
        acc2 = tl.dot(a2_desc.load([rm0 + BLOCK_M, kb * BLOCK_K]), b, acc2)
    gemm_v2._store_tile(c_ptr, acc, M, N, stride_cm, 1, rm0, rn0, BLOCK_M, BLOCK_N)
    gemm_v2._store_tile(c_ptr, acc2, M, N, stride_cm, 1, rm0 + BLOCK_M, rn0, BLOCK_M2, BLOCK_N)


def cm_launcher(cfg: dict, layout: str, inputs, out):
    """launch(i) on inputs[i % len]; cfg has BLOCK_M, BLOCK_M2, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages;
    `out` contiguous."""
    a0, b0 = inputs[0]
    m, n, k = G._dims(a0, b0, layout)
    bm, bm2, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_M2"], cfg["BLOCK_N"], cfg["BLOCK_K"]

    def descs(a, b):
        bd = (TensorDescriptor(b, [n, k], [b.stride(0), 1], [bn, bk]) if layout == "nk" else
              TensorDescriptor(b, [k, n], [b.stride(0), 1], [bk, bn]))
        return (TensorDescriptor(a, [m, k], [a.stride(0), 1], [bm, bk]),
                TensorDescriptor(a, [m, k], [a.stride(0), 1], [bm2, bk]), bd)

    all_descs = [descs(a, b) for a, b in inputs]
    bound = _cm_kernel[(triton.cdiv(m, bm + bm2) * triton.cdiv(n, bn),)]
    opts = dict(BLOCK_M=bm, BLOCK_M2=bm2, BLOCK_N=bn, BLOCK_K=bk, B_NK=layout == "nk",
                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])

    def launch(i: int) -> None:
        bound(*all_descs[i % len(all_descs)], out, m, n, k, out.stride(0), cfg["GROUP_M"], **opts)

    return launch
