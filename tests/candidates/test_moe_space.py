"""The fused-MoE space: it is vLLM's 1,920-config grid, its legality counts, and no rule drops a config that may
win (vLLM's shipped H200 winners and its default rule's configs stay legal, or keep a legal twin)."""

import itertools
import re

import numpy as np
import pytest

from rooftune.candidates import KERNELS, MOE_SPACE, Config, MoeShape, config_legality, legal_configs
from rooftune.candidates.moe_space import KEEP_BLOCK_M, group_twin, moe_legality
from rooftune.candidates.moe_space import VLLM_TOKENS as TOKENS
from rooftune.candidates.routing import expert_rows, row_tiles_bound
from rooftune.eval.shapelists.moe import MODELS
from rooftune.hwprofiles import load_profile
from rooftune.tuner.llm.moe_tables import SHIPPED_H200, default_config, shipped_tables

H200 = load_profile("h200")
A100 = load_profile("a100_sxm4_80gb")
BM_RULE = f"BLOCK_SIZE_M over the most rows an expert has (and over {KEEP_BLOCK_M})"
TWIN = "GROUP_SIZE_M a twin of a smaller one (both cover every tile row)"
IDLE = "GROUP_SIZE_M without effect (one tile row or column)"
# vLLM's benchmarks/kernels/benchmark_moe.py grid on CUDA.
VLLM_GRID = {"BLOCK_SIZE_M": (16, 32, 64, 128, 256), "BLOCK_SIZE_N": (32, 64, 128, 256),
             "BLOCK_SIZE_K": (64, 128, 256), "GROUP_SIZE_M": (1, 16, 32, 64), "num_warps": (4, 8),
             "num_stages": (2, 3, 4, 5)}
LAYERS = {(e, inter): (e, topk, hidden, inter) for layers in MODELS.values() for _, e, topk, hidden, inter in layers}


def test_the_space_is_vllms_grid_in_its_names():
    assert dict(MOE_SPACE.grid) == VLLM_GRID
    assert len(MOE_SPACE.all_columns()["num_warps"]) == 1920
    assert MOE_SPACE.version.startswith("moe-") and KERNELS["moe"].space is MOE_SPACE
    assert KERNELS["moe"].runtime_params == ("GROUP_SIZE_M",)


@pytest.mark.parametrize("layer, tokens, gemm, legal", [
    ((128, 8, 2048, 768), 1, "gate_up", 476),     # 8 rows: BLOCK_SIZE_M <= 64, GROUP_SIZE_M 1 or 16
    ((128, 8, 2048, 768), 256, "down", 952),      # <= 30 rows an expert: BLOCK_SIZE_M <= 64
    ((128, 8, 2048, 768), 4096, "gate_up", 1256),  # only shared memory and registers bind
    ((8, 2, 4096, 14336), 4096, "down", 1256),
    ((16, 1, 5120, 8192), 1, "gate_up", 238),     # one row: one tile row, GROUP_SIZE_M 1 only
])
def test_legal_counts_on_the_h200(layer, tokens, gemm, legal):
    got = legal_configs(MOE_SPACE, MoeShape(*layer, tokens, gemm), H200)
    assert len(got) == legal and got.total == 1920
    assert got.rejected["shared memory over the per-block limit"] == 616  # the same configs for every shape
    assert got.rejected["registers over the per-thread limit"] == 192


def _shipped():
    """(table name, M, MoeShape of either GEMM, config) of every entry of vLLM's stored H200 tables."""
    for name, table in shipped_tables(SHIPPED_H200).items():
        experts, n = map(int, re.match(r"E=(\d+),N=(\d+)", name).groups())
        for m, config in table.items():
            for gemm in ("gate_up", "down"):
                yield name, m, MoeShape(*LAYERS[(experts, n)], m, gemm), config


def test_vllms_shipped_h200_winners_stay_legal_up_to_a_group_twin():
    """vLLM's tuner timed these fastest on an H200 (for both GEMMs together): each is legal for both GEMMs of its
    layer at its token count, or only its GROUP_SIZE_M differs from a legal config's that runs the same order."""
    twins = 0
    for name, m, shape, config in _shipped():
        reasons = config_legality(MOE_SPACE, shape, config, H200)
        assert set(reasons) <= {TWIN, IDLE}, (name, m, shape.gemm, str(config), reasons)
        if reasons:
            twins += 1
            assert config_legality(MOE_SPACE, shape, group_twin(shape, config), H200) == []
    assert twins == 10  # 5 entries, each for both GEMMs (see test_group_twins_are_the_same_program_order)


@pytest.mark.parametrize("layer", sorted(set(LAYERS.values())))
def test_vllms_default_rule_stays_legal_up_to_a_group_twin(layer):
    for tokens, gemm in itertools.product(TOKENS, ("gate_up", "down")):
        shape = MoeShape(*layer, tokens, gemm)
        config = group_twin(shape, default_config(tokens, layer[0], layer[3], layer[2], layer[1]))
        assert config_legality(MOE_SPACE, shape, config, H200) == [], (shape, str(config))


def test_block_m_rule_follows_the_most_rows_of_an_expert():
    """A tile taller than every expert's rows only pads; 16, 32 and 64 rows stay legal however few rows there are."""
    for tokens in (1, 5, 40, 300, 2000):
        shape = MoeShape(32, 4, 1024, 512, tokens)
        most = int(expert_rows(shape).max())
        columns = MOE_SPACE.all_columns()
        dropped = moe_legality(shape, columns, H200)[BM_RULE]
        for bm in (16, 32, 64, 128, 256):
            rows = columns["BLOCK_SIZE_M"] == bm
            needed = bm <= KEEP_BLOCK_M or bm // 2 < most  # the smallest power of two >= most rows
            assert (not dropped[rows].any()) if needed else dropped[rows].all(), (tokens, most, bm)


def test_group_twins_are_the_same_program_order():
    """The twin the GROUP rules keep visits the (tile row, tile column) pairs in the same order as the dropped
    config (the grouped order of kernels/gemm.py `_grouped_tile`, in plain Python)."""

    def order(tiles_m, tiles_n, group):
        pairs = []
        for pid in range(tiles_m * tiles_n):
            first = pid // (group * tiles_n) * group
            size = min(tiles_m - first, group)
            pairs.append((first + pid % (group * tiles_n) % size, pid % (group * tiles_n) // size))
        return pairs

    checked = 0
    for tokens, gemm in itertools.product((1, 2, 8, 64, 700), ("gate_up", "down")):
        shape = MoeShape(64, 6, 2048, 1408, tokens, gemm)
        for config in (Config.make(4, 3, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64, GROUP_SIZE_M=g)
                       for bm, bn, g in itertools.product((16, 64), (64, 256), (16, 32, 64))):
            twin = group_twin(shape, config)
            tiles_m, tiles_n = int(row_tiles_bound(shape, config["BLOCK_SIZE_M"])), -(-shape.n // config["BLOCK_SIZE_N"])
            assert order(tiles_m, tiles_n, config["GROUP_SIZE_M"]) == order(tiles_m, tiles_n, twin["GROUP_SIZE_M"])
            assert config_legality(MOE_SPACE, shape, twin, H200) == []
            checked += twin != config
    assert checked > 10


def test_smem_and_register_rules_follow_the_profile():
    shape = MoeShape(8, 2, 4096, 14336, 4096)
    columns = MOE_SPACE.all_columns()
    hopper, ampere = moe_legality(shape, columns, H200), moe_legality(shape, columns, A100)
    # sm_90 keeps num_stages - 1 buffers for mma.sync tiles (BLOCK_SIZE_M < 64), so fewer configs run out of room
    assert hopper["shared memory over the per-block limit"].sum() < ampere["shared memory over the per-block limit"].sum()
    big = (columns["BLOCK_SIZE_M"] == 256) & (columns["BLOCK_SIZE_N"] == 256)
    assert hopper["registers over the per-thread limit"][big].all()  # a 256x256 fp32 accumulator spills
    small = (columns["BLOCK_SIZE_M"] * columns["BLOCK_SIZE_N"]) <= 64 * 128
    assert not hopper["registers over the per-thread limit"][small].any()


def test_every_shape_of_the_lists_keeps_configs_and_the_legality_is_fast():
    import time

    start = time.perf_counter()
    counts = [len(legal_configs(MOE_SPACE, MoeShape(*layer, tokens, gemm), H200))
              for layer in set(LAYERS.values()) for tokens in TOKENS for gemm in ("gate_up", "down")]
    assert min(counts) >= 238 and max(counts) <= 1256
    assert 700 < np.mean(counts) < 1100
    assert time.perf_counter() - start < 20
