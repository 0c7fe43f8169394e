"""Paged decode attention: one query token per sequence against a paged KV cache through block tables (vLLM's form).

The cache is vLLM's [pages, PAGE, kv_heads, head_dim] for K and for V, a sequence's pages listed in its row of
`block_tables` (scattered: pages are handed out in a seeded random order). One program per (sequence, KV head)
serves the KV head's group of query heads together (padded to BLOCK_H >= 16 rows for tl.dot, as vLLM's
unified_attention and SGLang's grouped decode kernel do), walking the sequence BLOCK_N tokens a step with an online
softmax; the loop's length is the sequence's length, read from memory. The list tunes BLOCK_N, warps and stages.
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, generator, next_pow2, randn
from rooftune.kernels.suite.rmsnorm import E

# sequences × query heads × KV heads × head_dim × context × page: Llama-3-8B (32/8) at 512-8K tokens of context,
# Llama-3-70B (64/8), Llama-2-7B (MHA 32/32); 0.27 to 1.1 GB of KV cache read per call
SHAPES = ({"B": 32, "H": 32, "HK": 8, "D": 128, "L": 4096, "PAGE": 16},
          {"B": 64, "H": 32, "HK": 8, "D": 128, "L": 2048, "PAGE": 16},
          {"B": 128, "H": 32, "HK": 8, "D": 128, "L": 1024, "PAGE": 16},
          {"B": 16, "H": 32, "HK": 8, "D": 128, "L": 8192, "PAGE": 16},
          {"B": 256, "H": 32, "HK": 8, "D": 128, "L": 512, "PAGE": 16},
          {"B": 64, "H": 64, "HK": 8, "D": 128, "L": 4096, "PAGE": 16},
          {"B": 32, "H": 32, "HK": 32, "D": 128, "L": 2048, "PAGE": 16})


@triton.jit
def paged_decode_kernel(q, k_cache, v_cache, block_tables, seq_lens, o, sm_scale, max_pages, HK,
                        GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, PAGE: tl.constexpr, BLOCK_H: tl.constexpr,
                        BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    hk = tl.program_id(1)
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, HEAD_DIM)
    heads = (b * HK + hk) * GROUP + offs_h                                             # rows of q, o [B · H, D]
    hmask = (offs_h < GROUP)[:, None]
    qb = tl.load(q + heads[:, None] * HEAD_DIM + offs_d[None, :], mask=hmask, other=0.0)  # [BLOCK_H, HEAD_DIM]
    length = tl.load(seq_lens + b)
    table = block_tables + b.to(tl.int64) * max_pages
    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], dtype=tl.float32)
    for start in range(0, length, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        nmask = offs_n < length
        page = tl.load(table + offs_n // PAGE, mask=nmask, other=0).to(tl.int64)
        kv = ((page * PAGE + offs_n % PAGE) * HK + hk)[:, None] * HEAD_DIM + offs_d[None, :]
        kb = tl.load(k_cache + kv, mask=nmask[:, None], other=0.0)                   # [BLOCK_N, HEAD_DIM]
        s = tl.where(nmask[None, :], tl.dot(qb, tl.trans(kb)) * sm_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vb = tl.load(v_cache + kv, mask=nmask[:, None], other=0.0)
        acc = tl.dot(p.to(vb.dtype), vb, acc * alpha[:, None])
        m_i = m_new
    tl.store(o + heads[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(o.dtype.element_ty), mask=hmask)


def make_args(shape, device, dtype=None, seed=0):
    dtype = dtype_or_default(dtype)
    gen = generator(device, seed)
    b, h, hk, d, length, page = (shape[n] for n in ("B", "H", "HK", "D", "L", "PAGE"))
    per_seq = triton.cdiv(length, page)
    pages = b * per_seq
    cache = (pages, page, hk, d)
    order = torch.randperm(pages, generator=gen, device=device).to(torch.int32)
    return dict(q=randn((b, h, d), gen, device, dtype), k_cache=randn(cache, gen, device, dtype),
                v_cache=randn(cache, gen, device, dtype), block_tables=order.reshape(b, per_seq),
                seq_lens=torch.full((b,), length, device=device, dtype=torch.int32),
                o=torch.empty((b, h, d), device=device, dtype=dtype), sm_scale=1.0 / math.sqrt(d), max_pages=per_seq,
                HK=hk, GROUP=h // hk, HEAD_DIM=d, PAGE=page, BLOCK_H=max(16, next_pow2(h // hk)))


def decode_math(args, dtype) -> dict:
    """Each sequence's K and V gathered through its block table, then attention of its query, in `dtype`."""
    b, h, d = args["q"].shape
    hk = args["HK"]
    k, v = (args[n][args["block_tables"].long()].reshape(b, -1, hk, d).to(dtype)
            for n in ("k_cache", "v_cache"))                                         # [B, pages · PAGE, HK, D]
    q = args["q"].to(dtype).reshape(b, hk, h // hk, d)
    past = torch.arange(k.shape[1], device=k.device)[None, :] >= args["seq_lens"][:, None]  # no host sync: graphs
    scores = torch.einsum("bkgd,bnkd->bkgn", q, k) * args["sm_scale"]
    p = torch.softmax(scores.masked_fill(past[:, None, None, :], float("-inf")), dim=-1)
    return {"o": torch.einsum("bkgn,bnkd->bkgd", p, v).reshape(b, h, d)}


def grid(args: dict, meta: dict) -> tuple:
    return (args["q"].shape[0], args["HK"])


PAGED_DECODE = SuiteKernel(
    name="paged_decode", fn=paged_decode_kernel,
    configs=configs(BLOCK_N=(16, 32, 64, 128), num_warps=(1, 2, 4, 8), num_stages=(1, 2, 3, 4)),
    shapes=SHAPES, small_shape={"B": 3, "H": 4, "HK": 2, "D": 32, "L": 70, "PAGE": 16}, make_args=make_args,
    grid=grid, reference=lambda a: decode_math(a, torch.float64), outputs=("o",),
    key=("max_pages", "HK", "GROUP", "HEAD_DIM", "PAGE"),
    flops=lambda s: 4.0 * s["B"] * s["H"] * s["L"] * s["D"],  # q·k and p·v, 2 · head_dim each per token and head
    bytes=lambda s: (2.0 * E * s["B"] * s["L"] * s["HK"] * s["D"] + 2.0 * E * s["B"] * s["H"] * s["D"]
                     + 4.0 * s["B"] * (triton.cdiv(s["L"], s["PAGE"]) + 1)),  # K, V; q, o; block tables, lengths
    kind="matrix", source="vLLM paged attention / unified_attention 2-D decode (block tables, GQA head groups), "
    "SGLang decode_attention", baseline=lambda a: decode_math(a, a["q"].dtype))
