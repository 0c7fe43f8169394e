"""Causal flash attention backward (dQ, dK, dV) in the Triton tutorial's fused-attention form.

One program per BLOCK_N1 keys of one head computes their dK and dV walking the queries at and after them in
BLOCK_M1 steps (the diagonal's blocks masked), then dQ of BLOCK_M2 = BLOCK_N1 queries walking the keys up to them in
BLOCK_N2 = BLOCK_M1 steps; P is recomputed from the forward's log-sum-exp and dS = P · (dP − delta), delta =
rowsum(O · dO) from the preprocessing kernel (flash.py). The tutorial ties the four blocks so; its list varies the
pair, stages and warps. P and dS are rounded to the inputs' dtype before their products, as the forward's P: in the
interpreter at fp16 the gradients' error (~3e-4) is the forward's, so the check's bounds are the same.
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.flash import (
    SHAPES,
    SMALL,
    attention_math,
    bhsd,
    causal_pairs,
    head_slices,
    heads_grid,
    qkv,
)
from rooftune.kernels.suite.record import SuiteKernel, joint_configs, randn
from rooftune.kernels.suite.rmsnorm import E

PAIRS = ((16, 64), (32, 64), (64, 64), (16, 128), (32, 128), (64, 128))  # (BLOCK_M1, BLOCK_N1)
CONFIGS = joint_configs(("BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2"), [(m, n, n, m) for m, n in PAIRS],
                        num_warps=(4, 8), num_stages=(2, 3, 4, 5))


@triton.jit
def bwd_dkdv(dk, dv, q, do, lse, delta, kb, vb, offs_n, lo, hi, sm_scale, HEAD_DIM: tl.constexpr,
             BLOCK_M1: tl.constexpr, MASK: tl.constexpr):
    # Queries [lo, hi) in BLOCK_M1 steps, transposed: Sᵀ = K Qᵀ [BLOCK_N1, BLOCK_M1]
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in range(lo, hi, BLOCK_M1):
        offs_m = start_m + tl.arange(0, BLOCK_M1)
        qT = tl.load(q + offs_m[None, :] * HEAD_DIM + offs_d[:, None])                # [HEAD_DIM, BLOCK_M1]
        pT = tl.exp(tl.dot(kb, qT) * sm_scale - tl.load(lse + offs_m)[None, :])
        if MASK:
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        dob = tl.load(do + offs_m[:, None] * HEAD_DIM + offs_d[None, :])             # [BLOCK_M1, HEAD_DIM]
        dv = tl.dot(pT.to(dob.dtype), dob, dv)
        dsT = pT * (tl.dot(vb, tl.trans(dob)) - tl.load(delta + offs_m)[None, :])
        dk = tl.dot(dsT.to(qT.dtype), tl.trans(qT), dk)
    return dk, dv


@triton.jit
def bwd_dq(dq, qb, dob, lse_m, delta_m, k, v, offs_m, lo, hi, sm_scale, HEAD_DIM: tl.constexpr,
           BLOCK_N2: tl.constexpr, MASK: tl.constexpr):
    # Keys [lo, hi) in BLOCK_N2 steps: S = Q Kᵀ [BLOCK_M2, BLOCK_N2]
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N2):
        offs_n = start_n + tl.arange(0, BLOCK_N2)
        kT = tl.load(k + offs_n[None, :] * HEAD_DIM + offs_d[:, None])                # [HEAD_DIM, BLOCK_N2]
        vT = tl.load(v + offs_n[None, :] * HEAD_DIM + offs_d[:, None])
        p = tl.exp(tl.dot(qb, kT) * sm_scale - lse_m[:, None])
        if MASK:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        ds = p * (tl.dot(dob, vT) - delta_m[:, None])
        dq = tl.dot(ds.to(kT.dtype), tl.trans(kT), dq)
    return dq


@triton.jit
def flash_attn_bwd_kernel(q, k, v, do, lse, delta, dq, dk, dv, sm_scale, S, HEAD_DIM: tl.constexpr,
                          BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr,
                          BLOCK_N2: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * HEAD_DIM
    q, k, v, do, dq, dk, dv = q + base, k + base, v + base, do + base, dq + base, dk + base, dv + base
    lse += bh * S
    delta += bh * S
    offs_d = tl.arange(0, HEAD_DIM)

    n0 = tl.program_id(0) * BLOCK_N1
    offs_n = n0 + tl.arange(0, BLOCK_N1)
    kv_offs = offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    kb = tl.load(k + kv_offs)                                                          # [BLOCK_N1, HEAD_DIM]
    vb = tl.load(v + kv_offs)
    dk_acc = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dv_acc = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
    dk_acc, dv_acc = bwd_dkdv(dk_acc, dv_acc, q, do, lse, delta, kb, vb, offs_n, n0, n0 + BLOCK_N1, sm_scale,
                              HEAD_DIM, BLOCK_M1, True)
    dk_acc, dv_acc = bwd_dkdv(dk_acc, dv_acc, q, do, lse, delta, kb, vb, offs_n, n0 + BLOCK_N1, S, sm_scale,
                              HEAD_DIM, BLOCK_M1, False)
    tl.store(dk + kv_offs, (dk_acc * sm_scale).to(dk.dtype.element_ty))
    tl.store(dv + kv_offs, dv_acc.to(dv.dtype.element_ty))

    m0 = tl.program_id(0) * BLOCK_M2
    offs_m = m0 + tl.arange(0, BLOCK_M2)
    q_offs = offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    dq_acc = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
    qb, dob = tl.load(q + q_offs), tl.load(do + q_offs)
    lse_m, delta_m = tl.load(lse + offs_m), tl.load(delta + offs_m)
    dq_acc = bwd_dq(dq_acc, qb, dob, lse_m, delta_m, k, v, offs_m, 0, m0, sm_scale, HEAD_DIM, BLOCK_N2, False)
    dq_acc = bwd_dq(dq_acc, qb, dob, lse_m, delta_m, k, v, offs_m, m0, m0 + BLOCK_M2, sm_scale, HEAD_DIM, BLOCK_N2,
                    True)
    tl.store(dq + q_offs, (dq_acc * sm_scale).to(dq.dtype.element_ty))


def make_args(shape, device, dtype=None, seed=0):
    """Q, K, V, dO drawn; O (rounded to the inputs' dtype, as a forward stores it) and the LSE from a float32
    forward; delta = rowsum(O · dO) as the preprocessing kernel writes it."""
    gen, q, k, v = qkv(shape, device, dtype, seed)
    scale = 1.0 / math.sqrt(shape["D"])
    o, lse = attention_math(q, k, v, scale, torch.float32)
    do = randn(q.shape, gen, device, q.dtype)
    return dict(q=q, k=k, v=v, do=do, lse=lse, delta=(o.to(q.dtype).float() * do.float()).sum(-1),
                dq=torch.empty_like(q), dk=torch.empty_like(k), dv=torch.empty_like(v), sm_scale=scale,
                S=shape["S"], HEAD_DIM=shape["D"])


def grads_math(args, dtype) -> dict:
    """dQ, dK, dV of causal attention from the inputs (P from the LSE, dS = P · (dP − delta)) in `dtype`, over a
    few heads at a time."""
    b, h, s, d = args["q"].shape
    q, k, v, do = (args[n].to(dtype).reshape(b * h, s, d) for n in ("q", "k", "v", "do"))
    lse, delta = (args[n].to(dtype).reshape(b * h, s, 1) for n in ("lse", "delta"))
    grads = {n: torch.empty((b * h, s, d), device=q.device, dtype=dtype) for n in ("dq", "dk", "dv")}
    causal = torch.ones((s, s), device=q.device, dtype=torch.bool).tril()
    scale = args["sm_scale"]
    for part in head_slices({"B": b, "H": h}, 3 * s * s):
        p = torch.exp(q[part] @ k[part].transpose(1, 2) * scale - lse[part]).masked_fill(~causal, 0.0)
        ds = p * (do[part] @ v[part].transpose(1, 2) - delta[part])
        grads["dv"][part] = p.transpose(1, 2) @ do[part]
        grads["dq"][part] = ds @ k[part] * scale
        grads["dk"][part] = ds.transpose(1, 2) @ q[part] * scale
    return {n: t.reshape(b, h, s, d) for n, t in grads.items()}


FLASH_ATTN_BWD = SuiteKernel(
    name="flash_attn_bwd", fn=flash_attn_bwd_kernel, configs=CONFIGS, shapes=SHAPES, small_shape=SMALL,
    make_args=make_args, grid=heads_grid("q", "BLOCK_N1"), reference=lambda a: grads_math(a, torch.float64),
    outputs=("dq", "dk", "dv"), key=("S", "HEAD_DIM"),
    flops=lambda s: 10.0 * causal_pairs(s) * s["D"],  # S again, dP, dV, dK, dQ: 2 · head_dim each per kept pair
    bytes=lambda s: 7.0 * E * bhsd(s) + 8.0 * s["B"] * s["H"] * s["S"], kind="matrix",  # Q K V dO dQ dK dV; LSE, delta
    source="Triton tutorial 06-fused-attention backward (_attn_bwd_dkdv, _attn_bwd_dq; BLOCK_M1 = BLOCK_N2, "
    "BLOCK_N1 = BLOCK_M2)", baseline=lambda a: grads_math(a, a["q"].dtype))
