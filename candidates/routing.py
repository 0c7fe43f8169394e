"""A fused-MoE shape's routing (which experts each token goes to, with what weight, drawn from its seed) and
what sorting the routed rows by expert and padding each expert's rows to BLOCK_SIZE_M makes of it.

The draw (the distribution the datasets are timed on): every token picks `topk` distinct experts uniformly
at random (the top-k of i.i.d. uniform gate scores, as vLLM's tuner routes random gate logits), and its
weights are those k scores renormalized to sum to 1. NumPy's PCG64 seeded by the SeedSequence of (seed,
experts, topk, tokens), through `Generator.random` (float64 from the top 53 bits): the same shape gives the
same routing on every machine, and a layer's two GEMMs (same experts, topk, tokens and seed) share it.
NumPy only, so legality and the cost model read the exact rows per expert without torch.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from rooftune.candidates.shapes import MoeShape


@lru_cache(maxsize=64)
def _draw(experts: int, topk: int, tokens: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, experts, topk, tokens])
    scores = rng.random((tokens, experts))
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :topk]                    # [tokens, topk]
    chosen = np.take_along_axis(scores, ids, axis=1)
    weights = chosen / chosen.sum(axis=1, keepdims=True)
    ids, weights = ids.astype(np.int32), weights.astype(np.float32)
    ids.flags.writeable = weights.flags.writeable = False  # cached: shared by every caller
    return ids, weights


def routing(shape: MoeShape) -> tuple[np.ndarray, np.ndarray]:
    """(expert ids [tokens, topk] int32, routing weights [tokens, topk] float32) of `shape` (read-only)."""
    return _draw(shape.experts, shape.topk, shape.tokens, shape.seed)


def expert_rows(shape: MoeShape) -> np.ndarray:
    """Routed rows per expert [experts] (int64): how many tokens chose each expert; they sum to tokens·topk."""
    return np.bincount(routing(shape)[0].ravel(), minlength=shape.experts).astype(np.int64)


def padded_rows(counts: np.ndarray, block_m) -> np.ndarray:
    """Σ_e ceil(counts[e] / BLOCK_SIZE_M) · BLOCK_SIZE_M: the rows the GEMM computes once each expert's rows
    are padded to whole tiles (an empty expert gets none), elementwise over an array of `block_m`."""
    bm = np.asarray(block_m, dtype=np.int64)
    return (-(-np.asarray(counts, dtype=np.int64)[:, None] // bm.reshape(1, -1)) * bm.reshape(1, -1)).sum(axis=0) \
        .reshape(bm.shape)


def padded_rows_bound(rows: int, experts: int, block_m):
    """The padded rows' upper bound for any routing: rows + min(experts, rows) · (BLOCK_SIZE_M − 1), since at
    most min(experts, rows) experts get rows and each pads less than one tile. The launch sizes its grid
    and the sorted row list by it (kernels/moe.py), so it needs no device-to-host copy of the real count; vLLM's
    `moe_align_block_size` sizes its own the same (rows + experts · (BLOCK_SIZE_M − 1), or rows · BLOCK_SIZE_M
    where there are fewer rows than experts)."""
    return rows + min(experts, rows) * (np.asarray(block_m, dtype=np.int64) - 1)


def row_tiles_bound(shape: MoeShape, block_m):
    """Programs along M in the launch's grid: ceil(padded_rows_bound / BLOCK_SIZE_M); programs past the real
    padded rows return at once."""
    bm = np.asarray(block_m, dtype=np.int64)
    return -(-padded_rows_bound(shape.rows, shape.experts, bm) // bm)
