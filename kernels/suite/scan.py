"""Inclusive prefix sum along rows in chunks with a carry (tl.cumsum), in the form of fla's cumsum kernels.

Each program scans BLOCK_M rows, BLOCK_N columns a step, adding the running total of the earlier chunks (fla's
`chunk_local_cumsum` and Mamba's gate cumsums scan a [chunk] tile with tl.cumsum the same way); the sums are fp32.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rooftune.kernels.lazy import torch
from rooftune.kernels.suite.record import SuiteKernel, configs, dtype_or_default, fitting, generator, randn
from rooftune.kernels.suite.rmsnorm import E

# rows × sequence (per head gate and decay cumsums over 4K-128K tokens): 32 to 256 MB of bf16 in, twice that out
SHAPES = ({"M": 4096, "N": 4096}, {"M": 1024, "N": 32768}, {"M": 65536, "N": 512}, {"M": 8192, "N": 8192},
          {"M": 256, "N": 131072}, {"M": 16384, "N": 2048})


@triton.jit
def cumsum_kernel(x, y, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    base = rows[:, None].to(tl.int64) * N
    carry = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = (rows < M)[:, None] & (cols < N)[None, :]
        v = tl.load(x + base + cols[None, :], mask=mask, other=0.0).to(tl.float32)   # [BLOCK_M, BLOCK_N]
        tl.store(y + base + cols[None, :], tl.cumsum(v, axis=1) + carry[:, None], mask=mask)
        carry += tl.sum(v, axis=1)


def make_args(shape, device, dtype=None, seed=0):
    x = randn((shape["M"], shape["N"]), generator(device, seed), device, dtype_or_default(dtype))
    return dict(x=x, y=torch.empty(x.shape, device=device, dtype=torch.float32), **shape)


def grid(args: dict, meta: dict) -> tuple:
    return (triton.cdiv(args["M"], meta["BLOCK_M"]),)


SCAN = SuiteKernel(
    name="scan", fn=cumsum_kernel,
    configs=fitting(configs(BLOCK_M=(1, 2, 4, 8), BLOCK_N=(256, 512, 1024, 2048, 4096), num_warps=(2, 4, 8)),
                    lambda m: m["BLOCK_M"] * m["BLOCK_N"]),
    shapes=SHAPES, small_shape={"M": 7, "N": 1300}, make_args=make_args, grid=grid,
    reference=lambda a: {"y": torch.cumsum(a["x"].double(), dim=1)}, outputs=("y",), key=("M", "N"),
    flops=lambda s: 2.0 * s["M"] * s["N"],  # the scan's add and the carry's
    bytes=lambda s: (E + 4.0) * s["M"] * s["N"], kind="memory",  # x; y (fp32)
    source="fla chunk_local_cumsum / Mamba gate cumsum (tl.cumsum over a tile, carried across chunks)",
    baseline=lambda a: torch.cumsum(a["x"], dim=1, dtype=torch.float32))
