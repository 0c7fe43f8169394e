"""A fused-MoE layer's score as an engine runs it, on a tiny hand-built recorded set (times chosen by hand)."""

import pytest

from rooftune.candidates import Config, MoeShape, Trial
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.scoring.layers import best_single, best_split, layer_records, score_layer, split_gain


def cfg(bm, bn, bk=64):
    return Config.make(4, 3, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=1)


A, B, C, D, E = cfg(16, 64), cfg(32, 64), cfg(16, 128), cfg(32, 128, 128), cfg(64, 64)
# gate_up / down µs of each config at M = 16: single sums A 15, B 17, C 16, D 17; E fails on down
TIMES = {"gate_up": {A: 10, B: 8, C: 12, D: 9, E: 7}, "down": {A: 5, B: 9, C: 4, D: 8, E: None}}
LAYER = (8, 2, 1024, 512)


def records(m, scale=1.0):
    out = []
    for g, times in TIMES.items():
        trials = tuple(Trial(c, None, error="check: wrong") if t is None else Trial(c, t * scale)
                       for c, t in times.items())
        out.append(ShapeRecords(MoeShape(*LAYER, m, gemm=g), trials))
    return out


def test_best_single_and_best_split_by_hand():
    (key, by_m), = layer_records(records(16)).items()
    pair = by_m[16]
    assert key == (*LAYER, "bf16") and best_single(pair) == (A, 15)
    # BLOCK_SIZE_M 16: gate_up A 10 + down C 4 = 14; 32: B 8 + D 8 = 16; 64 never ran on down
    assert best_split(pair) == ({"gate_up": A, "down": C}, 14)


def test_a_table_scored_as_the_engine_runs_it():
    (key, by_m), = layer_records([*records(16), *records(64, 2.0), records(128)[0]]).items()
    assert list(by_m) == [16, 64]  # M = 128 lacks its down GEMM: not a layer token count
    table = {16: {"gate_up": B, "down": B}, 64: {"gate_up": A, "down": C}}
    score = score_layer(key, by_m, table.get)
    assert [e.single for e in score.entries] == pytest.approx([15 / 17, 30 / 28])
    assert [e.split for e in score.entries] == pytest.approx([14 / 17, 1.0])
    assert score.mean == pytest.approx((15 / 17 + 30 / 28) / 2) and score.worst == pytest.approx(15 / 17)
    assert score.time_us == pytest.approx(17 + 28)
    # an entry that fails on a GEMM, or that is not there, scores 0
    failing = score_layer(key, by_m, {16: {"gate_up": E, "down": E}}.get)
    assert [e.single for e in failing.entries] == [0.0, 0.0] and failing.worst == 0.0
    assert split_gain(by_m) == pytest.approx((15 + 30) / (14 + 28))
