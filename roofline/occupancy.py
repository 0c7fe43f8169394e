"""Per-SM rates derived from a profile, CTAs per SM from shared memory, registers and warps, and waves."""

from __future__ import annotations

import numpy as np

from rooftune.hwprofiles import HardwareProfile

# Shared memory delivers 32 banks × 4 bytes per clock on every NVIDIA SM since Volta; the tensor
# cores read their operands (wgmma) or fragments (ldmatrix for mma.sync) through it.
SMEM_BYTES_PER_CLOCK = 128
# Round trip of one pipeline stage's asynchronous copy (issue, L2 or DRAM access, shared-memory
# write, barrier) on a loaded GPU. Pointer-chase microbenchmarks of A100/H100 put an idle L2 hit at
# about 250-450 ns (near / far partition) and an idle DRAM access at about 500-650 ns; queueing
# under full load adds roughly half again. A pipelined loop must keep latency × bandwidth bytes in
# flight (Little's law) to reach the bandwidth.
L2_LATENCY_NS = 500.0
DRAM_LATENCY_NS = 900.0
# Registers are allocated per warp in units of 256 (8 per thread).
REG_ALLOC_UNIT_PER_THREAD = 8
THREADS_PER_WARP = 32


def clock_hz(profile: HardwareProfile) -> float:
    return profile.sm_clock_mhz * 1e6


def tensor_flops_per_sm_s(profile: HardwareProfile, dtype: str) -> float:
    """Dense matrix-unit rate of one SM, FLOP/s: tensor_tflops(dtype) · 1e12 / sm_count."""
    return profile.tensor_tflops(dtype) * 1e12 / profile.sm_count


def smem_bytes_per_sm_s(profile: HardwareProfile) -> float:
    """Shared-memory bandwidth of one SM, bytes/s: SMEM_BYTES_PER_CLOCK · SM clock."""
    return SMEM_BYTES_PER_CLOCK * clock_hz(profile)


def ctas_per_sm(smem_bytes: np.ndarray, regs_per_thread: np.ndarray, num_warps: np.ndarray,
                profile: HardwareProfile) -> tuple[np.ndarray, np.ndarray]:
    """Resident CTAs per SM = min(smem/smem_per_cta, regs/regs_per_cta, threads/threads_per_cta, max CTAs).

    Returns (ctas, limiter) where limiter names what binds: 0 smem, 1 registers, 2 threads, 3 CTA cap.
    Never below 1: a config that does not fit at all is illegal, not slow; legality says so."""
    regs = -(-np.asarray(regs_per_thread) // REG_ALLOC_UNIT_PER_THREAD) * REG_ALLOC_UNIT_PER_THREAD
    threads = num_warps * THREADS_PER_WARP
    by_smem = profile.smem_per_sm_bytes // np.maximum(smem_bytes, 1)
    by_regs = profile.regs_per_sm // np.maximum(regs * threads, 1)
    by_threads = profile.max_threads_per_sm // threads
    by_cap = np.full_like(by_threads, profile.max_ctas_per_sm)
    stacked = np.stack([by_smem, by_regs, by_threads, by_cap])
    return np.maximum(stacked.min(axis=0), 1), stacked.argmin(axis=0)


LIMITERS = ("smem", "registers", "threads", "cta cap")


def wave_split(ctas: np.ndarray, slots_per_sm: np.ndarray, sm_count: int):
    """Split `ctas` CTAs into full waves of sm_count·slots_per_sm and a partial last wave.

    Returns (full_waves, last_ctas_per_sm, last_active_sms, waves, efficiency) where waves is
    fractional (ctas / slots) and efficiency = waves / ceil(waves) (1 when the last wave is full)."""
    slots = sm_count * slots_per_sm
    full = ctas // slots
    rest = ctas - full * slots
    last_per_sm = -(-rest // sm_count)
    last_active = np.minimum(rest, sm_count)
    waves = ctas / slots
    efficiency = waves / np.ceil(waves)
    return full, last_per_sm, last_active, waves, efficiency
