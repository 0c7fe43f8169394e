"""The seeded subsets a second device (or another Triton release) is scored on: fixed by the seed, in the source's
order, refused when too large; whole fused-MoE layers, one per model."""

import json

import pytest

from rooftune.eval.shapelists.subset import SubsetError, draw, draw_layers, layer_model, write_subset

SHAPES = [{"m": m, "n": 64, "k": 64} for m in range(1, 31)]


def test_a_seed_fixes_the_subset_and_keeps_the_source_order():
    a, b = draw(SHAPES, 10, 66), draw(SHAPES, 10, 66)
    assert a == b and len(a) == 10 and a == sorted(a, key=SHAPES.index)
    assert draw(SHAPES, 10, 67) != a


def test_written_subset_is_byte_for_byte_the_source_shapes(tmp_path):
    src = tmp_path / "s.json"
    src.write_text(json.dumps(SHAPES))
    written = write_subset(src, 5, 1, tmp_path / "sub" / "shapes.json")
    assert json.loads((tmp_path / "sub" / "shapes.json").read_text()) == written
    assert all(s in SHAPES for s in written)


@pytest.mark.parametrize("count", [0, 31])
def test_impossible_counts_are_refused(count):
    with pytest.raises(SubsetError, match="cannot draw"):
        draw(SHAPES, count, 0)


def test_the_committed_partition_lists_are_the_seeded_draws():
    """datasets/h200-sm66 holds exactly what `python -m rooftune.eval.shapelists.subset ... --seed 66` draws."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "datasets"
    for kernel, split, count in (("gemm", "heldout", 100), ("attention", "heldout", 50), ("gemm", "train", 24),
                                 ("attention", "train", 16)):
        source = json.loads((root / "h200" / kernel / f"shapes_{split}.json").read_text())
        committed = json.loads((root / "h200-sm66" / kernel / f"shapes_{split}.json").read_text())
        assert committed == draw(source, count, 66)


LAYERS = [{"tokens": t, "gemm": g, "source": src} for src in ("a tp1", "b tp1", "b tp2", "b tp4", "c")
          for t in (1, 2) for g in ("gate_up", "down")]


def test_layers_draws_one_whole_layer_of_each_model():
    chosen = draw_layers(LAYERS, 43)
    sources = {s["source"] for s in chosen}
    assert {layer_model(s) for s in sources} == {"a", "b", "c"} and len(sources) == 3
    assert all(sum(s["source"] == src for s in chosen) == 4 for src in sources)  # every shape of the layer
    assert chosen == sorted(chosen, key=LAYERS.index) and draw_layers(LAYERS, 43) == chosen
    assert {s["source"] for seed in range(20) for s in draw_layers(LAYERS, seed)} >= {"b tp1", "b tp2", "b tp4"}
    with pytest.raises(SubsetError, match="'source'"):
        draw_layers(SHAPES, 0)


def test_the_committed_release_lists_are_the_seeded_draws():
    """datasets/h200/releases holds the subsamples every Triton release is swept on, drawn with seed 43 before any
    timing: at least every other training shape, every 4th held-out GEMM shape, one layer of each held-out MoE
    model; the held-out ones named so that `fit` refuses their sweeps."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "datasets" / "h200"
    for kernel, split, count in (("gemm", "train", 60), ("gemm", "heldout", 50), ("moe", "train", 90),
                                 ("moe", "heldout", None)):
        source = json.loads((root / kernel / f"shapes_{split}.json").read_text())
        committed = json.loads((root / "releases" / kernel / f"shapes_{split}.json").read_text())
        assert committed == (draw(source, count, 43) if count else draw_layers(source, 43))
        assert len(committed) * (2 if split == "train" else 4) >= len(source)  # every other; every 4th
    heldout_models = {layer_model(s["source"]) for s in json.loads((root / "moe" / "shapes_heldout.json").read_text())}
    chosen = json.loads((root / "releases" / "moe" / "shapes_heldout.json").read_text())
    assert {layer_model(s["source"]) for s in chosen} == heldout_models and len(chosen) == 36 * len(heldout_models)
