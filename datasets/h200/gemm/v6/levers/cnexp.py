"""Composite-width tiles: kernels/gemm.py's TMA kernels with a tile BLOCK_N + BLOCK_N2 columns wide, which
need not be a power of two (80, 96, 144, 160, 192, 288, 320, 384), for cntiles.py to time.

Triton's blocks are powers of two, but wgmma takes any multiple of 8 columns (cuBLAS's Hopper kernels run
tiles such as 128x200, 256x152 or 192x144: datasets/h200/gemm/v5/levers). Here a program keeps two
accumulators, [BLOCK_M, BLOCK_N] and [BLOCK_M, BLOCK_N2], fed by one A tile and two B tiles per K step,
so a tile width can be picked to fill the SMs' last wave: 256x5120 at 128x160 is 64 tiles... and
2048x1280 at 128x160 is exactly 128 tiles on 132 SMs, where 128x128 makes 160 (1.2 waves).

- `cn`: one tile per program (as `_gemm_tma_kernel`, SPLIT_K 1), C by pointer stores;
- `pcn`: persistent (as `_gemm_tma_persistent_kernel`), C stored through two tensor descriptors, one per
  accumulator (the two parts are the epilogue's subtiles), where C's rows are 16-byte aligned.
"""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from rooftune.kernels import gemm as G
from rooftune.kernels import gemm_v2


@triton.jit
def _cn_mainloop(a_desc, b_desc, b2_desc, rm0, rn0, k_blocks,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_N2: tl.constexpr, BLOCK_K: tl.constexpr,
                 B_NK: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, BLOCK_N2), dtype=tl.float32)
    for kb in range(0, k_blocks):
        a = a_desc.load([rm0, kb * BLOCK_K])
        if B_NK:
            acc = tl.dot(a, b_desc.load([rn0, kb * BLOCK_K]).T, acc)
            acc2 = tl.dot(a, b2_desc.load([rn0 + BLOCK_N, kb * BLOCK_K]).T, acc2)
        else:
            acc = tl.dot(a, b_desc.load([kb * BLOCK_K, rn0]), acc)
            acc2 = tl.dot(a, b2_desc.load([kb * BLOCK_K, rn0 + BLOCK_N]), acc2)
    return acc, acc2


@triton.jit(do_not_specialize=["M", "GROUP_M"])
def _cn_kernel(a_desc, b_desc, b2_desc, c_ptr, M, N, K, stride_cm, GROUP_M,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_N2: tl.constexpr, BLOCK_K: tl.constexpr,
               B_NK: tl.constexpr):
    pid_m, pid_n = G._grouped_tile(tl.program_id(0), M, N, GROUP_M, BLOCK_M, BLOCK_N + BLOCK_N2)
    rm0 = pid_m * BLOCK_M
    rn0 = pid_n * (BLOCK_N + BLOCK_N2)
    acc, acc2 = _cn_mainloop(a_desc, b_desc, b2_desc, rm0, rn0, tl.cdiv(K, BLOCK_K),
                             BLOCK_M, BLOCK_N, BLOCK_N2, BLOCK_K, B_NK)
    gemm_v2._store_tile(c_ptr, acc, M, N, stride_cm, 1, rm0, rn0, BLOCK_M, BLOCK_N)
    gemm_v2._store_tile(c_ptr, acc2, M, N, stride_cm, 1, rm0, rn0 + BLOCK_N, BLOCK_M, BLOCK_N2)


@triton.jit(do_not_specialize=["M", "GROUP_M"])
def _pcn_kernel(a_desc, b_desc, b2_desc, c_desc, c2_desc, M, N, K, GROUP_M,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_N2: tl.constexpr, BLOCK_K: tl.constexpr,
                B_NK: tl.constexpr):
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N + BLOCK_N2)
    k_blocks = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=True):
        pid_m, pid_n = G._grouped_tile(tile, M, N, GROUP_M, BLOCK_M, BLOCK_N + BLOCK_N2)
        rm0 = pid_m * BLOCK_M
        rn0 = pid_n * (BLOCK_N + BLOCK_N2)
        acc, acc2 = _cn_mainloop(a_desc, b_desc, b2_desc, rm0, rn0, k_blocks, BLOCK_M, BLOCK_N, BLOCK_N2, BLOCK_K,
                                 B_NK)
        c_desc.store([rm0, rn0], acc.to(c_desc.dtype))
        c2_desc.store([rm0, rn0 + BLOCK_N], acc2.to(c2_desc.dtype))


def _dims(inputs, layout):
    a, b = inputs[0]
    return G._dims(a, b, layout)


def _b_descs(b, layout, n, k, bn, bn2, bk):
    if layout == "nk":
        return (TensorDescriptor(b, [n, k], [b.stride(0), 1], [bn, bk]),
                TensorDescriptor(b, [n, k], [b.stride(0), 1], [bn2, bk]))
    return (TensorDescriptor(b, [k, n], [b.stride(0), 1], [bk, bn]),
            TensorDescriptor(b, [k, n], [b.stride(0), 1], [bk, bn2]))


def cn_launcher(cfg: dict, layout: str, inputs, out, persistent: bool = False, sms: int = 0,
                programs: int = 0):
    """launch(i) on inputs[i % len]; cfg has BLOCK_M, BLOCK_N, BLOCK_N2, BLOCK_K, GROUP_M, num_warps,
    num_stages. Persistent: min(tiles, SMs x resident CTAs) programs (`programs` overrides: the
    interpreter has no binary); needs out's rows 16-byte aligned."""
    m, n, k = _dims(inputs, layout)
    bm, bn, bn2, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_N2"], cfg["BLOCK_K"]
    descs = [(TensorDescriptor(a, [m, k], [a.stride(0), 1], [bm, bk]), *_b_descs(b, layout, n, k, bn, bn2, bk))
             for a, b in inputs]
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn + bn2)
    opts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_N2=bn2, BLOCK_K=bk, B_NK=layout == "nk",
                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if persistent:
        if not G.tma_ready(out):
            raise ValueError("pcn needs C's rows 16-byte aligned")
        cds = (TensorDescriptor(out, [m, n], [out.stride(0), 1], [bm, bn]),
               TensorDescriptor(out, [m, n], [out.stride(0), 1], [bm, bn2]))
        if not programs:
            compiled = _pcn_kernel.warmup(*descs[0], *cds, m, n, k, cfg["GROUP_M"], grid=(1,), **opts)
            programs = sms * G.resident_ctas(compiled, out.device)
        bound = _pcn_kernel[(min(tiles, programs),)]

        def launch(i: int) -> None:
            bound(*descs[i % len(descs)], *cds, m, n, k, cfg["GROUP_M"], **opts)
    else:
        bound = _cn_kernel[(tiles,)]

        def launch(i: int) -> None:
            bound(*descs[i % len(descs)], out, m, n, k, out.stride(0), cfg["GROUP_M"], **opts)

    return launch
