"""The published fused-MoE search space (vLLM's tuning grid, in vLLM's parameter names) and its legality
rules against a hardware profile.

The grid is vLLM's `benchmarks/kernels/benchmark_moe.py` grid for CUDA: BLOCK_SIZE_M {16, 32, 64, 128, 256}
× BLOCK_SIZE_N {32, 64, 128, 256} × BLOCK_SIZE_K {64, 128, 256} × GROUP_SIZE_M {1, 16, 32, 64} × num_warps
{4, 8} × num_stages {2, 3, 4, 5} = 1,920 configs, so every config of a vLLM table is a point of this space
and a table rooftune writes is one vLLM reads. Each rule drops only configs that cannot run or cannot be the
fastest (each says why); tests/candidates/test_moe_space.py holds them to that against vLLM's own H200 tables.
"""

from __future__ import annotations

import numpy as np

from rooftune.candidates.attention_space import TMA_MIN_CAPABILITY
from rooftune.candidates.config import Config
from rooftune.candidates.gemm_space import gemm_regs_per_thread, gemm_smem_bytes
from rooftune.candidates.routing import expert_rows, row_tiles_bound
from rooftune.candidates.shapes import DTYPE_BYTES, MOE_MIN_BLOCK_M, MOE_MIN_BLOCK_N, MoeShape
from rooftune.candidates.space import SearchSpace, cdiv, next_pow2, thread_limits
from rooftune.hwprofiles import HardwareProfile

BLOCK_SIZES_M = (MOE_MIN_BLOCK_M, 32, 64, 128, 256)
BLOCK_SIZES_N = (MOE_MIN_BLOCK_N, 64, 128, 256)
BLOCK_SIZES_K = (64, 128, 256)
GROUP_SIZES_M = (1, 16, 32, 64)
# The token counts vLLM's tuner (benchmarks/kernels/benchmark_moe.py, its default batch sizes) writes a table for.
VLLM_TOKENS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
# Tiles of up to this many rows stay legal however few rows an expert has. On compute capability 9.0 a
# 64-row tile feeds wgmma, where 16 and 32 rows fall back to mma.sync (roofline/lowering.py), so 64 rows
# can win over 16 with most of them padding; and vLLM's tuner picked a tile wider than an expert's rows
# (Mixtral on the H200 at M = 2: 32 rows, at most 2 of them routed). Kept on every GPU: a conservative floor.
KEEP_BLOCK_M = 64


def moe_smem_bytes(c: dict[str, np.ndarray], elem_bytes: int, hopper: bool) -> np.ndarray:
    """The GEMM's pipelined operand buffers (`gemm_smem_bytes` of the pointer path): num_stages × (BLOCK_SIZE_M
    + BLOCK_SIZE_N) × BLOCK_SIZE_K × bytes per element, num_stages − 1 buffers on sm_90 where BLOCK_SIZE_M < 64.
    The gathered A rows load along K like a GEMM's A (cp.async into the same buffers); tests/kernels/
    test_moe_sm90.py compiles the kernel for sm_90 and holds the estimate to what Triton allocates."""
    cols = {"BLOCK_M": c["BLOCK_SIZE_M"], "BLOCK_N": c["BLOCK_SIZE_N"], "BLOCK_K": c["BLOCK_SIZE_K"],
            "num_warps": c["num_warps"], "num_stages": c["num_stages"]}
    return gemm_smem_bytes(cols, elem_bytes, hopper)


def moe_regs_per_thread(c: dict[str, np.ndarray]) -> np.ndarray:
    """fp32 accumulator registers per thread, BLOCK_SIZE_M·BLOCK_SIZE_N / (32·num_warps), plus the GEMM's overhead."""
    return gemm_regs_per_thread({"BLOCK_M": c["BLOCK_SIZE_M"], "BLOCK_N": c["BLOCK_SIZE_N"],
                                 "num_warps": c["num_warps"]})


def group_floor(tiles_m) -> np.ndarray:
    """The smallest GROUP_SIZES_M value >= the tile rows (a huge number where none is): every GROUP_SIZE_M of
    at least the tile rows puts all of them in one group, so those values order the programs alike."""
    tiles = np.asarray(tiles_m)[..., None]
    sizes = np.asarray(GROUP_SIZES_M)
    return np.where(sizes >= tiles, sizes, np.iinfo(np.int64).max).min(axis=-1)


def moe_legality(shape: MoeShape, c: dict[str, np.ndarray], profile: HardwareProfile) -> dict[str, np.ndarray]:
    bm, bn, bk, group = c["BLOCK_SIZE_M"], c["BLOCK_SIZE_N"], c["BLOCK_SIZE_K"], c["GROUP_SIZE_M"]
    hopper = tuple(profile.compute_capability) >= TMA_MIN_CAPABILITY
    regs = moe_regs_per_thread(c)
    # The launch's grid (kernels/moe.py): tile rows over the padded-rows bound, tile columns over N.
    tiles_m, tiles_n = row_tiles_bound(shape, bm), cdiv(shape.n, bn)
    most_rows = int(expert_rows(shape).max())
    return {
        # Cannot launch: Triton raises OutOfResources (the estimate is what Triton allocates: test_moe_sm90).
        "shared memory over the per-block limit":
            moe_smem_bytes(c, DTYPE_BYTES[shape.dtype], hopper) > profile.smem_per_block_bytes,
        # Spills the accumulator; on the H200 GEMM probe no such config reached half the best one's speed.
        **thread_limits(regs, c["num_warps"], profile),
        # Once BLOCK_SIZE_M holds the most rows any expert has, every expert is one tile row whatever the tile:
        # the grid and the weight traffic stay, and a taller tile adds only padded rows (their MMAs, registers
        # and buffers), never speed. The rows are this shape's routing (candidates/routing.py).
        f"BLOCK_SIZE_M over the most rows an expert has (and over {KEEP_BLOCK_M})":
            (bm > KEEP_BLOCK_M) & (bm > next_pow2(most_rows)),
        # One tile column (or K block) either way; a wider one adds only masked columns.
        "BLOCK_SIZE_N larger than N needs": (bn > MOE_MIN_BLOCK_N) & (bn > next_pow2(shape.n)),
        "BLOCK_SIZE_K larger than K needs": (bk > BLOCK_SIZES_K[0]) & (bk > next_pow2(shape.k)),
        # The grouped order (kernels/moe.py `_grouped_tile`) is the plain one for every GROUP_SIZE_M when the grid
        # has one tile column or one tile row: the same programs in the same order as GROUP_SIZE_M = 1.
        "GROUP_SIZE_M without effect (one tile row or column)": (group > 1) & ((tiles_n == 1) | (tiles_m == 1)),
        # GROUP_SIZE_M is a run-time integer (one binary for all): two values that both cover every tile row
        # run the same program order, so the larger is a twin of the smaller, which stays.
        "GROUP_SIZE_M a twin of a smaller one (both cover every tile row)": group > group_floor(tiles_m),
    }


def group_twin(shape: MoeShape, config: Config) -> Config:
    """`config` with the GROUP_SIZE_M that the legality keeps for its program order: 1 where the grid has one
    tile row or column (every value orders alike), the smallest GROUP_SIZES_M value >= the tile rows where
    `config`'s is larger (both put every tile row in one group), else its own. The two GROUP_SIZE_M rules drop
    only configs whose twin this is: the same binary running the same programs in the same order (a vLLM table
    may name either twin; replay times it as the one the space holds)."""
    bm, group = config["BLOCK_SIZE_M"], config["GROUP_SIZE_M"]
    tiles_m = int(row_tiles_bound(shape, bm))
    if group > 1 and (tiles_m == 1 or -(-shape.n // config["BLOCK_SIZE_N"]) == 1):
        group = 1
    group = min(group, int(group_floor(tiles_m)))
    params = tuple((name, group if name == "GROUP_SIZE_M" else value) for name, value in config.params)
    return Config(params, config.num_warps, config.num_stages)


MOE_SPACE = SearchSpace(
    kernel="moe",
    grid=(
        ("BLOCK_SIZE_M", BLOCK_SIZES_M),
        ("BLOCK_SIZE_N", BLOCK_SIZES_N),
        ("BLOCK_SIZE_K", BLOCK_SIZES_K),
        ("GROUP_SIZE_M", GROUP_SIZES_M),
        ("num_warps", (4, 8)),
        ("num_stages", (2, 3, 4, 5)),
    ),
    legality=moe_legality,
    rules_version="moe-rules-1",
)
