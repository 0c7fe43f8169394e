import dataclasses

import pytest

from rooftune.candidates import (
    AttentionShape,
    Config,
    ConfigError,
    GemmShape,
    ShapeError,
    configs_to_columns,
    parse_attention_shape,
    parse_config,
    parse_gemm_shape,
)
from rooftune.candidates.gemm_space import GEMM_SPACE


def test_parse_shapes():
    assert parse_gemm_shape("4096x4096x4096") == GemmShape(4096, 4096, 4096)
    assert parse_gemm_shape(" 1 x 14336x4096", layout="nk") == GemmShape(1, 14336, 4096, layout="nk")
    assert parse_attention_shape("2x32x4096x128") == AttentionShape(2, 32, 4096, 128)
    assert GemmShape(3, 5, 7).flops == 2 * 3 * 5 * 7


@pytest.mark.parametrize("text,message", [
    ("4096x4096", "has 2 dimension"),
    ("4096x0x4096", "n must be >= 1"),
    ("4096x-3x4096", "cannot parse"),
    ("abc", "cannot parse"),
    ("", "cannot parse"),
    ("1.5x2x3", "cannot parse"),
])
def test_bad_gemm_shapes(text, message):
    with pytest.raises(ShapeError, match=message):
        parse_gemm_shape(text)


def test_bad_attention_shapes_and_layouts():
    with pytest.raises(ShapeError, match="head_dim"):
        parse_attention_shape("2x32x4096x100")
    with pytest.raises(ShapeError, match="has 3 dimension"):
        parse_attention_shape("2x32x4096")
    with pytest.raises(ShapeError, match="layout"):
        GemmShape(1, 2, 3, layout="mk")
    with pytest.raises(ShapeError, match="dtype"):
        GemmShape(1, 2, 3, dtype="int8")


def test_a_layout_defaults_and_validation():
    # Every existing construction keeps meaning A [M, K]; positional (m, n, k, layout, dtype) still works.
    assert GemmShape(1, 2, 3, "nk", "tf32").a_layout == "mk"
    assert parse_gemm_shape("4096x4096x4096").a_layout == "mk"
    km = parse_gemm_shape("64x128x256", layout="kn", dtype="tf32", a_layout="km")
    assert km == GemmShape(64, 128, 256, "kn", "tf32", a_layout="km") != GemmShape(64, 128, 256, "kn", "tf32")
    assert len({km, GemmShape(64, 128, 256, "kn", "tf32")}) == 2
    for bad in ("kn", "nk", "MK", "", None):
        with pytest.raises(ShapeError, match=r"A layout \(a_layout\) must be one of \('mk', 'km'\)"):
            GemmShape(1, 2, 3, a_layout=bad)
    with pytest.raises(ShapeError, match="a_layout"):
        parse_gemm_shape("1x2x3", a_layout="nk")


def test_a_layout_str_and_round_trip():
    # The default A layout is not shown, so names of existing shapes and dataset files do not change.
    from rooftune.eval.datasets.format import shape_id

    assert str(GemmShape(8, 16, 32)) == "8x16x32"
    assert str(GemmShape(8, 16, 32, "nk", "fp16")) == "8x16x32 (nk, fp16)"
    assert str(GemmShape(8, 16, 32, a_layout="km")) == "8x16x32 (A km)"
    assert str(GemmShape(8, 16, 32, "nk", "tf32", a_layout="km")) == "8x16x32 (nk, tf32, A km)"
    assert shape_id(GemmShape(8, 16, 32, "nk", "fp16")) == "8x16x32-nk-fp16"
    for shape in (GemmShape(8, 16, 32), GemmShape(8, 16, 32, "nk", "tf32", a_layout="km")):
        assert GemmShape(**dataclasses.asdict(shape)) == shape
        assert parse_gemm_shape(f"{shape.m}x{shape.n}x{shape.k}", shape.layout, shape.dtype, shape.a_layout) == shape


def test_config_round_trip_and_mapping():
    text = "BLOCK_M=128,BLOCK_N=64,BLOCK_K=32,GROUP_M=8,SPLIT_K=1,TMA=1,PERSISTENT=0,FIXUP=0,BLOCK_N2=0,num_warps=4,num_stages=3"
    config = parse_config(text, GEMM_SPACE.param_names)
    assert str(config) == text and parse_config(str(config)) == config
    assert config["BLOCK_M"] == 128 and config["num_stages"] == 3 and len(config) == 11
    assert config.kernel_params() == {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "SPLIT_K": 1,
                                      "TMA": 1, "PERSISTENT": 0, "FIXUP": 0, "BLOCK_N2": 0}
    assert hash(config) == hash(Config.make(4, 3, BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0))
    cols = configs_to_columns([config, Config.make(8, 2, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, SPLIT_K=2, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)])
    assert list(cols["num_warps"]) == [4, 8] and list(cols["SPLIT_K"]) == [1, 2]


@pytest.mark.parametrize("text,message", [
    ("BLOCK_M=128", "lacks num_warps"),
    ("BLOCK_M=12x,num_warps=4,num_stages=2", "not an integer"),
    ("BLOCK_M,num_warps=4,num_stages=2", "not NAME=VALUE"),
    ("BLOCK_M=1,BLOCK_M=2,num_warps=4,num_stages=2", "given twice"),
    ("", "empty config"),
])
def test_bad_configs(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(text)


def test_config_names_checked_against_space():
    with pytest.raises(ConfigError, match="unknown parameter.*BLOCK_Q"):
        parse_config("BLOCK_Q=1,num_warps=4,num_stages=2", GEMM_SPACE.param_names)
    with pytest.raises(ConfigError, match="missing parameter"):
        parse_config("BLOCK_M=64,num_warps=4,num_stages=2", GEMM_SPACE.param_names)


def test_load_attention_shapes_reads_and_rejects(tmp_path):
    import json

    from rooftune.candidates.shapes import ShapeListError, load_attention_shapes

    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"batch": 1, "heads": 2, "seq": 64, "head_dim": 64},
                                {"batch": 4, "heads": 32, "seq": 100, "head_dim": 32, "causal": False,
                                 "dtype": "fp16", "why": "ignored"}]))
    assert load_attention_shapes(good) == [AttentionShape(1, 2, 64, 64),
                                           AttentionShape(4, 32, 100, 32, causal=False, dtype="fp16")]
    entry = {"batch": 1, "heads": 2, "seq": 64, "head_dim": 64}
    cases = {"[]": "non-empty JSON list of {batch, heads, seq, head_dim}", "{": "not valid JSON",
             json.dumps([entry, {"batch": 1, "heads": 2, "seq": 64}]): "entry 1 must be an object with keys",
             json.dumps([{**entry, "seq": 0}]): "entry 0: .*seq must be >= 1",
             json.dumps([{**entry, "head_dim": 48}]): "head_dim",
             json.dumps([{**entry, "causal": 1}]): "causal must be true or false",
             json.dumps([{**entry, "dtype": "int8"}]): "dtype",
             json.dumps([{"m": 1, "n": 2, "k": 3}]): "entry 0"}
    for text, message in cases.items():
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ShapeListError, match=message) as err:
            load_attention_shapes(bad)
        assert str(bad) in str(err.value)
    with pytest.raises(ShapeListError, match="no such file"):
        load_attention_shapes(tmp_path / "absent.json")


def test_attention_kv_heads_default_parse_and_text():
    from rooftune.candidates.shapes import ShapeError, parse_attention_shape

    plain = parse_attention_shape("2x32x4096x128")
    assert plain.kv_heads == 32 and plain == AttentionShape(2, 32, 4096, 128, kv_heads=32) and str(plain) == "2x32x4096x128"
    gqa = parse_attention_shape("2x32x4096x128x8")
    assert gqa.kv_heads == 8 and str(gqa) == "2x32x4096x128x8" and gqa.flops == plain.flops
    for bad in ("2x32x4096x128x5", "2x32x4096x128x0", "2x32x4096x128x8x1", "2x32x4096"):
        with pytest.raises(ShapeError):
            parse_attention_shape(bad)
