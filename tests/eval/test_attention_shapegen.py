"""The attention shape generator: deterministic, disjoint lists of the promised sizes and ranges, capped work, committed files match."""

import json
from pathlib import Path

from rooftune.candidates.shapes import load_attention_shapes
from rooftune.eval.shapelists.attention import (
    HELDOUT_FAMILIES,
    MAX_CAUSAL_FLOPS,
    SEED,
    causal_flops,
    generate,
    write_lists,
)

REPO = Path(__file__).resolve().parents[2]


def _keys(shapes):
    return [(s["batch"], s["heads"], s["kv_heads"], s["seq"], s["head_dim"]) for s in shapes]


def test_seeded_disjoint_lists_with_capped_work_in_the_promised_ranges():
    train, heldout = generate()
    assert (train, heldout) == generate() != generate(SEED + 1)
    assert len(train) >= 100 and len(heldout) == 200
    assert len(set(_keys(train))) == len(train) and len(set(_keys(heldout))) == len(heldout)
    assert not set(_keys(train)) & set(_keys(heldout))
    assert not any(s["source"].split()[0] in HELDOUT_FAMILIES for s in train)
    for shapes in (train, heldout):
        for s in shapes:
            assert causal_flops(s) <= MAX_CAUSAL_FLOPS and s["causal"] is True
            assert 1 <= s["batch"] <= 64 and 8 <= s["heads"] <= 128 and 64 <= s["seq"] <= 16384
            assert s["head_dim"] in (64, 128) and s["heads"] // s["kv_heads"] in (1, 4, 8)
            assert s["heads"] % s["kv_heads"] == 0
        assert {s["heads"] // s["kv_heads"] for s in shapes} == {1, 4, 8}
        assert {s["head_dim"] for s in shapes} == {64, 128}
        seqs = [s["seq"] for s in shapes]
        assert min(seqs) == 64 and max(seqs) >= 8192
        assert 0.3 < sum(x & (x - 1) != 0 for x in seqs) / len(seqs) < 0.7  # not only powers of two
        assert len({s["source"].split()[0] for s in shapes[:12]}) >= 8  # a prefix spans families
        # The mean work stays far under the cap: ≈ 1 ms a launch at ~550 TFLOP/s, so sweeps take seconds.
        assert sum(map(causal_flops, shapes)) / len(shapes) < MAX_CAUSAL_FLOPS / 2


def test_committed_lists_are_the_generator_output_and_load(tmp_path):
    write_lists(tmp_path)
    for name in ("shapes_train.json", "shapes_heldout.json"):
        committed = REPO / "datasets" / "h200" / "attention" / name
        assert json.loads(committed.read_text()) == json.loads((tmp_path / name).read_text())
        shapes = load_attention_shapes(committed)
        assert any(s.kv_heads < s.heads for s in shapes) and all(s.causal for s in shapes)
