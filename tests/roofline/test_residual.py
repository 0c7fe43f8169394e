"""The residual correction: GEMM's, attention's and MoE's features, the ridge fit (deterministic, recovers a planted
effect), its JSON (each kernel's features version)."""

import json

import numpy as np
import pytest

from rooftune.candidates import (
    ATTENTION_SPACE,
    GEMM_SPACE,
    MOE_SPACE,
    AttentionShape,
    Config,
    MoeShape,
    configs_to_columns,
    legal_configs,
    parse_gemm_shape,
)
from rooftune.hwprofiles import load_profile
from rooftune.roofline import predict
from rooftune.roofline.fit import (
    FitShape,
    PickSettings,
    RidgeSettings,
    fit_coefficients,
    fit_pick,
    make_residual,
    prepare,
)
from rooftune.roofline.releases import load_residual
from rooftune.roofline.residual import (
    ATTENTION_FEATURES_VERSION,
    GEMM_FEATURES_VERSION,
    MOE_FEATURES_VERSION,
    Residual,
    ResidualError,
    attention_features,
    feature_names,
    gemm_features,
    is_pick_feature,
    moe_features,
    read_residual,
    residual_to_dict,
    write_residual,
)

PROFILE = load_profile("h200")
SHAPES = [parse_gemm_shape(s) for s in ("1024x1024x4096", "16x4096x4096", "4096x4096x256", "256x8192x2048")]
ATTENTION_SHAPES = [AttentionShape(2, 8, 256, 64), AttentionShape(1, 16, 2048, 128, kv_heads=4),
                    AttentionShape(4, 8, 700, 128), AttentionShape(1, 32, 4096, 64, kv_heads=8)]


def _planted(effect: str, beta: float, shapes=SHAPES, space=GEMM_SPACE, features=gemm_features) -> list[FitShape]:
    """Every legal config 'measured' at the model's time × exp(beta · feature `effect`)."""
    out = []
    for shape in shapes:
        configs = legal_configs(space, shape, PROFILE).configs
        columns = configs_to_columns(configs)
        bd = predict(shape, columns, PROFILE)
        names, x = features(shape, columns, bd)
        out.append(FitShape(shape, tuple(configs), bd.time_us * np.exp(beta * x[:, names.index(effect)])))
    return out


MOE_SHAPES = [MoeShape(128, 8, 2048, 768, 1), MoeShape(64, 6, 2048, 1408, 96, gemm="down"),
              MoeShape(16, 1, 5120, 8192, 4096), MoeShape(60, 4, 2048, 1408, 512, gemm="down")]


@pytest.mark.parametrize("shape, space, features, most", [(SHAPES[0], GEMM_SPACE, gemm_features, 72),
                                                          (ATTENTION_SHAPES[1], ATTENTION_SPACE, attention_features, 48),
                                                          (MOE_SHAPES[0], MOE_SPACE, moe_features, 90),
                                                          (MOE_SHAPES[1], MOE_SPACE, moe_features, 90)])
def test_features_are_named_finite_and_few(shape, space, features, most):
    configs = legal_configs(space, shape, PROFILE).configs
    columns = configs_to_columns(configs)
    names, x = features(shape, columns, predict(shape, columns, PROFILE))
    assert x.shape == (len(configs), len(names)) and len(set(names)) == len(names) <= most
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


def _pick_score(data, coefficients) -> float:
    """Mean over shapes of best / time of the corrected model's best (the budget-1 score)."""
    scores = []
    for d in data:
        coef = np.array([coefficients.get(n, 0.0) for n in d.names])
        pick = int(np.argmin(np.where(d.fits, d.log_predicted + d.x @ coef, np.inf)))
        scores.append(d.source.time_us.min() / d.source.time_us[pick])
    return float(np.mean(scores))


def test_the_pick_fit_moves_base_features_only_toward_the_best():
    # Measured times with a planted 8-warp penalty; a ridge penalised to nothing misses it (budget-1
    # score 0.96 here), the pick's change, fitted for that score, finds it (1.0).
    data = prepare(_planted("warps8", 0.3), PROFILE)
    ridge = fit_coefficients(data, RidgeSettings(ridge=1e6, near_best_weight=0.0))
    change = fit_pick(data, ridge, PickSettings(penalty=1e-3))
    assert change and all(is_pick_feature(n) for n in change) and change["warps8"] > 0
    merged = {n: ridge.get(n, 0.0) + change.get(n, 0.0) for n in ridge}
    assert _pick_score(data, merged) > _pick_score(data, ridge)
    assert fit_pick(data, ridge, PickSettings(penalty=1e-3)) == change


def test_residual_json_round_trip_and_errors(tmp_path):
    coefficients = {n: 0.0 for n in feature_names("gemm")} | {"stages": 0.1}
    residual = Residual("gemm", PROFILE.name, GEMM_FEATURES_VERSION, coefficients, {"kappa": 2.0}, {"data": "x"},
                        {"warps8": 0.2})
    path = tmp_path / "r.json"
    write_residual(residual, path)
    assert read_residual(path) == residual
    without = residual_to_dict(residual)
    del without["pick"]  # written before the pick had its own change: it picks by the coefficients
    path.write_text(json.dumps(without))
    assert read_residual(path).pick == {}
    write_residual(residual, path)
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
    assert load_residual("gemm", load_profile("a100_sxm4_80gb")) is None
    shipped = load_residual("gemm", PROFILE)
    assert shipped is not None and shipped.profile == PROFILE.name and "heldout" not in shipped.fit["data"]


def test_attention_features_name_the_space_and_take_probe_configs():
    shape = ATTENTION_SHAPES[1]
    probe = [Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, ORDER=1)]  # the H200 probe's configs have no TMA: 0
    names, row = attention_features(shape, probe, predict(shape, configs_to_columns(probe), PROFILE))
    assert {"softmax_frac", "tma", "order_reverse", "tma*log_seq", "stages*log_gqa"} <= set(names)
    assert row[0, names.index("tma")] == 0 and row[0, names.index("order_reverse")] == 1


def test_the_fit_and_the_residual_use_each_kernels_features():
    # heads_fastest: ORDER 3 against ORDER 1, both in the H200's space (TMA is 1 in every config there)
    data = prepare(_planted("heads_fastest", 0.05, ATTENTION_SHAPES, ATTENTION_SPACE, attention_features), PROFILE)
    assert data[0].names == attention_features(data[0].source.shape, list(data[0].source.configs), data[0].breakdown)[0]
    coef = fit_coefficients(data, RidgeSettings(ridge=1e-6, near_best_weight=0.0))
    assert coef["heads_fastest"] == pytest.approx(0.05, abs=5e-3)
    residual = make_residual("attention", PROFILE, coef, {}, {})
    assert residual.features_version == ATTENTION_FEATURES_VERSION
    d = data[1]
    corrected = np.log(d.breakdown.time_us) + residual.correction(d.source.shape, list(d.source.configs), d.breakdown)
    assert np.allclose(corrected, np.log(d.source.time_us), atol=0.01)
    order3 = [i for i, c in enumerate(d.source.configs) if c["ORDER"] == 3][0]
    assert residual.contributions(d.source.shape, list(d.source.configs), d.breakdown, top=1)[order3][0][0] == "heads_fastest"


def test_a_residual_must_carry_its_kernels_features_version(tmp_path):
    path = tmp_path / "r.json"
    coefficients = {n: 0.0 for n in feature_names("attention")} | {"tma": 0.1}
    residual = Residual("attention", PROFILE.name, ATTENTION_FEATURES_VERSION, coefficients)
    write_residual(residual, path)
    assert read_residual(path) == residual
    for kernel, version, match in (("attention", GEMM_FEATURES_VERSION, "refit with `rooftune fit attention`"),
                                   ("gemm", ATTENTION_FEATURES_VERSION, "refit with `rooftune fit gemm`"),
                                   ("conv", GEMM_FEATURES_VERSION, "kernel 'conv'")):
        path.write_text(json.dumps(residual_to_dict(residual) | {"kernel": kernel, "features_version": version}))
        with pytest.raises(ResidualError, match=match):
            read_residual(path)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["coefficients"].update(stages=float("nan")), "coefficients stages = nan is not a finite number"),
    (lambda d: d["coefficients"].update(stages=float("inf")), "coefficients stages = inf is not a finite number"),
    (lambda d: d["coefficients"].update(stages=1e308), "coefficients stages = 1e[+]308 is past"),
    (lambda d: d["coefficients"].update(stages="fast"), "coefficients stages = 'fast' is not a finite number"),
    (lambda d: d["coefficients"].pop("stages"), r"missing 1 \(stages\)"),
    (lambda d: d["coefficients"].update(bogus=1.0), "unknown bogus"),
    (lambda d: d.update(coefficients=[1.0]), "'coefficients' must be an object"),
    (lambda d: d["pick"].update(stages=float("nan")), "pick stages = nan"),
    (lambda d: d["strategy"].update(first_round=-3), "strategy first_round = -3 must be a whole number >= 1"),
    (lambda d: d["strategy"].update(round_size=2.5), "strategy round_size = 2.5"),
    (lambda d: d["strategy"].update(prior_sd=0), "strategy prior_sd = 0 must be > 0"),
    (lambda d: d["strategy"].update(kappa=-1), "strategy kappa = -1 must be >= 0"),
])
def test_a_residual_is_validated_on_load(tmp_path, change, message):
    """A NaN coefficient ranked by NaN, 1e308 printed inf TFLOP/s, a missing one counted as 0, first_round -3
    scored 0.000: each is refused on load, naming the file and the value."""
    data = residual_to_dict(load_residual("gemm", PROFILE))
    data["pick"] = {"stages": 0.1}
    change(data)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResidualError, match=message) as error:
        read_residual(path)
    assert str(path) in str(error.value)


def test_moe_features_name_the_routing_regimes_and_a_planted_effect_is_recovered():
    """The shipped MoE residual is fitted on training data, folded by layer; the routing's regimes enter its
    features as axes, and the ridge fit finds an effect planted on them."""
    for triton, data in (("3.6.0", "datasets/h200/moe/train"), ("3.9.0", "datasets/h200/releases/triton-3.9/moe/train")):
        shipped = load_residual("moe", PROFILE, triton)
        assert shipped.fit["data"] == data and shipped.fit["folds_by"] == "layer"
    shape = MOE_SHAPES[1]
    configs = legal_configs(MOE_SPACE, shape, PROFILE).configs
    names, x = moe_features(shape, configs, predict(shape, configs_to_columns(configs), PROFILE))
    assert {"row_eff", "empty_share", "indirection_frac", "group", "stages*log_rows_per_expert", "log_bm*down",
            "row_eff*log_tokens"} <= set(names)
    assert x[:, names.index("log_bm*down")].tolist() == x[:, names.index("log_bm")].tolist()  # a down shape
    group = x[:, names.index("group")]
    assert set(np.round(group, 3)) <= {0.0, 1.0, 1.25, 1.5}
    data = prepare(_planted("indirection_frac", -0.2, MOE_SHAPES, MOE_SPACE, moe_features), PROFILE)
    coef = fit_coefficients(data, RidgeSettings(ridge=1e-6, near_best_weight=0.0))
    assert coef["indirection_frac"] == pytest.approx(-0.2, abs=0.01)
    residual = make_residual("moe", PROFILE, coef, {}, {})
    assert residual.features_version == MOE_FEATURES_VERSION
    d = data[2]
    corrected = np.log(d.breakdown.time_us) + residual.correction(d.source.shape, list(d.source.configs), d.breakdown)
    assert np.allclose(corrected, np.log(d.source.time_us), atol=0.01)


def test_every_shipped_residual_loads_whatever_profile_is_listed_first():
    """A residual's feature names come from a profile that models its kernel: the first profile listed (the A100)
    has no FP8 rate, and the FP8 fused-MoE residual still validates on load."""
    from pathlib import Path

    from rooftune.hwprofiles import ProfileError, list_profiles
    with pytest.raises(ProfileError):
        load_profile(list_profiles()[0]).tensor_tflops("fp8e4m3")
    names = feature_names("moe-fp8")
    assert names and len(names) == len(set(names))
    shipped = sorted((Path(__file__).parents[2] / "hwprofiles" / "residuals").glob("triton-*/*-NVIDIA_*.json"))
    from rooftune.candidates import KERNELS
    residuals = [read_residual(p) for p in shipped if p.name.split("-NVIDIA_")[0] in KERNELS]  # not routes or votes
    assert "moe-fp8" in {r.kernel for r in residuals}
