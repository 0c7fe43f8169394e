"""The live MoE table check's CPU side: layers parsed, a tune call resumable, a table scored on recorded data."""

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from script_module import load_script

from rooftune.eval.datasets import readers
from rooftune.hwprofiles import load_profile

live = load_script("scripts/device/moe_live.py")
TRAIN = Path(__file__).resolve().parents[2] / "datasets/h200/moe/train"
LAYER = (16, 1, 5120, 8192, 1)  # Llama-4-Scout, a training layer


def test_layers_parse_with_tp_one_by_default_and_bad_ones_are_refused():
    assert live.parse_layer("128,8,2048,768") == (128, 8, 2048, 768, 1)
    assert live.parse_layer("128,8,2048,768,4") == (128, 8, 2048, 768, 4)
    for bad in ("128,8,2048", "a,b,c,d", "128,8,2048,0"):
        with pytest.raises(argparse.ArgumentTypeError):
            live.parse_layer(bad)


def test_tune_runs_each_layer_once_and_keeps_its_table(monkeypatch, tmp_path):
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "E=16,N=8192,device_name=NVIDIA_H200.json").write_text(json.dumps({"1": {"BLOCK_SIZE_M": 16}}))
        assert kw["env"]["TRITON_CACHE_DIR"]  # an empty Triton cache of its own
        return SimpleNamespace(returncode=0, stdout="ok", stderr="")

    monkeypatch.setattr(live.subprocess, "run", fake_run)
    args = ["tune", "--layer", "16,1,5120,8192", "--out", str(tmp_path)]
    live.main(args)
    live.main(args)  # resumed: already there
    assert len(calls) == 1 and "--cache" in calls[0] and calls[0][calls[0].index("--cache") + 1] == "none"
    state = json.loads((tmp_path / "moe_live.json").read_text())
    run = state["layers"]["16,1,5120,8192,1"]
    assert run["rc"] == 0 and run["table_file"].startswith("E=16,N=8192")
    assert run["table"] == {"1": {"BLOCK_SIZE_M": 16}}


@pytest.mark.slow  # reads and scores the MoE training set twice: 6-13 s
def test_a_table_of_each_m_s_recorded_best_scores_one_on_its_gemm():
    records = live.layer_records(readers.load_records(TRAIN), LAYER)
    assert len(records) == 36  # 18 token counts x 2 GEMMs
    gate_up = {r.shape.tokens: min((t for t in r.trials if t.ok and t.in_space), key=lambda t: t.time_us).config
               for r in records if r.shape.gemm == "gate_up"}
    table = {str(m): {**dict(c.params), "num_warps": c.num_warps, "num_stages": c.num_stages}
             for m, c in gate_up.items()}
    state = {"layers": {"16,1,5120,8192,1": {"wall_s": 60.0, "rc": 0, "table": table}}}
    (row,) = live.check(state, TRAIN, "h200")
    assert row["shapes"] == 36 and row["scores"]["gate_up"] == pytest.approx([1.0] * 18)
    assert all(0 < s <= 1 for s in row["scores"]["down"]) and 0 < row["vllm_mean"] <= 1
    assert row["mean"] == pytest.approx((18 + sum(row["scores"]["down"])) / 36)  # over both GEMMs, as vLLM's
    assert row["sweep_s"] == pytest.approx(live.sweep_seconds(records)) and row["sweep_s"] > 0


def test_an_fp8_layer_is_tuned_with_its_scales_and_scored_against_its_own_table(monkeypatch, tmp_path):
    """`--block-shape 128,128` reaches the tune; `check` on FP8 data looks the layer's table up under its FP8 name
    (vLLM's `...,dtype=fp8_w8a8,block_shape=[128,128].json`): each M's recorded best as the table scores 1.0."""
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        return SimpleNamespace(returncode=0, stdout="ok", stderr="")

    monkeypatch.setattr(live.subprocess, "run", fake_run)
    live.main(["tune", "--layer", "256,8,7168,2048,8", "--out", str(tmp_path), "--block-shape", "128,128"])
    assert calls[0][-2:] == ["--block-shape", "128,128"]
    assert live.fp8_args("fp8_w8a8", None) == ("--dtype", "fp8_w8a8") and live.fp8_args(None, None) == ()
    heldout = TRAIN.parents[1] / "moe_fp8/heldout"
    records = [r for r in live.layer_records(readers.load_records(heldout), (256, 8, 7168, 2048, 8))
               if r.shape.gemm == "gate_up" and r.shape.tokens <= 8]
    best = {r.shape.tokens: min((t for t in r.trials if t.ok and t.in_space), key=lambda t: t.time_us).config
            for r in records}
    table = {str(m): {**dict(c.params), "num_warps": c.num_warps, "num_stages": c.num_stages} for m, c in best.items()}
    scores = live.score_table(records, table, load_profile("h200"))
    assert len(records) == 4 and scores["gate_up"] == pytest.approx([1.0] * 4)
