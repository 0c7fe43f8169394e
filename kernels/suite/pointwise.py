"""Tiled element-wise kernels: vLLM's SwiGLU act_and_mul, Liger's embedding gather, SGLang's per-token-group FP8 quant.

Each program handles a [BLOCK_M, BLOCK_N] tile of rows and columns (the embedding's rows gathered by token id; the
quantization's rows are groups of GROUP = 128 contiguous values, each with its own scale, DeepSeek-V3's layout).
FP8 conversions are not faithful in Triton's interpreter, so off the GPU only the quantization's scales are compared.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, fitting, generator, randn
from rooftune.kernels.suite.rmsnorm import E

FP8_MAX = 448.0  # the largest finite float8 e4m3 (OCP "e4m3fn") value: the format's, not a GPU's
GROUP = 128

# tokens × intermediate size (Llama-2-7B 11008, Llama-3-8B 14336, 70B 28672, Llama-2-13B 13824): 0.2 to 0.7 GB
SWIGLU_SHAPES = ({"M": 4096, "N": 11008}, {"M": 8192, "N": 14336}, {"M": 4096, "N": 14336},
                 {"M": 16384, "N": 8192}, {"M": 2048, "N": 28672}, {"M": 8192, "N": 13824})
# tokens × vocabulary × hidden
EMBEDDING_SHAPES = ({"T": 8192, "V": 128256, "D": 4096}, {"T": 16384, "V": 32000, "D": 4096},
                    {"T": 4096, "V": 151936, "D": 5120}, {"T": 32768, "V": 32000, "D": 2048},
                    {"T": 8192, "V": 32000, "D": 8192}, {"T": 16384, "V": 50304, "D": 2560})
# tokens × hidden of FP8 layers (DeepSeek-V3 7168, its expert intermediate 18432, Llama-3 4096/14336)
FP8_SHAPES = ({"M": 4096, "N": 4096}, {"M": 8192, "N": 7168}, {"M": 16384, "N": 4096}, {"M": 4096, "N": 14336},
              {"M": 4096, "N": 18432}, {"M": 32768, "N": 2048})


@triton.jit
def swiglu_kernel(x, out, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # out [M, N] = silu(gate) · up, x [M, 2N] = [gate | up] (the fused gate_up projection's output)
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    gate_ptrs = x + rows[:, None] * (2 * N) + cols[None, :]
    gate = tl.load(gate_ptrs, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_ptrs + N, mask=mask, other=0.0).to(tl.float32)
    tl.store(out + rows[:, None] * N + cols[None, :], (gate * tl.sigmoid(gate) * up).to(out.dtype.element_ty),
             mask=mask)


@triton.jit
def embedding_kernel(ids, weight, out, T, D, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < T)[:, None] & (cols < D)[None, :]
    token = tl.load(ids + rows, mask=rows < T, other=0)
    vals = tl.load(weight + token[:, None] * D + cols[None, :], mask=mask)
    tl.store(out + rows[:, None].to(tl.int64) * D + cols[None, :], vals, mask=mask)


@triton.jit
def fp8_quant_kernel(x, y, scale, groups, eps, fp8_max, GROUP: tl.constexpr, BLOCK_M: tl.constexpr):
    # Groups of GROUP contiguous values (x viewed as [groups, GROUP]); scale = max|x| / fp8_max per group.
    g = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.arange(0, GROUP)
    offs = g[:, None] * GROUP + cols[None, :]
    mask = (g < groups)[:, None]
    v = tl.load(x + offs, mask=mask, other=0.0).to(tl.float32)                     # [BLOCK_M, GROUP]
    s = tl.maximum(tl.max(tl.abs(v), axis=1), eps) / fp8_max
    q = tl.clamp(v / s[:, None], -fp8_max, fp8_max)
    tl.store(y + offs, q.to(y.dtype.element_ty), mask=mask)
    tl.store(scale + g, s, mask=g < groups)


def tile(meta: dict) -> int:
    return meta["BLOCK_M"] * meta["BLOCK_N"]


def tile_grid(rows: str, cols: str):
    def grid(args: dict, meta: dict) -> tuple:
        return (triton.cdiv(args[rows], meta["BLOCK_M"]), triton.cdiv(args[cols], meta["BLOCK_N"]))
    return grid


def swiglu_args(shape, device, dtype=None, seed=0):
    x = randn((shape["M"], 2 * shape["N"]), generator(device, seed), device, dtype_or_default(dtype))
    return dict(x=x, out=torch.empty((shape["M"], shape["N"]), device=device, dtype=x.dtype), **shape)


def swiglu_math(args, dtype) -> dict:
    gate, up = args["x"].to(dtype).chunk(2, dim=1)
    return {"out": torch.nn.functional.silu(gate) * up}


def embedding_args(shape, device, dtype=None, seed=0):
    gen = generator(device, seed)
    weight = randn((shape["V"], shape["D"]), gen, device, dtype_or_default(dtype))
    ids = torch.randint(0, shape["V"], (shape["T"],), generator=gen, device=device)
    return dict(ids=ids, weight=weight, out=torch.empty((shape["T"], shape["D"]), device=device, dtype=weight.dtype),
                T=shape["T"], D=shape["D"])


def fp8_args(shape, device, dtype=None, seed=0):
    x = randn((shape["M"], shape["N"]), generator(device, seed), device, dtype_or_default(dtype))
    groups = shape["M"] * shape["N"] // GROUP
    return dict(x=x, y=torch.empty(x.shape, device=device, dtype=torch.float8_e4m3fn),
                scale=torch.empty((shape["M"], shape["N"] // GROUP), device=device, dtype=torch.float32),
                groups=groups, eps=1e-10, fp8_max=FP8_MAX, GROUP=GROUP)


def fp8_math(args) -> dict:
    """torch's quantization of the same fp32 values: the reference of the scales and of the FP8 values."""
    v = args["x"].float().reshape(args["groups"], GROUP)
    s = v.abs().amax(dim=1).clamp(min=args["eps"]) / args["fp8_max"]
    y = (v / s[:, None]).clamp(-args["fp8_max"], args["fp8_max"]).to(torch.float8_e4m3fn)
    return {"y": y.reshape(args["x"].shape), "scale": s.reshape(args["scale"].shape)}


def fp8_grid(args: dict, meta: dict) -> tuple:
    return (triton.cdiv(args["groups"], meta["BLOCK_M"]),)


SWIGLU = SuiteKernel(
    name="swiglu", fn=swiglu_kernel,
    configs=fitting(configs(BLOCK_M=(1, 2, 4, 8), BLOCK_N=(512, 1024, 2048, 4096), num_warps=(2, 4, 8)), tile),
    shapes=SWIGLU_SHAPES, small_shape={"M": 5, "N": 700}, make_args=swiglu_args, grid=tile_grid("M", "N"),
    reference=lambda a: swiglu_math(a, torch.float64), outputs=("out",), key=("M", "N"),
    flops=lambda s: 5.0 * s["M"] * s["N"],  # sigmoid (exp, add, divide), two products
    bytes=lambda s: 3.0 * E * s["M"] * s["N"], kind="memory",
    source="vLLM act_and_mul (gate | up halves of one tensor), Liger swiglu; tiles as torch inductor's pointwise",
    baseline=lambda a: swiglu_math(a, a["x"].dtype))
EMBEDDING = SuiteKernel(
    name="embedding", fn=embedding_kernel,
    configs=fitting(configs(BLOCK_M=(1, 4, 16, 64), BLOCK_N=(256, 512, 1024, 2048), num_warps=(1, 2, 4, 8)), tile),
    shapes=EMBEDDING_SHAPES, small_shape={"T": 19, "V": 50, "D": 300}, make_args=embedding_args,
    grid=tile_grid("T", "D"), reference=lambda a: {"out": a["weight"][a["ids"]].double()}, outputs=("out",),
    key=("T", "D"), flops=lambda s: 0.0,  # a gather: rows read and written, the ids
    bytes=lambda s: 2.0 * E * s["T"] * s["D"] + 8 * s["T"],
    kind="memory", source="Liger embedding_forward_kernel (token and column blocks)",
    baseline=lambda a: torch.nn.functional.embedding(a["ids"], a["weight"]))
FP8_QUANT = SuiteKernel(
    name="fp8_quant", fn=fp8_quant_kernel, configs=configs(BLOCK_M=(1, 2, 4, 8, 16, 32), num_warps=(1, 2, 4, 8)),
    shapes=FP8_SHAPES, small_shape={"M": 6, "N": 384}, make_args=fp8_args, grid=fp8_grid,
    reference=fp8_math, outputs=("y", "scale"), key=("groups",),
    flops=lambda s: 3.0 * s["M"] * s["N"],  # |x| and its max, the division
    bytes=lambda s: (E + 1.0) * s["M"] * s["N"] + 4.0 * s["M"] * s["N"] / GROUP,  # x; y (1 byte); the scales
    kind="memory", source="SGLang/vLLM per_token_group_quant_fp8 (group 128, e4m3), groups per program",
    baseline=fp8_math, interpreted=("scale",))
