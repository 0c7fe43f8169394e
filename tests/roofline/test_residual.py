"""The residual correction: features, the ridge fit (deterministic, recovers a planted effect), its JSON."""

import json

import numpy as np
import pytest

from rooftune.candidates import GEMM_SPACE, configs_to_columns, legal_configs, parse_gemm_shape
from rooftune.hwprofiles import load_profile
from rooftune.roofline import predict
from rooftune.roofline.fit import FitShape, RidgeSettings, fit_coefficients, prepare
from rooftune.roofline.residual import (
    GEMM_FEATURES_VERSION,
    Residual,
    ResidualError,
    gemm_features,
    load_residual,
    read_residual,
    residual_to_dict,
    write_residual,
)

PROFILE = load_profile("h200")
SHAPES = [parse_gemm_shape(s) for s in ("1024x1024x4096", "16x4096x4096", "4096x4096x256", "256x8192x2048")]


def _planted(effect: str, beta: float) -> list[FitShape]:
    """Every legal config 'measured' at the model's time × exp(beta · feature `effect`)."""
    out = []
    for shape in SHAPES:
        configs = legal_configs(GEMM_SPACE, shape, PROFILE).configs
        columns = configs_to_columns(configs)
        bd = predict(shape, columns, PROFILE)
        names, x = gemm_features(shape, columns, bd)
        out.append(FitShape(shape, tuple(configs), bd.time_us * np.exp(beta * x[:, names.index(effect)])))
    return out


def test_features_are_named_finite_and_few():
    shape = SHAPES[0]
    configs = legal_configs(GEMM_SPACE, shape, PROFILE).configs
    columns = configs_to_columns(configs)
    names, x = gemm_features(shape, columns, predict(shape, columns, PROFILE))
    assert x.shape == (len(configs), len(names)) and len(set(names)) == len(names) <= 72
    assert np.isfinite(x).all()


def test_fit_recovers_a_planted_effect_and_is_deterministic():
    data = prepare(_planted("stages", 0.05), PROFILE)
    settings = RidgeSettings(ridge=1e-6, near_best_weight=0.0)
    coef = fit_coefficients(data, settings)
    assert coef["stages"] == pytest.approx(0.05, abs=2e-3)
    others = {k: v for k, v in coef.items() if k != "stages"}
    assert max(abs(v) for v in others.values()) < 5e-3
    assert fit_coefficients(data, settings) == coef


def test_a_correction_reorders_as_fitted():
    data = prepare(_planted("warps8", 0.3), PROFILE)
    coef = fit_coefficients(data, RidgeSettings(ridge=1e-6, near_best_weight=0.0))
    residual = Residual("gemm", PROFILE.name, GEMM_FEATURES_VERSION, coef)
    d = data[0]
    corrected = np.log(d.breakdown.time_us) + residual.correction(d.source.shape, list(d.source.configs), d.breakdown)
    assert np.allclose(corrected, np.log(d.source.time_us), atol=0.02)
    top = residual.contributions(d.source.shape, list(d.source.configs), d.breakdown, top=1)
    eight = [i for i, c in enumerate(d.source.configs) if c.num_warps == 8][0]
    assert top[eight][0][0] == "warps8"


def test_residual_json_round_trip_and_errors(tmp_path):
    residual = Residual("gemm", PROFILE.name, GEMM_FEATURES_VERSION, {"stages": 0.1}, {"kappa": 2.0}, {"data": "x"})
    path = tmp_path / "r.json"
    write_residual(residual, path)
    assert read_residual(path) == residual
    bad = residual_to_dict(residual) | {"features_version": "gemm-features-0"}
    path.write_text(json.dumps(bad))
    with pytest.raises(ResidualError, match="refit"):
        read_residual(path)
    path.write_text("{")
    with pytest.raises(ResidualError, match="not valid JSON"):
        read_residual(path)
    with pytest.raises(ResidualError, match="no such residual"):
        read_residual(tmp_path / "none.json")


def test_a_profile_without_a_residual_runs_the_model_alone():
    assert load_residual("gemm", load_profile("h100_sxm")) is None
    shipped = load_residual("gemm", PROFILE)
    assert shipped is not None and shipped.profile == PROFILE.name and "heldout" not in shipped.fit["data"]
