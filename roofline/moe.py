"""The fused-MoE GEMM cost model (kernels/moe.py, vLLM's fused_moe_kernel): routed rows per expert, padding,
the launched grid with its empty programs, weight and gathered-row traffic, occupancy; vectorized over configs.

The kernel is a GEMM whose row tiles each belong to one expert, so the model is the GEMM's (roofline/gemm.py)
fed with what the routing makes of the tiles, named terms composed in `predict_moe`:

- `moe_routing`: the shape's routed rows per expert, the exact seeded draw the kernel and the datasets run
  (candidates/routing.py; under uniform routing an expert expects tokens·topk / experts of them).
- `moe_tiling`: each expert's rows padded to whole BLOCK_SIZE_M tiles (the padding each tile size wastes is
  computed by the tensor cores, never loaded); the real tiles are the GEMM's tiles; the grid the launch
  makes covers the padded rows' bound for any routing, so it also holds programs past the real tiles,
  which exit after reading the padded total.
- `moe_residency`: shared memory and registers as the kernel compiles (candidates/moe_space.py, the sizes
  the legality checks and tests/kernels/test_moe_sm90.py holds to Triton's), the matrix instructions
  (`lower_dot`: A [rows, K] and W[e] [N, K] are both K-major), CTAs per SM and the waves of real tiles.
- `moe_traffic`: each expert's weights are read through L2 by every one of its tile rows, from DRAM once
  where L2 keeps them between the tile rows that reuse them (GROUP_SIZE_M's order keeps a group's tile
  rows of one expert on the same weight columns at once); the routed rows of A are gathered row by row
  (indirect loads: cp.async per row, never TMA), each tile column reading its tile row's rows again from
  L2; C is scattered back to the rows' places; the down GEMM also reads each row's routing weight.
- the main loop is `gemm_main_loop` over the real tiles (the same per-iteration terms, pipeline and waves);
  then what a GEMM does not pay: the dependent loads before a program's first operand load (the padded
  total, then its row ids and expert; on down the routing weights before the store), one chain per wave,
  and the empty programs' rounds.

No constant here is fitted: every number is the profile's, the kernel's or the GEMM model's (whose own
constants were chosen on GEMM data). vLLM's shipped tables are a sanity check of the ranking
(tests/roofline/test_moe_model.py), not a target the terms were tuned to.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates.moe_space import moe_regs_per_thread, moe_smem_bytes
from rooftune.candidates.routing import expert_rows, padded_rows, row_tiles_bound
from rooftune.candidates.shapes import DTYPE_BYTES, MoeShape
from rooftune.candidates.space import cdiv
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.costmodel import CostModel
from rooftune.roofline.gemm import (
    L2_REUSE_FRACTION,
    TERM_BOUND,
    TERMS,
    GemmResidency,
    GemmTiling,
    GemmTraffic,
    gemm_main_loop,
    rows_aligned,
    staged_load_regs,
    tile_iteration,
)
from rooftune.roofline.lowering import WGMMA_MIN_COMPUTE_CAPABILITY, lower_dot, mma_flops_per_sm_s
from rooftune.roofline.occupancy import THREADS_PER_WARP, ctas_per_sm, load_latency_s, smem_bytes_per_sm_s, wave_split

INDEX_BYTES = 4    # a row id (int32) or a routing weight (fp32)
# How A and B reach shared memory: the gathered rows through cp.async (16-byte aligned rows), else through
# registers. Never TMA: a tile's rows are not one box of A.
LOAD_PATHS = ("cp.async, gathered rows", "registers, gathered rows")
__all__ = ["LOAD_PATHS", "TERMS", "TERM_BOUND", "MoeBreakdown", "predict_moe"]


@dataclass(frozen=True)
class MoeBreakdown:
    """Per-config cost terms of one fused-MoE GEMM (one array element per config). Times in µs, bytes in bytes."""

    flops: np.ndarray             # useful 2·rows·N·K (rows = tokens·topk)
    padded_flops: np.ndarray      # what the tensor cores compute: every expert's rows padded to whole tiles
    padding_efficiency: np.ndarray  # flops / padded_flops (rows, columns and K padded)
    row_efficiency: np.ndarray    # routed rows / padded rows: the padding BLOCK_SIZE_M wastes
    padded_rows: np.ndarray
    experts_active: np.ndarray    # experts with at least one routed row (their weights are read)
    rows_per_expert: np.ndarray   # the most rows one expert has (the mean is rows / experts)
    weight_bytes: np.ndarray      # the experts' weights read from DRAM (once per pass)
    weight_passes: np.ndarray     # mean DRAM passes over an active expert's weights
    gather_bytes: np.ndarray      # routed rows of A read from DRAM
    dram_bytes: np.ndarray        # weights, gathered rows, C written
    l2_bytes: np.ndarray          # operand (and index) bytes every CTA loads through L2
    smem_bytes_per_cta: np.ndarray
    regs_per_thread: np.ndarray
    fits: np.ndarray              # shared memory within the per-block limit (else it cannot launch)
    uses_wgmma: np.ndarray
    load_path: np.ndarray         # LOAD_PATHS
    programs: np.ndarray          # the launched grid: row tiles over the padded-rows bound × column tiles
    empty_programs: np.ndarray    # programs past the real padded rows (they exit at once)
    ctas: np.ndarray              # real programs (tiles of routed rows)
    ctas_per_sm: np.ndarray
    occupancy_limiter: np.ndarray  # index into roofline.occupancy.LIMITERS
    occupancy: np.ndarray
    waves: np.ndarray             # real programs / (SMs × CTAs per SM)
    wave_efficiency: np.ndarray
    compute_us: np.ndarray        # padded FLOPs at the tensor rate on every SM
    smem_us: np.ndarray
    l2_us: np.ndarray
    memory_us: np.ndarray         # DRAM bytes / DRAM bandwidth
    latency_us: np.ndarray        # load latency per pipeline depth and the prologues, every wave
    indirection_us: np.ndarray    # dependent index loads (padded total, row ids, routing weights) per wave
    empty_us: np.ndarray          # the empty programs' rounds
    launch_us: np.ndarray
    time_us: np.ndarray
    dominant: np.ndarray          # index into TERMS of the term that binds the main loop
    bound: np.ndarray             # 'compute' | 'memory' | 'latency'


@dataclass(frozen=True)
class MoeRouting:
    """The shape's routed rows (config independent): per expert, and the distinct counts with how many experts
    have each (the weight traffic is summed over those)."""

    rows: np.ndarray              # [experts] routed rows per expert
    counts: np.ndarray            # distinct nonzero row counts
    experts_with: np.ndarray      # experts having each count


def moe_routing(shape: MoeShape) -> MoeRouting:
    """Rows per expert of `shape`'s seeded routing (candidates/routing.py `expert_rows`)."""
    rows = expert_rows(shape)
    counts, experts_with = np.unique(rows[rows > 0], return_counts=True)
    return MoeRouting(rows=rows, counts=counts.astype(np.int64), experts_with=experts_with.astype(np.int64))


def _col(columns: dict[str, np.ndarray], name: str) -> np.ndarray:
    return np.asarray(columns[name], dtype=np.int64)


@dataclass(frozen=True)
class MoeTiling:
    """The real tiles (as the GEMM main loop runs them) and the grid the launch makes (arrays per config)."""

    tiles: GemmTiling             # tiles_m: real row tiles over all experts; ctas: real programs
    padded_rows: np.ndarray
    programs: np.ndarray          # the grid: row tiles over the padded-rows bound × column tiles
    empty_programs: np.ndarray


def moe_tiling(shape: MoeShape, columns: dict[str, np.ndarray], routing: MoeRouting) -> MoeTiling:
    """Each expert's e rows cₑ padded to ceil(cₑ / BLOCK_SIZE_M) tiles (an expert without rows gets none);
    padded rows = Σₑ ceil(cₑ / BM)·BM; real programs = padded rows / BM × ceil(N / BN); the grid's rows are the
    padded-rows bound, rows + min(experts, rows)·(BM − 1) (kernels/moe.py, as vLLM sizes its launch), so
    programs past the real tiles exist whenever some expert's rows are not one short of whole tiles.
    Padded FLOPs = 2 · padded rows · (tiles_n · BN) · (k_iters · BK): the tensor cores multiply whole tiles."""
    bm, bn, bk = _col(columns, "BLOCK_SIZE_M"), _col(columns, "BLOCK_SIZE_N"), _col(columns, "BLOCK_SIZE_K")
    padded = padded_rows(routing.rows, bm)
    tiles_m, tiles_n, k_iters = padded // bm, cdiv(shape.n, bn), cdiv(shape.k, bk)
    programs = row_tiles_bound(shape, bm) * tiles_n
    gemm = GemmTiling(
        bm=bm, bn=bn, bk=bk, composite=np.zeros(bm.shape, dtype=bool), group_m=_col(columns, "GROUP_SIZE_M"),
        split_k=np.ones_like(bm), warps=_col(columns, "num_warps"), stages=_col(columns, "num_stages"),
        tiles_m=tiles_m, tiles_n=tiles_n, tiles=tiles_m * tiles_n, k_split=np.full(bm.shape, shape.k),
        k_iters=k_iters, ctas=tiles_m * tiles_n, flops=np.full(bm.shape, float(shape.flops)),
        padded_flops=2.0 * padded * (tiles_n * bn) * (k_iters * bk))
    return MoeTiling(tiles=gemm, padded_rows=padded, programs=programs, empty_programs=programs - gemm.ctas)


@dataclass(frozen=True)
class DotOperands:
    """What `lower_dot` reads of a GEMM: the operands' dtype and layouts (an FP8 MoE's operands are no GemmShape's)."""

    dtype: str
    layout: str = "nk"
    a_layout: str = "mk"


def _dot_shape(shape: MoeShape) -> DotOperands:
    """The GEMM whose tl.dot lowers as the MoE's: A [rows, K] row-major ('mk'), W[e] [N, K] ('nk')."""
    return DotOperands(shape.dtype)


def moe_residency(shape: MoeShape, columns: dict[str, np.ndarray], t: MoeTiling,
                  profile: HardwareProfile) -> GemmResidency:
    """Occupancy as the kernel compiles: shared memory `moe_smem_bytes` and registers `moe_regs_per_thread`
    (candidates/moe_space.py), plus the prefetched stages held in registers where rows are not 16-byte
    aligned (K · bytes per element not a multiple of 16: both A's and W's rows are K long); CTAs per SM from
    them; the waves of the real programs (the empty ones are `moe_empty_s`)."""
    g = t.tiles
    elem = DTYPE_BYTES[shape.dtype]
    hopper = tuple(profile.compute_capability) >= WGMMA_MIN_COMPUTE_CAPABILITY
    low = lower_dot(_dot_shape(shape), g.bm, g.bn, g.bk, g.warps, g.stages, elem, profile)
    staged = np.full(g.bm.shape, not rows_aligned((shape.k, shape.k), elem))
    smem = moe_smem_bytes(columns, elem, hopper)
    regs = moe_regs_per_thread(columns) + low.staged_regs + staged_load_regs(staged, g.bm, g.bn, g.bk, g.warps,
                                                                              g.stages, elem)
    if shape.rescaled_partials:  # the dot's partial product beside the accumulator: a second BM·BN fp32 tile
        regs = regs + g.bm * g.bn // (THREADS_PER_WARP * g.warps)
    resident, limiter = ctas_per_sm(smem, regs, g.warps, profile)
    full_waves, last_per_sm, last_active, waves, wave_eff = wave_split(g.ctas, resident, profile.sm_count)
    return GemmResidency(
        low=low, persistent=np.zeros(g.bm.shape, dtype=bool), staged=staged, smem_cta=smem, regs=regs,
        resident=resident, limiter=limiter, occupancy=resident * g.warps * THREADS_PER_WARP / profile.max_threads_per_sm,
        full_waves=full_waves, last_per_sm=last_per_sm, last_active=last_active, waves=waves, wave_eff=wave_eff,
        concurrent=np.minimum(g.tiles, profile.sm_count * resident))


@dataclass(frozen=True)
class MoeBytes:
    """DRAM bytes by operand (per config)."""

    weights: np.ndarray
    weight_passes: np.ndarray     # Σ over active experts of their DRAM passes
    gathered: np.ndarray
    out: np.ndarray


def moe_weight_passes(routing: MoeRouting, t: MoeTiling, concurrent: np.ndarray, weight_bytes: int,
                      profile: HardwareProfile) -> tuple[np.ndarray, np.ndarray]:
    """(Σ over the active experts of the DRAM passes over each one's weights W[e] (N·K elements), Σ of their
    tile rows whose weight loads wait for DRAM), per config.

    An expert with cₑ rows has mₑ = ceil(cₑ / BM) tile rows, consecutive in the sorted row list; each sweeps
    all of W[e] through L2. The tile rows in flight together are max(a group's, GROUP_SIZE_M, and what the
    GPU holds at once, CTAs in flight / tile columns), at most mₑ; they read each weight column once between
    them, and all of them wait for that one DRAM read (a concurrent reader of a line in flight gets it when
    it lands, not at an L2 hit's latency). W[e] is read from DRAM once where it fits in the share of L2 an
    operand reused across the tile rows keeps (L2_REUSE_FRACTION, the GEMM's): then only the first tile rows
    in flight wait for DRAM, the later ones hit L2; else every set of tile rows in flight reads it again.
    Integer sums (exact)."""
    g = t.tiles
    m_e = cdiv(routing.counts[:, None], g.bm[None, :])                                  # [counts, configs]
    rows_live = np.minimum(np.maximum(np.minimum(g.group_m[None, :], m_e), cdiv(concurrent, g.tiles_n)[None, :]), m_e)
    fits = weight_bytes <= L2_REUSE_FRACTION * profile.l2_bytes
    passes = np.ones_like(m_e) if fits else cdiv(m_e, rows_live)
    waiting = rows_live if fits else m_e
    experts = routing.experts_with[:, None]
    return (experts * passes).sum(axis=0), (experts * waiting).sum(axis=0)


def short_row_cost(bk: np.ndarray, elem: int, profile: HardwareProfile) -> np.ndarray:
    """DRAM bytes moved per operand byte where a tile reads each row of A and W in pieces of BLOCK_SIZE_K · bytes:
    a piece shorter than the profile's `dram_piece_bytes` costs as a whole one (FP8 with BLOCK_SIZE_K 64 on 128:
    64-byte pieces, twice the bytes' time); 1 from there up, so bf16 (BLOCK_SIZE_K ≥ 64: 128-byte pieces) is
    unchanged. Checked on the FP8 training data (datasets/h200/moe_fp8/train: the model alone's pick 0.873 -> 0.941;
    256 there scored 0.936), where BLOCK_SIZE_K 64 was predicted fastest and ran ~1.7x slower than 128-256."""
    return np.maximum(1.0, profile.dram_piece_bytes / (np.asarray(bk) * elem))


def moe_traffic(shape: MoeShape, routing: MoeRouting, t: MoeTiling, r: GemmResidency,
                profile: HardwareProfile) -> tuple[GemmTraffic, MoeBytes]:
    """Bytes per CTA per k iteration and over the kernel.

    Shared memory: a tile's BM rows of A are filled (masked padding rows as zeros) beside BN columns of W.
    L2: every real program loads its BN columns of W[e] over all of K, and its tile's routed rows of A (the
    padding rows are masked, never loaded) with their row ids (and on down their routing weights); so each
    routed row is read once per tile column. DRAM: the weights (`moe_weight_passes`); the gathered rows once
    where they stay in L2 (gate_up: the tokens' hidden states, read by topk experts' tiles far apart in the
    order, stay only where they all fit; then every routed row is a read), and again per set of tile columns
    in flight where a group's row stripe does not fit, as GEMM's A; C written once, row by row. A k iteration
    waits for both its tiles, so a load's latency is the slower operand's share of loads from DRAM (the
    GEMM averages the two by bytes; here the weights, mostly from DRAM, would then wait less as more gathered
    rows hit L2): the weights' share is their tile rows that wait for DRAM (`moe_weight_passes`), the
    gathered rows' their bytes from DRAM over those through L2."""
    g = t.tiles
    elem, out_elem = DTYPE_BYTES[shape.dtype], DTYPE_BYTES[shape.out_dtype]  # C is bf16 where the operands are FP8
    n, k, rows = shape.n, shape.k, shape.rows
    reuse_cap = L2_REUSE_FRACTION * profile.l2_bytes
    cols_loaded = np.minimum(g.bn, n)
    it = tile_iteration(shape.dtype, g, r, g.bm, cols_loaded, elem, profile)
    cta_iters = g.ctas * g.k_iters
    indices = g.ctas * g.bm * INDEX_BYTES * (2 if shape.gemm == "down" else 1)
    l2_weights = g.ctas * cols_loaded * float(k) * elem
    l2_gathered = rows * float(k) * elem * g.tiles_n
    l2_total = l2_weights + l2_gathered + indices + it.spill_iter * cta_iters
    weight_bytes = n * k * elem
    passes, waiting_rows = moe_weight_passes(routing, t, r.concurrent, weight_bytes, profile)
    a_rows = shape.tokens if shape.gemm == "gate_up" else rows
    a_once = (a_rows if a_rows * k * elem <= reuse_cap else rows) * float(k) * elem
    rows_live = np.minimum(np.maximum(np.minimum(g.group_m, g.tiles_m), cdiv(r.concurrent, g.tiles_n)), g.tiles_m)
    cols_live = np.minimum(g.tiles_n, cdiv(r.concurrent, rows_live))
    a_passes = np.where(rows_live * g.bm * k * elem <= reuse_cap, 1, cdiv(g.tiles_n, cols_live))
    by = MoeBytes(weights=passes * float(weight_bytes), weight_passes=passes, gathered=a_once * a_passes,
                  out=np.full(g.bm.shape, float(rows) * n * out_elem))
    dram_operands = (by.weights + by.gathered) * short_row_cost(g.bk, elem, profile)
    return GemmTraffic(
        flops_iter=it.flops_iter, transpose_iter=it.transpose_iter, smem_iter=it.smem_iter, l2_total=l2_total,
        l2_iter=l2_total / cta_iters, dram_operands=dram_operands, dram_iter=dram_operands / cta_iters,
        out_elem=np.full(g.bm.shape, out_elem), dram_bytes=dram_operands + by.out,
        latency_s=load_latency_s(profile, np.clip(np.maximum(waiting_rows / g.tiles_m, by.gathered / l2_gathered),
                                                  0.0, 1.0))), by


def moe_indirection_s(shape: MoeShape, n_waves: np.ndarray, profile: HardwareProfile) -> np.ndarray:
    """Seconds of dependent index loads a wave's programs wait on beyond a GEMM's: the padded total (a program
    past it returns), then its row ids and expert (the operand addresses need them), each an L2 hit; on down
    also the rows' routing weights, loaded after the main loop before the scaled store."""
    chain = 3 if shape.gemm == "down" else 2
    return n_waves * chain * profile.l2_latency_ns * 1e-9


def moe_empty_s(t: MoeTiling, r: GemmResidency, profile: HardwareProfile) -> np.ndarray:
    """Seconds of the programs past the real tiles: each holds a slot while it reads the padded total (an L2
    hit) and returns; their row tiles come last in the grouped order, so they run in rounds of every slot of
    the GPU (SMs × CTAs per SM) after the real tiles."""
    return cdiv(t.empty_programs, profile.sm_count * r.resident) * profile.l2_latency_ns * 1e-9


def predict_moe(shape: MoeShape, columns: dict[str, np.ndarray], profile: HardwareProfile) -> MoeBreakdown:
    """Cost of every config in `columns` (vLLM's names: BLOCK_SIZE_M/N/K, GROUP_SIZE_M, num_warps,
    num_stages) for `shape` on `profile` (see MoeBreakdown): the routing, the tiling and grid, the residency,
    the traffic, the GEMM's main loop over the real tiles, the index chains and the empty programs, composed."""
    routing = moe_routing(shape)
    t = moe_tiling(shape, columns, routing)
    r = moe_residency(shape, columns, t, profile)
    tr, by = moe_traffic(shape, routing, t, r, profile)
    g = t.tiles
    loop = gemm_main_loop(shape, g, r, tr, profile, exact_last_wave=True)
    indirection_s = moe_indirection_s(shape, loop.n_waves, profile)
    empty_s = moe_empty_s(t, r, profile)
    launch_s = profile.launch_overhead_us * 1e-6
    time_s = loop.main_s + indirection_s + empty_s + launch_s
    rate_sm = mma_flops_per_sm_s(shape.dtype, r.low.wgmma, profile)
    active = int(routing.experts_with.sum())
    us = 1e6
    return MoeBreakdown(
        flops=g.flops, padded_flops=g.padded_flops, padding_efficiency=g.flops / g.padded_flops,
        row_efficiency=shape.rows / t.padded_rows, padded_rows=t.padded_rows,
        experts_active=np.full(g.bm.shape, active), rows_per_expert=np.full(g.bm.shape, int(routing.rows.max())),
        weight_bytes=by.weights, weight_passes=by.weight_passes / max(active, 1), gather_bytes=by.gathered,
        dram_bytes=tr.dram_bytes, l2_bytes=tr.l2_total, smem_bytes_per_cta=r.smem_cta, regs_per_thread=r.regs,
        fits=r.smem_cta <= profile.smem_per_block_bytes, uses_wgmma=r.low.wgmma,
        load_path=np.where(r.staged, LOAD_PATHS[1], LOAD_PATHS[0]),
        programs=t.programs, empty_programs=t.empty_programs, ctas=g.ctas, ctas_per_sm=r.resident,
        occupancy_limiter=r.limiter, occupancy=r.occupancy, waves=r.waves, wave_efficiency=r.wave_eff,
        compute_us=us * g.padded_flops / (rate_sm * profile.sm_count),
        smem_us=us * g.ctas * g.k_iters * tr.smem_iter / (smem_bytes_per_sm_s(profile) * profile.sm_count),
        l2_us=us * tr.l2_total / (profile.l2_bw_gbps * 1e9),
        memory_us=us * tr.dram_bytes / (profile.dram_bw_gbps * 1e9),
        latency_us=us * (loop.n_waves * g.k_iters * tr.latency_s / np.maximum(g.stages - 1, 1)
                         + loop.prologues * tr.latency_s),
        indirection_us=us * indirection_s, empty_us=us * empty_s,
        launch_us=np.full(g.bm.shape, us * launch_s), time_us=us * time_s, dominant=loop.dominant,
        bound=np.array([TERM_BOUND[term] for term in TERMS])[loop.dominant],
    )


def routing_note(shape: MoeShape, bd: MoeBreakdown, i: int) -> str:
    """What the routing makes of config `i`'s tiles: routed rows per expert, the padding, the grid."""
    return (f"routing (seed {shape.seed}): {shape.rows} routed rows over {int(bd.experts_active[i])} of {shape.experts} "
            f"experts (mean {shape.rows / shape.experts:.1f}, most {int(bd.rows_per_expert[i])}); the best pads them to "
            f"{int(bd.padded_rows[i])} rows (row efficiency {bd.row_efficiency[i]:.2f}); its grid: "
            f"{int(bd.programs[i])} programs, {int(bd.empty_programs[i])} of them past the padded rows; weights "
            f"{bd.weight_bytes[i] / 1e6:.1f} MB from DRAM")


MOE_MODEL = CostModel(predict_moe, MoeBreakdown, TERMS, routing_note)
