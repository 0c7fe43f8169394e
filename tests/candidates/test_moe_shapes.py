"""The MoE shape (its two GEMMs, parsing, lists, file ids) and its seeded routing."""

import json

import numpy as np
import pytest

from rooftune.candidates import KERNELS, MoeShape, ShapeError, kernel_of, parse_moe_shape
from rooftune.candidates.routing import expert_rows, padded_rows, padded_rows_bound, routing, row_tiles_bound
from rooftune.candidates import shape_id
from rooftune.candidates.shapes import ShapeListError, load_moe_shapes


def test_the_two_gemms_of_a_layer():
    up, down = (MoeShape(128, 8, 2048, 768, 64, gemm) for gemm in ("gate_up", "down"))
    assert (up.n, up.k, down.n, down.k) == (1536, 2048, 2048, 768)
    assert up.rows == down.rows == 512 and up.flops == 2 * 512 * 1536 * 2048
    assert str(up) == "128x8x2048x768x64 gate_up" and str(MoeShape(8, 2, 64, 32, 3, "down", "fp16", 5)) == \
        "8x2x64x32x3 down (fp16, routing seed 5)"
    assert kernel_of(up) is KERNELS["moe"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(experts=8, topk=9, hidden=64, intermediate=64, tokens=1), "topk"),
    (dict(experts=8, topk=2, hidden=64, intermediate=64, tokens=0), "tokens must be >= 1"),
    (dict(experts=8, topk=2, hidden=64, intermediate=64, tokens=1, gemm="up"), "gemm must be one of"),
    (dict(experts=8, topk=2, hidden=64, intermediate=64, tokens=1, dtype="int8"), "dtype"),
    (dict(experts=8, topk=2, hidden=64, intermediate=64, tokens=1, seed=-1), "seed"),
    (dict(experts=8, topk=2, hidden=64, intermediate=2**23, tokens=1), "n = "),
    (dict(experts=8, topk=2, hidden=64, intermediate=64, tokens=2**30), "tokens · topk"),
])
def test_bad_shapes_say_why(kwargs, match):
    with pytest.raises(ShapeError, match=match):
        MoeShape(**kwargs)


def test_parse_and_ids():
    shape = parse_moe_shape("128x8x2048x768x4096", gemm="down")
    assert shape == MoeShape(128, 8, 2048, 768, 4096, "down")
    assert KERNELS["moe"].parse("8x2x4096x14336x1") == MoeShape(8, 2, 4096, 14336, 1)
    with pytest.raises(ShapeError, match="expected 5"):
        parse_moe_shape("128x8x2048x768")
    assert shape_id(shape) == "moe-128x8x2048x768-m4096-down-bf16"
    assert shape_id(MoeShape(8, 2, 64, 32, 3, seed=7)) == "moe-8x2x64x32-m3-gate_up-bf16-r7"


def test_load_list(tmp_path):
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps([{"experts": 8, "topk": 2, "hidden": 64, "intermediate": 32, "tokens": 3,
                                 "gemm": "down", "source": "x"},
                                {"experts": 8, "topk": 2, "hidden": 64, "intermediate": 32, "tokens": 3,
                                 "gemm": "gate_up", "dtype": "fp16", "seed": 4}]))
    assert load_moe_shapes(path) == [MoeShape(8, 2, 64, 32, 3, "down"), MoeShape(8, 2, 64, 32, 3, "gate_up", "fp16", 4)]
    path.write_text(json.dumps([{"experts": 8, "topk": 2, "hidden": 64, "intermediate": 32, "tokens": 3}]))
    with pytest.raises(ShapeListError, match="entry 0 must be an object with keys"):
        load_moe_shapes(path)


def test_routing_is_seeded_uniform_top_k_with_renormalized_weights():
    shape = MoeShape(64, 6, 2048, 1408, 4096)
    ids, weights = routing(shape)
    assert ids.shape == weights.shape == (4096, 6) and ids.dtype == np.int32 and weights.dtype == np.float32
    assert all(len(set(row)) == 6 for row in ids.tolist())                  # distinct experts per token
    assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-6) and (weights > 0).all()
    counts = expert_rows(shape)
    assert counts.sum() == 4096 * 6 and abs(counts.mean() - 384) < 1e-9 and counts.std() < 40  # near uniform
    again = routing(MoeShape(64, 6, 1024, 512, 4096, "down"))                # same layer draw for either GEMM
    assert np.array_equal(again[0], ids)
    assert not np.array_equal(routing(MoeShape(64, 6, 2048, 1408, 4096, seed=1))[0], ids)
    # the draw itself is pinned: the committed datasets are timed on it
    assert routing(MoeShape(8, 2, 4096, 14336, 2))[0].tolist() == [[4, 6], [0, 7]]
    with pytest.raises(ValueError):
        ids[0, 0] = 1  # cached arrays are read-only


def test_padding_and_the_grid_bound():
    shape = MoeShape(8, 2, 64, 32, 5)
    counts = expert_rows(shape)
    assert padded_rows(counts, 16) == 16 * int((counts > 0).sum())
    assert list(padded_rows(counts, np.array([16, 64]))) == [16 * (counts > 0).sum(), 64 * (counts > 0).sum()]
    for bm in (16, 32, 256):  # the bound holds for any routing, and the grid covers it
        assert padded_rows(counts, bm) <= padded_rows_bound(shape.rows, shape.experts, bm)
        assert row_tiles_bound(shape, bm) * bm >= padded_rows_bound(shape.rows, shape.experts, bm)
    assert padded_rows_bound(3, 8, 16) == 3 * 16 and padded_rows_bound(100, 8, 16) == 100 + 8 * 15
