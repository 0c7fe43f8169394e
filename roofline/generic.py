"""The generic cost model of any Triton kernel's configs: the roofline + occupancy terms of the family models over
what the compiled binary and the IR say each config does (candidates/kernel_counts.py), vectorized over configs.

Per config: resident programs per SM from the binary's registers, shared memory and warps (roofline/occupancy.py
`ctas_per_sm`, the driver's reserved shared memory per block added, as the attention model does); the grid's
programs in full waves and a last partial one (`wave_split`); each wave's time from one program's terms with
`per_sm` programs sharing each of `active` SMs:

    tensor  = per_sm · mma FLOPs / (the dtype's matrix rate per SM, wgmma or mma.sync: roofline/lowering.py),
    vector  = per_sm · (elementwise results + each loop iteration's fixed instructions, the attention model's
              ISSUE_PER_BLOCK per warp) / (fp32_lanes_per_sm · clock),
    sfu     = per_sm · special-function results / (sfu_ops_per_clock · clock),
      (each at the share of the SM's four sub-partitions the resident warps keep busy, as the GEMM model's)
    smem    = per_sm · 2 · dot operand bytes / shared-memory bandwidth per SM (each tile written, then read),
    l2      = programs in flight · (loaded + stored + spilled bytes) / L2 bandwidth,
    dram    = programs in flight · DRAM bytes / DRAM bandwidth,
    latency = one program's waits on its loops' loads beyond its serial chain: a stage's buffer refills only once
              the work reading it is done, so its period obeys (stages − 1)·P >= a load's latency + its chain (the
              GEMM model's pipelined term; the work is the program's chain, or the busiest shared unit's for the
              programs sharing the SM where longer), less the matrix work of each iteration's last dot that waits
              for its results (Triton issues that dot asynchronously and waits for it only at the next iteration's
              first wait, after the refills: attention's PV, the attention model's "a load has PV to land"; a dot
              accumulating straight into the loop's accumulator, a GEMM's, waits for none and leaves nothing), and
              it waits max(serial, (iterations of loops that load · latency + work − that dot's time) /
              (stages − 1)) − serial; with one stage nothing is prefetched and each load in a loop is waited on as
              it is issued (loads in loops · latency),
    serial  = one program's matrix and elementwise work in sequence at the share of the SM its warps span (the
              elementwise instructions at CHAIN_ISSUE_CPI clocks each, the attention model's figure for a lone
              warp's dependences) plus the profile's `mma_latency_clocks` per dot that waits for its results
              (one whose result or accumulator passes through other work: attention's QKᵀ and PV, not a GEMM's
              chained K loop): a program is one dependent chain, which other resident programs can overlap but
              not shorten,

the shared units and the serial chain combined by `overlap` (the GEMM's p-norm: units never overlap perfectly), never
shorter than the chain with its waits (serial + latency: a wait occupies no unit, so other resident programs fill it;
the attention model's step). Programs of unequal work (a causal mask's rows) stretch the schedule by the ratio of their
greedy makespan to that of equal programs (roofline/attention.py `makespan_blocks`). Then the programs' first loads
and the launch overhead.

First loads: the launch's first programs start together and wait one load latency for their first loads; after them,
programs do not run in lock-step waves: as one program of an SM ends the next starts, and its first loads are waited
on while the SM's other resident programs work (a wait occupies no unit, as in the latency term). So each wave adds
that latency over its programs per SM: whole where a program runs alone on its SM, a share where others overlap it.
(One latency per wave whatever the residency charged a grid of many short programs, a row kernel's one row each,
a wave's latency over again: 0.9 µs × 100 waves where the DRAM stream takes 230 µs.)

The L2 / DRAM rule, per argument tensor: its loads read its unique bytes, min(loaded, tensor size), from DRAM once
where the tensor fits the share of L2 an operand reused across programs keeps (L2_REUSE_FRACTION of the GEMM
model). A larger tensor is read again by each set of programs in flight together (resident programs · SMs), which
share in L2 only the tiles they read alike: its loads × the share of them that are distinct among that many
consecutive programs (its sharing table, from where each program's tiles start: kernels/introspect/tally.py), at
least its unique bytes; where the IR does not say where a program's tiles lie (gathered rows), its re-reads
(loaded / unique − 1 per byte) miss L2 in the share of it L2 cannot hold, 1 − kept / size. Its stores write
min(stored, size) bytes; an argument of unknown size (or bytes not traced to one) goes to DRAM whole. Every loaded
and stored byte crosses L2, and so does local memory: a thread's spilled bytes stored and reloaded once per loop
iteration. A load's latency is an L2 hit's, or DRAM's for the share of L2
traffic DRAM serves (`load_latency_s`).

No constant here is fitted: every number is the profile's, the binary's, the IR's or the family models'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rooftune.candidates.kernel_counts import KernelCounts
from rooftune.hwprofiles import HardwareProfile, ProfileError
from rooftune.roofline.attention import CHAIN_ISSUE_CPI, ISSUE_PER_BLOCK, makespan_blocks
from rooftune.roofline.gemm import L2_REUSE_FRACTION, SUBPARTITIONS_PER_SM, overlap
from rooftune.roofline.lowering import mma_flops_per_sm_s
from rooftune.roofline.occupancy import (
    LIMITERS,
    THREADS_PER_WARP,
    clock_hz,
    ctas_per_sm,
    load_latency_s,
    smem_bytes_per_sm_s,
    wave_split,
)

TERMS = ("tensor", "vector", "sfu", "smem", "l2", "dram", "latency", "serial")
TERM_BOUND = {"tensor": "compute", "vector": "compute", "sfu": "compute", "smem": "compute", "l2": "memory",
              "dram": "memory", "latency": "latency", "serial": "latency"}
# Each operand tile of a dot is written to shared memory once and read by the matrix instructions once.
SMEM_PASSES_PER_OPERAND = 2
# A spilled register is stored and reloaded once per loop iteration.
SPILL_PASSES = 2
__all__ = ["LIMITERS", "TERMS", "GenericBreakdown", "dram_bytes", "predict_generic"]


@dataclass(frozen=True)
class GenericBreakdown:
    """Per-config cost terms of a user kernel's configs (one array element per config). Times in µs, bytes in
    bytes. The whole-GPU terms (`compute_us` .. `memory_us`) are each term alone over every wave."""

    flops: np.ndarray             # the matrix instructions' FLOPs over the grid
    padded_flops: np.ndarray      # the same (the IR counts what the matrix units compute, masked tiles whole)
    padding_efficiency: np.ndarray  # 1: the IR does not say how much of a tile a mask keeps
    dram_bytes: np.ndarray
    l2_bytes: np.ndarray
    smem_bytes_per_cta: np.ndarray
    regs_per_thread: np.ndarray
    local_bytes_per_thread: np.ndarray
    fits: np.ndarray              # it compiled, and its shared memory, registers and threads fit one SM
    uses_wgmma: np.ndarray
    programs: np.ndarray
    ctas_per_sm: np.ndarray
    occupancy_limiter: np.ndarray  # index into roofline.occupancy.LIMITERS
    occupancy: np.ndarray
    waves: np.ndarray
    wave_efficiency: np.ndarray   # full waves' share of the schedule, times the equal-work share
    imbalance: np.ndarray         # makespan of the programs' unequal work over that of equal work (>= 1)
    compute_us: np.ndarray        # matrix FLOPs at the matrix rate of every SM
    vector_us: np.ndarray         # elementwise results at every SM's FP32 lanes
    sfu_us: np.ndarray            # special-function results at every SM's SFUs
    smem_us: np.ndarray
    l2_us: np.ndarray
    memory_us: np.ndarray         # DRAM bytes / DRAM bandwidth
    latency_us: np.ndarray        # one program's waits on its loops' loads, and the waves' first loads
    serial_us: np.ndarray         # one program's work in sequence, each wave
    launch_us: np.ndarray
    time_us: np.ndarray
    dominant: np.ndarray          # index into TERMS of the term that binds the busiest wave
    bound: np.ndarray             # 'compute' | 'memory' | 'latency'


def _rate(dtype: str, wgmma: np.ndarray, profile: HardwareProfile) -> np.ndarray:
    """Matrix FLOP/s of one SM for a dot dtype (FP8 at bf16's rate on a profile without an FP8 one)."""
    try:
        return mma_flops_per_sm_s(dtype, wgmma, profile)
    except ProfileError:
        return mma_flops_per_sm_s("bf16", wgmma, profile)


def shared_share(sharing: tuple[tuple[float, float], ...], in_flight: float) -> float:
    """The share of loaded bytes that are distinct among `in_flight` programs, from a tensor's sharing table
    (log-linear between its sizes; its last beyond)."""
    sizes = np.log2([max(size, 1.0) for size, _ in sharing])
    return float(np.interp(np.log2(max(in_flight, 1.0)), sizes, [share for _, share in sharing]))


def dram_bytes(counts: KernelCounts, profile: HardwareProfile, in_flight: float = 1.0) -> float:
    """Bytes the call's loads and stores move to and from DRAM with `in_flight` programs running together
    (module docstring's rule)."""
    kept = L2_REUSE_FRACTION * profile.l2_bytes
    total = 0.0
    for t in counts.tensors:
        if t.tensor_bytes <= 0:
            total += t.load_bytes + t.store_bytes
            continue
        unique = min(t.load_bytes, t.tensor_bytes)
        if t.tensor_bytes <= kept:
            reads = unique
        elif t.sharing:
            reads = max(unique, t.load_bytes * shared_share(t.sharing, in_flight))
        else:
            rereads = t.load_bytes / unique - 1.0 if unique > 0 else 0.0
            reads = unique * (1.0 + rereads * (1.0 - kept / t.tensor_bytes))
        total += reads + min(t.store_bytes, t.tensor_bytes)
    return total


def _imbalance(runs: tuple[tuple[float, int], ...], slots: int) -> float:
    """Greedy makespan of programs of relative work `runs` on `slots` slots over that of equal programs."""
    if len(runs) <= 1:
        return 1.0
    sizes = np.repeat([v for v, _ in runs], [n for _, n in runs])
    equal = makespan_blocks(np.ones_like(sizes), slots)
    return max(1.0, makespan_blocks(sizes, slots) / equal) if equal > 0 else 1.0


@dataclass(frozen=True)
class ProgramWork:
    """One program's work per config (arrays): seconds of each SM unit at full rate, bytes through L2 and DRAM,
    iterations of loops that load; and the configs' facts."""

    tensor_s: np.ndarray
    vector_s: np.ndarray
    sfu_s: np.ndarray
    smem_s: np.ndarray
    l2_bytes: np.ndarray
    dram_bytes: np.ndarray
    iterations: np.ndarray
    loop_loads: np.ndarray
    warps: np.ndarray
    stages: np.ndarray
    latency_s: np.ndarray
    chain_s: np.ndarray          # one program's work in sequence, at the share of the SM its warps span
    async_s: np.ndarray          # each loop iteration's last waiting dot at the chain's matrix rate (its refills are
                                 # issued before that dot is waited for), per program


def program_work(counts: Sequence[KernelCounts], profile: HardwareProfile, in_flight: np.ndarray) -> ProgramWork:
    """Each config's work per program, at one SM's full rates, with `in_flight` programs running together
    (module docstring)."""
    c = counts
    programs = np.array([max(k.programs, 1) for k in c], dtype=float)
    wgmma = np.array([k.compiled.wgmma for k in c])
    tensor = np.zeros(len(c))
    for i, k in enumerate(c):
        tensor[i] = sum(f / _rate(d, wgmma[i:i + 1], profile)[0] for d, f in k.mma_flops)
    clock = clock_hz(profile)
    warps = np.array([k.compiled.num_warps for k in c], dtype=float)
    iterations = np.array([k.loop_iterations for k in c], dtype=float)
    spilled = np.array([k.compiled.local_bytes_per_thread * k.compiled.num_warps * THREADS_PER_WARP * SPILL_PASSES
                        for k in c], dtype=float) * np.maximum(iterations, 1.0)
    l2 = np.array([k.load_bytes + k.store_bytes for k in c]) / programs + spilled
    dram = np.array([dram_bytes(k, profile, f) for k, f in zip(c, in_flight)]) / programs
    miss = np.clip(dram / np.maximum(l2, 1.0), 0.0, 1.0)
    # each iteration of a loop also issues its barriers, copies, matrix and loop-control instructions: the attention
    # model's fixed instructions per key block, per warp
    control = iterations * ISSUE_PER_BLOCK * warps * THREADS_PER_WARP
    vector_s = (np.array([k.vector_ops for k in c]) / programs + control) / (profile.fp32_lanes_per_sm * clock)
    sfu_s = np.array([k.sfu_ops for k in c]) / programs / (profile.sfu_ops_per_clock * clock)
    share = np.minimum(1.0, warps / SUBPARTITIONS_PER_SM)
    dots = np.array([k.dot_executions for k in c], dtype=float)
    matrix_chain_s = tensor / programs / share
    return ProgramWork(
        tensor_s=tensor / programs, vector_s=vector_s, sfu_s=sfu_s,
        smem_s=np.array([k.dot_operand_bytes for k in c]) * SMEM_PASSES_PER_OPERAND / programs
        / smem_bytes_per_sm_s(profile),
        l2_bytes=l2, dram_bytes=dram, iterations=iterations, warps=warps,
        loop_loads=np.array([k.loop_loads for k in c], dtype=float),
        stages=np.array([k.compiled.num_stages for k in c], dtype=float), latency_s=load_latency_s(profile, miss),
        chain_s=(tensor / programs + CHAIN_ISSUE_CPI * (vector_s + sfu_s)) / share
        + dots * profile.mma_latency_clocks / clock,
        async_s=np.minimum(matrix_chain_s * iterations / np.maximum(dots, 1.0), matrix_chain_s) * (dots > 0))


def wave_terms(w: ProgramWork, per_sm, in_flight, profile: HardwareProfile) -> np.ndarray:
    """Seconds of each TERMS row for a wave with `per_sm` programs on each SM and `in_flight` in all."""
    per_sm = np.maximum(per_sm, 1)
    busy = np.minimum(1.0, per_sm * w.warps / SUBPARTITIONS_PER_SM)  # the SM's sub-partitions the warps fill
    resources = np.stack([
        per_sm * w.tensor_s / busy, per_sm * w.vector_s / busy, per_sm * w.sfu_s / busy, per_sm * w.smem_s,
        in_flight * w.l2_bytes / (profile.l2_bw_gbps * 1e9), in_flight * w.dram_bytes / (profile.dram_bw_gbps * 1e9),
    ])
    return np.concatenate([resources, exposed_s(w, resources.max(axis=0))[None], w.chain_s[None]])


def exposed_s(w: ProgramWork, busy: np.ndarray) -> np.ndarray:
    """Seconds one program waits on its loops' loads beyond its own serial chain, where the SM's busiest shared unit
    takes `busy` for the wave. S stages refill a buffer only once the work reading it is done, which is no sooner
    than the program's chain and than the shared units' work of every resident program: its period P obeys
    (S − 1)·P >= latency + max(chain, busy) (the GEMM model's pipeline), less the iteration's last waiting dot,
    which runs past the refills (`ProgramWork.async_s`: Triton issues it asynchronously and waits for it at the
    next iteration's first wait); one stage prefetches nothing, and each load of an iteration is waited on as it is
    issued. A wait occupies no unit the SM shares: other resident programs fill it."""
    chain = w.chain_s
    work = np.maximum(chain, busy)
    pipelined = np.maximum(chain, (w.iterations * w.latency_s + work - w.async_s) / np.maximum(w.stages - 1, 1))
    return np.where(w.stages <= 1, w.loop_loads * w.latency_s, pipelined - chain)


def wave_time(terms: np.ndarray) -> np.ndarray:
    """A wave's seconds from its TERMS rows: the `overlap` of the SM's shared units and one program's serial chain
    (the units the resident programs contend for), never shorter than that chain with its waits on loads (the
    attention model's step). Its programs' first loads are `first_load_s`'s."""
    latency, serial = TERMS.index("latency"), TERMS.index("serial")
    return np.maximum(overlap(np.delete(terms, latency, axis=0)), terms[serial] + terms[latency])


def first_load_s(w: ProgramWork, full: np.ndarray, resident: np.ndarray, last_per_sm: np.ndarray) -> np.ndarray:
    """Seconds the programs' first loads add to the launch: one load latency for the first wave, whose programs
    start together, and each later wave that latency over its programs per SM (module docstring)."""
    later = np.maximum(full - 1, 0) / np.maximum(resident, 1) + (full > 0) * (last_per_sm > 0) / np.maximum(
        last_per_sm, 1)
    return w.latency_s * (1.0 + later)


def _facts(counts: Sequence[KernelCounts], name: str) -> np.ndarray:
    return np.array([getattr(k.compiled, name) for k in counts], dtype=np.int64)


def predict_generic(counts: Sequence[KernelCounts], profile: HardwareProfile) -> GenericBreakdown:
    """Cost of every config of `counts` (one call of one kernel) on `profile` (module docstring)."""
    smem, regs, warps = _facts(counts, "smem_bytes"), _facts(counts, "regs_per_thread"), _facts(counts, "num_warps")
    reserved = profile.smem_per_sm_bytes - profile.smem_per_block_bytes  # the driver's, per resident block
    resident, limiter = ctas_per_sm(smem + reserved, np.minimum(regs, profile.regs_per_thread_max), warps, profile)
    programs = np.array([max(k.programs, 1) for k in counts], dtype=np.int64)
    w = program_work(counts, profile, np.minimum(programs, resident * profile.sm_count))
    full, last_per_sm, _, waves, wave_eff = wave_split(programs, resident, profile.sm_count)
    full_terms = wave_terms(w, resident, resident * profile.sm_count, profile)
    last_terms = wave_terms(w, last_per_sm, programs - full * resident * profile.sm_count, profile)
    has_last = last_per_sm > 0
    imbalance = np.array([_imbalance(k.work_runs, int(profile.sm_count * r)) for k, r in zip(counts, resident)])
    first_s = first_load_s(w, full, resident, last_per_sm)
    main_s = (full * wave_time(full_terms) + has_last * wave_time(last_terms)) * imbalance + first_s
    launch_s = profile.launch_overhead_us * 1e-6
    dominant = np.where(full > 0, full_terms.argmax(axis=0), last_terms.argmax(axis=0))
    flops = np.array([k.total_mma_flops for k in counts], dtype=float)
    n_waves = full + has_last
    us, sms = 1e6, profile.sm_count
    return GenericBreakdown(
        flops=flops, padded_flops=flops, padding_efficiency=np.ones(len(counts)),
        dram_bytes=w.dram_bytes * programs, l2_bytes=w.l2_bytes * programs, smem_bytes_per_cta=smem,
        regs_per_thread=regs, local_bytes_per_thread=_facts(counts, "local_bytes_per_thread"),
        fits=(smem <= profile.smem_per_block_bytes) & (regs <= profile.regs_per_thread_max)
        & (warps * THREADS_PER_WARP <= profile.max_threads_per_sm),
        uses_wgmma=np.array([k.compiled.wgmma for k in counts]), programs=programs, ctas_per_sm=resident,
        occupancy_limiter=limiter, occupancy=resident * warps * THREADS_PER_WARP / profile.max_threads_per_sm,
        waves=waves, wave_efficiency=wave_eff / imbalance, imbalance=imbalance,
        compute_us=us * w.tensor_s * programs / sms, vector_us=us * w.vector_s * programs / sms,
        sfu_us=us * w.sfu_s * programs / sms, smem_us=us * w.smem_s * programs / sms,
        l2_us=us * w.l2_bytes * programs / (profile.l2_bw_gbps * 1e9),
        memory_us=us * w.dram_bytes * programs / (profile.dram_bw_gbps * 1e9),
        latency_us=us * (n_waves * np.where(full > 0, full_terms, last_terms)[TERMS.index("latency")] + first_s),
        serial_us=us * n_waves * w.chain_s,
        launch_us=np.full(len(counts), us * launch_s), time_us=us * (main_s + launch_s), dominant=dominant,
        bound=np.array([TERM_BOUND[t] for t in TERMS])[dominant])
