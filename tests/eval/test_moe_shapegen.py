"""The MoE shape lists: seeded, split by model, at least 200 held-out shapes, the committed files are the
generator's output, a shape file round-trips, and the device-time plan fits the issue's ~2 hours."""

import json
from collections import Counter
from pathlib import Path

from rooftune.candidates import MOE_SPACE, Config, MoeShape, ShapeRecords, Trial
from rooftune.candidates.moe_space import VLLM_TOKENS as TOKENS
from rooftune.candidates.shapes import load_moe_shapes
from rooftune.eval.datasets.format import read_shape, write_shape
from rooftune.eval.shapelists.moe import (
    HELDOUT_MODELS,
    MODELS,
    SEED,
    device_time_plan,
    generate,
    plan_table,
    write_lists,
)
from rooftune.hwprofiles import load_profile

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "datasets" / "h200" / "moe"


def _model(s: dict) -> str:
    return s["source"].split()[0]


def test_seeded_and_deterministic():
    assert generate() == generate()
    train, heldout = generate(SEED + 1)
    assert (train, heldout) != generate() and sorted(map(json.dumps, train)) == sorted(map(json.dumps, generate()[0]))


def test_split_by_model_with_enough_held_out_shapes():
    train, heldout = generate()
    assert {_model(s) for s in heldout} == set(HELDOUT_MODELS)
    assert not {_model(s) for s in train} & set(HELDOUT_MODELS)
    assert {_model(s) for s in train} | set(HELDOUT_MODELS) == set(MODELS)
    assert len(heldout) >= 200 and len(train) >= 100
    for shapes in (train, heldout):
        keys = [json.dumps({k: v for k, v in s.items() if k != "source"}, sort_keys=True) for s in shapes]
        assert len(set(keys)) == len(keys)
        per_layer = Counter(s["source"] for s in shapes)
        assert set(per_layer.values()) == {2 * len(TOKENS)}  # both GEMMs at vLLM's 18 token counts
        assert all(s["seed"] == 0 for s in shapes)
        assert len({_model(s) for s in shapes[: len({_model(s) for s in shapes})]}) >= 3  # a prefix spans models


def test_committed_lists_are_the_generator_output(tmp_path):
    write_lists(tmp_path)
    for name in ("shapes_train.json", "shapes_heldout.json"):
        assert json.loads((DATA / name).read_text()) == json.loads((tmp_path / name).read_text())
        load_moe_shapes(DATA / name)


def test_a_moe_shape_file_round_trips(tmp_path):
    shape = MoeShape(128, 8, 2048, 768, 24, "down", seed=3)
    config = Config.make(4, 3, BLOCK_SIZE_M=16, BLOCK_SIZE_N=64, BLOCK_SIZE_K=128, GROUP_SIZE_M=1)
    failed = Config.make(4, 3, BLOCK_SIZE_M=16, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=1)
    records = ShapeRecords(shape=shape, trials=(Trial(config, 12.5), Trial(failed, None, error="check: x")),
                           baselines_us={"grouped_mm": 20.0}, meta={"space_version": "moe-x"})
    back = read_shape(write_shape(tmp_path, records))
    assert back.shape == shape and back.trials[0].config == config and back.baselines_us == {"grouped_mm": 20.0}


def test_the_device_time_plan_fits_two_hours():
    lists = {name: load_moe_shapes(DATA / f"shapes_{name}.json") for name in ("train", "heldout")}
    h200 = load_profile("h200")
    rows = device_time_plan(lists["heldout"][:4], h200)
    assert all(r["legal"] >= 238 and r["best_ms"] > 0 and r["sweep_s"] > 0 for r in rows)
    table = plan_table(lists, h200)
    minutes = float(table.splitlines()[-1].split("|")[-2].strip(" *"))
    assert 40 < minutes <= 120, table
    assert f"**{len(lists['train']) + len(lists['heldout'])}**" in table


def test_the_card_names_the_space_version_and_the_plans_total():
    card = (DATA / "README.md").read_text()
    assert f"`{MOE_SPACE.version}`" in card and MOE_SPACE.rules_version in card
    lists = {name: load_moe_shapes(DATA / f"shapes_{name}.json") for name in ("train", "heldout")}
    assert plan_table(lists, load_profile("h200")) in card  # the plan printed by --plan, as committed
