"""Per-SM rates derived from a profile, CTAs per SM from shared memory, registers and warps, and waves."""

from __future__ import annotations

import numpy as np

from rooftune.hwprofiles import HardwareProfile

# Registers are allocated per warp in units of 256 (8 per thread).
REG_ALLOC_UNIT_PER_THREAD = 8
THREADS_PER_WARP = 32


def clock_hz(profile: HardwareProfile) -> float:
    return profile.sm_clock_mhz * 1e6


def tensor_flops_per_sm_s(profile: HardwareProfile, dtype: str) -> float:
    """Dense matrix-unit rate of one SM, FLOP/s: tensor_tflops(dtype) · 1e12 / sm_count."""
    return profile.tensor_tflops(dtype) * 1e12 / profile.sm_count


def smem_bytes_per_sm_s(profile: HardwareProfile) -> float:
    """Shared-memory bandwidth of one SM, bytes/s: profile.smem_bytes_per_clock · SM clock."""
    return profile.smem_bytes_per_clock * clock_hz(profile)


def load_latency_s(profile: HardwareProfile, miss: np.ndarray) -> np.ndarray:
    """Effective latency of one pipelined load, s: an L2 hit, or a DRAM access for the fraction
    `miss` of bytes L2 does not serve: (l2_latency_ns + miss · (dram_latency_ns − l2_latency_ns)) · 1e-9."""
    return (profile.l2_latency_ns + miss * (profile.dram_latency_ns - profile.l2_latency_ns)) * 1e-9


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
