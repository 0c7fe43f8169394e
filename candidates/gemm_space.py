"""The published GEMM search space and its legality rules against a hardware profile."""

from __future__ import annotations

import numpy as np

from rooftune.candidates.attention_space import TMA_BARRIER_BYTES, TMA_MIN_CAPABILITY
from rooftune.candidates.shapes import DTYPE_BYTES, GemmShape
from rooftune.candidates.space import SearchSpace, cdiv, next_pow2, thread_limits
from rooftune.hwprofiles import HardwareProfile

# Registers a thread needs beside its accumulators (addresses, loop state, operand fragments).
# A rule of thumb of the space, not a fitted number: Triton GEMM kernels with small tiles use
# about 30-40 registers with no accumulator.
REGS_OVERHEAD_PER_THREAD = 32
# Fewer accumulator elements per thread than this leaves warps with nothing to do.
MIN_TILE_ELEMS_PER_THREAD = 4
# A split of K must get at least this many BLOCK_K steps, or software pipelining has nothing to overlap.
MIN_K_BLOCKS_PER_SPLIT = 2
# Tensor descriptors need 16-byte aligned row strides (the copy engine's rule).
TMA_STRIDE_BYTES = 16
# wgmma takes 64-row slices: a smaller BLOCK_M runs mma.sync (roofline/lowering.py).
WGMMA_MIN_BLOCK_M = 64
# Where M is above this (and below 64), 64-row tiles over M's rows are in the space on sm_90. Measured on
# the H200's training shapes (docs/history.md: v5/compare.py wgmma, each within one sweep): with
# M of 17 to 32 one was the fastest config on 3 of 17 shapes (32x768x768 by 4.4%; 1.003 in geometric mean);
# with M of 1 to 16 on none of 37, so 16 or fewer rows keep their 16-row tiles.
WGMMA_PAD_MIN_M = 16
# PERSISTENT = 1 (kernels/gemm.py `_gemm_tma_persistent_kernel`): the flattened tile loop keeps the next
# tile's operand buffers live while the epilogue goes through shared memory, so the epilogue's buffer comes
# on top. Where C's rows are 16-byte aligned the kernel stores C through a tensor descriptor in two halves
# along N: one half tile, BLOCK_M·BLOCK_N/2 elements (C_TMA, since gemm-rules-8); where the warpgroups
# split N (BLOCK_M < 16 · num_warps: 64-row tiles on 8 warps) Triton also converts the fp32 half tile's
# layout through shared memory (gemm-rules-9; compiled for sm_90: 64x256x64, 8 warps, 5 stages needs
# 253,992 bytes, the OutOfResources the v6 sweep recorded under rules 8). Elsewhere the layout conversion
# of a pointer store: at most the whole C tile (compiled for sm_90 on the CPU: tests/kernels/test_alignment.py).
FP32_BYTES = 4
# Where a persistent launch can differ from the one-tile-per-program grid: the tiles must fill at least
# this many waves of one CTA per SM (the H200 measurements of docs/history.md: v2/streamk: +1-3% with
# 2 or more waves of 128x256 tiles, within the noise on 1.7 waves) ...
PERSISTENT_MIN_WAVES = 2
# ... and tiles of at least 128x128 elements. Smaller tiles were not measured, and every persistent
# config is one more to time per multi-wave shape: this bound keeps the sweep near 8 s a shape.
PERSISTENT_MIN_TILE_ELEMS = 128 * 128
# FIXUP = 1 (kernels/gemm.py): the split of K that arrives last sums the fp32 partials inside the GEMM
# kernel, so no reduction kernel follows it. The path is chosen by M: up to FIXUP_ONLY_MAX_M split-K
# sums only in the kernel, up to FIXUP_MAX_M (decode) both ways, above it only in the reduction kernel.
# On 48 H200 training shapes with M <= 64 (docs/history.md: v3/fixup_bench.py: each shape's 12
# fastest split-K configs both ways) the fastest FIXUP config beat the fastest reduction-kernel one on
# 42, by up to 1.31x, and was the shape's fastest config on 18; the margin shrinks with M (M = 48:
# 1.008, 1.006 and 0.973 on its three shapes); on the 8 with M of 87 to 256 it was never the fastest
# (7 did not split K, 1 split through the reduction kernel; `fixup_bench.py --summary`). Space 4 had
# one path per shape (FIXUP_MAX_M alone); space 5 times both where M is 33 to 64.
FIXUP_ONLY_MAX_M = 32
FIXUP_MAX_M = 64
# BLOCK_N2 > 0 (kernels/gemm.py, space 7): a composite tile BLOCK_N + BLOCK_N2 columns wide (160, 192, 288,
# 320), which Triton's power-of-two blocks cannot make alone, run as two accumulators. Measured on 18 H200
# training shapes (docs/history.md: v6/levers/cntiles.py, each variant beside the shape's space-6 best
# configs and cuBLAS in one pass): a composite tile that turns a partial wave into a nearly full one wins,
# 256x10240x8192 at 64x320 (128 tiles on 132 SMs, where 64x256 makes 160) by 1.17x, 4096x1280x8192 at
# 128x320 by 1.13x; where the waves were already full it lost (up to 0.80x at the same tile count), 256-row
# composite tiles never won, nor did 16-column second parts or a persistent schedule. So a composite tile is
# in the space only where it fills the waves: at most COMPOSITE_MAX_WAVES waves of one CTA per SM, its
# useful share of those waves at least COMPOSITE_MIN_FILL and COMPOSITE_MIN_GAIN times the share of the
# BLOCK_N-wide tile it extends.
COMPOSITE_MAX_WAVES = 2
COMPOSITE_MIN_FILL = 0.8
COMPOSITE_MIN_GAIN = 1.15


def tile_cols(c: dict[str, np.ndarray]) -> np.ndarray:
    """A tile's columns: BLOCK_N, plus BLOCK_N2 for a composite tile (configs without the key have none)."""
    return np.asarray(c["BLOCK_N"]) + (np.asarray(c["BLOCK_N2"]) if "BLOCK_N2" in c else 0)


def wave_fill(shape: GemmShape, bm, cols, sm_count: int) -> np.ndarray:
    """The share of whole waves of one CTA per SM that a grid of `bm` x `cols` tiles spends on C's elements."""
    tiles = cdiv(shape.m, bm) * cdiv(shape.n, cols)
    return shape.m * shape.n / (cdiv(tiles, sm_count) * sm_count * bm * cols)


def c_rows_tma(row_elems, elem_bytes: int):
    """Whether C's rows, `row_elems` elements apart, are 16-byte aligned: a persistent config then stores C
    through a tensor descriptor in two halves (kernels/gemm.py C_TMA) rather than through pointers."""
    return row_elems * elem_bytes % TMA_STRIDE_BYTES == 0


def persistent_epilogue_bytes(c: dict[str, np.ndarray], elem_bytes: int, n: int | None = None) -> np.ndarray:
    """Shared memory a persistent config's epilogue holds beside the operand buffers (0 for the other
    configs). Where C's rows of `n` elements are 16-byte aligned (kernels/gemm.py stores C through a tensor
    descriptor): half the C tile, BLOCK_M · BLOCK_N / 2 · elem_bytes, plus that half in fp32 where the
    warpgroups split N (BLOCK_M < 16 · num_warps). Otherwise (n None too) the whole C tile."""
    persistent = np.asarray(c["PERSISTENT"]) if "PERSISTENT" in c else 0
    bm, warps = np.asarray(c["BLOCK_M"]), np.asarray(c["num_warps"])
    tile = bm * np.asarray(c["BLOCK_N"])
    if n is not None and c_rows_tma(n, elem_bytes):
        return persistent * (tile // 2) * (elem_bytes + np.where(bm < 16 * warps, FP32_BYTES, 0))
    return persistent * tile * elem_bytes


def gemm_smem_bytes(c: dict[str, np.ndarray], elem_bytes: int, hopper: bool = False, n: int | None = None) -> np.ndarray:
    """Pipelined operand buffers: buffers × (BLOCK_M + BLOCK_N) × BLOCK_K × bytes per element, with
    num_stages buffers, and with `hopper` (compute capability 9.0: Triton 3.6's sm_90 pipeliner)
    num_stages − 1 where BLOCK_M < 64; plus TMA_BARRIER_BYTES for a TMA config (column TMA = 1); plus
    a persistent config's epilogue buffer (`persistent_epilogue_bytes`, C rows of `n` elements).

    Checked against the H200 probe: every config above the 232,448-byte per-block limit failed
    with OutOfResources and every one below compiled (see tests/candidates).

    Buffers (compiled for sm_90 on the CPU, tests/kernels/test_alignment.py): a tile of BLOCK_M >= 64
    feeds wgmma, which still reads the consumed buffer while the next copy lands, so the pipeliner
    keeps num_stages buffers; BLOCK_M 16 or 32 falls back to mma.sync and Triton allocates
    num_stages − 1 (pointer and TMA loads alike, 4 and 8 warps). On older GPUs the formula keeps
    num_stages, an upper bound. TMA adds the copies' barriers, 8 bytes a stage.

    What Triton 3.6 allocates is max(operand buffers, the epilogue's layout conversion), the two
    never live at once:
    - an operand is multi-buffered only when its rows give cp.async >= 4 contiguous bytes (Triton's
      pipeliner, AssignLatencies.cpp: cp.async copies 4, 8 or 16 bytes); rows of 2 bytes (bf16 with
      an odd K, or an odd N for B [K, N]) are loaded through registers into one buffer. So this
      formula is an upper bound for the operand buffers in every alignment class.
    - the epilogue converts the fp32 accumulator to the store's layout through shared memory; its
      size comes from Triton's swizzle search (up to the whole BLOCK_M·BLOCK_N·4-byte tile: 262,144 B
      for 256x256 with an odd N, the OutOfResources seen on the H200). It can exceed this estimate
      but not the per-block limit for any config the register rule leaves legal (BLOCK_M·BLOCK_N
      <= 128·256, so at most 131,072 B; tests/candidates checks it). The estimate still
      undercounts those configs' real footprint, which matters for occupancy, not legality."""
    stages = c["num_stages"]
    if hopper:
        stages = np.where(np.asarray(c["BLOCK_M"]) < WGMMA_MIN_BLOCK_M, np.maximum(stages - 1, 1), stages)
    tma = np.asarray(c["TMA"]) if "TMA" in c else 0
    return (stages * (c["BLOCK_M"] + tile_cols(c)) * c["BLOCK_K"] * elem_bytes + TMA_BARRIER_BYTES * tma
            + persistent_epilogue_bytes(c, elem_bytes, n))


def gemm_tma_rows(shape: GemmShape) -> bool:
    """Whether tensor descriptors can address the shape's contiguous A [M, K] and B: row strides of
    K (and for B [K, N], N) elements that are multiples of 16 bytes; A stored [K, M] never."""
    elem = DTYPE_BYTES[shape.dtype]
    rows = (shape.k, shape.n) if shape.layout == "kn" else (shape.k,)
    return shape.a_layout == "mk" and all(r * elem % TMA_STRIDE_BYTES == 0 for r in rows)


def gemm_group_m_idle(shape: GemmShape, bm, bn):
    """True where GROUP_M cannot change anything: the grid has one tile row or one tile column, so the
    grouped order visits the tiles in the plain order (kernels/gemm.py) for every GROUP_M."""
    return (cdiv(shape.m, bm) == 1) | (cdiv(shape.n, bn) == 1)


def gemm_regs_per_thread(c: dict[str, np.ndarray]) -> np.ndarray:
    """fp32 accumulator registers per thread, BLOCK_M·(BLOCK_N + BLOCK_N2) / (32·num_warps), plus overhead."""
    return c["BLOCK_M"] * tile_cols(c) // (32 * c["num_warps"]) + REGS_OVERHEAD_PER_THREAD


def gemm_legality(shape: GemmShape, c: dict[str, np.ndarray], profile: HardwareProfile) -> dict[str, np.ndarray]:
    bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
    warps, split = c["num_warps"], c["SPLIT_K"]
    elem = DTYPE_BYTES[shape.dtype]
    hopper = tuple(profile.compute_capability) >= TMA_MIN_CAPABILITY
    tma = c["TMA"] == 1
    persistent = c["PERSISTENT"] == 1
    fixup = c["FIXUP"] == 1
    in_kernel_sum = shape.m <= FIXUP_MAX_M
    only_in_kernel_sum = shape.m <= FIXUP_ONLY_MAX_M
    # wgmma (sm_90) multiplies 64-row slices, so on it a 64-row tile is legal from M > WGMMA_PAD_MIN_M:
    # rows past M are zero-filled by the copy engine (TMA) or wrap inside the tile (pointer loads), and the
    # tile runs on wgmma where 16 or 32 rows fall back to mma.sync; the padding costs no operand traffic
    # (the model loads min(BLOCK_M, M) rows), only idle tensor-core work.
    max_bm = max(next_pow2(shape.m), WGMMA_MIN_BLOCK_M if hopper and shape.m > WGMMA_PAD_MIN_M else 16)
    tma_rows = gemm_tma_rows(shape)
    regs = gemm_regs_per_thread(c)
    cols = tile_cols(c)
    composite = cols > bn
    tiles_mn = cdiv(shape.m, bm) * cdiv(shape.n, cols)
    k_blocks = cdiv(shape.k, bk)
    sms = profile.sm_count
    fill = wave_fill(shape, bm, cols, sms)
    return {
        "shared memory over the per-block limit": gemm_smem_bytes(c, elem, hopper, shape.n) > profile.smem_per_block_bytes,
        **thread_limits(regs, warps, profile),
        # ... unless the tile already spans the whole (power-of-two padded) output: no larger tile
        # exists to give those warps work, and a 16x8 output would otherwise have no legal config.
        "too many warps for the tile": (bm * bn < MIN_TILE_ELEMS_PER_THREAD * 32 * warps)
        & ((bm < next_pow2(shape.m)) | (bn < next_pow2(shape.n))),
        "BLOCK_M larger than M needs": (bm > 16) & (bm > max_bm),
        "BLOCK_N larger than N needs": (bn > 16) & (bn > next_pow2(shape.n)),
        "BLOCK_K larger than a K split needs": (bk > 32) & (bk > next_pow2(cdiv(shape.k, split))),
        "GROUP_M without effect (one tile row or column)": (c["GROUP_M"] > 1) & gemm_group_m_idle(shape, bm, cols),
        "SPLIT_K with too few K blocks per split": (split > 1) & (k_blocks < MIN_K_BLOCKS_PER_SPLIT * split),
        "SPLIT_K while output tiles already fill the GPU": (split > 1) & (tiles_mn >= profile.sm_count),
        "TMA needs compute capability 9.0": tma & (not hopper),
        "TMA needs 16-byte aligned rows (K, and N for B [K, N]) and A [M, K]": tma & (not tma_rows),
        "pointer loads where TMA is available": ~tma & hopper & tma_rows,
        "PERSISTENT needs TMA loads and SPLIT_K 1": persistent & (~tma | (split > 1)),
        f"PERSISTENT with fewer than {PERSISTENT_MIN_WAVES} waves of tiles":
            persistent & (tiles_mn < PERSISTENT_MIN_WAVES * profile.sm_count),
        "PERSISTENT with a tile under 128x128": persistent & (bm * bn < PERSISTENT_MIN_TILE_ELEMS),
        "FIXUP needs SPLIT_K > 1": fixup & (split == 1),
        f"split-K sums in the GEMM kernel (FIXUP) where M <= {FIXUP_ONLY_MAX_M}": (split > 1) & ~fixup & only_in_kernel_sum,
        f"split-K sums in the reduction kernel where M > {FIXUP_MAX_M}": fixup & (not in_kernel_sum),
        "BLOCK_N2 needs TMA loads, one tile per program and SPLIT_K 1": composite & (~tma | persistent | (split > 1)),
        "BLOCK_N2 needs BLOCK_M 64 or 128 and a wider BLOCK_N, of 128 or more":
            composite & ((bm < 64) | (bm > 128) | (bn < 128) | (c["BLOCK_N2"] >= bn)),
        "BLOCK_N2 where BLOCK_N already spans N": composite & (bn >= shape.n),
        f"BLOCK_N2 where the tiles do not fill their waves (at most {COMPOSITE_MAX_WAVES}, filled "
        f"{COMPOSITE_MIN_FILL} and {COMPOSITE_MIN_GAIN}x BLOCK_N's tiles)":
            composite & ((cdiv(tiles_mn, sms) > COMPOSITE_MAX_WAVES) | (fill < COMPOSITE_MIN_FILL)
                         | (fill < COMPOSITE_MIN_GAIN * wave_fill(shape, bm, bn, sms))),
    }


GEMM_SPACE = SearchSpace(
    kernel="gemm",
    grid=(
        ("BLOCK_M", (16, 32, 64, 128, 256)),
        ("BLOCK_N", (16, 32, 64, 128, 256)),
        ("BLOCK_K", (32, 64, 128, 256)),
        ("GROUP_M", (1, 8)),
        ("SPLIT_K", (1, 2, 4, 8, 16)),
        ("TMA", (0, 1)),
        ("PERSISTENT", (0, 1)),
        ("FIXUP", (0, 1)),
        ("BLOCK_N2", (0, 32, 64)),
        ("num_warps", (4, 8)),
        ("num_stages", (2, 3, 4, 5)),
    ),
    legality=gemm_legality,
    rules_version="gemm-rules-10",
)
