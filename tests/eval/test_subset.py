"""The seeded subsets a second device is scored on: fixed by the seed, in the source's order, refused when too large."""

import json

import pytest

from rooftune.eval.shapelists.subset import SubsetError, draw, write_subset

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
