"""The published causal-attention search space and its legality rules against a hardware profile."""

from __future__ import annotations

import numpy as np

from rooftune.candidates.shapes import DTYPE_BYTES, AttentionShape
from rooftune.candidates.space import SearchSpace, next_pow2
from rooftune.hwprofiles import HardwareProfile

REGS_OVERHEAD_PER_THREAD = 32  # see candidates/gemm_space.py
ROWS_PER_WARP = 16  # a warp's share of the query block in the matrix-unit layout

# ORDER: how programs visit (batch·head, query block). Bit 0: heaviest (last) query block first,
# which shortens the causal tail. Bit 1: batch·head varies fastest, so consecutive programs share
# a query block position across heads instead of sharing one head's K and V.
ORDERS = {0: "query blocks first-to-last, per head", 1: "query blocks last-to-first, per head",
          2: "heads fastest, query blocks first-to-last", 3: "heads fastest, query blocks last-to-first"}


# TMA: loads and the output store through tensor descriptors (the copy engine) instead of pointer
# tiles. It needs compute capability 9.0 and costs a little shared memory: the copies' barriers and
# the 1,024-byte alignment of swizzled tiles (32 to 1,024 bytes in the Triton 3.6 sm_90 builds seen).
TMA_MIN_CAPABILITY = (9, 0)
TMA_BARRIER_BYTES = 1024


def attention_smem_bytes(c: dict[str, np.ndarray], head_dim: int, elem_bytes: int) -> np.ndarray:
    """Q tile once plus K and V tiles per stage: (BLOCK_M + 2·num_stages·BLOCK_N) · head_dim · bytes,
    plus at most TMA_BARRIER_BYTES with TMA."""
    tiles = (c["BLOCK_M"] + 2 * c["num_stages"] * c["BLOCK_N"]) * head_dim * elem_bytes
    return tiles + TMA_BARRIER_BYTES * c.get("TMA", 0)


def attention_regs_per_thread(c: dict[str, np.ndarray], head_dim: int) -> np.ndarray:
    """fp32 output accumulator (BLOCK_M·head_dim) and score tile (BLOCK_M·BLOCK_N) per thread, plus overhead."""
    return (c["BLOCK_M"] * head_dim + c["BLOCK_M"] * c["BLOCK_N"]) // (32 * c["num_warps"]) + REGS_OVERHEAD_PER_THREAD


def attention_legality(shape: AttentionShape, c: dict[str, np.ndarray], profile: HardwareProfile) -> dict[str, np.ndarray]:
    bm, bn, warps = c["BLOCK_M"], c["BLOCK_N"], c["num_warps"]
    regs = attention_regs_per_thread(c, shape.head_dim)
    elem = DTYPE_BYTES[shape.dtype]
    return {
        "shared memory over the per-block limit":
            attention_smem_bytes(c, shape.head_dim, elem) > profile.smem_per_block_bytes,
        "registers over the per-thread limit": (regs > profile.regs_per_thread_max)
        | (regs * 32 * warps > profile.regs_per_sm),
        "too many warps for the query block": bm < ROWS_PER_WARP * warps,
        "BLOCK_N does not divide BLOCK_M (causal diagonal)": (bm % bn) != 0,
        "BLOCK_M larger than seq needs": (bm > 16) & (bm > next_pow2(shape.seq)),
        "BLOCK_N larger than seq needs": (bn > 16) & (bn > next_pow2(shape.seq)),
        "TMA needs compute capability 9.0": (c["TMA"] == 1) & (tuple(profile.compute_capability) < TMA_MIN_CAPABILITY),
    }


ATTENTION_SPACE = SearchSpace(
    kernel="attention",
    grid=(
        ("BLOCK_M", (32, 64, 128, 256)),
        ("BLOCK_N", (16, 32, 64, 128)),
        ("ORDER", tuple(ORDERS)),
        ("TMA", (0, 1)),
        ("num_warps", (4, 8)),
        ("num_stages", (1, 2, 3, 4, 5)),
    ),
    legality=attention_legality,
    rules_version="attention-rules-2",
)
