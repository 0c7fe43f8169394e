"""Rotary embedding of Q and K (NeoX halves) from positions and a cos/sin cache, in vLLM's and Liger's rope form.

Each program rotates BLOCK_T tokens, BLOCK_H heads at a time, Q's heads then K's (Liger: all heads of a token in one
program, padded to a power of two; vLLM: a cos_sin_cache [max_position, head_dim] indexed by each token's position);
out of place, so that every launch reads the same inputs.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, fitting, generator, randn
from rooftune.kernels.suite.rmsnorm import E

MAX_POSITION = 8192
# tokens × heads (Q, KV) × head_dim: Llama-3-8B/70B (GQA 32/8, 64/8), Llama-2-7B (MHA 32), a head_dim-64 model
SHAPES = ({"T": 4096, "H": 32, "HK": 8, "D": 128}, {"T": 16384, "H": 32, "HK": 8, "D": 128},
          {"T": 8192, "H": 32, "HK": 32, "D": 128}, {"T": 8192, "H": 64, "HK": 8, "D": 128},
          {"T": 32768, "H": 32, "HK": 8, "D": 128}, {"T": 16384, "H": 16, "HK": 16, "D": 64})


@triton.jit
def rotate_heads(src, dst, t_rows, t_mask, cos, sin, heads, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # x1' = x1·cos − x2·sin, x2' = x2·cos + x1·sin over the halves of each head, BLOCK_H heads a step.
    d = tl.arange(0, HALF)
    for h0 in range(0, heads, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        offs = (t_rows[:, None, None] * heads + h[None, :, None]) * (2 * HALF) + d[None, None, :]
        mask = t_mask[:, None, None] & (h < heads)[None, :, None]
        x1 = tl.load(src + offs, mask=mask, other=0.0).to(tl.float32)           # [BLOCK_T, BLOCK_H, HALF]
        x2 = tl.load(src + offs + HALF, mask=mask, other=0.0).to(tl.float32)
        tl.store(dst + offs, (x1 * cos - x2 * sin).to(dst.dtype.element_ty), mask=mask)
        tl.store(dst + offs + HALF, (x2 * cos + x1 * sin).to(dst.dtype.element_ty), mask=mask)


@triton.jit
def rotary_kernel(q, k, q_out, k_out, positions, cos_sin_cache, T, H, HK, HALF: tl.constexpr,
                  BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_mask = t < T
    pos = tl.load(positions + t, mask=t_mask, other=0)
    d = tl.arange(0, HALF)
    cs = cos_sin_cache + pos[:, None] * (2 * HALF) + d[None, :]
    cos = tl.load(cs, mask=t_mask[:, None], other=0.0).to(tl.float32)[:, None, :]  # [BLOCK_T, 1, HALF]
    sin = tl.load(cs + HALF, mask=t_mask[:, None], other=0.0).to(tl.float32)[:, None, :]
    rows = t.to(tl.int64)
    rotate_heads(q, q_out, rows, t_mask, cos, sin, H, HALF, BLOCK_H)
    rotate_heads(k, k_out, rows, t_mask, cos, sin, HK, HALF, BLOCK_H)


def make_args(shape, device, dtype=None, seed=0):
    dtype = dtype_or_default(dtype)
    gen = generator(device, seed)
    t, d = shape["T"], shape["D"]
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    angles = torch.arange(MAX_POSITION, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    q = randn((t, shape["H"], d), gen, device, dtype)
    k = randn((t, shape["HK"], d), gen, device, dtype)
    return dict(q=q, k=k, q_out=torch.empty_like(q), k_out=torch.empty_like(k),
                positions=torch.randint(0, MAX_POSITION, (t,), generator=gen, device=device),
                cos_sin_cache=torch.cat([angles.cos(), angles.sin()], dim=1).to(dtype),
                T=t, H=shape["H"], HK=shape["HK"], HALF=d // 2)


def rope_math(args, dtype) -> dict:
    half = args["HALF"]
    cs = args["cos_sin_cache"][args["positions"]].to(dtype)[:, None, :]            # [T, 1, D]
    cos, sin = cs[..., :half], cs[..., half:]

    def rotate(x):
        x1, x2 = x.to(dtype)[..., :half], x.to(dtype)[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    return {"q_out": rotate(args["q"]), "k_out": rotate(args["k"])}


def grid(args: dict, meta: dict) -> tuple:
    return (triton.cdiv(args["T"], meta["BLOCK_T"]),)


def elements(s) -> float:
    return float(s["T"]) * (s["H"] + s["HK"]) * s["D"]


ROTARY = SuiteKernel(
    name="rotary", fn=rotary_kernel,
    configs=fitting(configs(BLOCK_T=(1, 2, 4, 8, 16), BLOCK_H=(2, 4, 8), num_warps=(1, 2, 4, 8)),
                    lambda m: m["BLOCK_T"] * m["BLOCK_H"] * 64),  # half of head_dim 128
    shapes=SHAPES, small_shape={"T": 13, "H": 6, "HK": 2, "D": 16}, make_args=make_args, grid=grid,
    reference=lambda a: rope_math(a, torch.float64), outputs=("q_out", "k_out"), key=("T", "H", "HK", "HALF"),
    flops=lambda s: 3.0 * elements(s),  # two products and a sum per element
    bytes=lambda s: 2.0 * E * elements(s) + 8 * s["T"] + E * s["T"] * s["D"],  # q, k in and out; positions; cos, sin
    kind="memory",
    source="vLLM rotary_embedding (positions, cos_sin_cache, NeoX style), Liger rope (heads per program)",
    baseline=lambda a: rope_math(a, a["q"].dtype))
