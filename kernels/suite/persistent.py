"""Persistent GEMMs: the Triton tutorial's persistent matmul and its grouped GEMM (several problems in one launch).

Both launch NUM_SMS programs (the GPU's SMs, read from the device in `make_args`; two in the interpreter), each
walking tiles NUM_SMS apart. The grouped GEMM is the tutorial's (08-grouped-gemm) over stacked operands, as torch's
`_grouped_mm` and MoE layers hold them: rows of A [M, K] split into G groups by `offsets`, group g multiplied by
B[g] [K, N]; its `while` over a group's tiles runs a data-dependent number of times.
"""

from __future__ import annotations

import random

import triton
import triton.language as tl

from rooftune.kernels.gemm import grouped_tile
from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.gemms import dot_k_loop, mm_bytes, mm_flops, operands, store_tile, tile_rows
from rooftune.kernels.suite.record import SuiteKernel, configs, interpreter_programs
from rooftune.kernels.suite.rmsnorm import E

PERSISTENT_SHAPES = ({"M": 4096, "N": 4096, "K": 4096}, {"M": 8192, "N": 8192, "K": 8192},
                     {"M": 2048, "N": 14336, "K": 4096}, {"M": 8192, "N": 4096, "K": 14336},
                     {"M": 4096, "N": 28672, "K": 8192}, {"M": 1024, "N": 6144, "K": 4096})
# experts × routed rows × N × K: Mixtral 8x7B up and down, DeepSeek-V2-Lite (64 × 1408), Qwen3-30B-A3B
# (128 × 768), Phi-3.5-MoE (16 × 6400), a 32-expert layer
GROUPED_SHAPES = ({"G": 8, "M": 16384, "N": 14336, "K": 4096}, {"G": 8, "M": 8192, "N": 4096, "K": 14336},
                  {"G": 64, "M": 16384, "N": 1408, "K": 2048}, {"G": 128, "M": 32768, "N": 768, "K": 2048},
                  {"G": 16, "M": 8192, "N": 6400, "K": 4096}, {"G": 32, "M": 4096, "N": 2048, "K": 4096})
# The tutorial's axes (BLOCK_K 128 only with BLOCK_N 128 and fewer stages, where its buffers fit) and 128 × 64 tiles
PERSISTENT_CONFIGS = (configs(BLOCK_M=(64, 128), BLOCK_N=(128, 256), BLOCK_K=(64,), GROUP_M=(8,), num_warps=(4, 8),
                              num_stages=(3, 4))
                      + configs(BLOCK_M=(64, 128), BLOCK_N=(128,), BLOCK_K=(128,), GROUP_M=(8,), num_warps=(4, 8),
                                num_stages=(2, 3))
                      + configs(BLOCK_M=(128,), BLOCK_N=(64,), BLOCK_K=(64,), GROUP_M=(8,), num_warps=(4, 8),
                                num_stages=(3, 4)))


@triton.jit
def persistent_gemm_kernel(a, b, c, M, N, K, NUM_SMS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # C [M, N] = A [M, K] @ B [K, N]; program p computes tiles p, p + NUM_SMS, ... in the grouped order
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = grouped_tile(tile, M, N, GROUP_M, BLOCK_M, BLOCK_N)
        rm, rn = tile_rows(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N)
        acc = dot_k_loop(a, b, rm, rn, 0, K, K, K, 1, N, 1, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), BLOCK_K)
        store_tile(c, acc, pid_m, pid_n, M, N, N, BLOCK_M, BLOCK_N)


@triton.jit
def grouped_gemm_kernel(a, b, c, offsets, G, N, K, NUM_SMS: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # C[offsets[g]:offsets[g+1]] = A[offsets[g]:offsets[g+1]] @ B[g] for each group g (an empty group has no tiles)
    tile = tl.program_id(0)
    last = 0
    n_tiles = tl.cdiv(N, BLOCK_N)
    b_g = b  # B[g], a step of K·N elements a group
    for g in range(G):
        m0 = tl.load(offsets + g)
        rows = tl.load(offsets + g + 1) - m0
        g_tiles = tl.cdiv(rows, BLOCK_M) * n_tiles
        while tile >= last and tile < last + g_tiles:
            local = tile - last
            pid_m = local // n_tiles
            pid_n = local % n_tiles
            rm, rn = tile_rows(pid_m, pid_n, rows, N, BLOCK_M, BLOCK_N)
            acc = dot_k_loop(a + m0.to(tl.int64) * K, b_g, rm, rn, 0, K, K, K, 1, N, 1,
                             tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), BLOCK_K)
            store_tile(c + m0.to(tl.int64) * N, acc, pid_m, pid_n, rows, N, N, BLOCK_M, BLOCK_N)
            tile += NUM_SMS
        last += g_tiles
        b_g += K * N


def persistent_args(shape, device, dtype=None, seed=0):
    _, a, b = operands(shape, device, dtype, seed, (shape["K"], shape["N"]))
    return dict(a=a, b=b, c=torch.empty((shape["M"], shape["N"]), device=device, dtype=a.dtype), **shape,
                NUM_SMS=interpreter_programs(device))


def persistent_grid(args: dict, meta: dict) -> tuple:
    tiles = triton.cdiv(args["M"], meta["BLOCK_M"]) * triton.cdiv(args["N"], meta["BLOCK_N"])
    return (min(args["NUM_SMS"], tiles),)


def group_rows(groups: int, rows: int) -> list[int]:
    """Rows per group: `rows` cut at G − 1 seeded uniform points (as unbalanced as routed tokens; some may be empty),
    the same for a shape whatever the inputs' seed, so that every input set is the same work."""
    rng = random.Random(groups * 1_000_003 + rows)
    cuts = sorted(rng.randint(0, rows) for _ in range(groups - 1))
    return [hi - lo for lo, hi in zip([0, *cuts], [*cuts, rows])]


def grouped_args(shape, device, dtype=None, seed=0):
    _, a, b = operands(shape, device, dtype, seed, (shape["G"], shape["K"], shape["N"]))
    ends = torch.tensor(group_rows(shape["G"], shape["M"]), dtype=torch.int32).cumsum(0)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int32), ends]).to(device=device, dtype=torch.int32)
    return dict(a=a, b=b, c=torch.empty((shape["M"], shape["N"]), device=device, dtype=a.dtype), offsets=offsets,
                G=shape["G"], N=shape["N"], K=shape["K"], NUM_SMS=interpreter_programs(device))


def grouped_math(args, dtype) -> dict:
    """One matmul per group, its rows from the host-side partition (a launch captured in a CUDA graph cannot read
    the offsets back)."""
    rows = group_rows(args["G"], args["a"].shape[0])
    parts = torch.split(args["a"].to(dtype), rows)
    return {"c": torch.cat([x @ args["b"][g].to(dtype) for g, x in enumerate(parts)])}


PERSISTENT_GEMM = SuiteKernel(
    name="persistent_gemm", fn=persistent_gemm_kernel,
    configs=PERSISTENT_CONFIGS,
    shapes=PERSISTENT_SHAPES, small_shape={"M": 70, "N": 100, "K": 90}, make_args=persistent_args,
    grid=persistent_grid, reference=lambda a: {"c": a["a"].double() @ a["b"].double()}, outputs=("c",),
    key=("M", "N", "K"), flops=mm_flops, bytes=mm_bytes, kind="matrix",
    source="Triton tutorial 09-persistent-matmul (NUM_SMS programs, tl.range flatten, its BM/BN/BK/stages/warps list)",
    baseline=lambda a: a["a"] @ a["b"])
GROUPED_GEMM = SuiteKernel(
    name="grouped_gemm", fn=grouped_gemm_kernel,
    configs=configs(BLOCK_M=(64, 128), BLOCK_N=(64, 128, 256), BLOCK_K=(32, 64), num_warps=(4, 8), num_stages=(3, 4)),
    shapes=GROUPED_SHAPES, small_shape={"G": 3, "M": 50, "N": 40, "K": 70}, make_args=grouped_args,
    grid=lambda args, meta: (args["NUM_SMS"],), reference=lambda a: grouped_math(a, torch.float64), outputs=("c",),
    key=("G", "N", "K"), flops=mm_flops,
    bytes=lambda s: E * (s["M"] * s["K"] + s["G"] * s["K"] * s["N"] + s["M"] * s["N"]) + 4 * (s["G"] + 1),
    kind="matrix", source="Triton tutorial 08-grouped-gemm (NUM_SM programs walking every group's tiles), over "
    "stacked operands as torch._grouped_mm", baseline=lambda a: grouped_math(a, a["a"].dtype))
