"""The MoE row-rule check's CPU side: which training shapes it lists, the taller tiles it times, its verdict."""

import json

from script_module import load_script

from rooftune.candidates import MOE_SPACE, MoeShape, Trial, legal_configs
from rooftune.candidates.records import ShapeRecords
from rooftune.hwprofiles import load_profile

PROFILE = load_profile("h200")


rule = load_script("scripts/device/moe_row_rule.py")


def _records(shape, fastest_bm):
    """Every legal config timed, those of BLOCK_SIZE_M `fastest_bm` fastest (the first of them fastest of all)."""
    configs = legal_configs(MOE_SPACE, shape, PROFILE).configs
    times = [(1.0 if c["BLOCK_SIZE_M"] == fastest_bm else 2.0) + i * 1e-3 for i, c in enumerate(configs)]
    return ShapeRecords(shape, tuple(Trial(c, t) for c, t in zip(configs, times)))


def test_only_shapes_won_at_the_tallest_kept_tile_are_listed_with_taller_tiles_that_fit():
    shape = MoeShape(16, 2, 4096, 6400, tokens=256, gemm="gate_up")
    kept = max(c["BLOCK_SIZE_M"] for c in legal_configs(MOE_SPACE, shape, PROFILE).configs)
    assert kept < rule.TALLEST
    entries = rule.plan_entries([_records(shape, kept), _records(shape, 16)], PROFILE)
    assert len(entries) == 1  # won at 16 rows: not at the edge
    entry = entries[0]
    assert entry["best"]["BLOCK_SIZE_M"] == kept and entry["shorter"]["BLOCK_SIZE_M"] < kept
    heights = [t["BLOCK_SIZE_M"] for t in entry["taller"]]
    assert heights and heights == sorted(heights) and set(heights) <= {2 * kept, 4 * kept} and max(heights) <= 256
    for t in entry["taller"]:  # the best's own tile otherwise, with at most its stages
        assert {k: v for k, v in t.items() if k not in ("BLOCK_SIZE_M", "num_stages")} == \
            {k: v for k, v in entry["best"].items() if k not in ("BLOCK_SIZE_M", "num_stages")}
        assert 2 <= t["num_stages"] <= entry["best"]["num_stages"]
    assert MoeShape(**json.loads(json.dumps(entry["shape"]))) == shape  # the plan's shape round-trips


def test_the_verdict_is_the_fastest_taller_tile_over_the_kept_best():
    plan = [{"id": "a", "taller": [{}, {}]}, {"id": "b", "taller": [{}]}, {"id": "c", "taller": []}]
    timed = {"shapes": {"a": {"us": [10.0, 12.0, 9.0, 11.0]}, "b": {"us": [10.0, None, 10.5]},
                        "c": {"us": [None, 3.0]}}}
    rows = rule.verdicts(plan, timed)
    assert [(r["id"], r["taller_ratio"]) for r in rows] == [("a", 0.9), ("b", None)]
