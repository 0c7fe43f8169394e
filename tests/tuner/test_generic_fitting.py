"""`rooftune fit generic` on a small synthetic suite dataset: the residual learns the model's systematic miss across
training kernels, is checked leave-one-kernel-out, and never reads a held-out kernel (a test of refusal)."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rooftune.candidates import Config, Trial
from rooftune.candidates.kernel_counts import CompiledFacts, KernelCounts, TensorTraffic
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.format import DatasetError
from rooftune.eval.datasets.suite import SuiteRecords, SuiteShape, open_folder, read_kernel, read_manifest, write_shape
from rooftune.hwprofiles import load_profile
from rooftune.roofline.generic import predict_generic
from rooftune.roofline.generic_residual import read_generic_residual
from rooftune.tuner.cli.app import app
from rooftune.tuner.fitting import FitError, HeldOutError
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.generic_residual import FEATURE_NAMES
from rooftune.tuner import generic_fitting
from rooftune.tuner.generic_fitting import FITTED_FEATURES, fit_generic, training_kernels

H100 = load_profile("h100_sxm")
SPLIT = {"copy": "train", "scale": "train", "norm": "train", "softmax": "heldout"}
MISS_PER_WARP_DOUBLING = -0.3  # what the "GPU" gains beyond the model, per doubling of the warps


def _counts(size: int, block: int, warps: int, stages: int) -> KernelCounts:
    facts = CompiledFacts(warps, stages, 32 + 8 * warps, 0)
    return KernelCounts(size // block, facts, tensors=(TensorTraffic("x", 2 * size, 2.0 * size, 0.0),
                                                        TensorTraffic("y", 2 * size, 0.0, 2.0 * size)),
                        vector_ops=float(size), loop_iterations=1.0)


def _write(folder, kernel: str, seed: int) -> None:
    """Two shapes of `kernel`, each config timed at the model's time with the miss and 1% noise."""
    rng = np.random.default_rng(seed)
    for size in (1 << 22, 1 << 24):
        configs = [(b, w, s) for b in (256, 1024, 4096) for w in (1, 4, 8) for s in (1, 3)]
        counts = tuple(_counts(size, b, w, s) for b, w, s in configs)
        model = predict_generic(counts, H100).time_us
        trials = tuple(Trial(Config.make(w, s, BLOCK=b), float(t * np.exp(MISS_PER_WARP_DOUBLING * (np.log2(w) - 2)
                                                                            + rng.normal(0, 0.01))))
                       for (b, w, s), t in zip(configs, model))
        write_shape(folder, SuiteRecords(ShapeRecords(SuiteShape.of(kernel, {"N": size}), trials), counts))


def _per_warp_doubling(residual) -> float:
    """The correction's mean step per doubling of the warps, on configs alike in all else (however the ridge spreads
    it over correlated features: warps, registers, the vector term)."""
    counts = [_counts(1 << 23, 1024, w, 3) for w in (1, 2, 4, 8)]
    return float(np.diff(residual.correction(predict_generic(counts, H100), counts)).mean())


@pytest.fixture
def dataset(tmp_path):
    folder = tmp_path / "suite"
    open_folder(folder, {"gpu": "NVIDIA H100 80GB HBM3", "profile": "h100_sxm", "triton": "3.6.0"},
                {k: {"split": s} for k, s in SPLIT.items()})
    for i, kernel in enumerate(k for k, s in SPLIT.items() if s == "train"):
        _write(folder, kernel, i)
    (folder / "softmax").mkdir()
    (folder / "softmax" / "N1.json.xz").write_text("a held-out kernel's file: never opened by a fit\n")
    return folder


def every_feature(dataset):
    """The fit over every feature at the fit's light ridge, which can learn a miss per warp doubling."""
    return fit_generic(dataset, H100, settings=RidgeSettings(), features=FEATURE_NAMES)


def test_the_fit_learns_the_miss_across_training_kernels_and_checks_it_on_each_left_out(dataset):
    residual = every_feature(dataset)
    assert residual.fit["kernels"] == ["copy", "norm", "scale"] and residual.fit["calls"] == 6
    assert _per_warp_doubling(residual) == pytest.approx(MISS_PER_WARP_DOUBLING, abs=0.05)
    cv, alone = residual.fit["cross_validated"], residual.fit["model_alone"]
    assert cv["budget_1"]["geomean"] > alone["budget_1"]["geomean"] and cv["budget_1"]["geomean"] > 0.95
    assert generic_fitting.gains(residual)


def test_the_shipped_fit_corrects_the_fractions_only(dataset):
    residual = fit_generic(dataset, H100)
    assert residual.fit["features"] == list(FITTED_FEATURES) and residual.fit["ridge"] == 10.0
    assert set(residual.coefficients) == set(FEATURE_NAMES)
    assert all(residual.coefficients[n] == 0.0 for n in FEATURE_NAMES if n not in FITTED_FEATURES)
    assert any(residual.coefficients[n] != 0.0 for n in FITTED_FEATURES)


def test_held_out_kernels_are_refused_and_never_read(dataset, monkeypatch):
    from rooftune.eval.datasets import suite

    opened, read = [], suite.read_shape_text
    monkeypatch.setattr(suite, "read_shape_text", lambda path: opened.append(path.parent.name) or read(path))
    fit_generic(dataset, H100)
    assert sorted(set(opened)) == ["copy", "norm", "scale"] and len(opened) == 6  # every training file, no other
    manifest = read_manifest(dataset)
    assert training_kernels(manifest) == ["copy", "norm", "scale"]
    with pytest.raises(HeldOutError, match="softmax: held out of the suite's training kernels"):
        fit_generic(dataset, H100, ["copy", "softmax"])
    with pytest.raises(FitError, match="not in the dataset: nope"):
        training_kernels(manifest, ["nope"])
    with pytest.raises(DatasetError):  # what a fit would meet, had it opened the held-out file
        read_kernel(dataset, "softmax")


def test_the_command_fits_writes_and_refuses(dataset, tmp_path):
    out = tmp_path / "generic.json"
    result = CliRunner().invoke(app, ["fit", "generic", "--data", str(dataset), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "6 calls of 3 training kernels" in result.output and "leave-one-kernel-out" in result.output
    assert read_generic_residual(out).coefficients == fit_generic(dataset, H100).coefficients
    result = CliRunner().invoke(app, ["fit", "generic", "--data", str(dataset), "--out", str(out),
                                      "--kernels", "softmax"])
    assert result.exit_code == 2 and "held out" in result.output
    manifest = json.loads((dataset / "manifest.json").read_text())
    manifest["kernels"]["copy"]["split"] = "maybe"
    (dataset / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(app, ["fit", "generic", "--data", str(dataset), "--out", str(out)])
    assert result.exit_code == 2 and "has no split" in result.output


def test_evaluation_scores_the_held_out_kernels(dataset):
    from rooftune.tuner.generic_fitting import evaluate_generic

    (dataset / "softmax" / "N1.json.xz").unlink()
    _write(dataset, "softmax", 7)
    alone = evaluate_generic(dataset, H100)
    assert alone["calls"] == 2 and set(alone["kernels"]) == {"softmax"}
    assert 0.4 < alone["budget_1"]["geomean"] <= alone["budget_5"]["geomean"] <= 1.0  # the synthetic miss costs ~half
    corrected = evaluate_generic(dataset, H100, residual=every_feature(dataset))
    assert corrected["budget_1"]["geomean"] >= alone["budget_1"]["geomean"]
    result = CliRunner().invoke(app, ["eval", "generic", "--data", str(dataset), "--residual", "none"])
    assert result.exit_code == 0 and "2 calls of the heldout kernels" in result.output and "softmax:" in result.output


def test_a_residual_that_loses_to_the_model_alone_is_not_shipped(dataset, tmp_path, monkeypatch):
    from rooftune.roofline import releases
    from rooftune.tuner.cli import fit_generic as command

    monkeypatch.setattr(releases, "residuals_root", lambda: tmp_path / "residuals")
    monkeypatch.setattr(command, "gains", lambda residual: False)
    result = CliRunner().invoke(app, ["fit", "generic", "--data", str(dataset), "--out", "shipped"])
    assert result.exit_code == 1 and "not shipped" in result.output
    assert not list((tmp_path / "residuals").rglob("*.json"))
    out = tmp_path / "kept.json"  # a file of the user's own: written whatever the check says
    assert CliRunner().invoke(app, ["fit", "generic", "--data", str(dataset), "--out", str(out)]).exit_code == 0
    assert out.is_file()
