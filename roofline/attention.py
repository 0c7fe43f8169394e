"""The causal-attention forward cost model: key blocks per query block, softmax, pipelining and scheduling order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates.attention_space import attention_regs_per_thread, attention_smem_bytes
from rooftune.candidates.shapes import DTYPE_BYTES, AttentionShape
from rooftune.candidates.space import cdiv
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.gemm import MMA_SYNC_FRACTION_OF_WGMMA
from rooftune.roofline.lowering import (
    TENSOR_DTYPES,
    WARPS_PER_WARPGROUP,
    WGMMA_MIN_COMPUTE_CAPABILITY,
    WGMMA_ROWS,
)
from rooftune.roofline.occupancy import (
    clock_hz,
    ctas_per_sm,
    smem_bytes_per_sm_s,
    tensor_flops_per_sm_s,
)

# exp2 runs on the special-function units: 16 results per clock per SM on compute capability
# 8.x and 9.0 (CUDA C Programming Guide, arithmetic instruction throughput). One per score element.
SFU_OPS_PER_CLOCK_PER_SM = 16
# ORDER bits (see candidates/attention_space.py).
ORDER_REVERSE, ORDER_HEADS_FASTEST = 1, 2

TERMS = ("tensor", "softmax", "smem", "memory", "latency")
TERM_BOUND = {"tensor": "compute", "softmax": "compute", "smem": "compute", "memory": "memory", "latency": "latency"}


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
    programs: np.ndarray
    ctas_per_sm: np.ndarray
    occupancy_limiter: np.ndarray
    occupancy: np.ndarray
    waves: np.ndarray
    wave_efficiency: np.ndarray  # mean program time / time the slots are held (tail imbalance)
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


def predict_attention(shape: AttentionShape, columns: dict[str, np.ndarray], profile: HardwareProfile) -> AttentionBreakdown:
    """Cost of every config in `columns` for `shape` on `profile` (see AttentionBreakdown)."""
    bm, bn = np.asarray(columns["BLOCK_M"], np.int64), np.asarray(columns["BLOCK_N"], np.int64)
    order = np.asarray(columns.get("ORDER", np.zeros_like(bm)), np.int64)
    warps, stages = np.asarray(columns["num_warps"], np.int64), np.asarray(columns["num_stages"], np.int64)
    elem, d, s, heads = DTYPE_BYTES[shape.dtype], shape.head_dim, shape.seq, shape.batch * shape.heads

    # Key blocks per program, summarized per (BLOCK_M, BLOCK_N) pair.
    total_blocks = np.zeros(bm.shape)
    first_blocks, last_blocks = np.zeros(bm.shape), np.zeros(bm.shape)
    for m_, n_ in set(zip(bm.tolist(), bn.tolist())):
        per_q = _key_blocks(s, m_, n_, shape.causal)
        sel = (bm == m_) & (bn == n_)
        total_blocks[sel], first_blocks[sel], last_blocks[sel] = per_q.sum(), per_q[0], per_q[-1]
    q_blocks = cdiv(s, bm)
    programs = q_blocks * heads
    key_blocks = total_blocks * heads
    masked = (q_blocks * cdiv(bm, bn) * heads) if shape.causal else np.zeros(bm.shape)
    flops = np.full(bm.shape, float(shape.flops))
    padded_flops = 4.0 * bm * bn * d * key_blocks

    smem_cta = attention_smem_bytes({"BLOCK_M": bm, "BLOCK_N": bn, "num_stages": stages}, d, elem)
    regs = attention_regs_per_thread({"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps}, d)
    resident, limiter = ctas_per_sm(smem_cta, regs, warps, profile)
    slots = profile.sm_count * resident

    tensor_dtype = shape.dtype in TENSOR_DTYPES
    hopper = tensor_dtype and profile.compute_capability >= WGMMA_MIN_COMPUTE_CAPABILITY
    wgmma = hopper & (bm % WGMMA_ROWS == 0) & (warps % WARPS_PER_WARPGROUP == 0)
    rate_sm = tensor_flops_per_sm_s(profile, shape.dtype) * np.where(wgmma | (not hopper), 1.0, MMA_SYNC_FRACTION_OF_WGMMA)

    # Per key block of one program: both matmuls, the exponentials, K and V through smem and L2.
    flops_blk = 4.0 * bm * bn * d
    t_tensor = flops_blk / rate_sm
    t_sfu = bm * bn / (SFU_OPS_PER_CLOCK_PER_SM * clock_hz(profile))
    kv_bytes = 2.0 * bn * d * elem
    t_smem = (kv_bytes * (1 + np.maximum(warps // WARPS_PER_WARPGROUP, 1)) + bm * bn * elem) / smem_bytes_per_sm_s(profile)

    # K and V stay in L2 across the programs that share them when the live heads' K/V fit.
    live_heads = np.where(order & ORDER_HEADS_FASTEST, np.minimum(heads, slots), cdiv(slots, q_blocks).clip(1, heads))
    kv_live = live_heads * 2.0 * s * d * elem
    kv_reuse = kv_live <= profile.l2_bytes / 2
    qo_bytes = 2.0 * heads * s * d * elem
    kv_once = 2.0 * heads * s * d * elem
    l2_bytes = key_blocks * kv_bytes + qo_bytes
    dram_bytes = np.where(kv_reuse, kv_once, key_blocks * kv_bytes) + qo_bytes
    miss = np.clip(dram_bytes / l2_bytes, 0, 1)
    latency_s = (profile.l2_latency_ns + miss * (profile.dram_latency_ns - profile.l2_latency_ns)) * 1e-9

    active = np.minimum(programs, profile.sm_count)
    per_sm = np.minimum(resident, cdiv(programs, profile.sm_count))
    bw = np.minimum(profile.dram_bw_gbps, profile.l2_bw_gbps) * 1e9
    t_mem = (dram_bytes / key_blocks) * per_sm * active / bw
    resources = np.stack([per_sm * t_tensor, per_sm * t_sfu, per_sm * t_smem, t_mem])
    busy = resources.max(axis=0)
    serial = t_tensor + t_sfu  # softmax waits for QKᵀ and PV for softmax inside one CTA
    pipelined = (latency_s + np.maximum(busy, serial)) / np.maximum(stages - 1, 1) + np.where(stages <= 1, serial, 0)
    terms = np.concatenate([resources, pipelined[None]])
    period = terms.max(axis=0)  # seconds per key block per program, with per_sm programs sharing an SM

    # Programs hold slots for (prologue + blocks · period); the heaviest-first order (ORDER bit 0)
    # leaves the lightest programs for the tail, light-first leaves the heaviest.
    prologue = latency_s + bm * d * elem * 2 * per_sm * active / bw
    mean_prog = prologue + (total_blocks / q_blocks) * period
    last_prog = prologue + np.where(order & ORDER_REVERSE, first_blocks, last_blocks) * period
    waves = programs / slots
    body = mean_prog * programs / np.minimum(slots, programs)
    tail = np.where(waves > 1, 0.5 * last_prog, np.maximum(last_prog, mean_prog) - mean_prog)
    tail = np.where(waves <= 1, prologue + last_blocks * period - mean_prog, tail)
    main_s = body + np.maximum(tail, 0)
    launch_s = profile.launch_overhead_us * 1e-6
    time_s = main_s + launch_s
    dominant = terms.argmax(axis=0)
    us = 1e6
    return AttentionBreakdown(
        flops=flops, padded_flops=padded_flops, padding_efficiency=flops / padded_flops,
        key_blocks=key_blocks, masked_blocks=masked, dram_bytes=dram_bytes, l2_bytes=l2_bytes,
        fits=smem_cta <= profile.smem_per_block_bytes, uses_wgmma=np.asarray(wgmma), programs=programs,
        ctas_per_sm=resident, occupancy_limiter=limiter, occupancy=resident * warps * 32 / profile.max_threads_per_sm,
        waves=waves, wave_efficiency=body / main_s,
        compute_us=us * padded_flops / (rate_sm * profile.sm_count),
        softmax_us=us * key_blocks * t_sfu / profile.sm_count,
        memory_us=us * dram_bytes / (profile.dram_bw_gbps * 1e9),
        latency_us=us * np.ceil(waves) * (prologue + last_blocks * latency_s / np.maximum(stages - 1, 1)),
        launch_us=np.full(bm.shape, us * launch_s),
        time_us=us * time_s, dominant=dominant,
        bound=np.array([TERM_BOUND[t] for t in TERMS])[dominant],
    )
