"""The GEMM cost model: tiles, waves and occupancy, tensor/smem/L2/DRAM/latency terms, vectorized over configs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates.gemm_space import c_rows_tma, gemm_regs_per_thread, persistent_epilogue_bytes
from rooftune.candidates.shapes import DTYPE_BYTES, GemmShape
from rooftune.candidates.space import cdiv
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.costmodel import CostModel
from rooftune.roofline.lowering import (
    REGISTER_BYTES,
    TENSOR_DTYPES,
    WARPS_PER_WARPGROUP,
    WGMMA_ROWS,
    DotLowering,
    lower_dot,
    mma_flops_per_sm_s,
)
from rooftune.roofline.occupancy import (
    THREADS_PER_WARP,
    ctas_per_sm,
    load_latency_s,
    smem_bytes_per_sm_s,
    wave_split,
)

# mma.sync fragment shape (m16n8k16) and the k-step every matrix instruction consumes.
MMA_SYNC_ROWS, MMA_SYNC_COLS, MMA_K = 16, 8, 16
# Each SM has four sub-partitions, each with its own tensor core and warp scheduler; warps of a
# sub-partition issue only to its tensor core, so fewer than four resident warps idle some.
SUBPARTITIONS_PER_SM = 4
# An operand reused across waves stays in L2 only if it leaves room for the operand that streams
# through it under LRU: roughly half the cache.
L2_REUSE_FRACTION = 0.5
# Reuse through L2 counts once per L2 partition the reusing CTAs run on: the H100 / H200 L2 is two partitions,
# each caching what its own SMs load, and concurrent CTAs far apart in launch order land on either. On the
# H200 training sweep, GROUP_M 1 of a config reads B up to 1.6x slower than GROUP_M 8 where 2 or 3 tile rows
# share one wave (48x8192x28672, 32x256 tiles, all 128 CTAs resident: 182 us against 115), and GROUP_M 8 is
# 5-10% slower on 10009x176x2824, whose A rows it shares between CTAs 8 apart. Chosen by cross-validation on
# the training shapes (1.5, 2, 3 tried): experiments/gemm_groupm.
L2_SHARING_PARTITIONS = 2.0
# Units that run concurrently (tensor cores, smem, L2, DRAM, the load pipeline) never overlap
# perfectly: a warp that waits on one stalls issue to the others. Combining the per-iteration
# terms with a p-norm, p = 4, charges a term equal to the largest about 19% extra (2^(1/4)).
OVERLAP_NORM = 4.0
# Without matrix units (fp32 FMA), a warp's k step is its per-thread block of FMAs and the shared loads feeding
# them, and part of a load's latency stays exposed between steps: one warp per scheduler then leaves the FMA
# pipes idle for FMA_EXPOSED_CLOCKS of each step (see `fma_issue_fraction`). Chosen on one half of PyTorch's
# AutoHeuristic A100 and H100 logs (crc32 of the shape, even), scored on the other: docs/results.md.
FMA_EXPOSED_CLOCKS = 7.0
# On the FMA path with B N-contiguous ('kn'), tiles of FMA_KN_ACCUMULATORS or more fp32 accumulators per thread
# run their FMAs FMA_KN_SLOWDOWN times slower than the issue model says. Both AutoHeuristic logs show it: with
# B 'nk', 128×128×32 tiles of 4 warps (128 accumulators a thread) are the best config on average (0.98 of the
# best on the H100, 0.99 on the A100); with B 'kn' they fall out of the top eight, and 64×64×32 tiles of 4
# warps (32) lead (on the H100's choosing half with A 'mk', 0.998 of the best on average against 0.93 for
# 64×128×32's 64: `python scripts/ah_halves.py --by-layout --dtype fp32 --half 0`). The
# compiler's register and spill counts do not explain it (ptxas spills more with 'nk':
# experiments/fma-register-counts). Chosen on the logs' choosing half, scored on the other: docs/results.md.
FMA_KN_ACCUMULATORS = 64
FMA_KN_SLOWDOWN = 2.0
SPLIT_K_PARTIAL_BYTES = 4  # split-K partials are fp32
CP_ASYNC_BYTES = 16  # the widest asynchronous global -> shared copy

TERMS = ("tensor", "smem", "l2", "dram", "serial", "latency")
# TMA = 1: the copy engine through tensor descriptors; else cp.async where the rows are 16-byte aligned,
# else loads through registers (which also hold every prefetched stage).
LOAD_PATHS = ("TMA", "cp.async", "registers")
# PERSISTENT = 1: min(tiles, SMs x resident CTAs) programs walk the tiles; else one program per tile.
SCHEDULES = ("one tile per program", "persistent")
# How C reaches global memory: pointer stores, or (a persistent config whose C rows are 16-byte aligned,
# kernels/gemm.py C_TMA) the copy engine, half a tile at a time.
STORE_PATHS = ("pointers", "TMA, two halves")
# Where SPLIT_K > 1 sums its fp32 partials: a second kernel (FIXUP = 0), or the split that arrives last
# inside the GEMM kernel (FIXUP = 1); "no split" without split-K.
SPLIT_K_SUMS = ("no split", "reduction kernel", "in the GEMM kernel")
TERM_BOUND = {"tensor": "compute", "smem": "compute", "l2": "memory", "dram": "memory", "serial": "latency",
              "latency": "latency"}


@dataclass(frozen=True)
class GemmBreakdown:
    """Per-config cost terms (one array element per config). Times in µs, bytes in bytes."""

    flops: np.ndarray            # useful 2·M·N·K (same for every config)
    padded_flops: np.ndarray     # what the tensor cores compute, partial tiles padded
    padding_efficiency: np.ndarray
    dram_bytes: np.ndarray       # A and B from DRAM with L2 reuse, C (or fp32 partials) written
    l2_bytes: np.ndarray         # operand bytes every CTA loads through L2
    smem_bytes_per_cta: np.ndarray
    regs_per_thread: np.ndarray
    fits: np.ndarray             # the CTA's shared memory fits the per-block limit (else it cannot launch)
    uses_wgmma: np.ndarray
    load_path: np.ndarray        # how A and B reach shared memory: 'TMA', 'cp.async' or 'registers' (LOAD_PATHS)
    schedule: np.ndarray         # 'one tile per program' or 'persistent' (SCHEDULES)
    splitk_sum: np.ndarray       # where split-K's partials are summed (SPLIT_K_SUMS)
    store_path: np.ndarray       # how C is stored (STORE_PATHS)
    accumulators: np.ndarray     # fp32 accumulators a program keeps: 2 for a composite tile (BLOCK_N2 > 0), else 1
    ctas: np.ndarray             # CTAs launched (output tiles × SPLIT_K)
    ctas_per_sm: np.ndarray
    occupancy_limiter: np.ndarray  # index into roofline.occupancy.LIMITERS
    occupancy: np.ndarray        # resident warps / max warps per SM
    waves: np.ndarray            # fractional: CTAs / (sm_count · ctas_per_sm)
    wave_efficiency: np.ndarray
    compute_us: np.ndarray       # padded FLOPs at the achieved tensor rate on every SM
    smem_us: np.ndarray          # shared-memory traffic at every SM's smem bandwidth
    l2_us: np.ndarray
    memory_us: np.ndarray        # DRAM bytes / DRAM bandwidth
    latency_us: np.ndarray       # load latency per pipeline depth, plus prologue, per wave
    prologue_us: np.ndarray
    splitk_us: np.ndarray        # summing split-K's fp32 partials: the second kernel, or with FIXUP the
                                 # last split's fix-up after the main loop (0 without split-K)
    launch_us: np.ndarray
    time_us: np.ndarray          # predicted kernel time
    dominant: np.ndarray         # index into TERMS of the term that binds the main loop
    bound: np.ndarray            # 'compute' | 'memory' | 'latency'


def _row_strides(shape: GemmShape) -> tuple[int, int]:
    """Elements between consecutive rows of A ([M, K] or [K, M]) and of B ([K, N] or [N, K])."""
    return (shape.k if shape.a_layout == "mk" else shape.m), (shape.n if shape.layout == "kn" else shape.k)


def overlap(terms: np.ndarray) -> np.ndarray:
    """Time of concurrent activities (rows of `terms`): the largest, plus what imperfect overlap
    leaves of the others, as the OVERLAP_NORM-norm: ||t||_p = (Σ tᵢᵖ)^(1/p) (p → ∞ is perfect overlap)."""
    top = terms.max(axis=0)
    scaled = terms / np.where(top > 0, top, 1.0)
    return top * (scaled ** OVERLAP_NORM).sum(axis=0) ** (1.0 / OVERLAP_NORM)


def _col(columns: dict[str, np.ndarray], name: str, default: int | None = None) -> np.ndarray:
    if name in columns:
        return np.asarray(columns[name], dtype=np.int64)
    if default is None:
        raise KeyError(f"GEMM config columns lack {name}")
    n = len(next(iter(columns.values())))
    return np.full(n, default, dtype=np.int64)


def _mma_sync_warp_grid(bm: np.ndarray, bn: np.ndarray, warps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Warps along M and N for mma.sync, as Triton lays them out: double along M while the tile
    has more 16-row fragments per warp than 16-column pairs, else along N."""
    wm = np.ones_like(bm)
    wn = np.ones_like(bm)
    for _ in range(int(np.log2(max(int(warps.max()), 1))) + 1):
        more = wm * wn < warps
        prefer_m = (bm // MMA_SYNC_ROWS // wm >= bn // (2 * MMA_SYNC_COLS) // wn) & (wm < bm // MMA_SYNC_ROWS)
        wm = np.where(more & prefer_m, wm * 2, wm)
        wn = np.where(more & ~prefer_m, wn * 2, wn)
    return wm, wn


def _smem_read_bytes_per_k16(bm, bn, warps, wgmma, elem, tensor: bool, a_reads=1) -> np.ndarray:
    """Shared-memory bytes the matrix instructions of one CTA read per 16-wide k step; `a_reads`: how many
    times each instruction stream reads the A slice (2 for a composite tile: each accumulator's wgmma
    reads it again, the B slices once in all).

    Without matrix units (fp32 FMA) each thread holds a tm×tn accumulator block and reads tm + tn
    operands per k: at best 2·sqrt(BLOCK_M·BLOCK_N / threads), so small per-thread blocks starve.
    wgmma: (BLOCK_M/64) instructions per warpgroup column, each reading a 64×16 A slice and its
    warpgroup's BLOCK_N/wgN × 16 B slice. mma.sync: every warp reads its own A and B fragments
    (ldmatrix), (wN·BLOCK_M + wM·BLOCK_N) × 16 elements in all."""
    groups = np.maximum(warps // WARPS_PER_WARPGROUP, 1)
    wg_m = np.clip(bm // WGMMA_ROWS, 1, groups)
    wg_n = np.maximum(groups // wg_m, 1)
    wgmma_bytes = (bm * wg_n * a_reads + bm * bn // WGMMA_ROWS) * MMA_K * elem
    wm, wn = _mma_sync_warp_grid(bm, bn, warps)
    frag_m = np.maximum(bm // wm, MMA_SYNC_ROWS)
    frag_n = np.maximum(bn // wn, MMA_SYNC_COLS)
    sync_bytes = warps * (frag_m * a_reads + frag_n) * MMA_K * elem
    if not tensor:
        threads = warps * THREADS_PER_WARP
        return threads * 2.0 * np.sqrt(np.maximum(bm * bn / threads, 1.0)) * MMA_K * elem
    return np.where(wgmma, wgmma_bytes, sync_bytes)


def partitions_spanned(placements) -> np.ndarray:
    """Expected L2 partitions (of L2_SHARING_PARTITIONS, p) that `placements` independently placed groups of
    CTAs reusing one operand stripe run on: p·(1 − (1 − 1/p)^placements); 1 for one placement."""
    p = L2_SHARING_PARTITIONS
    return p * (1.0 - (1.0 - 1.0 / p) ** np.maximum(np.asarray(placements, dtype=float), 1.0))


def _dram_operand_bytes(shape: GemmShape, bm, bn, group_m, concurrent, k_split, elem, profile) -> np.ndarray:
    """A and B bytes read from DRAM for one K split, with L2 reuse from the tile visiting order.

    Tiles are visited in groups of GROUP_M tile rows, column by column inside a group. B is swept
    once per group of concurrently resident tile rows, max(GROUP_M, CTAs in flight / tile columns),
    unless all of B stays in L2; A is read once if a group's A stripe stays in L2, else once per
    wave of tile columns. Each sweep is read once per L2 partition its concurrent sharers run on
    (`partitions_spanned`): sharers that are consecutive programs count as one placement (a B column's
    rows inside a group; an A row's columns without grouping), sharers further apart each as their own
    (a B column's rows_live rows without grouping; an A row's cols_live columns, GROUP_M apart, with it)."""
    tiles_m, tiles_n = cdiv(shape.m, bm), cdiv(shape.n, bn)
    a_bytes = shape.m * k_split * elem
    b_bytes = shape.n * k_split * elem
    reuse_cap = L2_REUSE_FRACTION * profile.l2_bytes
    rows_live = np.minimum(np.maximum(np.minimum(group_m, tiles_m), cdiv(concurrent, tiles_n)), tiles_m)
    cols_live = np.minimum(tiles_n, cdiv(concurrent, rows_live))
    b_passes = np.where(b_bytes <= reuse_cap, 1, cdiv(tiles_m, rows_live))
    a_stripe = np.minimum(rows_live * bm, shape.m) * k_split * elem
    a_passes = np.where(a_stripe <= reuse_cap, 1, cdiv(tiles_n, cols_live))
    grouped = np.minimum(group_m, tiles_m) > 1
    b_spread = partitions_spanned(np.where(grouped, cdiv(rows_live, np.minimum(group_m, tiles_m)), rows_live))
    a_spread = partitions_spanned(np.where(grouped, cols_live, 1))
    return a_bytes * a_passes * a_spread + b_bytes * b_passes * b_spread


@dataclass(frozen=True)
class GemmTiling:
    """The grid: tiles, K splits and the work the tensor cores do, per config (arrays)."""

    bm: np.ndarray
    bn: np.ndarray               # the tile's columns: BLOCK_N + BLOCK_N2
    bk: np.ndarray
    composite: np.ndarray        # BLOCK_N2 > 0: two accumulators
    group_m: np.ndarray
    split_k: np.ndarray
    warps: np.ndarray
    stages: np.ndarray
    tiles_m: np.ndarray
    tiles_n: np.ndarray
    tiles: np.ndarray
    k_split: np.ndarray          # K elements one split covers
    k_iters: np.ndarray          # BLOCK_K steps of one split
    ctas: np.ndarray             # tiles × SPLIT_K
    flops: np.ndarray            # useful 2·M·N·K
    padded_flops: np.ndarray     # what the tensor cores compute, partial tiles padded


def gemm_tiling(shape: GemmShape, columns: dict[str, np.ndarray]) -> GemmTiling:
    """Tiles, splits and padding. A composite tile (BLOCK_N2 > 0, space 7) is BLOCK_N + BLOCK_N2 columns
    wide; the model costs it as one tile of that width (its two accumulators issue the same matrix work
    and load the same B rows), except that each accumulator's matrix instructions read the A slice from
    shared memory: twice per k step (`gemm_traffic`)."""
    bm, bk = _col(columns, "BLOCK_M"), _col(columns, "BLOCK_K")
    bn2 = _col(columns, "BLOCK_N2", 0)
    bn = _col(columns, "BLOCK_N") + bn2
    split_k = _col(columns, "SPLIT_K", 1)
    m, n, k = shape.m, shape.n, shape.k
    tiles_m, tiles_n = cdiv(m, bm), cdiv(n, bn)
    k_split = cdiv(k, split_k)
    k_iters = cdiv(k_split, bk)
    return GemmTiling(
        bm=bm, bn=bn, bk=bk, composite=bn2 > 0, group_m=_col(columns, "GROUP_M", 1), split_k=split_k,
        warps=_col(columns, "num_warps"), stages=_col(columns, "num_stages"), tiles_m=tiles_m, tiles_n=tiles_n,
        tiles=tiles_m * tiles_n, k_split=k_split, k_iters=k_iters, ctas=tiles_m * tiles_n * split_k,
        flops=np.full(bm.shape, 2.0 * m * n * k),
        padded_flops=2.0 * (tiles_m * bm) * (tiles_n * bn) * (split_k * k_iters * bk))


def rows_aligned(row_strides, elem: int) -> bool:
    """cp.async copies 16-byte vectors straight into shared memory only where every operand's rows start
    16-byte aligned: each row stride × bytes per element a multiple of CP_ASYNC_BYTES."""
    return all(stride * elem % CP_ASYNC_BYTES == 0 for stride in row_strides)


def staged_load_regs(staged: np.ndarray, bm, bn, bk, warps, stages, elem: int) -> np.ndarray:
    """Registers per thread holding the prefetched stages of operands loaded through registers (`staged`:
    rows not 16-byte aligned, no TMA): (num_stages − 1)·(BLOCK_M + BLOCK_N)·BLOCK_K·bytes / (4 · threads)."""
    return np.where(staged, (stages - 1) * (bm + bn) * bk * elem // (REGISTER_BYTES * warps * THREADS_PER_WARP), 0)


@dataclass(frozen=True)
class GemmResidency:
    """What one CTA holds (shared memory, registers), how many fit an SM, and the waves they make."""

    low: DotLowering             # the matrix instructions and operand buffers
    persistent: np.ndarray
    staged: np.ndarray           # operands loaded through registers (unaligned rows, no TMA)
    smem_cta: np.ndarray
    regs: np.ndarray
    resident: np.ndarray         # CTAs per SM
    limiter: np.ndarray          # index into roofline.occupancy.LIMITERS
    occupancy: np.ndarray
    full_waves: np.ndarray
    last_per_sm: np.ndarray
    last_active: np.ndarray
    waves: np.ndarray
    wave_eff: np.ndarray
    concurrent: np.ndarray       # tiles in flight at once


def gemm_residency(shape: GemmShape, columns: dict[str, np.ndarray], t: GemmTiling,
                   profile: HardwareProfile) -> GemmResidency:
    """Occupancy and waves.

    cp.async copies 16-byte vectors straight into shared memory; when a row stride is not a multiple of
    16 bytes the loads are narrower and go through registers, so every prefetched stage also occupies
    registers: (stages-1)·(BLOCK_M + BLOCK_N)·BLOCK_K·bytes / 4 per CTA. TMA = 1 (tensor descriptors;
    legal only where the rows are 16-byte aligned): the copy engine writes shared memory directly, like
    aligned cp.async, and with the same pipelined buffers. A persistent CTA keeps its epilogue's C buffer
    beside the operand buffers (candidates/gemm_space.py)."""
    elem = DTYPE_BYTES[shape.dtype]
    bm, bn, bk, warps, stages = t.bm, t.bn, t.bk, t.warps, t.stages
    staged = (_col(columns, "TMA", 0) == 0) & (not rows_aligned(_row_strides(shape), elem))
    low = lower_dot(shape, bm, bn, bk, warps, stages, elem, profile)
    persistent = _col(columns, "PERSISTENT", 0) == 1
    smem_cta = low.smem_bytes + persistent_epilogue_bytes({"PERSISTENT": persistent.astype(np.int64), "BLOCK_M": bm,
                                                           "BLOCK_N": bn, "num_warps": warps}, elem, shape.n)
    regs = gemm_regs_per_thread({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps}) + low.staged_regs
    regs = regs + staged_load_regs(staged, bm, bn, bk, warps, stages, elem)
    resident, limiter = ctas_per_sm(smem_cta, regs, warps, profile)
    full_waves, last_per_sm, last_active, waves, wave_eff = wave_split(t.ctas, resident, profile.sm_count)
    return GemmResidency(
        low=low, persistent=persistent, staged=staged, smem_cta=smem_cta, regs=regs, resident=resident,
        limiter=limiter, occupancy=resident * warps * THREADS_PER_WARP / profile.max_threads_per_sm,
        full_waves=full_waves, last_per_sm=last_per_sm, last_active=last_active, waves=waves, wave_eff=wave_eff,
        concurrent=np.minimum(t.tiles, profile.sm_count * resident))


@dataclass(frozen=True)
class GemmTraffic:
    """Bytes per CTA per k iteration through each path, and in all."""

    flops_iter: np.ndarray
    transpose_iter: np.ndarray   # an operand loaded through registers, stored transposed
    smem_iter: np.ndarray        # shared-memory bytes: the matrix instructions' reads and the fills
    l2_total: np.ndarray         # operand bytes every CTA loads through L2 (and spills)
    l2_iter: np.ndarray
    dram_operands: np.ndarray    # A and B from DRAM with L2 reuse
    dram_iter: np.ndarray
    out_elem: np.ndarray         # bytes per output element: fp32 partials with split-K
    dram_bytes: np.ndarray       # operands and C (or the partials)
    latency_s: np.ndarray        # a load's latency: an L2 hit, or DRAM for what L2 cannot reuse


@dataclass(frozen=True)
class TileIteration:
    """One CTA's k iteration: its matrix work and what it moves through shared memory (per config)."""

    flops_iter: np.ndarray
    transpose_iter: np.ndarray   # an operand loaded through registers, stored transposed
    smem_iter: np.ndarray        # shared-memory bytes: the matrix instructions' reads, the fills, the transposes
    spill_iter: np.ndarray       # accumulator registers spilled and reloaded (through L2)


def tile_iteration(dtype: str, t: GemmTiling, r: GemmResidency, rows_loaded, cols_loaded, elem: int,
                   profile: HardwareProfile) -> TileIteration:
    """Bytes and FLOPs of one k iteration of a BLOCK_M × BLOCK_N tile that loads `rows_loaded` rows of A and
    `cols_loaded` columns of B (BLOCK_K wide) into shared memory.

    A tile loaded into registers passes the same L1/shared data path (one pass, as the fill counts), then
    its transposed store occupies the banks `*_transpose_ways` times as long. Accumulators beyond the
    per-thread register limit spill to local memory, loaded and stored once per matrix-instruction k step;
    these kernels carve nearly all of L1 into shared memory, so the spill traffic goes to L2."""
    bm, bn, bk, warps, low = t.bm, t.bn, t.bk, t.warps, r.low
    flops_iter = 2.0 * bm * bn * bk
    fill_iter = (rows_loaded + cols_loaded) * bk * elem  # global -> smem, also an smem write
    transpose_iter = (low.a_transpose_ways * rows_loaded + low.b_transpose_ways * cols_loaded) * bk * elem
    fill_iter = fill_iter + transpose_iter
    k16_steps = (bk // MMA_K).clip(1)
    spilled = np.maximum(r.regs - profile.regs_per_thread_max, 0)
    spill_iter = spilled.astype(float) * REGISTER_BYTES * 2 * warps * THREADS_PER_WARP * k16_steps
    smem_iter = (_smem_read_bytes_per_k16(bm, bn, warps, low.wgmma, elem, dtype in TENSOR_DTYPES, 1 + t.composite)
                 * k16_steps + fill_iter)
    return TileIteration(flops_iter=flops_iter, transpose_iter=transpose_iter, smem_iter=smem_iter,
                         spill_iter=spill_iter)


def gemm_traffic(shape: GemmShape, t: GemmTiling, r: GemmResidency, profile: HardwareProfile) -> GemmTraffic:
    """Bytes per CTA per k iteration (`tile_iteration`) and over the kernel through L2 and DRAM."""
    elem = DTYPE_BYTES[shape.dtype]
    m, n, k = shape.m, shape.n, shape.k
    bm, bn = t.bm, t.bn
    it = tile_iteration(shape.dtype, t, r, np.minimum(bm, m), np.minimum(bn, n), elem, profile)
    l2_total = (t.tiles_n * m + t.tiles_m * n) * float(k) * elem
    dram_operands = t.split_k * _dram_operand_bytes(shape, bm, bn, t.group_m, r.concurrent, t.k_split, elem, profile)
    cta_iters = t.ctas * t.k_iters
    l2_total = l2_total + it.spill_iter * cta_iters
    out_elem = np.where(t.split_k > 1, SPLIT_K_PARTIAL_BYTES, elem)
    miss = np.clip(dram_operands / l2_total, 0.0, 1.0)
    return GemmTraffic(
        flops_iter=it.flops_iter, transpose_iter=it.transpose_iter, smem_iter=it.smem_iter, l2_total=l2_total,
        l2_iter=l2_total / cta_iters, dram_operands=dram_operands, dram_iter=dram_operands / cta_iters,
        out_elem=out_elem, dram_bytes=dram_operands + t.split_k * m * n * out_elem,
        latency_s=load_latency_s(profile, miss))


@dataclass(frozen=True)
class GemmMainLoop:
    """The main loop's time over every wave (s), which term binds it, and the waves and prologues paid."""

    main_s: np.ndarray
    dominant: np.ndarray         # index into TERMS
    n_waves: np.ndarray
    prologues: np.ndarray


def fma_accumulators(bm, bn, warps):
    """fp32 accumulators a thread holds on the FMA path: BLOCK_M·BLOCK_N / threads."""
    return bm * bn / (warps * THREADS_PER_WARP)


def fma_issue_fraction(bm, bn, warps) -> np.ndarray:
    """Share of a scheduler's cycles one warp keeps the FMA pipes busy on the FMA path: each k step issues its
    `fma_accumulators` FMAs and about 2·sqrt of that in shared loads (`_smem_read_bytes_per_k16`), then
    waits FMA_EXPOSED_CLOCKS; w warps on a scheduler fill w times that share (capped at 1 by the caller)."""
    acc = fma_accumulators(bm, bn, warps)
    issue = acc + 2.0 * np.sqrt(acc)
    return issue / (FMA_EXPOSED_CLOCKS + issue)


def fma_layout_slowdown(layout: str, bm, bn, warps) -> np.ndarray:
    """How much slower than `fma_issue_fraction` says the FMA path runs a tile: FMA_KN_SLOWDOWN where B is
    N-contiguous ('kn') and a thread holds at least FMA_KN_ACCUMULATORS accumulators, else 1."""
    crowded = fma_accumulators(bm, bn, warps) >= FMA_KN_ACCUMULATORS
    return np.where(crowded & (layout == "kn"), FMA_KN_SLOWDOWN, 1.0)


def gemm_wave_terms(shape: GemmShape, t: GemmTiling, r: GemmResidency, tr: GemmTraffic, profile: HardwareProfile,
                    per_sm, active, wave_ctas) -> np.ndarray:
    """Seconds per k iteration of a wave with `per_sm` CTAs on each of `active` SMs (`wave_ctas` in all
    where given, for the shared L2 and DRAM), per term: tensor cores, shared memory, L2, DRAM, the unpipelined
    path."""
    bm, bn, warps = t.bm, t.bn, t.warps
    rate_sm = mma_flops_per_sm_s(shape.dtype, r.low.wgmma, profile)  # FLOP/s
    smem_bw = smem_bytes_per_sm_s(profile)
    l2_bw, dram_bw = profile.l2_bw_gbps * 1e9, profile.dram_bw_gbps * 1e9
    per_sm = np.maximum(per_sm, 1)
    warps_per_scheduler = per_sm * warps / SUBPARTITIONS_PER_SM
    fma_path = shape.dtype not in TENSOR_DTYPES
    if fma_path:
        warps_per_scheduler = warps_per_scheduler * fma_issue_fraction(bm, bn, warps)
    warps_busy = np.minimum(1.0, warps_per_scheduler)
    if fma_path:
        warps_busy = warps_busy / fma_layout_slowdown(shape.layout, bm, bn, warps)
    tensor = tr.flops_iter / (rate_sm * np.minimum(1.0, warps / SUBPARTITIONS_PER_SM))
    return np.stack([
        per_sm * tr.flops_iter / (rate_sm * warps_busy),
        per_sm * tr.smem_iter / smem_bw,
        per_sm * tr.l2_iter * active / l2_bw if wave_ctas is None else wave_ctas * tr.l2_iter / l2_bw,
        per_sm * tr.dram_iter * active / dram_bw if wave_ctas is None else wave_ctas * tr.dram_iter / dram_bw,
        # One CTA's unpipelined operand loads (issued together: one latency), transposed
        # stores and matrix work, in sequence.
        np.where(r.low.via_registers, tr.latency_s + tr.transpose_iter / smem_bw + tensor, 0.0),
    ])


def gemm_epilogue_s(t: GemmTiling, tr: GemmTraffic, profile: HardwareProfile, per_sm, active,
                    wave_ctas=None) -> np.ndarray:
    """Seconds a wave with `per_sm` CTAs on each of `active` SMs (`wave_ctas` in all) spends writing its C tiles."""
    dram_bw = profile.dram_bw_gbps * 1e9
    if wave_ctas is not None:
        return wave_ctas * t.bm * t.bn * tr.out_elem / dram_bw
    return np.maximum(per_sm, 1) * t.bm * t.bn * tr.out_elem * active / dram_bw


def gemm_wave_time(shape: GemmShape, t: GemmTiling, r: GemmResidency, tr: GemmTraffic, profile: HardwareProfile,
                   per_sm, active, wave_ctas=None) -> tuple[np.ndarray, np.ndarray]:
    """A wave's seconds and its terms. A stage's buffer is refilled only after the matrix instructions reading
    it finish, so with S stages a CTA's iteration period P obeys (S-1)·P >= latency + P_resources."""
    resources = gemm_wave_terms(shape, t, r, tr, profile, per_sm, active, wave_ctas)
    busy = resources.max(axis=0)
    pipelined = (tr.latency_s + busy) / np.maximum(t.stages - 1, 1)
    terms = np.concatenate([resources, pipelined[None]])
    return (t.k_iters * overlap(terms) + tr.latency_s + gemm_epilogue_s(t, tr, profile, per_sm, active, wave_ctas),
            terms)


def gemm_main_loop(shape: GemmShape, t: GemmTiling, r: GemmResidency, tr: GemmTraffic,
                   profile: HardwareProfile, exact_last_wave: bool = False) -> GemmMainLoop:
    """The full waves and the last partial one, each from its per-iteration terms (tensor cores, shared
    memory, L2, DRAM, the unpipelined path, load latency over the pipeline depth) combined by `overlap`,
    plus a load latency and the epilogue's C stores per wave. Persistent: the flattened tile loop issues
    the next tile's first copies during this tile's epilogue, so of each wave's prologue (one load
    latency) and epilogue only the last wave's remain.

    The last wave's L2 and DRAM terms count ceil(CTAs / SMs) CTAs on each SM it uses (the GEMM's rounding,
    under which its residual was fitted); with `exact_last_wave`, the wave's own CTAs (the fused-MoE model:
    its weight bytes do not grow with its tiles, so the rounding would make a grid just short of a
    multiple of the SMs look slower than a larger one)."""
    full_time, full_terms = gemm_wave_time(shape, t, r, tr, profile, r.resident, profile.sm_count)
    last_ctas = t.ctas - r.full_waves * r.resident * profile.sm_count if exact_last_wave else None
    last_time, last_terms = gemm_wave_time(shape, t, r, tr, profile, r.last_per_sm, r.last_active, last_ctas)
    has_last = r.last_per_sm > 0
    n_waves = r.full_waves + has_last
    epilogue = gemm_epilogue_s(t, tr, profile, r.resident, profile.sm_count)
    hidden = np.where(r.persistent, np.maximum(n_waves - 1, 0) * (tr.latency_s + epilogue), 0.0)
    main_s = r.full_waves * full_time + np.where(has_last, last_time, 0.0) - hidden
    binding_terms = np.where(r.full_waves > 0, full_terms, last_terms)
    return GemmMainLoop(main_s=main_s, dominant=binding_terms.argmax(axis=0), n_waves=n_waves,
                        prologues=np.where(r.persistent, 1, n_waves))


def gemm_split_k_sum_s(shape: GemmShape, columns: dict[str, np.ndarray], t: GemmTiling, tr: GemmTraffic,
                       profile: HardwareProfile) -> np.ndarray:
    """Seconds summing split-K's fp32 partials: a second kernel reads every partial and writes C, after a
    launch of its own; with FIXUP the last split of each tile reads its tile's partials from L2 (one
    latency, then at one SM's share of L2 bandwidth; the tiles' fix-ups run side by side) and stores the
    C tile. 0 without split-K."""
    elem = DTYPE_BYTES[shape.dtype]
    m, n, split_k = shape.m, shape.n, t.split_k
    fixup = _col(columns, "FIXUP", 0) == 1
    l2_bw, dram_bw = profile.l2_bw_gbps * 1e9, profile.dram_bw_gbps * 1e9
    reduction_s = (split_k * m * n * SPLIT_K_PARTIAL_BYTES + m * n * elem) / dram_bw + profile.launch_overhead_us * 1e-6
    fixup_s = tr.latency_s + split_k * t.bm * t.bn * SPLIT_K_PARTIAL_BYTES / (l2_bw / profile.sm_count)
    return np.where(split_k > 1, np.where(fixup, fixup_s, reduction_s), 0.0)


def predict_gemm(shape: GemmShape, columns: dict[str, np.ndarray], profile: HardwareProfile) -> GemmBreakdown:
    """Cost of every config in `columns` for `shape` on `profile` (see GemmBreakdown): the tiling, the
    residency, the traffic, the main loop and the split-K sum, each a named term above, composed."""
    t = gemm_tiling(shape, columns)
    r = gemm_residency(shape, columns, t, profile)
    tr = gemm_traffic(shape, t, r, profile)
    loop = gemm_main_loop(shape, t, r, tr, profile)
    splitk_s = gemm_split_k_sum_s(shape, columns, t, tr, profile)
    launch_s = profile.launch_overhead_us * 1e-6
    time_s = loop.main_s + splitk_s + launch_s
    elem = DTYPE_BYTES[shape.dtype]
    fixup = _col(columns, "FIXUP", 0) == 1
    rate_sm = mma_flops_per_sm_s(shape.dtype, r.low.wgmma, profile)
    smem_bw = smem_bytes_per_sm_s(profile)
    cta_iters = t.ctas * t.k_iters
    us = 1e6
    return GemmBreakdown(
        flops=t.flops, padded_flops=t.padded_flops, padding_efficiency=t.flops / t.padded_flops,
        dram_bytes=tr.dram_bytes, l2_bytes=tr.l2_total, smem_bytes_per_cta=r.smem_cta, regs_per_thread=r.regs,
        fits=r.smem_cta <= profile.smem_per_block_bytes,
        uses_wgmma=r.low.wgmma, load_path=np.where(_col(columns, "TMA", 0) == 1, LOAD_PATHS[0],
                                                   np.where(r.staged, LOAD_PATHS[2], LOAD_PATHS[1])),
        schedule=np.where(r.persistent, SCHEDULES[1], SCHEDULES[0]),
        splitk_sum=np.where(t.split_k > 1, np.where(fixup, SPLIT_K_SUMS[2], SPLIT_K_SUMS[1]), SPLIT_K_SUMS[0]),
        store_path=np.where(r.persistent & c_rows_tma(shape.n, elem), STORE_PATHS[1], STORE_PATHS[0]),
        accumulators=1 + t.composite.astype(np.int64),
        ctas=t.ctas, ctas_per_sm=r.resident, occupancy_limiter=r.limiter, occupancy=r.occupancy,
        waves=r.waves, wave_efficiency=r.wave_eff,
        compute_us=us * t.padded_flops / (rate_sm * profile.sm_count),
        smem_us=us * cta_iters * tr.smem_iter / (smem_bw * profile.sm_count),
        l2_us=us * tr.l2_total / (profile.l2_bw_gbps * 1e9),
        memory_us=us * tr.dram_bytes / (profile.dram_bw_gbps * 1e9),
        latency_us=us * (loop.n_waves * t.k_iters * tr.latency_s / np.maximum(t.stages - 1, 1)
                         + loop.prologues * tr.latency_s),
        prologue_us=us * loop.prologues * tr.latency_s,
        splitk_us=us * splitk_s,
        launch_us=np.full(t.bm.shape, us * launch_s),
        time_us=us * time_s,
        dominant=loop.dominant,
        bound=np.array([TERM_BOUND[term] for term in TERMS])[loop.dominant],
    )


GEMM_MODEL = CostModel(predict_gemm, GemmBreakdown, TERMS)
