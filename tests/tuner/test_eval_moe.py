"""`rooftune eval moe` on a tiny recorded fused-MoE dataset (written with eval/datasets/format.py): every method through
`tune` and the recorded measurer, vLLM's shipped table looked up as vLLM does, its default rule."""

import json

import pytest
from typer.testing import CliRunner

from rooftune.candidates import MOE_SPACE, MoeShape, legal_configs
from rooftune.candidates.moe_space import group_twin
from rooftune.eval.datasets.format import read_dataset, write_manifest, write_shape
from rooftune.eval.scoring.replay import RecordedMeasurer
from rooftune.hwprofiles import load_profile
from rooftune.tuner.cli.app import app
from rooftune.tuner.evaluation import replay_shape
from rooftune.tuner.llm.moe_tables import default_config, lookup, shipped_tables
from rooftune.tuner.search.methods import moe_eval_methods
from rooftune.tuner.search.vllm import vllm_config, vllm_default, vllm_shipped
from rooftune.tuner.tune import tune

runner = CliRunner()
PROFILE = load_profile("h200")
QWEN_TP4 = (128, 8, 2048, 192)   # vLLM ships E=128,N=192,device_name=NVIDIA_H200.json
GPT_OSS = (32, 4, 2880, 2880)    # no vLLM table: its default rule
SHAPES = [MoeShape(*QWEN_TP4, 1), MoeShape(*QWEN_TP4, 64, gemm="down"), MoeShape(*QWEN_TP4, 100),
          MoeShape(*GPT_OSS, 16)]


@pytest.fixture
def dataset(tmp_path, synthetic):
    """Every legal config of four shapes 'measured' as tests/tuner/conftest.py's synthetic records."""
    root = tmp_path / "moe"
    write_manifest(root, {"kernel": "moe", "space_version": MOE_SPACE.version, "gpu_profile": PROFILE.name})
    for shape in SHAPES:
        write_shape(root, synthetic(shape, PROFILE))
    return root


def test_vllm_looks_up_the_nearest_m_of_its_table_else_its_default_rule():
    tables = shipped_tables()
    table = tables["E=128,N=192,device_name=NVIDIA_H200.json"]
    assert vllm_config(SHAPES[0], PROFILE, tables) == table[1]
    assert vllm_config(SHAPES[2], PROFILE, tables) == table[96] == lookup(table, 100)  # 100 tokens: M 96's entry
    assert vllm_config(SHAPES[3], PROFILE, tables) == default_config(16, 32, 2880, 2880, 4)
    # another GPU: vLLM ships no H200 table for it, so its default rule
    a100 = load_profile("a100_sxm4_80gb")
    assert vllm_config(SHAPES[0], a100, tables) == default_config(1, 128, 192, 2048, 8)


def test_the_vllm_methods_measure_its_one_config_as_the_space_holds_it(dataset):
    for records in read_dataset(dataset):
        shape, candidates = records.shape, records.candidate_configs()
        for strategy, expected in ((vllm_shipped(), vllm_config(shape, PROFILE, shipped_tables())),
                                   (vllm_default(), default_config(shape.tokens, shape.experts, shape.intermediate,
                                                                   shape.hidden, shape.topk))):
            result = tune(shape, RecordedMeasurer(records), strategy, 20, profile=PROFILE, candidates=candidates)
            assert [t.config for t in result.trials] == [group_twin(shape, expected)]  # one config, whatever the budget
            score = replay_shape(records, strategy, 20, PROFILE).score
            assert score == pytest.approx(records.best_candidate_us / records.lookup()[group_twin(shape, expected)].time_us)


def test_methods_and_static_where_a_list_is_given(dataset):
    records = read_dataset(dataset)
    assert list(moe_eval_methods(records)) == ["rooftune", "model", "random", "vllm-shipped", "vllm-default"]
    static = legal_configs(MOE_SPACE, SHAPES[0], PROFILE).configs[:3]
    assert "static" in moe_eval_methods(records, static=static)


def test_eval_moe_scores_every_method(dataset, tmp_path):
    out = tmp_path / "summary.json"
    result = runner.invoke(app, ["eval", "moe", "--data", str(dataset), "--budget", "20", "--json", str(out)],
                           env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    summary = json.loads(out.read_text())
    assert summary["n_shapes"] == 4 and summary["vllm_tables"] == {"shapes": 3, "of": 4}
    assert set(summary["methods"]) == {"rooftune", "model", "random", "vllm-shipped", "vllm-default"}
    assert summary["methods"]["random"]["runs"] == 10
    for method, s in summary["methods"].items():
        assert 0 < s["worst_decile_mean"] <= s["mean"] <= 1, method
    # the synthetic times are the model's × a factor of 0.8 .. 1.4: 20 configs by the model find nearly the best
    assert summary["methods"]["rooftune"]["mean"] > 0.85
    assert "vLLM's NVIDIA H200 table for 3 of 4 shapes" in text
    one = runner.invoke(app, ["eval", "moe", "--data", str(dataset), "--budget", "5", "--methods",
                              "vllm-shipped,model"])
    assert one.exit_code == 0 and "vllm-default" not in one.output
    bad = runner.invoke(app, ["eval", "moe", "--data", str(dataset), "--budget", "5", "--methods", "static"])
    assert bad.exit_code == 2 and "static not available here" in " ".join(bad.output.split())


def test_eval_moe_refuses_data_without_moe_shapes(tmp_path):
    root = tmp_path / "empty"
    write_manifest(root, {"kernel": "moe", "space_version": MOE_SPACE.version, "gpu_profile": PROFILE.name})
    result = runner.invoke(app, ["eval", "moe", "--data", str(root), "--budget", "5"])
    assert result.exit_code == 2 and "no fused-MoE shapes recorded" in " ".join(result.output.split())


def test_eval_moe_scores_the_layer_as_an_engine_runs_it(tmp_path, synthetic):
    """Both GEMMs of a layer recorded at two token counts: each table method's layer score, mean and worst."""
    root = tmp_path / "layer"
    write_manifest(root, {"kernel": "moe", "space_version": MOE_SPACE.version, "gpu_profile": PROFILE.name})
    for m in (1, 64):
        for g in ("gate_up", "down"):
            write_shape(root, synthetic(MoeShape(*QWEN_TP4, m, gemm=g), PROFILE))
    out = tmp_path / "summary.json"
    result = runner.invoke(app, ["eval", "moe", "--data", str(root), "--budget", "8", "--residual", "none",
                                 "--methods", "rooftune,vllm-shipped,vllm-default", "--json", str(out)],
                           env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    layers = json.loads(out.read_text())["layers"]
    label = "E=128,topk=8,H=2048,N=192"
    assert list(layers["layers"]) == [label] and layers["layers"][label]["split_gain"] >= 1
    assert set(layers["methods"]) == {"rooftune", "rooftune-split", "vllm-shipped", "vllm-default"}
    for method, per_layer in layers["methods"].items():
        s = per_layer[label]
        assert 0 < s["worst"] <= s["mean"] and s["split_mean"] <= min(1, s["mean"]), method
        assert s["mean"] <= 1 or method == "rooftune-split", method  # separate configs can beat one config
    assert "the layer as an engine runs it" in " ".join(result.output.split())
