"""RMSNorm forward and backward and vLLM's fused residual add + RMSNorm, in the row-block forms of fla's and Liger's.

Forward (fla's `layer_norm_fwd_kernel` form): each program normalizes BLOCK_M rows whole, BLOCK_N =
next_power_of_2(N) derived from the shape, the list tuning BLOCK_M and num_warps (fla: num_warps 1..32; here no more
rows than warps). Backward
(Liger's `rms_norm_backward` form): each program walks ROWS_PER_PROGRAM rows, writing dx and keeping its share of dw
in registers, added once into the fp32 dw with an atomic (Liger sums a [programs, N] buffer on the host instead).
"""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import (
    SuiteKernel,
    configs,
    dtype_or_default,
    fitting,
    generator,
    next_pow2,
    randn,
)

E = 2  # bytes of a bf16 element, the sweep's dtype (flops and bytes are counted for it)
EPS = 1e-6

# tokens × hidden of 7B-70B models' norms: 32 MB (4096 × 4096) to 256 MB (16384 × 8192) of bf16 activations
NORM_SHAPES = ({"M": 4096, "N": 4096}, {"M": 16384, "N": 4096}, {"M": 8192, "N": 5120}, {"M": 4096, "N": 8192},
               {"M": 16384, "N": 8192}, {"M": 32768, "N": 2048})
NORM_SMALL = {"M": 37, "N": 100}
# fla's warps 1..32 with 1-16 rows a program, at least a warp a row (a row of 4096, the common hidden size: a tile of
# TILE_PER_WARP a warp)
FWD_CONFIGS = fitting(configs(BLOCK_M=(1, 2, 4, 8, 16), num_warps=(1, 2, 4, 8, 16, 32)), lambda m: m["BLOCK_M"] * 4096)
BWD_CONFIGS = configs(ROWS_PER_PROGRAM=(8, 16, 32, 64, 128, 256), num_warps=(2, 4, 8, 16))
FWD_SOURCE = "fla ops/layernorm (row blocks, num_warps 1..32), Liger rms_norm"
BWD_SOURCE = "Liger rms_norm_backward (rows per program, dW partials); dW summed by atomics"


@triton.jit
def row_block(ptr, stride, rows, cols, M, N):
    """Pointers and mask of the [rows, cols] block of a row-major [M, N] tensor with row stride `stride`."""
    ptrs = ptr + rows[:, None].to(tl.int64) * stride + cols[None, :]
    return ptrs, (rows < M)[:, None] & (cols < N)[None, :]


@triton.jit
def rmsnorm_fwd_kernel(x, w, y, rstd, M, N, stride, eps, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    x_ptrs, mask = row_block(x, stride, rows, cols, M, N)
    xf = tl.load(x_ptrs, mask=mask, other=0.0).to(tl.float32)                     # [BLOCK_M, BLOCK_N]
    r = tl.rsqrt(tl.sum(xf * xf, axis=1) / N + eps)
    wf = tl.load(w + cols, mask=cols < N, other=0.0).to(tl.float32)
    y_ptrs, _ = row_block(y, stride, rows, cols, M, N)
    tl.store(y_ptrs, (xf * r[:, None] * wf[None, :]).to(y.dtype.element_ty), mask=mask)
    tl.store(rstd + rows, r, mask=rows < M)


@triton.jit
def add_rmsnorm_kernel(x, residual, w, y, residual_out, M, N, stride, eps,
                       BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr):
    # vLLM's fused_add_rms_norm, out of place: h = x + residual is the next layer's residual (stored in the
    # input dtype), and the rounded h is normalized.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    x_ptrs, mask = row_block(x, stride, rows, cols, M, N)
    r_ptrs, _ = row_block(residual, stride, rows, cols, M, N)
    h = (tl.load(x_ptrs, mask=mask, other=0.0).to(tl.float32)
         + tl.load(r_ptrs, mask=mask, other=0.0).to(tl.float32)).to(residual_out.dtype.element_ty)
    h_ptrs, _ = row_block(residual_out, stride, rows, cols, M, N)
    tl.store(h_ptrs, h, mask=mask)
    hf = h.to(tl.float32)
    r = tl.rsqrt(tl.sum(hf * hf, axis=1) / N + eps)
    wf = tl.load(w + cols, mask=cols < N, other=0.0).to(tl.float32)
    y_ptrs, _ = row_block(y, stride, rows, cols, M, N)
    tl.store(y_ptrs, (hf * r[:, None] * wf[None, :]).to(y.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_bwd_kernel(dy, x, w, rstd, dx, dw, M, N, stride, BLOCK_N: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr):
    # dx = rstd · (w·dy − x̂ · mean(x̂ · w·dy)), x̂ = x · rstd; dw = Σ_rows dy · x̂
    cols = tl.arange(0, BLOCK_N)
    cmask = cols < N
    wf = tl.load(w + cols, mask=cmask, other=0.0).to(tl.float32)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    row0 = tl.program_id(0) * ROWS_PER_PROGRAM
    off = row0.to(tl.int64) * stride  # the row's offset, advanced by pointer steps as Liger's loop does
    for row in tl.range(row0, tl.minimum(row0 + ROWS_PER_PROGRAM, M)):
        xf = tl.load(x + off + cols, mask=cmask, other=0.0).to(tl.float32)
        dyf = tl.load(dy + off + cols, mask=cmask, other=0.0).to(tl.float32)
        r = tl.load(rstd + row)
        xhat = xf * r
        wdy = wf * dyf
        c = tl.sum(xhat * wdy, axis=0) / N
        tl.store(dx + off + cols, ((wdy - xhat * c) * r).to(dx.dtype.element_ty), mask=cmask)
        dw_acc += dyf * xhat
        off += stride
    tl.atomic_add(dw + cols, dw_acc, mask=cmask)


def row_grid(args: dict, meta: dict) -> tuple:
    return (triton.cdiv(args["M"], meta["BLOCK_M"]),)


def program_grid(args: dict, meta: dict) -> tuple:
    return (triton.cdiv(args["M"], meta["ROWS_PER_PROGRAM"]),)


def norm_inputs(shape: dict, device, dtype, seed: int) -> tuple:
    """(generator, x [M, N], w [N] near 1), as a trained norm's weight."""
    dtype = dtype_or_default(dtype)
    gen = generator(device, seed)
    x = randn((shape["M"], shape["N"]), gen, device, dtype)
    w = (1.0 + randn((shape["N"],), gen, device, torch.float32, 0.1)).to(dtype)
    return gen, x, w


def sizes(shape: dict) -> dict:
    return dict(M=shape["M"], N=shape["N"], stride=shape["N"])


def rms(h, eps: float):
    """(rstd, h · rstd) of rows of `h` in its own dtype."""
    r = torch.rsqrt(h.square().mean(1) + eps)
    return r, h * r[:, None]


def fwd_args(shape, device, dtype=None, seed=0):
    _, x, w = norm_inputs(shape, device, dtype, seed)
    return dict(x=x, w=w, y=torch.empty_like(x), rstd=torch.empty(shape["M"], device=device, dtype=torch.float32),
                **sizes(shape), eps=EPS, BLOCK_N=next_pow2(shape["N"]))


def fwd_reference(args):
    r, xhat = rms(args["x"].double(), args["eps"])
    return {"y": xhat * args["w"].double(), "rstd": r}


def fwd_baseline(args):
    return torch.nn.functional.rms_norm(args["x"], (args["N"],), args["w"], args["eps"])


def add_args(shape, device, dtype=None, seed=0):
    gen, x, w = norm_inputs(shape, device, dtype, seed)
    residual = randn(x.shape, gen, device, x.dtype)
    return dict(x=x, residual=residual, w=w, y=torch.empty_like(x), residual_out=torch.empty_like(x),
                **sizes(shape), eps=EPS, BLOCK_N=next_pow2(shape["N"]))


def add_reference(args):
    h = args["x"].double() + args["residual"].double()
    return {"y": rms(h, args["eps"])[1] * args["w"].double(), "residual_out": h}


def add_baseline(args):
    h = args["x"] + args["residual"]
    return torch.nn.functional.rms_norm(h, (args["N"],), args["w"], args["eps"]), h


def bwd_args(shape, device, dtype=None, seed=0):
    gen, x, w = norm_inputs(shape, device, dtype, seed)
    dy = randn(x.shape, gen, device, x.dtype)
    r = rms(x.float(), EPS)[0]
    return dict(dy=dy, x=x, w=w, rstd=r, dx=torch.empty_like(x),
                dw=torch.empty(shape["N"], device=device, dtype=torch.float32), **sizes(shape),
                BLOCK_N=next_pow2(shape["N"]))


def bwd_math(args, dtype) -> dict:
    dy, x, w, r = (args[k].to(dtype) for k in ("dy", "x", "w", "rstd"))
    xhat, wdy = x * r[:, None], w * dy
    c = (xhat * wdy).mean(1, keepdim=True)
    return {"dx": (wdy - xhat * c) * r[:, None], "dw": (dy * xhat).sum(0)}


def fwd_flops(s):
    return 4.0 * s["M"] * s["N"]  # x², the row sum, · rstd, · w


def fwd_bytes(s):
    return 2.0 * E * s["M"] * s["N"] + E * s["N"] + 4 * s["M"]  # x, y; w; rstd (fp32)


def add_flops(s):
    return 5.0 * s["M"] * s["N"]  # the add, then the RMSNorm's four


def add_bytes(s):
    return 4.0 * E * s["M"] * s["N"] + E * s["N"]  # x, residual, y, residual_out; w


def bwd_flops(s):
    return 9.0 * s["M"] * s["N"]  # x̂, w·dy, x̂·w·dy and its sum, x̂·c, the difference, · rstd, dy·x̂ into dw


def bwd_bytes(s):
    return 3.0 * E * s["M"] * s["N"] + E * s["N"] + 4 * s["M"] + 4 * s["N"]  # dy, x, dx; w; rstd; dw (fp32)


KEY = ("M", "N")
RMSNORM_FWD = SuiteKernel(
    name="rmsnorm_fwd", fn=rmsnorm_fwd_kernel, configs=FWD_CONFIGS, shapes=NORM_SHAPES, small_shape=NORM_SMALL,
    make_args=fwd_args, grid=row_grid, reference=fwd_reference, outputs=("y", "rstd"), key=KEY,
    flops=fwd_flops, bytes=fwd_bytes, kind="memory", source=FWD_SOURCE, baseline=fwd_baseline)
ADD_RMSNORM = SuiteKernel(
    name="add_rmsnorm", fn=add_rmsnorm_kernel, configs=FWD_CONFIGS, shapes=NORM_SHAPES, small_shape=NORM_SMALL,
    make_args=add_args, grid=row_grid, reference=add_reference, outputs=("y", "residual_out"), key=KEY,
    flops=add_flops, bytes=add_bytes, kind="memory", source="vLLM fused_add_rms_norm; " + FWD_SOURCE,
    baseline=add_baseline)
RMSNORM_BWD = SuiteKernel(
    name="rmsnorm_bwd", fn=rmsnorm_bwd_kernel, configs=BWD_CONFIGS, shapes=NORM_SHAPES, small_shape=NORM_SMALL,
    make_args=bwd_args, grid=program_grid, reference=lambda a: bwd_math(a, torch.float64), outputs=("dx", "dw"),
    key=KEY, flops=bwd_flops, bytes=bwd_bytes, kind="memory", source=BWD_SOURCE,
    baseline=lambda a: bwd_math(a, torch.float32), reset=("dw",))
