"""Chunked causal linear attention forward, in fla's fused-chunk form: o_t = scale · Σ_{s ≤ t} (q_t · k_s) v_s.

One program per (BV columns of V, batch · head) walks the sequence BT tokens a chunk: the chunk's output is its
masked intra-chunk product (Q Kᵀ ⊙ causal) V plus Q times the state H [DK, BV] of the earlier chunks, then
H += Kᵀ V (fla's `fused_chunk_linear_attn_fwd_kernel`; its lists tune the V block, warps and stages, here the chunk
length too). Q, K [batch, heads, T, DK], V, O [batch, heads, T, DV], contiguous.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.flash import head_slices
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, generator, randn
from rooftune.kernels.suite.rmsnorm import E

CHUNK = 64  # fla's chunk length: the one `flops` counts the intra-chunk work at
# batch × heads × tokens × head dims of linear-attention layers (fla's benchmarks: 2K-16K tokens, head_dim 64-128)
SHAPES = ({"B": 4, "H": 32, "T": 4096, "DK": 128, "DV": 128}, {"B": 8, "H": 16, "T": 2048, "DK": 128, "DV": 128},
          {"B": 2, "H": 32, "T": 8192, "DK": 128, "DV": 128}, {"B": 16, "H": 32, "T": 1024, "DK": 64, "DV": 64},
          {"B": 8, "H": 32, "T": 2048, "DK": 64, "DV": 64}, {"B": 1, "H": 32, "T": 16384, "DK": 128, "DV": 128})


@triton.jit
def chunk_linear_attn_kernel(q, k, v, o, scale, T, DK: tl.constexpr, DV: tl.constexpr, BT: tl.constexpr,
                             BV: tl.constexpr):
    i_v = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    q += bh * T * DK
    k += bh * T * DK
    v += bh * T * DV
    o += bh * T * DV
    offs_t = tl.arange(0, BT)
    offs_k = tl.arange(0, DK)
    offs_v = i_v * BV + tl.arange(0, BV)
    vmask = offs_v < DV
    causal = offs_t[:, None] >= offs_t[None, :]
    h = tl.zeros([DK, BV], dtype=tl.float32)
    for t0 in range(0, T, BT):
        rows = t0 + offs_t
        tmask = rows < T
        qk_offs = rows[:, None] * DK + offs_k[None, :]
        v_offs = rows[:, None] * DV + offs_v[None, :]
        vm = tmask[:, None] & vmask[None, :]
        qb = tl.load(q + qk_offs, mask=tmask[:, None], other=0.0)                     # [BT, DK]
        kb = tl.load(k + qk_offs, mask=tmask[:, None], other=0.0)
        vb = tl.load(v + v_offs, mask=vm, other=0.0)                                   # [BT, BV]
        s = tl.where(causal, tl.dot(qb, tl.trans(kb)), 0.0)                           # [BT, BT]
        ob = tl.dot(s.to(vb.dtype), vb) + tl.dot(qb, h.to(qb.dtype))
        tl.store(o + v_offs, (ob * scale).to(o.dtype.element_ty), mask=vm)
        h = tl.dot(tl.trans(kb), vb, h)


def make_args(shape, device, dtype=None, seed=0):
    dtype = dtype_or_default(dtype)
    gen = generator(device, seed)
    b, h, t, dk, dv = (shape[n] for n in ("B", "H", "T", "DK", "DV"))
    # q, k at 1/√DK so that the products stay near 1 and the state grows as a trained layer's (feature maps ≥ 0
    # in practice; the kernel does not care)
    q, k = (randn((b, h, t, dk), gen, device, dtype, dk ** -0.25) for _ in range(2))
    v = randn((b, h, t, dv), gen, device, dtype)
    return dict(q=q, k=k, v=v, o=torch.empty_like(v), scale=dk ** -0.5, T=t, DK=dk, DV=dv)


def linear_attn_math(args, dtype) -> dict:
    """scale · tril(Q Kᵀ) V in `dtype`, a few heads at a time."""
    b, h, t, dk = args["q"].shape
    dv = args["v"].shape[-1]
    q, k = (args[n].to(dtype).reshape(b * h, t, dk) for n in ("q", "k"))
    v = args["v"].to(dtype).reshape(b * h, t, dv)
    out = torch.empty((b * h, t, dv), device=q.device, dtype=dtype)
    for part in head_slices({"B": b, "H": h}, t * t):
        out[part] = (q[part] @ k[part].transpose(1, 2)).tril() @ v[part] * args["scale"]
    return {"o": out.reshape(b, h, t, dv)}


def grid(args: dict, meta: dict) -> tuple:
    return (triton.cdiv(args["DV"], meta["BV"]), args["q"].shape[0] * args["q"].shape[1])


def flops(s) -> float:
    """Per head: each chunk's Q Kᵀ and (·) V (2 · CHUNK² · (DK + DV)), Q H and Kᵀ V (2 · CHUNK · DK · DV each)."""
    return float(s["B"]) * s["H"] * s["T"] * (2.0 * CHUNK * (s["DK"] + s["DV"]) + 4.0 * s["DK"] * s["DV"])


CHUNK_LINEAR_ATTN = SuiteKernel(
    name="chunk_linear_attn", fn=chunk_linear_attn_kernel,
    configs=configs(BT=(32, 64), BV=(32, 64, 128), num_warps=(2, 4, 8), num_stages=(1, 2, 3)),
    shapes=SHAPES, small_shape={"B": 1, "H": 2, "T": 150, "DK": 32, "DV": 48}, make_args=make_args, grid=grid,
    reference=lambda a: linear_attn_math(a, torch.float64), outputs=("o",), key=("T", "DK", "DV"), flops=flops,
    bytes=lambda s: E * s["B"] * s["H"] * s["T"] * (2.0 * s["DK"] + 2.0 * s["DV"]), kind="matrix",  # q, k; v, o
    source="fla fused_chunk_linear_attn forward (chunk state H carried in registers; BV, warps, stages lists)",
    baseline=lambda a: linear_attn_math(a, a["q"].dtype))
