"""`rooftune fit attention` and `eval attention` on a tiny synthetic attention dataset: the GEMM command's
code path (cross-validation, static list, space version), held-out data refused, the residual taken by
`eval attention --residual` and by `explain attention`, never applied to another kernel's data."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rooftune.candidates import ATTENTION_SPACE, AttentionShape, configs_to_columns, legal_configs
from rooftune.eval.datasets.format import ShapeRecords, Trial, write_manifest, write_shape
from rooftune.hwprofiles import load_profile
from rooftune.roofline import predict
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.residual import ATTENTION_FEATURES_VERSION, read_residual
from rooftune.tuner import fitting
from rooftune.tuner.search.gp import SearchSettings

from .conftest import factor

PROFILE = load_profile("h200")
SHAPES = [AttentionShape(2, 8, 256, 64), AttentionShape(1, 16, 2048, 128, kv_heads=4),
          AttentionShape(4, 8, 700, 128), AttentionShape(1, 32, 1024, 64, kv_heads=8)]
runner = CliRunner()


def _dataset(root, shapes_file: str):
    """Every legal config 'measured' at the model's time × a fixed per-config factor, TMA 10% faster;
    SDPA beside them. Returns the dataset folder."""
    write_manifest(root, {"kernel": "attention", "shapes_file": shapes_file, "space_version": ATTENTION_SPACE.version,
                          "gpu_profile": PROFILE.name})
    for shape in SHAPES:
        configs = legal_configs(ATTENTION_SPACE, shape, PROFILE).configs
        predicted = predict(shape, configs_to_columns(configs), PROFILE).time_us
        rows = tuple(Trial(c, float(t) * factor(c) * (0.9 if c["ORDER"] == 3 else 1.0)) for c, t in zip(configs, predicted))
        write_shape(root, ShapeRecords(shape, rows, {"sdpa": float(np.min(predicted))}, {"space_version": ATTENTION_SPACE.version}))
    return root


@pytest.fixture
def one_setting(monkeypatch):
    monkeypatch.setattr(fitting, "candidates_grid", lambda: [fitting.Candidate(RidgeSettings(0.1, 5.0), SearchSettings())])


def test_fit_attention_writes_a_residual_that_eval_and_explain_take(tmp_path, one_setting):
    data = _dataset(tmp_path / "train", "shapes_train.json")
    out = tmp_path / "attention.json"
    result = runner.invoke(app(), ["fit", "attention", "--data", str(data), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "4 training shapes" in result.output and "CV at  5 configs" in result.output
    residual = read_residual(out)
    assert (residual.kernel, residual.features_version) == ("attention", ATTENTION_FEATURES_VERSION)
    assert residual.fit["space_version"] == ATTENTION_SPACE.version and residual.fit["shapes"] == 4
    assert residual.coefficients["heads_fastest"] < 0 and 0 < len(residual.fit["static_list"]) <= 20
    summary = tmp_path / "s.json"
    r = runner.invoke(app(), ["eval", "attention", "--data", str(data), "--budget", "3", "--residual", str(out),
                              "--json", str(summary)])
    assert r.exit_code == 0, r.output
    assert "in-sample" in " ".join(r.output.split())  # the residual's own training data
    evaluated = json.loads(summary.read_text())
    assert list(evaluated["methods"]) == ["rooftune", "model", "random", "static"]
    assert evaluated["residual"]["fit"] == str(data) and evaluated["methods"]["static"]["mean"] > 0.5
    e = runner.invoke(app(), ["explain", "attention", "--shape", "1x16x2048x128x4", "--residual", str(out),
                              "--config", "BLOCK_M=128,BLOCK_N=64,ORDER=1,TMA=1,num_warps=8,num_stages=2"])
    assert e.exit_code == 0, e.output
    assert "residual fitted on" in " ".join(e.output.split()) and "residual: " in e.output


def test_fit_attention_refuses_held_out_and_other_kernels_data(tmp_path, one_setting):
    heldout = _dataset(tmp_path / "heldout", "shapes_heldout.json")
    out = tmp_path / "never.json"
    result = runner.invoke(app(), ["fit", "attention", "--data", str(heldout), "--out", str(out)])
    assert result.exit_code == 2 and "held-out" in " ".join(result.output.split()) and not out.exists()
    train = _dataset(tmp_path / "train", "shapes_train.json")
    gemm = runner.invoke(app(), ["fit", "gemm", "--data", str(train), "--out", str(out)])
    assert gemm.exit_code == 2 and "attention measurements, not gemm" in " ".join(gemm.output.split())


def test_eval_takes_only_a_residual_of_its_kernel(tmp_path, one_setting):
    data = _dataset(tmp_path / "train", "shapes_train.json")
    out = tmp_path / "attention.json"
    assert runner.invoke(app(), ["fit", "attention", "--data", str(data), "--out", str(out)]).exit_code == 0
    r = runner.invoke(app(), ["explain", "gemm", "--shape", "64x64x64", "--residual", str(out)])
    assert r.exit_code == 2 and "a residual for attention, not gemm" in " ".join(r.output.split())


def test_without_a_residual_eval_attention_runs_the_model_and_the_tutorial_style_list(tmp_path):
    """`--residual none`: the model alone, and the tutorial-style static list, as each config's twin in
    today's space, not as unrecorded configs scored 0. By default the shipped residual (fitted on the
    H200 training set) and its own static list."""
    data = _dataset(tmp_path / "train", "shapes_train.json")
    summary = tmp_path / "s.json"
    r = runner.invoke(app(), ["eval", "attention", "--data", str(data), "--budget", "5", "--residual", "none",
                              "--json", str(summary)])
    assert r.exit_code == 0, r.output
    evaluated = json.loads(summary.read_text())
    assert evaluated["residual"] is None and evaluated["methods"]["static"]["mean"] > 0.3
    r = runner.invoke(app(), ["eval", "attention", "--data", str(data), "--budget", "5", "--json", str(summary)])
    assert r.exit_code == 0, r.output
    assert json.loads(summary.read_text())["residual"]["fit"] == "datasets/h200/attention/train"


def app():
    from rooftune.tuner.cli.app import app

    return app
