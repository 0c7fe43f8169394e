"""The shape generator: deterministic, disjoint lists of the promised sizes, and the committed files match."""

import json
from pathlib import Path

from rooftune.eval.shapelists.gemm import HELDOUT_FAMILIES, MAX_MNK, SEED, generate, write_lists

REPO = Path(__file__).resolve().parents[2]


def _keys(shapes):
    return [(s["m"], s["n"], s["k"], s["layout"]) for s in shapes]


def test_deterministic_and_seeded():
    assert generate() == generate()
    assert generate(SEED + 1) != generate()


def test_sizes_disjointness_and_limits():
    train, heldout = generate()
    assert len(train) >= 100 and len(heldout) == 200
    assert len(set(_keys(train))) == len(train) and len(set(_keys(heldout))) == len(heldout)
    assert not set(_keys(train)) & set(_keys(heldout))
    for s in train + heldout:
        assert s["m"] * s["n"] * s["k"] <= MAX_MNK and s["layout"] in ("kn", "nk")
    assert not any(s["source"].split()[0] in HELDOUT_FAMILIES for s in train)


def test_coverage_and_odd_minority():
    for shapes in generate():
        ms = [s["m"] for s in shapes]
        assert min(ms) == 1 and max(ms) >= 8192
        assert any(s["m"] <= 64 for s in shapes[:10]) and any(s["m"] > 64 for s in shapes[:10])
        odd = [s for s in shapes if s["n"] % 16 or s["k"] % 16]
        assert 0 < len(odd) <= 0.15 * len(shapes)
        groups = {(s["layout"], s["n"] % 16, s["k"] % 16) for s in shapes}
        assert len(groups) <= 6  # every group is a full pre-compile
        assert {s["layout"] for s in shapes} == {"kn", "nk"}
        assert len({s["source"].split()[0] for s in shapes[:12]}) >= 8  # a prefix spans families


def test_committed_lists_are_the_generator_output(tmp_path):
    write_lists(tmp_path)
    for name in ("shapes_train.json", "shapes_heldout.json"):
        committed = REPO / "datasets" / "h200" / "gemm" / name
        assert json.loads(committed.read_text()) == json.loads((tmp_path / name).read_text())
