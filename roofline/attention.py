"""The causal-attention forward cost model: warp layout, tensor vs softmax overlap, registers, K/V traffic and the causal tail."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates.attention_space import ROWS_PER_WARP, attention_regs_per_thread, attention_smem_bytes
from rooftune.candidates.shapes import DTYPE_BYTES, AttentionShape
from rooftune.candidates.space import cdiv
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.gemm import SUBPARTITIONS_PER_SM, overlap
from rooftune.roofline.lowering import REGISTER_BYTES, WARPS_PER_WARPGROUP, mma_flops_per_sm_s, uses_wgmma
from rooftune.roofline.occupancy import (
    THREADS_PER_WARP,
    clock_hz,
    ctas_per_sm,
    load_latency_s,
    smem_bytes_per_sm_s,
)

# Throughput per SM per clock comes from the profile: `sfu_ops_per_clock` exp2 results on the
# special-function units and `fp32_lanes_per_sm` 32-bit FP add/mul/FMA results (128 from compute
# capability 8.6 on, where four schedulers issuing one warp instruction each per clock make 128
# thread instructions of any kind the issue limit too; 64 on the A100).
# Online softmax, per score element besides its exp2: one FFMA (score·scale·log2e − row max), one
# max into the row maximum, one add into the row sum, one conversion of P to the input dtype.
SOFTMAX_FP32_OPS_PER_SCORE = 4
# Per key block each row also rescales its running max and sum: one exp2 (alpha) and a few FP32 ops.
ROW_OPS_PER_BLOCK = 4
# Latency of one wgmma/mma group from issue to usable result beyond its throughput time. An
# estimate, not a probed figure (pipelined units are ~100+ clocks deep); one key block waits on two
# dependent groups (QKᵀ before the softmax, PV before the next rescale of O).
MMA_LATENCY_CLOCKS = 128
DEPENDENT_MMA_GROUPS_PER_BLOCK = 2
# Greedy dispatch: when a program is dispatched, the running ones are on average half way through,
# so a slot frees about half a mean program before the fluid estimate (checked against an exact
# list-scheduling simulation of causal grids: within ~3% of its makespan).
IN_FLIGHT_REMAINING_FRACTION = 0.5
FP32_BYTES = 4
# ORDER bits (see candidates/attention_space.py).
ORDER_REVERSE, ORDER_HEADS_FASTEST = 1, 2

TERMS = ("tensor", "softmax", "smem", "l2", "serial", "latency", "memory")
TERM_BOUND = {"tensor": "compute", "softmax": "compute", "smem": "compute", "l2": "memory", "memory": "memory",
              "serial": "latency", "latency": "latency"}


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
    compute_us: np.ndarray
    softmax_us: np.ndarray
    memory_us: np.ndarray
    latency_us: np.ndarray
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


def predict_attention(shape: AttentionShape, columns: dict[str, np.ndarray], profile: HardwareProfile) -> AttentionBreakdown:
    """Cost of every config in `columns` for `shape` on `profile` (see AttentionBreakdown).

    One step = every resident CTA of an SM advancing one key block; the step time combines the
    SM's shared resources (tensor cores, exp2/FP32 pipes, shared memory, L2, DRAM) with the serial
    chain of one warpgroup (QKᵀ, softmax, PV in sequence), which other resident warpgroups hide."""
    bm, bn = np.asarray(columns["BLOCK_M"], np.int64), np.asarray(columns["BLOCK_N"], np.int64)
    order = np.asarray(columns.get("ORDER", np.zeros_like(bm)), np.int64)
    warps, stages = np.asarray(columns["num_warps"], np.int64), np.asarray(columns["num_stages"], np.int64)
    elem, d, s, heads = DTYPE_BYTES[shape.dtype], shape.head_dim, shape.seq, shape.batch * shape.heads
    clock = clock_hz(profile)

    # Key blocks per program, summarized per (BLOCK_M, BLOCK_N) pair.
    total_blocks = np.zeros(bm.shape)
    pairs = sorted(set(zip(bm.tolist(), bn.tolist())))
    per_q_of = {(m_, n_): _key_blocks(s, m_, n_, shape.causal) for m_, n_ in pairs}
    for (m_, n_), per_q in per_q_of.items():
        total_blocks[(bm == m_) & (bn == n_)] = per_q.sum()
    q_blocks = cdiv(s, bm)
    programs = q_blocks * heads
    key_blocks = total_blocks * heads
    masked = (q_blocks * cdiv(bm, bn) * heads) if shape.causal else np.zeros(bm.shape)
    flops = np.full(bm.shape, float(shape.flops))
    padded_flops = 4.0 * bm * bn * d * key_blocks

    # Warp layout. A warp owns ROWS_PER_WARP rows of the matrix fragment; warps beyond BLOCK_M /
    # ROWS_PER_WARP split the columns instead, so row max and row sum cross warps and P is re-laid
    # out through shared memory for PV. Warps along M form independent chains: a warpgroup of
    # 64 rows for wgmma (BLOCK_M a multiple of 64, warps a multiple of 4), one warp for mma.sync.
    wgmma = uses_wgmma(shape.dtype, bm, warps, profile)
    n_split = np.maximum(ROWS_PER_WARP * warps // bm, 1)
    warps_m = np.maximum(warps // n_split, 1)
    chains = np.where(wgmma, np.maximum(warps_m // WARPS_PER_WARPGROUP, 1), warps_m)
    chain_rows = bm / chains
    chain_share = np.minimum(1.0, warps / chains / SUBPARTITIONS_PER_SM)  # sub-partitions one chain spans
    rate_sm = mma_flops_per_sm_s(shape.dtype, wgmma, profile)

    # Registers per thread: fp32 O (BLOCK_M·head_dim) and S (BLOCK_M·BLOCK_N), P packed in the
    # input dtype for PV, and without a pipeline (num_stages 1) the K and V tiles staged between
    # their global load and shared-memory store. Above the per-thread limit the rest spills.
    threads = warps * THREADS_PER_WARP
    regs = (attention_regs_per_thread({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps}, d)
            + bm * bn * elem // (REGISTER_BYTES * threads)
            + np.where(stages <= 1, 2 * bn * d * elem // (REGISTER_BYTES * threads), 0))
    spilled = np.maximum(regs - profile.regs_per_thread_max, 0)
    tma = np.asarray(columns.get("TMA", np.zeros_like(bm)), np.int64)
    smem_cta = attention_smem_bytes({"BLOCK_M": bm, "BLOCK_N": bn, "num_stages": stages, "TMA": tma}, d, elem)
    resident, limiter = ctas_per_sm(smem_cta, np.minimum(regs, profile.regs_per_thread_max), warps, profile)
    slots = profile.sm_count * resident

    # One key block of one CTA.
    flops_blk = 4.0 * bm * bn * d
    scores = (bm * bn).astype(float)
    exps = scores + bm
    # The diagonal blocks' mask (a compare and select per score on BLOCK_M/BLOCK_N of a program's
    # blocks) is left out: second order, and a kernel with S unspecialized bounds-checks anyway.
    fp32_ops = scores * SOFTMAX_FP32_OPS_PER_SCORE + bm * d + bm * ROW_OPS_PER_BLOCK
    sfu_s = exps / (profile.sfu_ops_per_clock * clock)
    issue_s = (exps + fp32_ops) / (profile.fp32_lanes_per_sm * clock)
    softmax_blk = np.maximum(sfu_s, issue_s)  # the whole SM's pipes
    kv_bytes = 2.0 * bn * d * elem
    relayout = np.where(n_split > 1, bm * bn * elem * (1 + n_split) + 2 * 2 * bm * n_split * FP32_BYTES, 0)
    # Shared memory: K and V written by the copies; Q read by every warp column, K and V by every
    # chain; P and the cross-warp row statistics where warps split the columns.
    smem_blk = kv_bytes + n_split * bm * d * elem + chains * kv_bytes + relayout
    spill_blk = spilled * REGISTER_BYTES * 2 * threads  # spilled values stored and reloaded once per block

    # K and V stay in L2 across the programs that share them when the live heads' K/V fit.
    live_heads = np.where(order & ORDER_HEADS_FASTEST, np.minimum(heads, slots), cdiv(slots, q_blocks).clip(1, heads))
    # Grouped-query attention: a K/V head serves `group` query heads, so K and V are heads/group of Q's size.
    group = shape.heads // shape.kv_heads
    kv_live = cdiv(live_heads, group) * 2.0 * s * d * elem
    kv_reuse = kv_live <= profile.l2_bytes / 2
    qo_bytes = 2.0 * heads * s * d * elem
    kv_once = 2.0 * (heads // group) * s * d * elem
    l2_bytes = key_blocks * (kv_bytes + spill_blk) + qo_bytes
    dram_bytes = np.where(kv_reuse, kv_once, key_blocks * kv_bytes) + qo_bytes
    # A load's latency: an L2 hit, or DRAM for the first of the reads of each K/V block. Counted as
    # the heaviest programs see it (they set the tail): all q_blocks programs of a head read each block.
    full_reads = q_blocks * cdiv(s, bn) * heads * kv_bytes
    miss = np.clip(np.where(kv_reuse, kv_once, full_reads) / full_reads, 0, 1)
    latency_s = load_latency_s(profile, miss)

    # The step of one SM with per_sm CTAs resident on each of `active` SMs.
    active = np.minimum(programs, profile.sm_count)
    per_sm = np.minimum(resident, cdiv(programs, profile.sm_count))
    sm_share = np.minimum(1.0, per_sm * warps / SUBPARTITIONS_PER_SM)
    l2_bw, dram_bw, smem_bw = profile.l2_bw_gbps * 1e9, profile.dram_bw_gbps * 1e9, smem_bytes_per_sm_s(profile)
    resources = np.stack([
        per_sm * flops_blk / (rate_sm * sm_share),
        per_sm * softmax_blk / sm_share,
        per_sm * (smem_blk + spill_blk) / smem_bw,
        per_sm * (kv_bytes + spill_blk) * active / l2_bw,
    ])
    # One chain's block in sequence: its QKᵀ, softmax and PV at the share of the SM its warps
    # span, the relayout, two dependent MMA latencies. Without a pipeline (num_stages 1) the warps
    # also wait for the K/V load and store the tiles from registers into shared memory themselves.
    chain_frac = chain_rows / bm
    chain_s = ((flops_blk / rate_sm + softmax_blk) * chain_frac / chain_share + relayout / smem_bw
               + DEPENDENT_MMA_GROUPS_PER_BLOCK * MMA_LATENCY_CLOCKS / clock
               + np.where(stages <= 1, latency_s + kv_bytes / smem_bw, 0.0))
    # A stage's buffer is refilled only after the MMA reading it finishes (as in roofline/gemm.py),
    # so with S stages a CTA's block period P obeys (S-1)·P >= latency + its own chain.
    prefetch_s = np.where(stages <= 1, 0.0, (latency_s + chain_s) / np.maximum(stages - 1, 1))
    step_terms = np.concatenate([resources, chain_s[None], prefetch_s[None]])
    step = overlap(step_terms)  # seconds per key block per program, per_sm programs sharing an SM

    # Programs hold a slot for prologue + blocks · step; the grid's dispatch order sets the tail.
    prologue = latency_s + bm * d * elem * 2 * per_sm * active / dram_bw
    span_blocks = np.zeros(bm.shape)
    for (m_, n_), per_q in per_q_of.items():
        sel = (bm == m_) & (bn == n_)
        for o_, slots_ in set(zip(order[sel].tolist(), slots[sel].tolist())):
            span_blocks[sel & (order == o_) & (slots == slots_)] = makespan_blocks(
                program_sequence(per_q, heads, o_), slots_)
    programs_per_slot = np.maximum(programs / slots, 1.0)
    # DRAM moves Q, O and K/V (once per head where L2 keeps them) over the whole kernel, overlapped
    # with the schedule rather than charged per block (a short grid is not a stream of blocks).
    dram_s = dram_bytes / dram_bw
    scheduled_s = span_blocks * step + prologue * np.ceil(programs_per_slot)
    main_s = overlap(np.stack([scheduled_s, dram_s]))
    ideal_s = overlap(np.stack([(key_blocks / np.minimum(slots, programs)) * step + prologue * programs_per_slot, dram_s]))
    launch_s = profile.launch_overhead_us * 1e-6
    time_s = main_s + launch_s
    # What binds: DRAM where the whole-kernel traffic outlasts the schedule, else the largest step term.
    step_names = [t for t in TERMS if t != "memory"]
    dominant = np.where(dram_s > scheduled_s, TERMS.index("memory"),
                        np.array([TERMS.index(t) for t in step_names])[step_terms.argmax(axis=0)])
    us = 1e6
    return AttentionBreakdown(
        flops=flops, padded_flops=padded_flops, padding_efficiency=flops / padded_flops,
        key_blocks=key_blocks, masked_blocks=masked, dram_bytes=dram_bytes, l2_bytes=l2_bytes,
        fits=smem_cta <= profile.smem_per_block_bytes, uses_wgmma=np.asarray(wgmma), warps_along_n=n_split,
        regs_per_thread=regs, programs=programs, ctas_per_sm=resident, occupancy_limiter=limiter,
        occupancy=resident * warps * THREADS_PER_WARP / profile.max_threads_per_sm,
        waves=programs / slots, wave_efficiency=np.minimum(ideal_s / main_s, 1.0),
        compute_us=us * padded_flops / (rate_sm * profile.sm_count),
        softmax_us=us * key_blocks * softmax_blk / profile.sm_count,
        memory_us=us * dram_bytes / (profile.dram_bw_gbps * 1e9),
        latency_us=us * span_blocks * np.maximum(chain_s / per_sm, prefetch_s),
        launch_us=np.full(bm.shape, us * launch_s),
        time_us=us * time_s, dominant=dominant,
        bound=np.array([TERM_BOUND[t] for t in TERMS])[dominant],
    )
