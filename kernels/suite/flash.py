"""Causal flash attention forward and the backward's preprocessing, in the Triton tutorial's fused-attention form.

Q, K, V, O are contiguous [batch, heads, seq, head_dim], seq a multiple of 128 (the tutorial's blocks divide it);
the forward writes O and the row log-sum-exp (natural log, fp32), which the backward (flash_bwd.py) reads. Forward:
one program per BLOCK_M queries of one head, the keys below the diagonal block first, then the diagonal block masked
(the tutorial's two stages, so BLOCK_N divides BLOCK_M). Preprocessing: delta = rowsum(O · dO) per query.
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, generator, joint_configs, randn
from rooftune.kernels.suite.rmsnorm import E

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
REFERENCE_ELEMS = 1 << 27  # score elements a float64 reference holds at once (1 GiB)

# batch × heads × seq × head_dim of prefill and training: 2K-8K tokens, head_dim 128 (and 64)
SHAPES = ({"B": 4, "H": 32, "S": 2048, "D": 128}, {"B": 1, "H": 32, "S": 8192, "D": 128},
          {"B": 8, "H": 32, "S": 1024, "D": 128}, {"B": 2, "H": 32, "S": 4096, "D": 128},
          {"B": 4, "H": 32, "S": 4096, "D": 64}, {"B": 16, "H": 16, "S": 1024, "D": 128})
SMALL = {"B": 1, "H": 2, "S": 256, "D": 32}
# The tutorial's list: BLOCK_M 64 or 128, BLOCK_N 32 to 128 (dividing BLOCK_M), stages 2-4, warps 4 or 8, and its
# `keep` rule (a 128 x 128 tile only with 8 warps). At head_dim 128, 128 x 128 with 4 stages needs more shared
# memory than an H100 block has: error rows there, as in the tutorial's own list on Hopper.
FWD_PAIRS = ((64, 32), (64, 64), (128, 32), (128, 64), (128, 128))  # (BLOCK_M, BLOCK_N)
FWD_CONFIGS = tuple(c for c in joint_configs(("BLOCK_M", "BLOCK_N"), FWD_PAIRS, num_warps=(4, 8), num_stages=(2, 3, 4))
                    if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] < 128 * 128 or c.num_warps == 8)
PREPROCESS_CONFIGS = configs(BLOCK_M=(16, 32, 64, 128, 256), num_warps=(1, 2, 4, 8))


@triton.jit
def attn_fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, offs_m, lo, hi, qk_scale, HEAD_DIM: tl.constexpr,
                   BLOCK_N: tl.constexpr, MASK: tl.constexpr):
    # Keys [lo, hi) in BLOCK_N steps: online softmax in log2 units (scores · scale · log2 e)
    offs_n = tl.arange(0, BLOCK_N)
    k_ptrs += lo * HEAD_DIM
    v_ptrs += lo * HEAD_DIM
    for start_n in range(lo, hi, BLOCK_N):
        s = tl.dot(q, tl.load(k_ptrs)) * qk_scale                                  # [BLOCK_M, BLOCK_N]
        if MASK:
            s = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
        k_ptrs += BLOCK_N * HEAD_DIM
        v_ptrs += BLOCK_N * HEAD_DIM
    return acc, l_i, m_i


@triton.jit
def flash_attn_fwd_kernel(q, k, v, o, lse, sm_scale, S, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    qb = tl.load(q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])             # [BLOCK_M, HEAD_DIM]
    k_ptrs = k + base + offs_n[None, :] * HEAD_DIM + offs_d[:, None]                 # Kᵀ [HEAD_DIM, BLOCK_N]
    v_ptrs = v + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]                 # V [BLOCK_N, HEAD_DIM]
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2 e
    acc, l_i, m_i = attn_fwd_inner(acc, l_i, m_i, qb, k_ptrs, v_ptrs, offs_m, 0, start_m * BLOCK_M, qk_scale,
                                   HEAD_DIM, BLOCK_N, False)
    acc, l_i, m_i = attn_fwd_inner(acc, l_i, m_i, qb, k_ptrs, v_ptrs, offs_m, start_m * BLOCK_M,
                                   (start_m + 1) * BLOCK_M, qk_scale, HEAD_DIM, BLOCK_N, True)
    tl.store(o + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(o.dtype.element_ty))
    tl.store(lse + bh * S + offs_m, (m_i + tl.math.log2(l_i)) * 0.6931471805599453)  # · ln 2


@triton.jit
def attn_bwd_preprocess_kernel(o, do, delta, S, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = bh * S * HEAD_DIM + offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    mask = (offs_m < S)[:, None]
    prod = (tl.load(o + offs, mask=mask, other=0.0).to(tl.float32)
            * tl.load(do + offs, mask=mask, other=0.0).to(tl.float32))
    tl.store(delta + bh * S + offs_m, tl.sum(prod, axis=1), mask=offs_m < S)


def head_slices(shape: dict, per_head: int):
    """Slices over batch · heads that keep a reference's temporaries near REFERENCE_ELEMS elements."""
    bh = shape["B"] * shape["H"]
    step = max(1, REFERENCE_ELEMS // max(per_head, 1))
    return [slice(i, min(bh, i + step)) for i in range(0, bh, step)]


def attention_math(q, k, v, scale: float, dtype) -> tuple:
    """(O, natural-log LSE) of causal attention on [batch, heads, seq, head_dim] tensors, computed in `dtype`
    over a few heads at a time."""
    b, h, s, d = q.shape
    qf, kf, vf = (t.reshape(b * h, s, d) for t in (q, k, v))
    out = torch.empty((b * h, s, d), device=q.device, dtype=dtype)
    lse = torch.empty((b * h, s), device=q.device, dtype=dtype)
    causal = torch.ones((s, s), device=q.device, dtype=torch.bool).tril()
    for part in head_slices({"B": b, "H": h}, s * s):
        scores = (qf[part].to(dtype) @ kf[part].to(dtype).transpose(1, 2) * scale).masked_fill(~causal, float("-inf"))
        lse[part] = torch.logsumexp(scores, dim=-1)
        out[part] = torch.exp(scores - lse[part][..., None]) @ vf[part].to(dtype)
    return out.reshape(b, h, s, d), lse.reshape(b, h, s)


def qkv(shape, device, dtype, seed) -> tuple:
    """(generator, Q, K, V) of standard-normal values, [batch, heads, seq, head_dim]."""
    gen = generator(device, seed)
    dims = (shape["B"], shape["H"], shape["S"], shape["D"])
    return gen, *(randn(dims, gen, device, dtype_or_default(dtype)) for _ in range(3))


def fwd_args(shape, device, dtype=None, seed=0):
    _, q, k, v = qkv(shape, device, dtype, seed)
    return dict(q=q, k=k, v=v, o=torch.empty_like(q),
                lse=torch.empty(q.shape[:3], device=device, dtype=torch.float32),
                sm_scale=1.0 / math.sqrt(shape["D"]), S=shape["S"], HEAD_DIM=shape["D"])


def fwd_reference(args) -> dict:
    o, lse = attention_math(args["q"], args["k"], args["v"], args["sm_scale"], torch.float64)
    return {"o": o, "lse": lse}


def fwd_baseline(args):
    return torch.nn.functional.scaled_dot_product_attention(args["q"], args["k"], args["v"], is_causal=True,
                                                            scale=args["sm_scale"])


def preprocess_args(shape, device, dtype=None, seed=0):
    gen, o, do, _ = qkv(shape, device, dtype, seed)
    return dict(o=o, do=do, delta=torch.empty(o.shape[:3], device=device, dtype=torch.float32), S=shape["S"],
                HEAD_DIM=shape["D"])


def preprocess_math(args, dtype) -> dict:
    return {"delta": (args["o"].to(dtype) * args["do"].to(dtype)).sum(-1)}


def causal_pairs(s) -> float:
    """batch · heads · the (query, key) pairs a causal mask keeps."""
    return float(s["B"]) * s["H"] * s["S"] * (s["S"] + 1) / 2


def heads_grid(tensor: str, block: str = "BLOCK_M"):
    """The grid (seq blocks of `block`, batch · heads) of a kernel whose argument `tensor` is [batch, heads, seq, d]."""
    def grid(args: dict, meta: dict) -> tuple:
        batch, heads = args[tensor].shape[:2]
        return (triton.cdiv(args["S"], meta[block]), batch * heads)
    return grid


def bhsd(s) -> float:
    return float(s["B"]) * s["H"] * s["S"] * s["D"]


FLASH_ATTN_FWD = SuiteKernel(
    name="flash_attn_fwd", fn=flash_attn_fwd_kernel, configs=FWD_CONFIGS, shapes=SHAPES, small_shape=SMALL,
    make_args=fwd_args, grid=heads_grid("q"), reference=fwd_reference, outputs=("o", "lse"), key=("S", "HEAD_DIM"),
    flops=lambda s: 4.0 * causal_pairs(s) * s["D"],  # QKᵀ and PV: 2 · head_dim each per kept pair
    bytes=lambda s: 4.0 * E * bhsd(s) + 4.0 * s["B"] * s["H"] * s["S"], kind="matrix",  # Q, K, V, O; LSE
    source="Triton tutorial 06-fused-attention forward (two stages, causal; its BLOCK_M/BLOCK_N/stages/warps list)",
    baseline=fwd_baseline)
ATTN_BWD_PREPROCESS = SuiteKernel(
    name="attn_bwd_preprocess", fn=attn_bwd_preprocess_kernel, configs=PREPROCESS_CONFIGS, shapes=SHAPES,
    small_shape={"B": 1, "H": 3, "S": 100, "D": 32}, make_args=preprocess_args, grid=heads_grid("o"),
    reference=lambda a: preprocess_math(a, torch.float64), outputs=("delta",), key=("S", "HEAD_DIM"),
    flops=lambda s: 2.0 * bhsd(s), bytes=lambda s: 2.0 * E * bhsd(s) + 4.0 * s["B"] * s["H"] * s["S"],
    kind="memory", source="Triton tutorial 06-fused-attention _attn_bwd_preprocess; flash-attn's bwd preprocess",
    baseline=lambda a: preprocess_math(a, torch.float32))
