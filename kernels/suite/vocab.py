"""Kernels over a vocabulary's logits in chunks: Liger's cross-entropy (loss, log-sum-exp, gradient) and greedy argmax.

Both walk a row in BLOCK_N chunks (one program per row, Liger's form): the cross-entropy keeps an online max and
sum for the log-sum-exp, then writes the gradient of the summed loss, softmax − one-hot, in a second pass (Liger
writes it over the logits; here into `dlogits`, so that every launch reads the same inputs); the argmax keeps the
running maximum and its first index, as torch.argmax breaks ties.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, generator, randn
from rooftune.kernels.suite.rmsnorm import E

IGNORE_INDEX = -100
CHUNK_CONFIGS = configs(BLOCK_N=(1024, 2048, 4096, 8192, 16384, 32768), num_warps=(4, 8, 16, 32))
# tokens × vocabulary (Llama-2 32000, GPT-NeoX 50304, Llama-3 128256, Qwen2 151936): 0.26 to 1.1 GB of bf16 logits
CE_SHAPES = ({"M": 4096, "N": 32000}, {"M": 8192, "N": 32000}, {"M": 2048, "N": 128256}, {"M": 4096, "N": 128256},
             {"M": 2048, "N": 151936}, {"M": 8192, "N": 50304})
# sampled rows × vocabulary (Gemma's 256000 too): 0.13 to 0.6 GB
ARGMAX_SHAPES = ({"M": 4096, "N": 32000}, {"M": 512, "N": 128256}, {"M": 1024, "N": 128256},
                 {"M": 2048, "N": 151936}, {"M": 256, "N": 256000}, {"M": 8192, "N": 32000})


@triton.jit
def cross_entropy_kernel(logits, target, loss, lse, dlogits, M, N, stride, ignore_index, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = logits + row * stride
    t = tl.load(target + row)
    m = float("-inf")
    d = 0.0
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    row_lse = m + tl.log(d)
    keep = t != ignore_index
    x_t = tl.load(x_row + tl.maximum(t, 0)).to(tl.float32)
    tl.store(loss + row, tl.where(keep, row_lse - x_t, 0.0))
    tl.store(lse + row, row_lse)
    g_row = dlogits + row * stride
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        g = tl.exp(x - row_lse) - tl.where(cols == t, 1.0, 0.0)
        tl.store(g_row + cols, tl.where(keep, g, 0.0).to(dlogits.dtype.element_ty), mask=cols < N)


@triton.jit
def argmax_kernel(logits, index, value, M, N, stride, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = logits + row * stride
    best = float("-inf")
    best_i = 0
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(x_row + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        block_max, block_i = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True)
        better = block_max > best  # strictly: an equal later maximum keeps the first index
        best_i = tl.where(better, start + block_i, best_i)
        best = tl.where(better, block_max, best)
    tl.store(index + row, best_i.to(tl.int64))
    tl.store(value + row, best)


def row_grid(args: dict, meta: dict) -> tuple:
    return (args["M"],)


def logits(shape, device, dtype, seed):
    """(generator, logits [M, N] with a trained model's spread of a few units)."""
    gen = generator(device, seed)
    return gen, randn((shape["M"], shape["N"]), gen, device, dtype_or_default(dtype), 3.0)


def ce_args(shape, device, dtype=None, seed=0):
    gen, x = logits(shape, device, dtype, seed)
    target = torch.randint(0, shape["N"], (shape["M"],), generator=gen, device=device)
    ignored = torch.rand((shape["M"],), generator=gen, device=device) < 0.05  # padding, prompt tokens
    row = torch.empty(shape["M"], device=device, dtype=torch.float32)
    return dict(logits=x, target=target.masked_fill(ignored, IGNORE_INDEX), loss=row, lse=torch.empty_like(row),
                dlogits=torch.empty_like(x), M=shape["M"], N=shape["N"], stride=shape["N"], ignore_index=IGNORE_INDEX)


def ce_math(args, dtype) -> dict:
    """Loss per row (0 where ignored), log-sum-exp, and the gradient of the summed loss, in `dtype`."""
    x, t = args["logits"].to(dtype), args["target"]
    keep = (t != args["ignore_index"]).to(dtype)
    safe = t.clamp(min=0)[:, None]
    lse = torch.logsumexp(x, dim=1)
    grad = torch.exp(x - lse[:, None])
    grad.scatter_add_(1, safe, -torch.ones_like(safe, dtype=dtype))
    return {"loss": (lse - x.gather(1, safe)[:, 0]) * keep, "lse": lse, "dlogits": grad * keep[:, None]}


def argmax_args(shape, device, dtype=None, seed=0):
    _, x = logits(shape, device, dtype, seed)
    return dict(logits=x, index=torch.empty(shape["M"], device=device, dtype=torch.int64),
                value=torch.empty(shape["M"], device=device, dtype=torch.float32), M=shape["M"], N=shape["N"],
                stride=shape["N"])


def argmax_math(args, dtype) -> dict:
    value, index = args["logits"].to(dtype).max(dim=1)  # torch: the first index of the maximum
    return {"index": index, "value": value}


CROSS_ENTROPY = SuiteKernel(
    name="cross_entropy", fn=cross_entropy_kernel, configs=CHUNK_CONFIGS, shapes=CE_SHAPES,
    small_shape={"M": 9, "N": 3000}, make_args=ce_args, grid=row_grid, reference=lambda a: ce_math(a, torch.float64),
    outputs=("loss", "lse", "dlogits"), key=("M", "N"),
    flops=lambda s: 9.0 * s["M"] * s["N"],  # online max and sum (5 per logit), then exp, −, one-hot, mask
    bytes=lambda s: 2.0 * E * s["M"] * s["N"] + 8 * s["M"] + 8 * s["M"],  # logits, dlogits; target; loss, lse
    kind="memory", source="Liger cross_entropy (online log-sum-exp over vocabulary chunks, gradient in a second pass)",
    baseline=lambda a: ce_math(a, torch.float32))
ARGMAX = SuiteKernel(
    name="argmax", fn=argmax_kernel, configs=CHUNK_CONFIGS, shapes=ARGMAX_SHAPES, small_shape={"M": 7, "N": 3000},
    make_args=argmax_args, grid=row_grid, reference=lambda a: argmax_math(a, torch.float64),
    outputs=("index", "value"), key=("M", "N"), flops=lambda s: 1.0 * s["M"] * s["N"],  # one comparison a logit
    bytes=lambda s: E * s["M"] * s["N"] + 12 * s["M"], kind="memory",
    source="greedy sampling (vLLM/SGLang argmax over logits), chunked as Liger's vocabulary kernels",
    baseline=lambda a: torch.argmax(a["logits"], dim=1))
