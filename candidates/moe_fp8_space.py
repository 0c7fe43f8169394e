"""The FP8 fused-MoE search space (vLLM's grid, as `benchmark_moe.py --dtype fp8_w8a8` tunes it) and its legality.

The grid is the bf16 MoE space's (candidates/moe_space.py: vLLM's 1,920 configs), so every entry of a vLLM FP8
table is a point of it. Legality is the MoE space's rules on one-byte operands (the shared-memory rule counts 1
byte per element of the A and W buffers, so twice the stages fit; the accumulator's registers are fp32 as in
bf16), plus, for block-quantized shapes (128×128 weight blocks, 1×128 activation groups), vLLM's own rule:
`benchmark_moe.py` keeps only tiles whose BLOCK_SIZE_N is a multiple of the quant block's N and BLOCK_SIZE_K a
multiple of its K, since a program reads one weight-scale column per BLOCK_SIZE_N/128 and one activation scale
per row and K block; and `invoke_fused_moe_kernel` launches BLOCK_SIZE_K = min(BLOCK_SIZE_K, 128), so 256 runs
as 128 (a twin, dropped as the GROUP_SIZE_M twins are; `block_twin` maps a table's entry onto the kept one).
"""

from __future__ import annotations

import numpy as np

from rooftune.candidates.config import Config
from rooftune.candidates.moe_space import MOE_SPACE, group_twin, moe_legality
from rooftune.candidates.shapes import FP8_BLOCK, MoeFp8Shape
from rooftune.candidates.space import SearchSpace
from rooftune.hwprofiles import HardwareProfile


def moe_fp8_legality(shape: MoeFp8Shape, c: dict[str, np.ndarray], profile: HardwareProfile) -> dict[str, np.ndarray]:
    """The MoE rules on FP8 operands (`moe_legality` reads the shape's 1-byte dtype), and for 'block' shapes the
    quant block's: BLOCK_SIZE_N and BLOCK_SIZE_K multiples of (128, 128), BLOCK_SIZE_K above 128 a twin of 128."""
    reasons = moe_legality(shape, c, profile)
    none = np.zeros(len(c["BLOCK_SIZE_N"]), dtype=bool)
    block = shape.block_shape is not None
    group_n, group_k = FP8_BLOCK
    reasons["BLOCK_SIZE_N or BLOCK_SIZE_K not a multiple of the quant block (vLLM's benchmark_moe rule)"] = (
        ((c["BLOCK_SIZE_N"] % group_n != 0) | (c["BLOCK_SIZE_K"] % group_k != 0)) if block else none)
    reasons["BLOCK_SIZE_K over the quant block's K (vLLM launches it as 128: a twin)"] = (
        (c["BLOCK_SIZE_K"] > group_k) if block else none)
    return reasons


def block_twin(shape: MoeFp8Shape, config: Config) -> Config:
    """`config` as vLLM launches it for `shape`: BLOCK_SIZE_K capped at the quant block's K for block scales
    (`invoke_fused_moe_kernel`'s min(BLOCK_SIZE_K, block_shape)); unchanged for per-tensor scales."""
    if shape.block_shape is None or config["BLOCK_SIZE_K"] <= FP8_BLOCK[1]:
        return config
    params = tuple((n, FP8_BLOCK[1] if n == "BLOCK_SIZE_K" else v) for n, v in config.params)
    return Config(params, config.num_warps, config.num_stages)


def fp8_twin(shape: MoeFp8Shape, config: Config) -> Config:
    """The config the space holds for `config` on `shape`: its block twin (`block_twin`), then that one's GROUP_SIZE_M
    twin (candidates/moe_space.py `group_twin`): what a vLLM table's entry runs as."""
    return group_twin(shape, block_twin(shape, config))


MOE_FP8_SPACE = SearchSpace(kernel="moe-fp8", grid=MOE_SPACE.grid, legality=moe_fp8_legality,
                            rules_version="moe-fp8-rules-1")
