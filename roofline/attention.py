"""The causal-attention forward cost model: a CTA's serial chain per key block, the SM's shared units, K/V traffic, the tail."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates.attention_space import (
    ROWS_PER_WARP,
    TMA_BARRIER_BYTES,
    attention_regs_per_thread,
    attention_smem_bytes,
)
from rooftune.candidates.shapes import DTYPE_BYTES, AttentionShape
from rooftune.candidates.space import cdiv
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.costmodel import CostModel
from rooftune.roofline.gemm import L2_REUSE_FRACTION, SUBPARTITIONS_PER_SM, overlap
from rooftune.roofline.lowering import REGISTER_BYTES, WGMMA_ROWS, mma_flops_per_sm_s, uses_wgmma
from rooftune.roofline.occupancy import (
    THREADS_PER_WARP,
    clock_hz,
    ctas_per_sm,
    load_latency_s,
    smem_bytes_per_sm_s,
)

# Throughput per SM per clock comes from the profile: `sfu_ops_per_clock` exp2 results on the
# special-function units and `fp32_lanes_per_sm` thread instructions issued (four schedulers issuing
# one warp instruction each per clock make 128 from compute capability 8.6 on; 64 on the A100).
# The loop's instruction stream as Triton 3.6 compiles it for sm_90 (the SASS of every config of the
# space, compiled on the CPU; a linear fit within 17%): per warp and key block, ISSUE_PER_SCORE
# instructions per score a thread holds (scale-and-subtract FFMA, row max, exp2, row sum, P's
# conversion), ISSUE_PER_ACC per fp32 output element it holds (the rescale by alpha, wgmma fragment
# moves) and ISSUE_PER_BLOCK fixed (barriers, the TMA and wgmma instructions, the row reductions'
# shuffles); the masked loop adds MASK_ISSUE_PER_SCORE per score (index compare and select).
ISSUE_PER_SCORE = 5.7
ISSUE_PER_ACC = 2.0
ISSUE_PER_BLOCK = 40.0
MASK_ISSUE_PER_SCORE = 5.0
# The four threads of a quad hold one row of the matrix fragment; each computes the row's rescale
# factor alpha = exp2(m_old − m_new) itself.
THREADS_PER_ROW = 4
# Without a pipeline (num_stages 1) the loop keeps no buffer indices, barrier phases or prefetch
# addresses: ptxas allocated about 16 registers a thread fewer in the same sm_90 compiles.
PIPELINE_REGS = 16
# A lone warp issues an instruction only every CHAIN_ISSUE_CPI clocks on average: with no other warp
# of its CTA on its scheduler it waits on its own dependences (FP32 results, exp2, the shuffles of
# the row reductions). One CTA's softmax takes CHAIN_ISSUE_CPI × its issue slots, while the SM's
# issue slots take one instruction per scheduler per clock from all CTAs together.
CHAIN_ISSUE_CPI = 1.5
# One key block waits on two dependent MMA groups (QKᵀ before the softmax, PV before the next rescale
# of O), each for the profile's `mma_latency_clocks` beyond its throughput time (the wait for the last
# accumulator write and the barrier after it).
DEPENDENT_MMA_GROUPS_PER_BLOCK = 2
# Units that run concurrently (tensor cores, SFUs, issue slots, shared memory, L2, one CTA's busy
# chain) never overlap perfectly; their times combine as a p-norm, as in roofline/gemm.py `overlap`
# (p = 4 there, for the GEMM's one-operation loop). Attention's loop alternates matrix and softmax
# phases, and the resident CTAs contend for each in turn: p = 3.
OVERLAP_NORM = 3.0
# CHAIN_ISSUE_CPI, OVERLAP_NORM and the H200 profile's mma_latency_clocks are the only constants chosen
# on data: by 5-fold cross-validation over the H200 training shapes (datasets/h200/attention/train,
# the fit's folds) on the grid CPI 1.5-3, latency 64-768 clocks, p 2.5-4, maximizing the mean within-shape
# Spearman correlation of predicted and measured time minus the mean |log(measured / predicted)|.
# Every fold chose these.
# Greedy dispatch: when a program is dispatched, the running ones are on average half way through,
# so a slot frees about half a mean program before the fluid estimate (checked against an exact
# list-scheduling simulation of causal grids: within ~3% of its makespan).
IN_FLIGHT_REMAINING_FRACTION = 0.5
# A generation of causal programs reads on average half of its heads' K/V (the prefix up to its
# heaviest query block, from the whole sequence down to one block).
CAUSAL_MEAN_PREFIX = 0.5
FP32_BYTES = 4
# ORDER bits (see candidates/attention_space.py).
ORDER_REVERSE, ORDER_HEADS_FASTEST = 1, 2

TERMS = ("tensor", "exp2", "issue", "smem", "l2", "serial", "latency", "memory")
TERM_BOUND = {"tensor": "compute", "exp2": "compute", "issue": "compute", "smem": "compute", "l2": "memory",
              "memory": "memory", "serial": "latency", "latency": "latency"}


@dataclass(frozen=True)
class AttentionBreakdown:
    """Per-config cost terms of a causal attention forward. Times in µs."""

    flops: np.ndarray            # useful QKᵀ + PV FLOPs under the mask
    padded_flops: np.ndarray     # what the tensor cores compute: whole visited key blocks
    padding_efficiency: np.ndarray
    key_blocks: np.ndarray       # key blocks visited, all programs
    masked_blocks: np.ndarray    # diagonal blocks that need the causal mask
    dram_bytes: np.ndarray
    l2_bytes: np.ndarray
    fits: np.ndarray
    uses_wgmma: np.ndarray
    warps_along_n: np.ndarray    # warps sharing a row block (softmax reductions and P through smem when > 1)
    regs_per_thread: np.ndarray  # O and S accumulators, P, staged K/V, overhead (spills above the limit)
    programs: np.ndarray
    ctas_per_sm: np.ndarray
    occupancy_limiter: np.ndarray
    occupancy: np.ndarray
    waves: np.ndarray
    wave_efficiency: np.ndarray  # ideal (work / slots) time / scheduled time: the causal tail
    compute_us: np.ndarray       # padded FLOPs at the tensor rate on every SM
    softmax_us: np.ndarray       # exp2 on the SFUs or the loop's issue slots, whichever is longer, on every SM
    smem_us: np.ndarray          # shared-memory traffic (copies in, wgmma operand reads) at every SM's bandwidth
    l2_us: np.ndarray            # K/V tiles every program loads, at L2 bandwidth
    memory_us: np.ndarray        # DRAM bytes / DRAM bandwidth
    latency_us: np.ndarray       # the slots' schedule at one CTA's chain per block (its serial work and load waits)
    launch_us: np.ndarray
    time_us: np.ndarray
    dominant: np.ndarray         # index into TERMS
    bound: np.ndarray


def _key_blocks(seq: int, bm: int, bn: int, causal: bool) -> np.ndarray:
    """Key blocks visited by each query block i: ceil(min((i+1)·BLOCK_M, S) / BLOCK_N) under the mask."""
    q_blocks = cdiv(seq, bm)
    if not causal:
        return np.full(int(q_blocks), int(cdiv(seq, bn)))
    ends = np.minimum((np.arange(int(q_blocks)) + 1) * bm, seq)
    return cdiv(ends, bn)


def program_sequence(per_q: np.ndarray, heads: int, order: int) -> np.ndarray:
    """Key blocks of each program in dispatch order: query blocks first-to-last (or last-to-first,
    ORDER bit 0) within each head, heads one after another (or heads fastest, ORDER bit 1)."""
    per_q = per_q[::-1] if order & ORDER_REVERSE else per_q
    return np.repeat(per_q, heads) if order & ORDER_HEADS_FASTEST else np.tile(per_q, heads)


def makespan_blocks(sizes: np.ndarray, slots: int) -> float:
    """Finish time, in key blocks of one slot, of programs of `sizes` blocks dispatched in order to
    the first free of `slots` slots: max(Σ sizes / slots, maxᵢ startᵢ + sizeᵢ) with the fluid start
    startᵢ = Σ_{j<i} sizes / slots − half a mean program (0 in the first wave)."""
    sizes = sizes.astype(float)
    if len(sizes) <= slots:
        return float(sizes.max())
    before = np.cumsum(sizes) - sizes
    start = before / slots - IN_FLIGHT_REMAINING_FRACTION * sizes.mean()
    start[:slots] = 0.0
    return float(max(sizes.sum() / slots, (np.maximum(start, 0.0) + sizes).max()))


def _overlap(terms: np.ndarray) -> np.ndarray:
    """Time of concurrent activities (rows of `terms`) as their OVERLAP_NORM-norm (roofline/gemm.py `overlap`)."""
    top = terms.max(axis=0)
    scaled = terms / np.where(top > 0, top, 1.0)
    return top * (scaled ** OVERLAP_NORM).sum(axis=0) ** (1.0 / OVERLAP_NORM)


def resident_smem_bytes(columns: dict[str, np.ndarray], head_dim: int, elem_bytes: int) -> np.ndarray:
    """Shared memory a CTA holds, bytes: attention_smem_bytes (Q, and K and V per stage, as legality
    bounds it) where the loop is pipelined; with num_stages 1, Q and the one tile that K and then V
    pass through, (BLOCK_M + BLOCK_N) · head_dim · bytes (+ the TMA barriers), as compiled for sm_90."""
    single = (columns["BLOCK_M"] + columns["BLOCK_N"]) * head_dim * elem_bytes + TMA_BARRIER_BYTES * columns["TMA"]
    return np.where(columns["num_stages"] <= 1, single, attention_smem_bytes(columns, head_dim, elem_bytes))


@dataclass(frozen=True)
class AttentionGrid:
    """The programs and the key blocks they visit, per config (arrays)."""

    bm: np.ndarray
    bn: np.ndarray
    order: np.ndarray
    warps: np.ndarray
    stages: np.ndarray
    tma: np.ndarray
    per_q_of: dict               # (BLOCK_M, BLOCK_N) -> key blocks of each query block
    q_blocks: np.ndarray
    programs: np.ndarray
    key_blocks: np.ndarray       # all programs
    masked_per_program: np.ndarray
    flops: np.ndarray
    padded_flops: np.ndarray


def attention_grid(shape: AttentionShape, columns: dict[str, np.ndarray]) -> AttentionGrid:
    """Key blocks per program, summarized per (BLOCK_M, BLOCK_N) pair. The blocks of each program that
    run the masked loop: the diagonal (BLOCK_M / BLOCK_N blocks) under the causal mask, else the last
    block where seq is not a multiple of BLOCK_N."""
    bm, bn = np.asarray(columns["BLOCK_M"], np.int64), np.asarray(columns["BLOCK_N"], np.int64)
    s, heads = shape.seq, shape.batch * shape.heads
    total_blocks = np.zeros(bm.shape)
    pairs = sorted(set(zip(bm.tolist(), bn.tolist())))
    per_q_of = {(m_, n_): _key_blocks(s, m_, n_, shape.causal) for m_, n_ in pairs}
    for (m_, n_), per_q in per_q_of.items():
        total_blocks[(bm == m_) & (bn == n_)] = per_q.sum()
    q_blocks = cdiv(s, bm)
    key_blocks = total_blocks * heads
    return AttentionGrid(
        bm=bm, bn=bn, order=np.asarray(columns.get("ORDER", np.zeros_like(bm)), np.int64),
        warps=np.asarray(columns["num_warps"], np.int64), stages=np.asarray(columns["num_stages"], np.int64),
        tma=np.asarray(columns.get("TMA", np.zeros_like(bm)), np.int64), per_q_of=per_q_of, q_blocks=q_blocks,
        programs=q_blocks * heads, key_blocks=key_blocks,
        masked_per_program=cdiv(bm, bn) if shape.causal else (s % bn > 0).astype(np.int64),
        flops=np.full(bm.shape, float(shape.flops)), padded_flops=4.0 * bm * bn * shape.head_dim * key_blocks)


@dataclass(frozen=True)
class AttentionResidency:
    """The warps' layout, a CTA's registers and shared memory, and how many CTAs an SM holds."""

    wgmma: np.ndarray
    n_split: np.ndarray          # warps sharing a row block
    b_readers: np.ndarray        # readers of each K or V tile from shared memory
    chain_share: np.ndarray      # share of the SM's sub-partitions a CTA's warps span
    rate_sm: np.ndarray          # matrix FLOP/s per SM
    threads: np.ndarray
    regs: np.ndarray
    spilled: np.ndarray
    tiles: dict[str, np.ndarray]
    resident: np.ndarray
    limiter: np.ndarray
    slots: np.ndarray            # CTAs the whole GPU holds at once


def attention_residency(shape: AttentionShape, g: AttentionGrid, profile: HardwareProfile) -> AttentionResidency:
    """Warp layout. A warp owns ROWS_PER_WARP rows of the matrix fragment; warps beyond BLOCK_M /
    ROWS_PER_WARP split the columns instead, so row max and row sum cross warps and P is re-laid out
    through shared memory for PV. wgmma (BLOCK_M a multiple of 64, warps a multiple of 4) issues one
    instruction per 64-row slab, each reading the K (QKᵀ) or V (PV) tile from shared memory again;
    mma.sync reads them once per warp along M. A CTA's warps run the loop in lockstep (the K/V barriers
    and the wait before the softmax), so a CTA is one serial chain.

    Registers per thread: fp32 O (BLOCK_M·head_dim) and S (BLOCK_M·BLOCK_N), P packed in the input dtype
    for PV, and with pointer loads and no pipeline (num_stages 1) the K and V tiles staged between their
    global load and shared-memory store (TMA copies bypass registers). Above the per-thread limit the
    rest spills. The driver reserves shared memory per resident CTA: what a block may not opt in to."""
    bm, bn, warps, stages, tma = g.bm, g.bn, g.warps, g.stages, g.tma
    elem, d = DTYPE_BYTES[shape.dtype], shape.head_dim
    wgmma = uses_wgmma(shape.dtype, bm, warps, profile)
    n_split = np.maximum(ROWS_PER_WARP * warps // bm, 1)
    warps_m = np.maximum(warps // n_split, 1)
    threads = warps * THREADS_PER_WARP
    regs = (attention_regs_per_thread({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps}, d)
            + bm * bn * elem // (REGISTER_BYTES * threads) - np.where(stages <= 1, PIPELINE_REGS, 0)
            + np.where((stages <= 1) & (tma == 0), 2 * bn * d * elem // (REGISTER_BYTES * threads), 0))
    tiles = {"BLOCK_M": bm, "BLOCK_N": bn, "num_stages": stages, "TMA": tma}
    smem_cta = resident_smem_bytes(tiles, d, elem)
    reserved = profile.smem_per_sm_bytes - profile.smem_per_block_bytes
    resident, limiter = ctas_per_sm(smem_cta + reserved, np.minimum(regs, profile.regs_per_thread_max), warps, profile)
    return AttentionResidency(
        wgmma=wgmma, n_split=n_split, b_readers=np.where(wgmma, np.maximum(bm // WGMMA_ROWS, 1), warps_m),
        chain_share=np.minimum(1.0, warps / SUBPARTITIONS_PER_SM), rate_sm=mma_flops_per_sm_s(shape.dtype, wgmma, profile),
        threads=threads, regs=regs, spilled=np.maximum(regs - profile.regs_per_thread_max, 0), tiles=tiles,
        resident=resident, limiter=limiter, slots=profile.sm_count * resident)


@dataclass(frozen=True)
class AttentionBlockWork:
    """What one key block of one CTA costs each unit: issue slots, SFUs, shared memory, bytes loaded."""

    flops_blk: np.ndarray
    issue_blk: np.ndarray        # s on the SM's issue slots
    mask_issue_blk: np.ndarray   # s of the causal mask's instructions
    sfu_blk: np.ndarray          # s of exp2 on the SFUs
    softmax_blk: np.ndarray      # the longer of the two, on the whole SM's pipes
    kv_bytes: np.ndarray         # one K and one V tile
    relayout: np.ndarray         # P and the row statistics through shared memory where warps split the columns
    smem_blk: np.ndarray
    spill_blk: np.ndarray


def attention_block_work(shape: AttentionShape, g: AttentionGrid, r: AttentionResidency,
                         profile: HardwareProfile) -> AttentionBlockWork:
    """One key block of one CTA. Issue slots: every warp instruction of the loop takes one of the SM's
    fp32_lanes_per_sm / 32 issue slots per clock (seconds = warps · 32 · instructions per warp /
    (fp32_lanes_per_sm · clock)); exp2 runs on the SFUs. Shared memory: K and V written by the copies;
    Q read by every warp column, K and V by every B-operand reader; P and the cross-warp row statistics
    where warps split the columns. Spilled values are stored and reloaded once per block."""
    bm, bn, threads, n_split = g.bm, g.bn, r.threads, r.n_split
    elem, d, clock = DTYPE_BYTES[shape.dtype], shape.head_dim, clock_hz(profile)
    scores_thread, acc_thread = bm * bn / threads, bm * d / threads
    issue_warp = ISSUE_PER_SCORE * scores_thread + ISSUE_PER_ACC * acc_thread + ISSUE_PER_BLOCK
    issue_blk = threads * issue_warp / (profile.fp32_lanes_per_sm * clock)
    exps = bm * bn + bm * THREADS_PER_ROW  # P, and each row's rescale factor in every thread holding the row
    sfu_blk = exps / (profile.sfu_ops_per_clock * clock)
    kv_bytes = 2.0 * bn * d * elem
    relayout = np.where(n_split > 1, bm * bn * elem * (1 + n_split) + 2 * 2 * bm * n_split * FP32_BYTES, 0)
    return AttentionBlockWork(
        flops_blk=4.0 * bm * bn * d, issue_blk=issue_blk,
        mask_issue_blk=threads * MASK_ISSUE_PER_SCORE * scores_thread / (profile.fp32_lanes_per_sm * clock),
        sfu_blk=sfu_blk, softmax_blk=np.maximum(sfu_blk, issue_blk), kv_bytes=kv_bytes, relayout=relayout,
        smem_blk=kv_bytes + n_split * bm * d * elem + r.b_readers * kv_bytes + relayout,
        spill_blk=r.spilled * REGISTER_BYTES * 2 * threads)


@dataclass(frozen=True)
class AttentionTraffic:
    """Bytes through L2 and DRAM over the kernel, and a load's latency."""

    l2_bytes: np.ndarray
    dram_bytes: np.ndarray
    latency_s: np.ndarray


def attention_traffic(shape: AttentionShape, g: AttentionGrid, r: AttentionResidency, w: AttentionBlockWork,
                      profile: HardwareProfile) -> AttentionTraffic:
    """K/V traffic. Programs running at once read each K/V block of their head at about the same time, so
    one DRAM read serves them all (L2 keeps the block between its first and last reader). A head's K/V is
    streamed from DRAM again only by programs dispatched after its earlier ones finished (a later
    generation of `slots` programs), and only where what the programs in between touch does not fit in
    L2: the live heads' K/V for per-head orders, every head's for heads-fastest orders (a head's next
    query blocks come after all other heads'). A causal generation reads on average half the sequence
    (its heaviest programs' prefix). A load's latency: an L2 hit, or DRAM for the share of K/V bytes L2
    does not serve."""
    elem, d, s, heads = DTYPE_BYTES[shape.dtype], shape.head_dim, shape.seq, shape.batch * shape.heads
    heads_fastest = (g.order & ORDER_HEADS_FASTEST) != 0
    group = shape.heads // shape.kv_heads  # grouped-query attention: a K/V head serves `group` query heads
    kv_head_bytes = 2.0 * s * d * elem
    live_heads = np.where(heads_fastest, heads, cdiv(r.slots, g.q_blocks).clip(1, heads))
    kv_reuse = cdiv(live_heads, group) * kv_head_bytes <= profile.l2_bytes * L2_REUSE_FRACTION
    generations = np.where(heads_fastest, np.minimum(g.q_blocks, cdiv(g.programs, r.slots)), cdiv(g.q_blocks, r.slots))
    prefix = CAUSAL_MEAN_PREFIX if shape.causal else 1.0
    kv_passes = np.where(kv_reuse, 1.0, np.maximum(generations * prefix, 1.0))
    kv_once = (heads // group) * kv_head_bytes
    qo_bytes = 2.0 * heads * s * d * elem
    kv_dram = np.minimum(kv_once * kv_passes, g.key_blocks * w.kv_bytes)
    return AttentionTraffic(
        l2_bytes=g.key_blocks * (w.kv_bytes + w.spill_blk) + qo_bytes, dram_bytes=kv_dram + qo_bytes,
        latency_s=load_latency_s(profile, np.clip(kv_dram / (g.key_blocks * w.kv_bytes), 0, 1)))


@dataclass(frozen=True)
class AttentionStep:
    """One step: every resident CTA of an SM advancing one key block."""

    step_s: np.ndarray           # seconds per key block per program, `per_sm` sharing an SM
    step_terms: np.ndarray       # the shared units' times and the chain's busy part (rows)
    core_s: np.ndarray           # one CTA's busy chain per block
    exposed_s: np.ndarray        # what the loads leave exposed per block
    chain_s: np.ndarray          # core + exposed
    active: np.ndarray           # SMs in use


def attention_step(shape: AttentionShape, g: AttentionGrid, r: AttentionResidency, w: AttentionBlockWork,
                   tr: AttentionTraffic, profile: HardwareProfile) -> AttentionStep:
    """The step of one SM with per_sm CTAs resident on each of `active` SMs: each shared unit's time for
    one key block of every CTA. One CTA's block in sequence: QKᵀ, the softmax and PV at the share of the
    SM its warps span, the relayout, the dependent MMA latencies; then what the loads leave exposed. The
    loop issues the next loads after PV is issued, into the buffer block j−1 freed: with S stages they
    are for block j+S−1, so a load has PV and S−2 further blocks to land. Without a pipeline (num_stages
    1) K and V share one buffer and each is waited on right after its copy is issued (pointer loads also
    store the tiles from registers). A K/V tile arrives after the latency plus its transfer at this SM's
    share of L2 bandwidth. The SM's units and one CTA's busy chain overlap imperfectly; its waits on
    loads do not compete for anything (other CTAs fill them), so the whole chain only bounds the step
    from below."""
    warps, stages, tma, rate_sm = g.warps, g.stages, g.tma, r.rate_sm
    clock = clock_hz(profile)
    active = np.minimum(g.programs, profile.sm_count)
    l2_bw, smem_bw = profile.l2_bw_gbps * 1e9, smem_bytes_per_sm_s(profile)
    per_sm = np.minimum(r.resident, cdiv(g.programs, profile.sm_count))
    load_s = tr.latency_s + w.kv_bytes / 2 * active / l2_bw  # one tile, K or V, at this SM's share of L2
    sm_share = np.minimum(1.0, per_sm * warps / SUBPARTITIONS_PER_SM)
    resources = np.stack([
        per_sm * w.flops_blk / (rate_sm * sm_share),
        per_sm * w.sfu_blk / sm_share,
        per_sm * w.issue_blk / sm_share,
        per_sm * (w.smem_blk + w.spill_blk) / smem_bw,
        per_sm * (w.kv_bytes + w.spill_blk) * active / l2_bw,
    ])
    mma_pv_s = w.flops_blk / 2 / rate_sm / r.chain_share
    core_s = ((w.flops_blk / rate_sm + np.maximum(w.sfu_blk, CHAIN_ISSUE_CPI * w.issue_blk)) / r.chain_share
              + w.relayout / smem_bw + DEPENDENT_MMA_GROUPS_PER_BLOCK * profile.mma_latency_clocks / clock)
    exposed_s = np.where(stages <= 1, 2 * load_s + np.where(tma == 0, w.kv_bytes / smem_bw, 0.0),
                         np.maximum(load_s - mma_pv_s - np.maximum(stages - 2, 0) * core_s, 0.0))
    chain_s = core_s + exposed_s
    step_terms = np.concatenate([resources, core_s[None]])
    return AttentionStep(step_s=np.maximum(_overlap(step_terms), chain_s), step_terms=step_terms, core_s=core_s,
                         exposed_s=exposed_s, chain_s=chain_s, active=active)


@dataclass(frozen=True)
class AttentionSchedule:
    """The programs on the GPU's slots: the span of the dispatch order and the kernel's main time."""

    span_blocks: np.ndarray      # finish time in key blocks of one slot
    scheduled_s: np.ndarray
    dram_s: np.ndarray
    main_s: np.ndarray
    ideal_s: np.ndarray          # the same work spread evenly over the slots: the causal tail's yardstick


def attention_schedule(shape: AttentionShape, g: AttentionGrid, r: AttentionResidency, w: AttentionBlockWork,
                       tr: AttentionTraffic, st: AttentionStep, profile: HardwareProfile) -> AttentionSchedule:
    """A program holds its slot for a fixed part plus its key blocks · step; the grid's dispatch order sets
    the tail. The fixed part: the wait for its Q tile (and the first K/V tiles, loaded alongside) from
    DRAM at this SM's share of bandwidth, the masks' instructions of its masked blocks, and at the end
    the wait for its O tile's copy out of shared memory (an L2 write). DRAM moves Q, O and K/V (once per
    head where L2 keeps them) over the whole kernel, overlapped with the schedule rather than charged per
    block (a short grid is not a stream of blocks)."""
    bm, order, slots = g.bm, g.order, r.slots
    elem, d, heads = DTYPE_BYTES[shape.dtype], shape.head_dim, shape.batch * shape.heads
    dram_bw = profile.dram_bw_gbps * 1e9
    per_program_s = (tr.latency_s + bm * d * elem * st.active / dram_bw + profile.l2_latency_ns * 1e-9
                     + g.masked_per_program * CHAIN_ISSUE_CPI * w.mask_issue_blk / r.chain_share)
    span_blocks = np.zeros(bm.shape)
    for (m_, n_), per_q in g.per_q_of.items():
        sel = (bm == m_) & (g.bn == n_)
        for o_, slots_ in set(zip(order[sel].tolist(), slots[sel].tolist())):
            span_blocks[sel & (order == o_) & (slots == slots_)] = makespan_blocks(
                program_sequence(per_q, heads, o_), slots_)
    programs_per_slot = np.maximum(g.programs / slots, 1.0)
    dram_s = tr.dram_bytes / dram_bw
    scheduled_s = span_blocks * st.step_s + per_program_s * np.ceil(programs_per_slot)
    ideal_s = overlap(np.stack([(g.key_blocks / np.minimum(slots, g.programs)) * st.step_s
                                + per_program_s * programs_per_slot, dram_s]))
    return AttentionSchedule(span_blocks=span_blocks, scheduled_s=scheduled_s, dram_s=dram_s,
                             main_s=overlap(np.stack([scheduled_s, dram_s])), ideal_s=ideal_s)


def attention_dominant(st: AttentionStep, sched: AttentionSchedule) -> np.ndarray:
    """What binds (index into TERMS): DRAM where the whole-kernel traffic outlasts the schedule, else the
    largest step term. The chain is "latency" where waiting on loads makes up most of it, else "serial"."""
    step_names = np.array([TERMS.index(t) for t in ("tensor", "exp2", "issue", "smem", "l2", "serial")])
    step_dominant = np.where(st.chain_s >= st.step_terms.max(axis=0), TERMS.index("serial"),
                             step_names[st.step_terms.argmax(axis=0)])
    step_dominant = np.where((step_dominant == TERMS.index("serial")) & (st.exposed_s > st.core_s),
                             TERMS.index("latency"), step_dominant)
    return np.where(sched.dram_s > sched.scheduled_s, TERMS.index("memory"), step_dominant)


def predict_attention(shape: AttentionShape, columns: dict[str, np.ndarray], profile: HardwareProfile) -> AttentionBreakdown:
    """Cost of every config in `columns` for `shape` on `profile` (see AttentionBreakdown): the grid, the
    residency, one key block's work, the K/V traffic, the step and the schedule, each a named term above.

    One step = every resident CTA of an SM advancing one key block. A CTA's block is a serial chain
    (QKᵀ, the softmax, PV, the waits on their results and on loads the pipeline leaves exposed);
    the step combines that chain with the SM's shared units (tensor cores, SFUs, issue slots,
    shared memory, L2) that all resident CTAs use, and is never shorter than the whole chain.
    Programs then hold a slot for their prologue and their key blocks in the grid's dispatch order;
    DRAM traffic overlaps the whole schedule."""
    g = attention_grid(shape, columns)
    r = attention_residency(shape, g, profile)
    w = attention_block_work(shape, g, r, profile)
    tr = attention_traffic(shape, g, r, w, profile)
    st = attention_step(shape, g, r, w, tr, profile)
    sched = attention_schedule(shape, g, r, w, tr, st, profile)
    launch_s = profile.launch_overhead_us * 1e-6
    time_s = sched.main_s + launch_s + profile.dram_latency_ns * 1e-9  # the last stores drain to DRAM
    dominant = attention_dominant(st, sched)
    elem, d = DTYPE_BYTES[shape.dtype], shape.head_dim
    l2_bw, dram_bw, smem_bw = profile.l2_bw_gbps * 1e9, profile.dram_bw_gbps * 1e9, smem_bytes_per_sm_s(profile)
    us = 1e6
    return AttentionBreakdown(
        flops=g.flops, padded_flops=g.padded_flops, padding_efficiency=g.flops / g.padded_flops,
        key_blocks=g.key_blocks, masked_blocks=g.masked_per_program * g.programs, dram_bytes=tr.dram_bytes,
        l2_bytes=tr.l2_bytes, fits=attention_smem_bytes(r.tiles, d, elem) <= profile.smem_per_block_bytes,
        uses_wgmma=np.asarray(r.wgmma), warps_along_n=r.n_split,
        regs_per_thread=r.regs, programs=g.programs, ctas_per_sm=r.resident, occupancy_limiter=r.limiter,
        occupancy=r.resident * g.warps * THREADS_PER_WARP / profile.max_threads_per_sm,
        waves=g.programs / r.slots, wave_efficiency=np.minimum(sched.ideal_s / sched.main_s, 1.0),
        compute_us=us * g.padded_flops / (r.rate_sm * profile.sm_count),
        softmax_us=us * g.key_blocks * w.softmax_blk / profile.sm_count,
        smem_us=us * g.key_blocks * (w.smem_blk + w.spill_blk) / (smem_bw * profile.sm_count),
        l2_us=us * tr.l2_bytes / l2_bw,
        memory_us=us * tr.dram_bytes / dram_bw,
        latency_us=us * sched.span_blocks * st.chain_s,
        launch_us=np.full(g.bm.shape, us * launch_s),
        time_us=us * time_s, dominant=dominant,
        bound=np.array([TERM_BOUND[t] for t in TERMS])[dominant],
    )


ATTENTION_MODEL = CostModel(predict_attention, AttentionBreakdown, TERMS)
