"""The generic model on counts whose cost is known: a copy at DRAM bandwidth, occupancy from the compiled facts
against the profile's limits, the L2 / DRAM rule, waves, unequal programs, the matrix rate."""

from dataclasses import replace

import numpy as np
import pytest

from rooftune.candidates.kernel_counts import CompiledFacts, KernelCounts, TensorTraffic, counts_from_dict
from rooftune.hwprofiles import load_profile
from rooftune.roofline.generic import TERMS, dram_bytes, predict_generic
from rooftune.roofline.lowering import MMA_SYNC_FRACTION_OF_WGMMA
from rooftune.roofline.occupancy import LIMITERS

H100 = load_profile("h100_sxm")
FACTS = CompiledFacts(num_warps=4, num_stages=3, regs_per_thread=32, smem_bytes=0)
MB = 1 << 20


def copy(size_bytes: int, programs: int, facts: CompiledFacts = FACTS) -> KernelCounts:
    return KernelCounts(programs=programs, compiled=facts, tensors=(
        TensorTraffic("x", size_bytes, float(size_bytes), 0.0), TensorTraffic("y", size_bytes, 0.0, float(size_bytes))),
        vector_ops=size_bytes / 2.0)


def test_a_large_copy_runs_at_dram_bandwidth():
    size = 1 << 30
    bd = predict_generic([copy(size, size // 4096)], H100)
    floor_us = 2 * size / (H100.dram_bw_gbps * 1e9) * 1e6
    assert TERMS[bd.dominant[0]] == "dram" and bd.bound[0] == "memory"
    assert floor_us < bd.time_us[0] < 1.25 * floor_us
    assert bd.memory_us[0] == pytest.approx(floor_us)


def test_occupancy_comes_from_the_binarys_registers_shared_memory_and_warps():
    reserved = H100.smem_per_sm_bytes - H100.smem_per_block_bytes
    cases = {  # facts -> (resident programs per SM, what limits them)
        replace(FACTS, num_warps=8, regs_per_thread=64, smem_bytes=100 * 1024): (2, "smem"),
        replace(FACTS, num_warps=8, regs_per_thread=255): (1, "registers"),  # 255 rounds up to 256
        replace(FACTS, num_warps=4, regs_per_thread=16, smem_bytes=0): (16, "threads"),
        replace(FACTS, num_warps=1, regs_per_thread=16, smem_bytes=0): (32, "cta cap"),
    }
    bd = predict_generic([copy(MB, 1000, f) for f in cases], H100)
    for i, (facts, (resident, limiter)) in enumerate(cases.items()):
        assert (bd.ctas_per_sm[i], LIMITERS[bd.occupancy_limiter[i]]) == (resident, limiter), facts
    smem, regs = (100 * 1024 + reserved), 256 * 8 * 32
    assert bd.ctas_per_sm[0] == min(H100.smem_per_sm_bytes // smem, H100.regs_per_sm // (64 * 256))
    assert bd.ctas_per_sm[1] == H100.regs_per_sm // regs
    too_big = replace(FACTS, smem_bytes=H100.smem_per_block_bytes + 1)
    assert list(predict_generic([copy(MB, 10), copy(MB, 10, too_big)], H100).fits) == [True, False]


def test_a_tensor_that_fits_l2_is_read_from_dram_once_a_larger_one_partly_again():
    small = TensorTraffic("w", 4 * MB, 64.0 * 4 * MB, 0.0)           # read 64 times, kept by L2
    kept = 0.5 * H100.l2_bytes
    large = TensorTraffic("w", 4 * H100.l2_bytes, 8.0 * 4 * H100.l2_bytes, 0.0)
    unknown = TensorTraffic("(untraced)", 0, 1000.0, 24.0)
    counts = KernelCounts(1, FACTS, tensors=(small,))
    assert dram_bytes(counts, H100) == 4 * MB
    miss = 1 - kept / (4 * H100.l2_bytes)
    assert dram_bytes(replace(counts, tensors=(large,)), H100) == pytest.approx(4 * H100.l2_bytes * (1 + 7 * miss))
    assert dram_bytes(replace(counts, tensors=(unknown,)), H100) == 1024.0
    # where the IR says which programs read alike: each set in flight reads its distinct tiles
    shared = replace(large, sharing=((1.0, 1.0), (64.0, 0.5), (256.0, 0.25)))
    assert dram_bytes(replace(counts, tensors=(shared,)), H100, in_flight=128) == pytest.approx(8.0 * 4 * H100.l2_bytes
                                                                                               * 0.375)
    assert dram_bytes(replace(counts, tensors=(shared,)), H100, in_flight=1e6) == pytest.approx(2.0 * 4 * H100.l2_bytes)


def test_the_last_waves_programs_and_unequal_programs_cost_time():
    slots = H100.sm_count * 16  # 4 warps, 32 registers: 16 programs per SM
    bd = predict_generic([copy(64 * MB, slots), copy(64 * MB, 2 * slots), copy(64 * MB, 2 * slots + 1)], H100)
    assert list(bd.waves[:2]) == [1.0, 2.0] and bd.wave_efficiency[2] < 1.0
    programs = 4 * slots  # one program does 8 programs' work: the schedule waits for it
    uneven = replace(copy(64 * MB, programs), work_runs=((8.0, 1), ((programs - 8) / (programs - 1), programs - 1)))
    even = copy(64 * MB, programs)
    bd = predict_generic([even, uneven], H100)
    assert bd.imbalance[0] == 1.0 and bd.imbalance[1] > 1.0 and bd.time_us[1] > bd.time_us[0]


def test_matrix_flops_at_the_dtypes_rate_wgmma_or_not():
    flops = 2.0 * 8192 ** 3
    dots = [KernelCounts(512, replace(FACTS, num_warps=8, regs_per_thread=168, smem_bytes=160 * 1024, wgmma=w),
                         mma_flops=(("bf16", flops),)) for w in (True, False)]
    bd = predict_generic(dots, H100)
    assert bd.compute_us[0] == pytest.approx(flops / (H100.bf16_tflops * 1e12) * 1e6)
    assert bd.compute_us[1] == pytest.approx(bd.compute_us[0] / MMA_SYNC_FRACTION_OF_WGMMA)
    assert TERMS[bd.dominant[0]] == "tensor" and bd.time_us[0] < bd.time_us[1]


def test_counts_round_trip_through_their_json_form():
    counts = KernelCounts(12, replace(FACTS, wgmma=True), mma_flops=(("fp16", 1e9),), dot_operand_bytes=5.0,
                          tensors=(TensorTraffic("a", 10, 20.0, 0.0),), vector_ops=3.0, sfu_ops=1.0,
                          loop_iterations=2.5, work_runs=((0.5, 6), (1.5, 6)), notes=("a rule",))
    assert counts_from_dict(counts.to_dict()) == counts
    assert counts.load_bytes == 20.0 and counts.total_mma_flops == 1e9


def test_the_model_is_vectorized_over_configs():
    many = [copy(MB * (1 + i % 7), 100 + i) for i in range(300)]
    bd = predict_generic(many, H100)
    assert bd.time_us.shape == (300,) and np.all(np.isfinite(bd.time_us)) and np.all(bd.time_us > 0)


def test_a_waves_first_loads_wait_whole_only_where_a_program_is_alone_on_its_sm():
    """Programs do not run in lock-step waves: with 16 programs per SM the same stream in twice the programs (half
    the bytes each, four more waves) adds a sixteenth of a load latency a wave; with one program per SM, a whole one."""
    size, latency_us = 256 * MB, H100.dram_latency_ns * 1e-3  # every byte from DRAM
    slots = H100.sm_count * 16
    bd = predict_generic([copy(size, 4 * slots), copy(size, 8 * slots)], H100)
    assert list(bd.ctas_per_sm) == [16, 16] and list(bd.waves) == [4.0, 8.0]
    assert bd.time_us[1] - bd.time_us[0] == pytest.approx(4 * latency_us / 16)
    assert bd.latency_us[0] >= latency_us * (1 + 4 / 16)
    alone = replace(FACTS, num_warps=8, regs_per_thread=255)
    bd = predict_generic([copy(size, 4 * H100.sm_count, alone), copy(size, 8 * H100.sm_count, alone)], H100)
    assert list(bd.ctas_per_sm) == [1, 1]
    assert bd.time_us[1] - bd.time_us[0] == pytest.approx(4 * latency_us)


def test_a_lone_programs_serial_chain_bounds_its_wave():
    """One resident program of 4 warps does its matrix and elementwise work in sequence: the wave is no shorter
    than that chain, whatever the units could overlap; more resident programs hide it."""
    work = dict(mma_flops=(("bf16", 2.0 * 132 * 2 ** 30),), vector_ops=132 * 2.0 ** 26, dot_executions=64.0)
    alone = KernelCounts(132, replace(FACTS, regs_per_thread=255, smem_bytes=200 * 1024, wgmma=True), **work)
    shared = KernelCounts(132 * 4, replace(FACTS, regs_per_thread=64, smem_bytes=40 * 1024, wgmma=True),
                          mma_flops=((("bf16", 4 * 2.0 * 132 * 2 ** 28),)), vector_ops=132 * 2.0 ** 26,
                          dot_executions=16.0)
    bd = predict_generic([alone, shared], H100)
    assert bd.ctas_per_sm[0] == 1 and TERMS[bd.dominant[0]] == "serial"
    assert bd.time_us[0] >= bd.serial_us[0] and bd.time_us[1] < bd.time_us[0]


def test_a_loops_waits_on_loads_follow_its_stages_and_contend_for_no_unit():
    """A loop of 1000 iterations with next to no work waits a load's latency per iteration with two stages (and with
    one: each load waited on as issued); with three, its period is (latency + its work) / 2. A wait is the program's
    own: eight resident programs wait side by side, their buffers refilled once the shared units did their work."""
    loop = dict(loop_iterations=1000.0, loop_loads=1000.0, vector_ops=132 * 1000.0 * 128)
    lone = [KernelCounts(132, replace(FACTS, num_stages=s, smem_bytes=200 * 1024), **loop) for s in (1, 2, 3)]
    eight = KernelCounts(132 * 8, replace(FACTS, num_stages=2, smem_bytes=27 * 1024),
                         **{**loop, "vector_ops": 8 * loop["vector_ops"]})
    bd = predict_generic(lone + [eight], H100)
    latency_us = H100.l2_latency_ns * 1e-3
    waits = bd.latency_us - latency_us  # each wave's first load aside
    assert list(bd.ctas_per_sm) == [1, 1, 1, 8]
    assert waits[0] == pytest.approx(1000 * latency_us) and waits[1] == pytest.approx(1000 * latency_us, rel=0.01)
    assert waits[2] == pytest.approx((1000 * latency_us - bd.serial_us[2]) / 2)  # (S − 1)·P = latency + chain
    assert bd.time_us[1] == pytest.approx(bd.latency_us[1] + bd.serial_us[1] + bd.launch_us[1])
    # eight resident programs: a buffer refills once the SM's shared units have done all eight's work
    assert waits[3] == pytest.approx(1000 * latency_us + max(bd.vector_us[3], bd.serial_us[3]) - bd.serial_us[3])
    assert bd.time_us[3] < 2 * bd.time_us[1] and TERMS[bd.dominant[3]] == "latency"


def test_a_loops_last_waiting_dot_runs_past_its_refills():
    """A loop of 1000 iterations whose two dots each wait for their results (attention's QKᵀ and PV): the iteration
    leaves its last dot running and issues its refills before it, so with two stages a load has that dot's matrix
    time to land (the attention model's "a load has PV to land"): each iteration waits latency − one dot's time. A
    dot that accumulates straight into the loop's accumulator (a GEMM's) leaves nothing running: a full latency."""
    flops = 132 * 1000 * 2 * 2.0 * 64 * 64 * 64  # 1000 iterations of two 64×64×64 dots a program
    loop = dict(loop_iterations=1000.0, loop_loads=2000.0, mma_flops=(("bf16", flops),))
    facts = replace(FACTS, num_stages=2, smem_bytes=200 * 1024, wgmma=True)
    waiting, chained = KernelCounts(132, facts, dot_executions=2000.0, **loop), KernelCounts(132, facts, **loop)
    bd = predict_generic([waiting, chained], H100)
    latency_us = H100.l2_latency_ns * 1e-3
    dot_us = bd.compute_us[0] / 2000  # one dot at the SM's matrix rate (a wave of one program a SM)
    assert dot_us < latency_us
    assert bd.latency_us[0] - latency_us == pytest.approx(1000 * (latency_us - dot_us))
    assert bd.latency_us[1] - latency_us == pytest.approx(1000 * latency_us)
