import json

import pytest

from rooftune.hwprofiles import (
    ProfileError,
    list_profiles,
    load_profile,
    profile_from_dict,
    profile_to_dict,
    save_profile,
)


def test_shipped_profiles_load_and_round_trip(tmp_path):
    assert {"h200", "h100_sxm", "a100_sxm4_80gb", "b200"} <= set(list_profiles())
    for name in list_profiles():
        p = load_profile(name)
        assert p.sm_count > 0 and p.smem_per_block_bytes <= p.smem_per_sm_bytes
        assert set(p.sources) >= {"sm_count", "dram_bw_gbps", "bf16_tflops"}, "every profile says where numbers came from"
        save_profile(p, tmp_path / f"{name}.json")
        assert load_profile(tmp_path / f"{name}.json") == p


def test_h200_matches_the_device_readings():
    p = load_profile("h200")
    assert (p.sm_count, p.l2_bytes, p.smem_per_block_bytes, p.smem_per_sm_bytes) == (132, 62914560, 232448, 233472)


def _h200_dict():
    return profile_to_dict(load_profile("h200"))


@pytest.mark.parametrize("field,value,message", [
    ("sm_count", -4, "'sm_count' must be positive"),
    ("sm_count", "132", "'sm_count' must be an integer"),
    ("dram_bw_gbps", "fast", "'dram_bw_gbps' must be a number"),
    ("bf16_tflops", 0, "'bf16_tflops' must be positive"),
    ("compute_capability", [9], "compute_capability"),
    ("bf16_tflops", 1e308, "'bf16_tflops' is implausibly large (1e+308"),  # finite, but the model overflows to inf
    ("l2_bytes", 10**15, "'l2_bytes' is implausibly large"),
])
def test_bad_field_is_named(field, value, message, tmp_path):
    data = _h200_dict()
    data[field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert message in str(err.value) and "bad.json" in str(err.value)


def test_missing_field_and_unknown_field():
    data = _h200_dict()
    del data["l2_bytes"]
    with pytest.raises(ProfileError, match="missing field.*l2_bytes"):
        profile_from_dict(data, "x.json")
    data = _h200_dict()
    data["l2_size"] = 5
    with pytest.raises(ProfileError, match="unknown field.*l2_size"):
        profile_from_dict(data, "x.json")


def test_unknown_name_and_bad_json(tmp_path):
    with pytest.raises(ProfileError, match="unknown GPU profile 'h900'.*h200"):
        load_profile("h900")
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(ProfileError, match="broken.json: not valid JSON"):
        load_profile(path)


def test_tensor_rate_by_dtype():
    p = load_profile("a100_sxm4_80gb")
    assert p.tensor_tflops("bf16") == 312 and p.tensor_tflops("tf32") == 156
    with pytest.raises(ValueError):
        p.tensor_tflops("int8")


def test_profiles_fitting_what_a_dataset_says_about_its_gpu():
    from rooftune.hwprofiles import fits_device, profiles_fitting

    assert profiles_fitting({"compute_capability": (8, 0), "smem_per_block_bytes": 166912}) == ["a100_sxm4_80gb"]
    # an H100 and an H200 look alike to an AutoHeuristic log: both fit
    assert profiles_fitting({"compute_capability": [9, 0], "smem_per_block_bytes": 232448}) == ["h100_sxm", "h200"]
    assert profiles_fitting({"compute_capability": (9, 0), "smem_per_block_bytes": 1024}) == []
    assert profiles_fitting({"name": "NVIDIA H200"}) == ["h200"] and profiles_fitting({"name": "RTX 9090"}) == []
    assert fits_device(load_profile("b200"), {"compute_capability": (10, 0), "smem_per_block_bytes": 232448})


# --- issue 57: values that are finite but impossible -------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("bf16_tflops", 1e-300),  # 300-digit predictions
    ("sm_clock_mhz", 1e-300),
    ("dram_bw_gbps", 5e-324),  # nan µs for every config
    ("max_threads_per_sm", 1),  # every config legal, 2,425 TFLOP/s predicted against a 790 peak
    ("smem_per_block_bytes", 1), ("l2_latency_ns", 1e-9), ("launch_overhead_us", 1e-12), ("fp8_tflops", 1e-5),
])
def test_an_implausibly_small_field_is_named(field, value, tmp_path):
    data = _h200_dict()
    data[field] = value
    path = tmp_path / "small.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=rf"small\.json: field '{field}' is implausibly small"):
        load_profile(path)


def test_every_number_of_a_profile_has_a_floor_under_every_shipped_profiles():
    from rooftune.hwprofiles.profile import _FLOAT_FIELDS, _INT_FIELDS, PLAUSIBLE_FLOOR

    assert set(PLAUSIBLE_FLOOR) == _INT_FIELDS | _FLOAT_FIELDS
    for name in list_profiles():
        data = profile_to_dict(load_profile(name))
        assert all(data[k] >= 10 * floor for k, floor in PLAUSIBLE_FLOOR.items() if data.get(k) is not None
                   and k not in ("sm_count", "max_ctas_per_sm", "dram_piece_bytes")), name


def test_legality_reads_the_threads_an_sm_holds():
    """max_threads_per_sm=1 left every config legal. An SM of 128 threads holds blocks of 4 warps at most."""
    import dataclasses

    import numpy as np

    from rooftune import roofline
    from rooftune.candidates import GEMM_SPACE, configs_to_columns, legal_configs, parse_gemm_shape

    shape, h200 = parse_gemm_shape("4096x4096x4096"), load_profile("h200")
    small = dataclasses.replace(h200, max_threads_per_sm=128)
    legal = legal_configs(GEMM_SPACE, shape, small)
    assert legal.configs and all(c["num_warps"] * 32 <= 128 for c in legal.configs)
    assert legal.rejected["more threads than an SM holds"] > 0
    assert legal_configs(GEMM_SPACE, shape, h200).rejected["more threads than an SM holds"] == 0
    tflops = shape.flops / roofline.predict(shape, configs_to_columns(legal.configs), small).time_us / 1e6
    assert np.isfinite(tflops).all() and tflops.max() <= small.bf16_tflops
    assert not legal_configs(GEMM_SPACE, shape, dataclasses.replace(h200, max_threads_per_sm=64)).configs
