"""Tiled GEMMs of the Triton tutorial's form: GELU(x Wᵀ + b), split-K with atomic adds, int8 weight-only (W8A16).

One program per output tile in the grouped order (kernels/gemm.py's `grouped_tile`), rows and columns past the edge
wrapped as the tutorial does, the K loop shared (`dot_k_loop`). The lists are torch inductor's `mm_configs` with the
tutorial's (dense), the old `triton.ops.matmul`'s io-bound SPLIT_K list (split-K), and a decode-to-prefill tile list
(int8: gemlite's and torchao's weight-only kernels tune the same axes).
"""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.gemm import grouped_tile
from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, generator, randn, tile_configs
from rooftune.kernels.suite.rmsnorm import E

TILE = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps): torch inductor's mm_configs, then the tutorial's CUDA list
MM_ROWS = [(32, 32, 16, 1, 2), (32, 32, 128, 2, 4), (32, 64, 32, 5, 8), (64, 32, 32, 5, 8), (64, 32, 128, 5, 4),
           (64, 64, 16, 2, 4), (64, 64, 32, 2, 4), (64, 64, 64, 3, 8), (64, 64, 128, 5, 4), (64, 128, 32, 3, 4),
           (64, 128, 32, 4, 8), (64, 128, 64, 3, 4), (64, 128, 128, 4, 4), (128, 64, 32, 3, 4), (128, 64, 32, 4, 8),
           (128, 128, 32, 2, 8), (128, 128, 32, 3, 4), (128, 128, 64, 3, 4), (128, 128, 64, 5, 8),
           (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4),
           (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2), (256, 128, 64, 3, 8), (128, 256, 64, 4, 8)]
MM_CONFIGS = tile_configs(MM_ROWS, TILE, GROUP_M=8)

# prefill and training GEMMs of GELU MLPs (hidden → 4 × hidden) and attention projections
DENSE_SHAPES = ({"M": 4096, "N": 4096, "K": 4096}, {"M": 4096, "N": 16384, "K": 4096},
                {"M": 8192, "N": 20480, "K": 5120}, {"M": 2048, "N": 32768, "K": 8192},
                {"M": 1024, "N": 14336, "K": 4096}, {"M": 512, "N": 8192, "K": 8192})
# decode down projections: few rows, long K (117 MB to 470 MB of bf16 weights)
SPLITK_SHAPES = ({"M": 16, "N": 4096, "K": 14336}, {"M": 32, "N": 4096, "K": 14336}, {"M": 64, "N": 5120, "K": 13824},
                 {"M": 16, "N": 8192, "K": 28672}, {"M": 128, "N": 4096, "K": 11008}, {"M": 64, "N": 8192, "K": 8192})
# decode to prefill on int8 weights
INT8_SHAPES = ({"M": 16, "N": 14336, "K": 4096}, {"M": 32, "N": 28672, "K": 8192}, {"M": 64, "N": 4096, "K": 14336},
               {"M": 256, "N": 8192, "K": 8192}, {"M": 1024, "N": 14336, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096})
GEMM_SMALL = {"M": 37, "N": 70, "K": 90}


@triton.jit
def tile_rows(pid_m, pid_n, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The tile's rows and columns, wrapped inside [0, M) and [0, N) as the tutorial does (its loads need no mask)."""
    return (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M, (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N


@triton.jit
def dot_k_loop(a, b, rm, rn, k_lo, k_hi, K, stride_am, stride_ak, stride_bk, stride_bn, acc, BLOCK_K: tl.constexpr):
    """acc + A[rm, k_lo:k_hi] @ B[k_lo:k_hi, rn] in BLOCK_K steps (B's element type converted to A's: int8 weights)."""
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a + rm[:, None].to(tl.int64) * stride_am + (k_lo + rk)[None, :] * stride_ak      # [BLOCK_M, BLOCK_K]
    b_ptrs = b + (k_lo + rk)[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn      # [BLOCK_K, BLOCK_N]
    for k in range(k_lo, k_hi, BLOCK_K):
        x = tl.load(a_ptrs, mask=(k + rk)[None, :] < K, other=0.0)
        y = tl.load(b_ptrs, mask=(k + rk)[:, None] < K, other=0.0)
        acc = tl.dot(x, y.to(x.dtype), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def store_tile(c, acc, pid_m, pid_n, M, N, stride_cm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(c + rm[:, None].to(tl.int64) * stride_cm + rn[None, :], acc.to(c.dtype.element_ty), mask=mask)


@triton.jit
def linear_tile(a, w, M, N, K, GROUP_M: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):
    """(acc, pid_m, pid_n, rn): this program's tile of A [M, K] @ W [N, K]ᵀ (nn.Linear's weight) in fp32."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, GROUP_M, BLOCK_M, BLOCK_N)
    rm, rn = tile_rows(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N)
    acc = dot_k_loop(a, w, rm, rn, 0, K, K, K, 1, 1, K, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), BLOCK_K)
    return acc, pid_m, pid_n, rn


@triton.jit
def gemm_bias_gelu_kernel(a, w, bias, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # C [M, N] = GELU_tanh(A [M, K] @ W [N, K]ᵀ + bias [N]); GELU_tanh(x) = x · sigmoid(2·√(2/π)·(x + 0.044715 x³))
    acc, pid_m, pid_n, rn = linear_tile(a, w, M, N, K, GROUP_M, BLOCK_M, BLOCK_N, BLOCK_K)
    acc += tl.load(bias + rn).to(tl.float32)[None, :]
    acc = acc * tl.sigmoid(1.5957691216057308 * (acc + 0.044715 * acc * acc * acc))
    store_tile(c, acc, pid_m, pid_n, M, N, N, BLOCK_M, BLOCK_N)


@triton.jit
def splitk_gemm_kernel(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       SPLIT_K: tl.constexpr, GROUP_M: tl.constexpr):
    # C [M, N] (fp32, zeroed first) += A [M, K] @ B [K, N] over this program's share of K's blocks (atomic adds)
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, GROUP_M, BLOCK_M, BLOCK_N)
    rm, rn = tile_rows(pid_m, pid_n, M, N, BLOCK_M, BLOCK_N)
    per_split = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K) * BLOCK_K
    k_lo = tl.program_id(1) * per_split
    acc = dot_k_loop(a, b, rm, rn, k_lo, tl.minimum(k_lo + per_split, K), K, K, 1, N, 1,
                     tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), BLOCK_K)
    om = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    on = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.atomic_add(c + om[:, None].to(tl.int64) * N + on[None, :], acc, mask=(om < M)[:, None] & (on < N)[None, :])


@triton.jit
def int8_gemm_kernel(a, w, scale, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # C [M, N] = (A [M, K] @ W [N, K]ᵀ, W int8 converted tile by tile) · scale [N] (per output channel)
    acc, pid_m, pid_n, rn = linear_tile(a, w, M, N, K, GROUP_M, BLOCK_M, BLOCK_N, BLOCK_K)
    store_tile(c, acc * tl.load(scale + rn)[None, :], pid_m, pid_n, M, N, N, BLOCK_M, BLOCK_N)


def tiles_grid(args: dict, meta: dict) -> tuple:
    return (triton.cdiv(args["M"], meta["BLOCK_M"]) * triton.cdiv(args["N"], meta["BLOCK_N"]),)


def splitk_grid(args: dict, meta: dict) -> tuple:
    return (*tiles_grid(args, meta), meta["SPLIT_K"])


def operands(shape, device, dtype, seed, b_shape):
    """(generator, A [M, K], B of `b_shape`), values scaled so that products stay near 1."""
    dtype = dtype_or_default(dtype)
    gen = generator(device, seed)
    return gen, randn((shape["M"], shape["K"]), gen, device, dtype), randn(b_shape, gen, device, dtype,
                                                                           shape["K"] ** -0.5)


def bias_args(shape, device, dtype=None, seed=0):
    gen, a, w = operands(shape, device, dtype, seed, (shape["N"], shape["K"]))
    return dict(a=a, w=w, bias=randn((shape["N"],), gen, device, a.dtype),
                c=torch.empty((shape["M"], shape["N"]), device=device, dtype=a.dtype), **shape)


def bias_math(args, dtype) -> dict:
    y = torch.nn.functional.linear(args["a"].to(dtype), args["w"].to(dtype), args["bias"].to(dtype))
    return {"c": torch.nn.functional.gelu(y, approximate="tanh")}


def splitk_args(shape, device, dtype=None, seed=0):
    _, a, b = operands(shape, device, dtype, seed, (shape["K"], shape["N"]))
    return dict(a=a, b=b, c=torch.empty((shape["M"], shape["N"]), device=device, dtype=torch.float32), **shape)


def int8_args(shape, device, dtype=None, seed=0):
    gen, a, _ = operands(shape, device, dtype, seed, (1,))
    w = torch.randint(-127, 128, (shape["N"], shape["K"]), generator=gen, device=device, dtype=torch.int8)
    scale = (1.0 + 0.1 * torch.rand((shape["N"],), generator=gen, device=device)) / (127 * shape["K"] ** 0.5)
    return dict(a=a, w=w, scale=scale, c=torch.empty((shape["M"], shape["N"]), device=device, dtype=a.dtype),
                **shape)


def int8_math(args, dtype) -> dict:
    return {"c": (args["a"].to(dtype) @ args["w"].to(dtype).t()) * args["scale"].to(dtype)}


def mm_flops(s):
    return 2.0 * s["M"] * s["N"] * s["K"]


def mm_bytes(s, b_bytes: float = E, c_bytes: float = E):
    return E * s["M"] * s["K"] + b_bytes * s["K"] * s["N"] + c_bytes * s["M"] * s["N"]


GEMM_BIAS_GELU = SuiteKernel(
    name="gemm_bias_gelu", fn=gemm_bias_gelu_kernel, configs=MM_CONFIGS, shapes=DENSE_SHAPES, small_shape=GEMM_SMALL,
    make_args=bias_args, grid=tiles_grid, reference=lambda a: bias_math(a, torch.float64), outputs=("c",),
    key=("M", "N", "K"), flops=lambda s: mm_flops(s) + 9.0 * s["M"] * s["N"],  # + bias and GELU's 8
    bytes=lambda s: mm_bytes(s) + E * s["N"], kind="matrix",
    source="Triton tutorial 03-matrix-multiplication (grouped order, fused activation); torch inductor mm_configs",
    baseline=lambda a: bias_math(a, a["a"].dtype))
SPLITK_GEMM = SuiteKernel(
    name="splitk_gemm", fn=splitk_gemm_kernel,
    configs=configs(BLOCK_M=(16, 32, 64), BLOCK_N=(32, 64, 128), BLOCK_K=(64, 128), SPLIT_K=(2, 4, 8, 16),
                    GROUP_M=(8,)),
    shapes=SPLITK_SHAPES, small_shape={"M": 5, "N": 70, "K": 300}, make_args=splitk_args, grid=splitk_grid,
    reference=lambda a: {"c": a["a"].double() @ a["b"].double()}, outputs=("c",), key=("M", "N", "K"),
    flops=mm_flops, bytes=lambda s: mm_bytes(s, c_bytes=4), kind="matrix",
    source="triton.ops.matmul (Triton 2.x: SPLIT_K atomic adds, init_to_zero, io-bound configs)",
    baseline=lambda a: a["a"] @ a["b"], reset=("c",))
INT8_GEMM = SuiteKernel(
    name="int8_gemm", fn=int8_gemm_kernel,
    configs=configs(BLOCK_M=(16, 32, 64, 128), BLOCK_N=(64, 128), BLOCK_K=(64, 128), GROUP_M=(8,),
                    num_stages=(3, 4)),
    shapes=INT8_SHAPES, small_shape=GEMM_SMALL, make_args=int8_args, grid=tiles_grid,
    reference=lambda a: int8_math(a, torch.float64), outputs=("c",), key=("M", "N", "K"),
    flops=mm_flops, bytes=lambda s: mm_bytes(s, b_bytes=1) + 4 * s["N"], kind="matrix",
    source="torchao int8 weight-only / gemlite W8A16 (per-channel scales, weights converted in the K loop)",
    baseline=lambda a: int8_math(a, a["a"].dtype))
