"""Row softmax in the Triton tutorial's fused-softmax form: whole rows in one block, each program walking its rows."""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, generator, next_pow2, randn
from rooftune.kernels.suite.rmsnorm import E, program_grid

# Attention-score, router and 32K-vocabulary rows: 64 MB (16384 × 2048) to 256 MB of bf16 in, as much out.
SHAPES = ({"M": 16384, "N": 4096}, {"M": 8192, "N": 8192}, {"M": 4096, "N": 16384}, {"M": 32768, "N": 2048},
          {"M": 4096, "N": 32000}, {"M": 65536, "N": 1024})


@triton.jit
def softmax_kernel(x, y, M, N, stride, BLOCK_N: tl.constexpr, ROWS_PER_PROGRAM: tl.constexpr):
    # The tutorial's loop over rows (`tl.range(..., num_stages=...)`), here a contiguous run of rows per program;
    # BLOCK_N = next_power_of_2(N) holds a whole row.
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    row0 = tl.program_id(0) * ROWS_PER_PROGRAM
    off = row0.to(tl.int64) * stride
    for _ in tl.range(row0, tl.minimum(row0 + ROWS_PER_PROGRAM, M)):
        v = tl.load(x + off + cols, mask=mask, other=float("-inf")).to(tl.float32)
        num = tl.exp(v - tl.max(v, axis=0))
        tl.store(y + off + cols, (num / tl.sum(num, axis=0)).to(y.dtype.element_ty), mask=mask)
        off += stride


def make_args(shape, device, dtype=None, seed=0):
    dtype = dtype_or_default(dtype)
    x = randn((shape["M"], shape["N"]), generator(device, seed), device, dtype, 2.0)
    return dict(x=x, y=torch.empty_like(x), M=shape["M"], N=shape["N"], stride=shape["N"],
                BLOCK_N=next_pow2(shape["N"]))


SOFTMAX = SuiteKernel(
    name="softmax", fn=softmax_kernel,
    configs=configs(ROWS_PER_PROGRAM=(1, 2, 4, 8, 16), num_warps=(4, 8, 16, 32), num_stages=(1, 2)),
    shapes=SHAPES, small_shape={"M": 21, "N": 300}, make_args=make_args, grid=program_grid,
    reference=lambda a: {"y": torch.softmax(a["x"].double(), dim=1)}, outputs=("y",), key=("M", "N"),
    flops=lambda s: 5.0 * s["M"] * s["N"],  # max, − max, exp, sum, divide
    bytes=lambda s: 2.0 * E * s["M"] * s["N"], kind="memory",
    source="Triton tutorial 02-fused-softmax (rows per program, num_stages), Liger softmax single-block",
    baseline=lambda a: torch.softmax(a["x"], dim=1))
