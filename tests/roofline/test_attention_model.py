"""Sanity of the causal-attention cost model."""

import dataclasses

import numpy as np

from rooftune.candidates import ATTENTION_SPACE, AttentionShape, legal_configs
from rooftune.hwprofiles import load_profile
from rooftune.roofline import predict, rank

H200 = load_profile("h200")


def test_causal_visits_about_half_the_key_blocks():
    causal, full = AttentionShape(4, 32, 4096, 128), AttentionShape(4, 32, 4096, 128, causal=False)
    columns = legal_configs(ATTENTION_SPACE, causal, H200).columns
    bc, bf = predict(causal, columns, H200), predict(full, columns, H200)
    ratio = bc.key_blocks / bf.key_blocks
    assert np.all((ratio > 0.5) & (ratio < 0.6))
    assert np.all(bc.masked_blocks > 0) and np.all(bf.masked_blocks == 0)
    assert np.all(bc.time_us < bf.time_us)
    assert np.all(bc.padded_flops >= bc.flops)


def test_longer_sequences_and_wider_heads_cost_more():
    base = AttentionShape(2, 16, 2048, 64)
    columns = legal_configs(ATTENTION_SPACE, base, H200).columns
    t = predict(base, columns, H200).time_us
    assert np.all(predict(AttentionShape(2, 16, 4096, 64), columns, H200).time_us > t)
    wide = AttentionShape(2, 16, 2048, 128)
    wcols = legal_configs(ATTENTION_SPACE, wide, H200).columns
    common = {k: v for k, v in wcols.items()}
    assert np.all(predict(wide, common, H200).time_us > predict(base, common, H200).time_us)


def test_heaviest_first_order_shortens_the_tail():
    shape = AttentionShape(1, 4, 8192, 128)  # few heads: the causal tail matters
    columns = {"BLOCK_M": np.array([128, 128]), "BLOCK_N": np.array([64, 64]), "ORDER": np.array([0, 1]),
               "num_warps": np.array([8, 8]), "num_stages": np.array([3, 3])}
    forward, reverse = predict(shape, columns, H200).time_us
    assert reverse < forward


def test_breakdown_consistency_and_rank():
    shape = AttentionShape(4, 32, 1024, 128)
    columns = legal_configs(ATTENTION_SPACE, shape, H200).columns
    bd = predict(shape, columns, H200)
    assert np.all(bd.time_us >= bd.compute_us * (1 - 1e-9))
    assert np.all(bd.time_us >= bd.memory_us * (1 - 1e-9))
    assert set(np.unique(bd.bound)) <= {"compute", "memory", "latency"}
    order = rank(shape, columns, H200)
    assert np.all(np.diff(bd.time_us[order]) >= 0)
    fields = {f.name for f in dataclasses.fields(bd)}
    assert {"ctas_per_sm", "waves", "occupancy", "dominant", "launch_us"} <= fields


# Shapes of the H200 probe's kind plus grids of under one wave and a single head.
SHAPES = ((1, 32, 4096, 128), (8, 16, 1024, 64), (32, 8, 256, 64), (1, 4, 8192, 128), (1, 1, 2048, 64))


def _columns(*rows):
    names = ("BLOCK_M", "BLOCK_N", "ORDER", "num_warps", "num_stages")
    return {n: np.array([r[i] for r in rows]) for i, n in enumerate(names)}


def test_causal_never_costs_more_than_non_causal_beyond_its_masks():
    # Beyond one wave causal runs about half the key blocks. Within one wave its heaviest programs
    # visit every key block as the non-causal ones do, plus the masks of their diagonal blocks.
    for dims in SHAPES:
        causal, full = AttentionShape(*dims), AttentionShape(*dims, causal=False)
        columns = legal_configs(ATTENTION_SPACE, causal, H200).columns
        bc, bf = predict(causal, columns, H200), predict(full, columns, H200)
        several = bc.waves > 1
        assert np.all(bc.time_us[several] <= bf.time_us[several] * (1 + 1e-9))
        assert np.all(bc.time_us <= bf.time_us * 1.1)


def test_heaviest_first_never_slower_for_causal_beyond_one_wave():
    for dims in SHAPES:
        shape = AttentionShape(*dims)
        columns = legal_configs(ATTENTION_SPACE, shape, H200).columns
        bd = predict(shape, columns, H200)
        index = {tuple(int(columns[k][i]) for k in columns): i for i in range(len(bd.time_us))}
        names = list(columns)
        for key, i in index.items():
            config = dict(zip(names, key))
            if config["ORDER"] & 1 or bd.waves[i] <= 1:
                continue
            j = index[tuple(config[k] | 1 if k == "ORDER" else config[k] for k in names)]
            assert bd.time_us[j] <= bd.time_us[i] * (1 + 1e-9), config


def test_makespan_tracks_greedy_list_scheduling():
    import heapq

    from rooftune.roofline.attention import makespan_blocks, program_sequence

    def greedy(sizes, slots):
        free = [0.0] * slots
        for size in sizes:
            heapq.heappush(free, heapq.heappop(free) + size)
        return max(free)

    for q_blocks, heads, slots in ((32, 32, 132), (64, 16, 132), (16, 128, 264), (8, 512, 264), (4, 16, 132)):
        per_q = np.arange(1, q_blocks + 1)
        for order in (0, 1, 2, 3):
            sizes = program_sequence(per_q, heads, order)
            exact = greedy(sizes.astype(float), slots)
            assert abs(makespan_blocks(sizes, slots) / exact - 1) < 0.08, (q_blocks, heads, slots, order)


def test_wgmma_needs_a_64_row_warpgroup_slab():
    shape = AttentionShape(4, 32, 2048, 128)
    bd = predict(shape, _columns((32, 32, 0, 4, 3), (64, 64, 0, 4, 3), (128, 64, 0, 8, 3)), H200)
    assert list(bd.uses_wgmma) == [False, True, True]
    mma_sync, wgmma = bd.compute_us[0] / bd.padded_flops[0], bd.compute_us[1] / bd.padded_flops[1]
    assert mma_sync > wgmma


def test_warps_splitting_columns_cost_more_than_warps_along_rows():
    # 64 rows cannot give 8 warps 16 rows each: two warpgroups share the rows, so the row max and
    # sum cross them and P goes through shared memory for PV, every key block.
    shape = AttentionShape(4, 32, 2048, 128)
    bd = predict(shape, _columns((64, 64, 0, 4, 3), (64, 64, 0, 8, 3)), H200)
    assert list(bd.warps_along_n) == [1, 2]
    assert bd.time_us[1] > bd.time_us[0]


def test_register_spill_of_a_large_output_accumulator():
    # BLOCK_M=256 with head_dim 128 on 4 warps: the fp32 O tile alone is 256 registers a thread.
    shape = AttentionShape(4, 32, 2048, 128)
    bd = predict(shape, _columns((256, 32, 0, 4, 2), (256, 32, 0, 8, 2)), H200)
    assert bd.regs_per_thread[0] > H200.regs_per_thread_max >= bd.regs_per_thread[1]
    assert bd.time_us[0] > bd.time_us[1]


def test_softmax_weighs_more_against_the_tensor_cores_at_small_head_dim():
    columns = _columns((128, 64, 0, 8, 3))
    ratios = []
    for d in (64, 128):
        bd = predict(AttentionShape(4, 32, 2048, d), columns, H200)
        ratios.append(bd.softmax_us[0] / bd.compute_us[0])
    assert ratios[0] > ratios[1]


def test_no_prefetch_without_stages_and_occupancy_from_shared_memory():
    shape = AttentionShape(4, 32, 2048, 128)
    # num_stages 1: K and V are loaded and waited on in the same block; 2 stages prefetch one ahead.
    bd = predict(shape, _columns((128, 64, 0, 8, 1), (128, 64, 0, 8, 2)), H200)
    assert bd.time_us[0] > bd.time_us[1]
    # Q + 4 stages of K and V (144 KB) leave room for one CTA where 3 stages (112 KB) fit two;
    # a second warpgroup on the SM hides one's softmax behind the other's matrix work.
    bd = predict(shape, _columns((64, 64, 0, 4, 3), (64, 64, 0, 4, 4)), H200)
    assert list(bd.ctas_per_sm) == [2, 1]
    assert bd.time_us[1] > bd.time_us[0]


def test_kv_read_from_dram_once_per_head_when_l2_holds_them():
    shape = AttentionShape(1, 8, 4096, 128)
    bd = predict(shape, _columns((128, 64, 0, 8, 3)), H200)
    qkvo = 4 * shape.batch * shape.heads * shape.seq * shape.head_dim * 2
    assert bd.dram_bytes[0] == qkvo
    assert bd.l2_bytes[0] > bd.dram_bytes[0]


def _tma_columns(*rows):
    names = ("BLOCK_M", "BLOCK_N", "ORDER", "TMA", "num_warps", "num_stages")
    return {n: np.array([r[i] for r in rows]) for i, n in enumerate(names)}


def test_tma_without_pipeline_holds_one_tile_and_no_staging_registers():
    # num_stages 1 (compiled for sm_90): Q and one tile that K, then V, pass through; TMA copies
    # bypass registers, so 64x64 on 4 warps fits four CTAs where pointer loads stage K and V.
    from rooftune.roofline.attention import resident_smem_bytes

    one = resident_smem_bytes({"BLOCK_M": np.array([64]), "BLOCK_N": np.array([64]), "num_stages": np.array([1]),
                               "TMA": np.array([1])}, 128, 2)
    assert one[0] == (64 + 64) * 128 * 2 + 1024
    bd = predict(AttentionShape(4, 32, 4096, 128), _tma_columns((64, 64, 1, 1, 4, 1), (64, 64, 1, 0, 4, 1)), H200)
    assert list(bd.ctas_per_sm) == [4, 2]
    assert bd.regs_per_thread[0] < bd.regs_per_thread[1]


def test_one_stage_waits_on_both_loads_and_three_stages_hide_them():
    # Same occupancy (two CTAs) at every depth: without a pipeline each block waits for K and then
    # V; with two stages a load has only PV to land; from three on it has a whole block.
    bd = predict(AttentionShape(4, 32, 4096, 64), _tma_columns(*[(128, 64, 1, 1, 8, s) for s in (1, 2, 3, 4)]), H200)
    assert len(set(bd.ctas_per_sm.tolist())) == 1
    t1, t2, t3, t4 = bd.time_us
    assert t1 > t2 > t3 and t3 == t4
    assert bd.bound[0] == "latency"


def test_programs_running_together_share_kv_from_dram():
    # Heads fastest: the K/V of all heads does not fit in L2 between a head's generations of
    # programs, but the programs of one generation read each block once from DRAM between them.
    shape = AttentionShape(2, 32, 8192, 128, kv_heads=8)
    bd = predict(shape, _tma_columns((128, 64, 1, 1, 4, 2), (128, 64, 3, 1, 4, 2)), H200)
    every_block = bd.key_blocks * 2 * 64 * 128 * 2
    assert np.all(bd.dram_bytes < 0.2 * every_block)
    assert bd.dram_bytes[1] > bd.dram_bytes[0]
    assert abs(bd.time_us[1] / bd.time_us[0] - 1) < 0.15
    assert np.all(bd.bound != "memory")


def test_a_ctas_warpgroups_are_one_chain():
    # 128 rows on one warpgroup or two: the CTA's warps wait on the same barriers, so with one CTA
    # per SM (three stages of 128x64 at head_dim 128) neither hides the other's softmax.
    bd = predict(AttentionShape(4, 32, 4096, 128), _tma_columns((128, 64, 1, 1, 4, 3), (128, 64, 1, 1, 8, 3)), H200)
    assert list(bd.ctas_per_sm) == [1, 1]
    assert abs(bd.time_us[1] / bd.time_us[0] - 1) < 0.05
    assert np.all(bd.latency_us > 0.8 * bd.time_us)


def test_masked_blocks_per_program():
    columns = _tma_columns((128, 32, 1, 1, 4, 2), (64, 64, 1, 1, 4, 2))
    # The diagonal's BLOCK_M / BLOCK_N blocks under the causal mask; without it, the last block
    # where seq is not a multiple of BLOCK_N.
    causal = predict(AttentionShape(2, 4, 1000, 64), columns, H200)
    assert list(causal.masked_blocks) == list(causal.programs * [4, 1])
    full = predict(AttentionShape(2, 4, 1000, 64, causal=False), columns, H200)
    assert list(full.masked_blocks) == list(full.programs)
    assert list(predict(AttentionShape(2, 4, 1024, 64, causal=False), columns, H200).masked_blocks) == [0, 0]


# Best of the space timed on the H200 for shapes outside the project's lists (docs/history.md:
# the attention notes, "Kernel vs each SDPA backend": best TMA config, µs).
MEASURED_BEST_US = {(4, 64, 4096, 128, 64): 2248.9, (1, 32, 8192, 128, 8): 991.4, (16, 12, 1024, 64, 12): 88.1,
                    (1, 8, 16384, 64, 8): 602.8}


def test_predicted_best_is_near_the_measured_best():
    for (batch, heads, seq, head_dim, kv_heads), measured in MEASURED_BEST_US.items():
        shape = AttentionShape(batch, heads, seq, head_dim, kv_heads=kv_heads)
        predicted = predict(shape, legal_configs(ATTENTION_SPACE, shape, H200).columns, H200).time_us.min()
        assert 0.75 < measured / predicted < 1.3, (shape, measured, predicted)
