"""Variants of kernels/gemm.py's TMA kernels that space 5 does not hold, for levers.py to time:

- `store`: C written through a tensor descriptor (the copy engine's store, as cuBLAS's epilogue does)
  instead of pointer stores, the whole tile at once (SUBTILE 1) or in N-halves (SUBTILE 2: epilogue
  subtiling, half the staging buffer and the second half's conversion overlapping the first's store);
  one tile per program, SPLIT_K 1;
- `pstore`: the same epilogue in the persistent schedule (`_gemm_tma_persistent_kernel`'s flattened loop);
- `ctas2`: `_gemm_tma_kernel` itself launched with num_ctas = 2 (a 2-CTA cluster per program; Triton 3.6
  splits the block over the pair: compiled for sm_90 it has `.reqnctapercluster 2` and no multicast copy);
- `fixup`: `_gemm_tma_kernel` with FIXUP = 1 (split-K summed in the kernel) where space 5 allows only the
  reduction kernel (M > 64).

Loads, tile order and accumulation are kernels/gemm.py's; only the named part differs.
"""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from rooftune.kernels import gemm as G
from rooftune.kernels.gemm import _grouped_tile


@triton.jit
def _store_c(c_desc, acc, rm0, rn0, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SUBTILE: tl.constexpr):
    if SUBTILE == 2:
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        c0, c1 = tl.split(halves)
        c_desc.store([rm0, rn0], c0.to(c_desc.dtype))
        c_desc.store([rm0, rn0 + BLOCK_N // 2], c1.to(c_desc.dtype))
    else:
        c_desc.store([rm0, rn0], acc.to(c_desc.dtype))


@triton.jit(do_not_specialize=["M", "GROUP_M"])
def _store_kernel(a_desc, b_desc, c_desc, M, N, K, GROUP_M,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B_NK: tl.constexpr,
                  SUBTILE: tl.constexpr):
    pid_m, pid_n = _grouped_tile(tl.program_id(0), M, N, GROUP_M, BLOCK_M, BLOCK_N)
    rm0 = pid_m * BLOCK_M
    rn0 = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([rm0, kb * BLOCK_K])
        if B_NK:
            acc = tl.dot(a, b_desc.load([rn0, kb * BLOCK_K]).T, acc)
        else:
            acc = tl.dot(a, b_desc.load([kb * BLOCK_K, rn0]), acc)
    _store_c(c_desc, acc, rm0, rn0, BLOCK_M, BLOCK_N, SUBTILE)


@triton.jit(do_not_specialize=["M", "GROUP_M"])
def _pstore_kernel(a_desc, b_desc, c_desc, M, N, K, GROUP_M,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B_NK: tl.constexpr,
                   SUBTILE: tl.constexpr):
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_blocks = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), flatten=True):
        pid_m, pid_n = _grouped_tile(tile, M, N, GROUP_M, BLOCK_M, BLOCK_N)
        rm0 = pid_m * BLOCK_M
        rn0 = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kb in range(0, k_blocks):
            a = a_desc.load([rm0, kb * BLOCK_K])
            if B_NK:
                acc = tl.dot(a, b_desc.load([rn0, kb * BLOCK_K]).T, acc)
            else:
                acc = tl.dot(a, b_desc.load([kb * BLOCK_K, rn0]), acc)
        _store_c(c_desc, acc, rm0, rn0, BLOCK_M, BLOCK_N, SUBTILE)


def _dims(inputs, layout):
    a, b = inputs[0]
    return G._dims(a, b, layout)


def store_launcher(cfg: dict, layout: str, inputs, out, subtile: int, persistent: bool, sms: int = 0):
    """launch(i) of the store / pstore variant on inputs[i % len]; persistent: min(tiles, SMs x resident CTAs)
    programs, the resident CTAs read from the compiled binary as kernels/gemm.py does."""
    m, n, k = _dims(inputs, layout)
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    c_desc = TensorDescriptor(out, [m, n], [out.stride(0), 1], [bm, bn // subtile])
    pairs = [G._descriptors(a, b, layout, (m, n, k), (a.stride(0), b.stride(0)), cfg) for a, b in inputs]
    kernel = _pstore_kernel if persistent else _store_kernel
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    opts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=cfg["BLOCK_K"], B_NK=layout == "nk", SUBTILE=subtile,
                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    grid = (tiles,)
    if persistent:
        compiled = kernel.warmup(*pairs[0], c_desc, m, n, k, cfg["GROUP_M"], grid=(1,), **opts)
        grid = (min(tiles, sms * G.resident_ctas(compiled, out.device)),)
    bound = kernel[grid]

    def launch(i: int) -> None:
        bound(*pairs[i % len(pairs)], c_desc, m, n, k, cfg["GROUP_M"], **opts)

    return launch, grid[0]


def ctas2_launcher(cfg: dict, layout: str, inputs, out):
    """`_gemm_tma_kernel` (SPLIT_K 1) as kernels/gemm.py launches it, with num_ctas = 2."""
    m, n, k = _dims(inputs, layout)
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    pairs = [G._descriptors(a, b, layout, (m, n, k), (a.stride(0), b.stride(0)), cfg) for a, b in inputs]
    ws = G._workspace({**cfg, "SPLIT_K": 1, "FIXUP": 0}, m, n, out.device)
    bound = G._gemm_tma_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn), 1)]
    strides = (inputs[0][0].stride(0), inputs[0][0].stride(1), *G._b_strides(inputs[0][1], layout),
               out.stride(0), out.stride(1))
    align_n, _ = G.alignments(layout, n, k, strides)

    def launch(i: int) -> None:
        bound(*pairs[i % len(pairs)], out, ws, m, n, k, out.stride(0), out.stride(1), cfg["GROUP_M"], 1,
              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=cfg["BLOCK_K"], B_NK=layout == "nk", ALIGN_N=align_n,
              num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], num_ctas=2)

    return launch
