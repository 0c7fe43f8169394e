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
