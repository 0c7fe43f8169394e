"""The published causal-attention search space and its legality rules against a hardware profile."""

from __future__ import annotations

import numpy as np

from rooftune.candidates.shapes import DTYPE_BYTES, AttentionShape
from rooftune.candidates.space import SearchSpace, next_pow2, thread_limits
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

# Measured on the H200 (datasets/h200/attention/README.md, space attention-rules-2: 14 training shapes
# swept over 504 configs and 10 outside shapes over 64): the space now holds what won there.
# - Pointer loads won on 1 of 24 shapes, by 0.3%: where TMA is available they are left out, so a GPU
#   of compute capability 9.0 sweeps TMA configs and an older one pointer configs.
# - BLOCK_M 32 needs at most 2 warps and BLOCK_M 256 never came within 1% of the best: 64 and 128.
# - BLOCK_N 16, 5 stages and the light-first ORDERs (0, 2) never won; ORDER 1 or 3 came within 0.5%
#   of the best on every shape. Both heavy-first orders stay: either can be 30% ahead of the other.
# The smallest BLOCK_M and BLOCK_N stay legal at any sequence length (the loads and stores are masked,
# or bounded by the descriptor), so every shape down to seq 1 has configs.
BLOCK_M_MIN, BLOCK_N_MIN = 64, 32


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
    has_tma = tuple(profile.compute_capability) >= TMA_MIN_CAPABILITY
    return {
        "shared memory over the per-block limit":
            attention_smem_bytes(c, shape.head_dim, elem) > profile.smem_per_block_bytes,
        **thread_limits(regs, warps, profile),
        "too many warps for the query block": bm < ROWS_PER_WARP * warps,
        "BLOCK_N does not divide BLOCK_M (causal diagonal)": (bm % bn) != 0,
        "BLOCK_M larger than seq needs": (bm > BLOCK_M_MIN) & (bm > next_pow2(shape.seq)),
        "BLOCK_N larger than seq needs": (bn > BLOCK_N_MIN) & (bn > next_pow2(shape.seq)),
        "TMA needs compute capability 9.0": (c["TMA"] == 1) & (not has_tma),
        "pointer loads where TMA is available": (c["TMA"] == 0) & has_tma,
    }


ATTENTION_SPACE = SearchSpace(
    kernel="attention",
    grid=(
        ("BLOCK_M", (BLOCK_M_MIN, 128)),
        ("BLOCK_N", (BLOCK_N_MIN, 64, 128)),
        ("ORDER", (1, 3)),
        ("TMA", (0, 1)),
        ("num_warps", (4, 8)),
        ("num_stages", (1, 2, 3, 4)),
    ),
    legality=attention_legality,
    rules_version="attention-rules-3",
)
