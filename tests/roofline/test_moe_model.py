"""Sanity of the fused-MoE cost model: tokens, padding, the grid's empty programs, weight traffic, regimes,
occupancy as compiled, vectorization, and how it ranks vLLM's shipped H200 entries."""

import dataclasses

import numpy as np
import pytest

from rooftune.candidates import MOE_SPACE, Config, MoeShape, configs_to_columns, legal_configs
from rooftune.candidates.moe_space import group_twin, moe_regs_per_thread, moe_smem_bytes
from rooftune.candidates.routing import expert_rows, padded_rows_bound
from rooftune.hwprofiles import load_profile
from rooftune.roofline import MoeBreakdown, predict, rank
from rooftune.roofline.moe import LOAD_PATHS, TERMS
from rooftune.roofline.occupancy import ctas_per_sm
from rooftune.tuner.llm.moe_tables import SHIPPED_H200, shipped_tables

H200 = load_profile("h200")
TOKENS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096)
# The held-out layers vLLM ships an H200 table for: (experts, topk, hidden, intermediate per shard).
SHIPPED_LAYERS = {"E=8,N=14336": (8, 2, 4096, 14336), "E=128,N=768": (128, 8, 2048, 768),
                  "E=128,N=384": (128, 8, 2048, 384), "E=128,N=192": (128, 8, 2048, 192),
                  "E=64,N=2560": (64, 8, 3584, 2560)}


def cfg(bm=64, bn=128, bk=64, group=1, warps=4, stages=3) -> Config:
    return Config.make(warps, stages, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=group)


def one(shape, config, profile=H200) -> dict:
    bd = predict(shape, configs_to_columns([config]), profile)
    return {f.name: getattr(bd, f.name)[0] for f in dataclasses.fields(bd)}


def space(shape):
    legal = legal_configs(MOE_SPACE, shape, H200)
    return legal, predict(shape, legal.columns, H200)


def test_predict_dispatches_on_the_shape_and_ranks():
    shape = MoeShape(64, 8, 2048, 1024, 256)
    legal, bd = space(shape)
    assert isinstance(bd, MoeBreakdown) and len(bd.time_us) == len(legal)
    order = rank(shape, legal.columns, H200)
    assert np.all(np.diff(bd.time_us[order]) >= 0)
    assert set(np.unique(bd.bound)) <= {"compute", "memory", "latency"}
    assert np.all((bd.dominant >= 0) & (bd.dominant < len(TERMS)))
    for term in (bd.compute_us, bd.memory_us, bd.l2_us, bd.smem_us):
        assert np.all(bd.time_us >= term * (1 - 1e-9))


@pytest.mark.parametrize("gemm", ["gate_up", "down"])
@pytest.mark.parametrize("layer", [(8, 8, 2048, 768), (4, 4, 4096, 14336), (32, 32, 2048, 192)])
def test_more_tokens_never_predicted_faster(layer, gemm):
    """With topk = experts every expert gets every token, so more tokens are more rows for every expert (a
    seeded top-k draw can route fewer experts at more tokens: fewer weights, rightly faster). Per config, over
    the 18 token counts, the time may fall by at most 0.5%: a latency-bound last wave lasts as long on 12 SMs
    as on 60, while the first wave's share of the weights shrinks as the tiles grow (8x8x2048x768 gate_up,
    48 -> 64 tokens: 0.3%)."""
    shapes = [MoeShape(*layer, tokens, gemm=gemm) for tokens in TOKENS]
    common = set.intersection(*(set(legal_configs(MOE_SPACE, s, H200).configs) for s in shapes))
    columns = configs_to_columns(sorted(common, key=str))
    times = np.array([predict(s, columns, H200).time_us for s in shapes])
    assert np.all(times[1:] >= times[:-1] * (1 - 0.005))
    assert np.all(times[-1] > 10 * times[0])


def test_the_best_time_grows_with_tokens_wherever_no_fewer_experts_are_routed():
    """The seeded draws of the held-out and training layers: the best predicted time never falls as tokens
    grow, except where the draw routes fewer experts (gpt-oss-20b's 24 -> 32 tokens: 31 -> 30 experts)."""
    for layer in [(8, 2, 4096, 14336), (32, 4, 2880, 2880), (128, 8, 2048, 768), (16, 1, 5120, 8192)]:
        best, active = [], []
        for tokens in TOKENS:
            shape = MoeShape(*layer, tokens)
            best.append(space(shape)[1].time_us.min())
            active.append(int((expert_rows(shape) > 0).sum()))
        for i in range(1, len(TOKENS)):
            if active[i] >= active[i - 1]:
                assert best[i] >= best[i - 1] * (1 - 1e-9), (layer, TOKENS[i])


def test_padding_each_block_size_m_wastes():
    # topk = experts: each of 8 experts has all 17 tokens' rows, padded to 32 (BM 16 or 32), 64 or 128.
    shape = MoeShape(8, 8, 2048, 768, 17)
    assert list(expert_rows(shape)) == [17] * 8
    b = {bm: one(shape, cfg(bm=bm, bn=128, bk=64)) for bm in (16, 32, 64, 128)}
    assert [b[bm]["padded_rows"] for bm in (16, 32, 64, 128)] == [256, 256, 512, 1024]
    assert b[64]["row_efficiency"] == pytest.approx(136 / 512)
    assert b[64]["padded_flops"] == 2 * 512 * 1536 * 2048
    assert b[64]["padding_efficiency"] == pytest.approx(b[64]["flops"] / b[64]["padded_flops"])
    assert b[64]["flops"] == shape.flops == 2 * 136 * 1536 * 2048
    assert b[128]["compute_us"] == pytest.approx(2 * b[64]["compute_us"])  # both wgmma: twice the padded rows
    assert b[128]["ctas"] == b[64]["ctas"] == 8 * 12  # one tile row per expert either way
    # the padding is computed, never loaded: the same weights and gathered rows from DRAM
    assert b[128]["dram_bytes"] == b[64]["dram_bytes"]


def test_the_grid_is_the_padded_rows_bound_with_empty_programs():
    # 16 tokens, all 8 experts: 8 real tile rows of 16; the launch's bound is 128 + 8·15 = 248 rows, 16 tile rows.
    shape = MoeShape(8, 8, 2048, 768, 16)
    b = one(shape, cfg(bm=16, bn=128))
    assert padded_rows_bound(128, 8, 16) == 248
    assert b["programs"] == 16 * 12 and b["ctas"] == 8 * 12 and b["empty_programs"] == 8 * 12
    slots = H200.sm_count * b["ctas_per_sm"]
    assert b["empty_us"] == pytest.approx(-(-96 // slots) * H200.l2_latency_ns * 1e-3)
    # one routed row per expert: each expert is one tile whatever BLOCK_SIZE_M, and the bound is exactly that
    lone = one(MoeShape(8, 8, 2048, 768, 1), cfg(bm=64))
    assert lone["empty_programs"] == 0 and lone["empty_us"] == 0


def test_decode_reads_each_routed_experts_weights_once_and_is_memory_bound():
    """At one token the best config of every held-out layer with a vLLM table is bound by DRAM: the routed
    experts' weights, each read once (they fit in L2's reuse share), dwarf the padded tile's work."""
    for layer in SHIPPED_LAYERS.values():
        for gemm in ("gate_up", "down"):
            shape = MoeShape(*layer, 1, gemm=gemm)
            legal, bd = space(shape)
            i = int(np.argmin(bd.time_us))
            assert bd.bound[i] == "memory", shape
            assert bd.memory_us[i] > 3 * bd.compute_us[i]
            assert bd.experts_active[i] == layer[1]  # topk experts, one row each
            weights = layer[1] * shape.n * shape.k * 2
            assert bd.weight_bytes[i] == weights and bd.weight_passes[i] == 1
            assert weights <= bd.dram_bytes[i] < weights * 1.01


def test_4096_tokens_are_compute_bound():
    for layer in [(8, 2, 4096, 14336), (64, 8, 3584, 2560), (128, 8, 2048, 768)]:
        for gemm in ("gate_up", "down"):
            shape = MoeShape(*layer, 4096, gemm=gemm)
            legal, bd = space(shape)
            i = int(np.argmin(bd.time_us))
            assert bd.bound[i] == "compute" and bd.compute_us[i] > bd.memory_us[i], shape
            assert bd.uses_wgmma[i] and bd.row_efficiency[i] > 0.75


def test_group_size_m_reads_weights_larger_than_l2_fewer_times():
    # Mixtral's gate_up: one expert's weights are 28672 x 4096 bf16 = 235 MB, far over L2.
    shape = MoeShape(8, 2, 4096, 14336, 4096)
    grouped, plain = one(shape, cfg(bm=128, bn=256, group=16, warps=8, stages=4)), \
        one(shape, cfg(bm=128, bn=256, group=1, warps=8, stages=4))
    assert grouped["weight_bytes"] < plain["weight_bytes"] and grouped["weight_passes"] < plain["weight_passes"]
    assert grouped["l2_bytes"] == plain["l2_bytes"]
    # weights that fit in L2 are read once whatever the order
    small = MoeShape(128, 8, 2048, 768, 4096)
    assert one(small, cfg(group=16))["weight_passes"] == one(small, cfg(group=1))["weight_passes"] == 1


def test_index_loads_chain_before_the_operands_and_the_routing_weight_on_down():
    up, down = (one(MoeShape(64, 8, 2048, 2048, 64, gemm=g), cfg(bm=16, bn=64)) for g in ("gate_up", "down"))
    waves = {name: np.ceil(b["waves"]) for name, b in (("up", up), ("down", down))}
    assert up["indirection_us"] == pytest.approx(waves["up"] * 2 * H200.l2_latency_ns * 1e-3)
    assert down["indirection_us"] == pytest.approx(waves["down"] * 3 * H200.l2_latency_ns * 1e-3)


def test_occupancy_as_compiled_and_gathered_rows_never_use_tma():
    shape = MoeShape(64, 8, 2048, 1024, 512)
    legal, bd = space(shape)
    c = legal.columns
    assert np.array_equal(bd.smem_bytes_per_cta, moe_smem_bytes(c, 2, True))
    assert np.array_equal(bd.regs_per_thread, moe_regs_per_thread(c))
    assert np.array_equal(bd.ctas_per_sm, ctas_per_sm(bd.smem_bytes_per_cta, bd.regs_per_thread, c["num_warps"], H200)[0])
    assert set(bd.load_path) == {LOAD_PATHS[0]}
    # rows of 2052 bf16 are not 16-byte aligned: loaded through registers, which also hold the prefetched stages
    odd = one(MoeShape(64, 8, 2052, 1024, 512), cfg(stages=3))
    assert odd["load_path"] == LOAD_PATHS[1]
    assert odd["regs_per_thread"] > one(shape, cfg(stages=3))["regs_per_thread"]


def test_one_config_alone_costs_what_it_costs_in_the_batch():
    for shape in (MoeShape(128, 8, 2048, 768, 64), MoeShape(8, 2, 4096, 14336, 4096, gemm="down"),
                  MoeShape(60, 4, 2048, 1408, 3, gemm="down")):
        legal, bd = space(shape)
        for i in range(0, len(legal), 11):
            alone = predict(shape, configs_to_columns([legal.configs[i]]), H200)
            for f in dataclasses.fields(bd):
                assert getattr(alone, f.name)[0] == getattr(bd, f.name)[i], (shape, legal.configs[i], f.name)


def test_a_faster_gpu_is_predicted_faster():
    shape = MoeShape(64, 8, 2048, 1024, 1024)
    legal = legal_configs(MOE_SPACE, shape, H200)
    faster = dataclasses.replace(H200, dram_bw_gbps=2 * H200.dram_bw_gbps, bf16_tflops=2 * H200.bf16_tflops)
    assert np.all(predict(shape, legal.columns, faster).time_us < predict(shape, legal.columns, H200).time_us)


def test_vllms_shipped_h200_entries_rank_well_above_the_median():
    """vLLM's 5 shipped unquantized H200 tables (datasets/h200/moe/vllm, 90 entries, each serving both GEMMs
    of its layer: 180 (entry, GEMM) pairs), as the space holds them (`group_twin`), by the share of the
    shape's legal configs the model predicts faster. On 2026-12-02: median 0.086, mean 0.139, 55% of them
    in the model's top tenth (a random config: median 0.5). vLLM's default rule scores about as well
    (median 0.078). The tables are vLLM's measurements, not our held-out data, and the model's terms were
    derived from the profile and the kernel, never tuned to them. Its largest misses: 19 pairs rank past
    0.35, 17 of them num_stages 2 at M <= 256 (ranked 0.45 to 0.72), where the GEMM pipeline term charges
    each CTA a load's latency per stage whatever its neighbours on the SM hide: the first term to check
    against the training sweep."""
    shares = []
    for name, table in shipped_tables(SHIPPED_H200).items():
        layer = SHIPPED_LAYERS[name.split(",device_name")[0]]
        for tokens, config in table.items():
            for gemm in ("gate_up", "down"):
                shape = MoeShape(*layer, tokens, gemm=gemm)
                legal, bd = space(shape)
                mine = bd.time_us[legal.configs.index(group_twin(shape, config))]
                shares.append(float((bd.time_us < mine).mean()))
    assert len(shares) == 180
    assert np.median(shares) < 0.15 and np.mean(shares) < 0.2 and np.mean(np.array(shares) < 0.1) > 0.45
