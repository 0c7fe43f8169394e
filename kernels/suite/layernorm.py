"""LayerNorm forward and backward in the row-block forms of rmsnorm.py (fla's forward, Liger's backward), same lists."""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, next_pow2, randn
from rooftune.kernels.suite.rmsnorm import (
    BWD_CONFIGS,
    BWD_SOURCE,
    EPS,
    FWD_CONFIGS,
    FWD_SOURCE,
    KEY,
    NORM_SHAPES,
    NORM_SMALL,
    E,
    norm_inputs,
    program_grid,
    row_block,
    row_grid,
    sizes,
)


@triton.jit
def layernorm_fwd_kernel(x, w, b, y, mean, rstd, M, N, stride, eps, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    x_ptrs, mask = row_block(x, stride, rows, cols, M, N)
    xf = tl.load(x_ptrs, mask=mask, other=0.0).to(tl.float32)                     # [BLOCK_M, BLOCK_N]
    mu = tl.sum(xf, axis=1) / N
    xc = tl.where(mask, xf - mu[:, None], 0.0)
    r = tl.rsqrt(tl.sum(xc * xc, axis=1) / N + eps)
    wf = tl.load(w + cols, mask=cols < N, other=0.0).to(tl.float32)
    bf = tl.load(b + cols, mask=cols < N, other=0.0).to(tl.float32)
    y_ptrs, _ = row_block(y, stride, rows, cols, M, N)
    tl.store(y_ptrs, (xc * r[:, None] * wf[None, :] + bf[None, :]).to(y.dtype.element_ty), mask=mask)
    tl.store(mean + rows, mu, mask=rows < M)
    tl.store(rstd + rows, r, mask=rows < M)


@triton.jit
def layernorm_bwd_kernel(dy, x, w, mean, rstd, dx, dw, db, M, N, stride,
                         BLOCK_N: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr):
    # dx = rstd · (w·dy − x̂ · mean(x̂ · w·dy) − mean(w·dy)), x̂ = (x − mean) · rstd; dw = Σ dy · x̂, db = Σ dy
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    wf = tl.load(w + cols, mask=cmask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    row0 = tl.program_id(0) * ROWS_PER_PROGRAM
    off = row0.to(tl.int64) * stride
    for row in tl.range(row0, tl.minimum(row0 + ROWS_PER_PROGRAM, M)):
        xf = tl.load(x + off + cols, mask=cmask, other=0.0).to(tl.float32)
        dyf = tl.load(dy + off + cols, mask=cmask, other=0.0).to(tl.float32)
        r = tl.load(rstd + row)
        xhat = tl.where(cmask, (xf - tl.load(mean + row)) * r, 0.0)
        wdy = wf * dyf
        c1 = tl.sum(xhat * wdy, axis=0) / N
        c2 = tl.sum(wdy, axis=0) / N
        tl.store(dx + off + cols, ((wdy - xhat * c1 - c2) * r).to(dx.dtype.element_ty), mask=cmask)
        dw_acc += dyf * xhat
        db_acc += dyf
        off += stride
    tl.atomic_add(dw + cols, dw_acc, mask=cmask)
    tl.atomic_add(db + cols, db_acc, mask=cmask)


def fwd_args(shape, device, dtype=None, seed=0):
    gen, x, w = norm_inputs(shape, device, dtype, seed)
    stats = dict(mean=torch.empty(shape["M"], device=device, dtype=torch.float32),
                 rstd=torch.empty(shape["M"], device=device, dtype=torch.float32))
    return dict(x=x, w=w, b=randn((shape["N"],), gen, device, x.dtype, 0.1), y=torch.empty_like(x), **stats,
                **sizes(shape), eps=EPS, BLOCK_N=next_pow2(shape["N"]))


def fwd_reference(args):
    x = args["x"].double()
    mu = x.mean(1)
    r = torch.rsqrt((x - mu[:, None]).square().mean(1) + args["eps"])
    return {"y": (x - mu[:, None]) * r[:, None] * args["w"].double() + args["b"].double(), "mean": mu, "rstd": r}


def fwd_baseline(args):
    return torch.nn.functional.layer_norm(args["x"], (args["N"],), args["w"], args["b"], args["eps"])


def bwd_args(shape, device, dtype=None, seed=0):
    gen, x, w = norm_inputs(shape, device, dtype, seed)
    xf = x.float()
    mu = xf.mean(1)
    grads = dict(dx=torch.empty_like(x), dw=torch.empty(shape["N"], device=device, dtype=torch.float32),
                 db=torch.empty(shape["N"], device=device, dtype=torch.float32))
    return dict(dy=randn(x.shape, gen, device, x.dtype), x=x, w=w, mean=mu,
                rstd=torch.rsqrt((xf - mu[:, None]).square().mean(1) + EPS), **grads, **sizes(shape),
                BLOCK_N=next_pow2(shape["N"]))


def bwd_math(args, dtype) -> dict:
    dy, x, w, mu, r = (args[k].to(dtype) for k in ("dy", "x", "w", "mean", "rstd"))
    xhat, wdy = (x - mu[:, None]) * r[:, None], w * dy
    c1, c2 = (xhat * wdy).mean(1, keepdim=True), wdy.mean(1, keepdim=True)
    return {"dx": (wdy - xhat * c1 - c2) * r[:, None], "dw": (dy * xhat).sum(0), "db": dy.sum(0)}


def fwd_flops(s):
    return 7.0 * s["M"] * s["N"]  # the mean's sum, x − mean, its square and sum, · rstd, · w, + b


def fwd_bytes(s):
    return 2.0 * E * s["M"] * s["N"] + 2 * E * s["N"] + 8 * s["M"]  # x, y; w, b; mean, rstd (fp32)


def bwd_flops(s):
    # x̂ (2), w·dy, x̂·w·dy and its sum, the w·dy sum, the dx difference (3), · rstd, dw (2), db
    return 13.0 * s["M"] * s["N"]


def bwd_bytes(s):
    return 3.0 * E * s["M"] * s["N"] + E * s["N"] + 8 * s["M"] + 8 * s["N"]  # dy, x, dx; w; mean, rstd; dw, db


LAYERNORM_FWD = SuiteKernel(
    name="layernorm_fwd", fn=layernorm_fwd_kernel, configs=FWD_CONFIGS, shapes=NORM_SHAPES, small_shape=NORM_SMALL,
    make_args=fwd_args, grid=row_grid, reference=fwd_reference, outputs=("y", "mean", "rstd"), key=KEY,
    flops=fwd_flops, bytes=fwd_bytes, kind="memory", source=FWD_SOURCE, baseline=fwd_baseline)
LAYERNORM_BWD = SuiteKernel(
    name="layernorm_bwd", fn=layernorm_bwd_kernel, configs=BWD_CONFIGS, shapes=NORM_SHAPES, small_shape=NORM_SMALL,
    make_args=bwd_args, grid=program_grid, reference=lambda a: bwd_math(a, torch.float64),
    outputs=("dx", "dw", "db"), key=KEY, flops=bwd_flops, bytes=bwd_bytes, kind="memory", source=BWD_SOURCE,
    baseline=lambda a: bwd_math(a, torch.float32), reset=("dw", "db"))
