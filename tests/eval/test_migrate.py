import pytest

from rooftune.candidates import GEMM_SPACE, GemmShape, legal_configs
from rooftune.eval.dataset import (
    ConfigResult, DatasetError, ShapeResult, read_manifest, read_shape, shape_files, write_manifest, write_shape,
)
from rooftune.eval.migrate import restamp_space_version
from rooftune.hwprofiles import load_profile

H200 = load_profile("h200")
SHAPE = GemmShape(16, 64, 256, layout="nk")


def _dataset(root, drop=0):
    configs = legal_configs(GEMM_SPACE, SHAPE, H200).configs
    rows = tuple(ConfigResult(c, 10.0 + i) for i, c in enumerate(configs[drop:]))
    write_manifest(root, {"kernel": "gemm", "space_version": "gemm-old"})
    write_shape(root, ShapeResult(SHAPE, rows, {}, {"space_version": "gemm-old"}))


def test_restamp_when_legal_sets_match(tmp_path):
    _dataset(tmp_path)
    assert restamp_space_version(tmp_path, H200) == 1
    manifest = read_manifest(tmp_path)
    assert manifest["space_version"] == GEMM_SPACE.version and manifest["space_version_history"] == ["gemm-old"]
    assert read_shape(shape_files(tmp_path)[0]).meta["space_version"] == GEMM_SPACE.version
    assert restamp_space_version(tmp_path, H200) == 0  # already current


def test_refuses_when_a_legal_config_was_never_timed(tmp_path):
    _dataset(tmp_path, drop=1)
    with pytest.raises(DatasetError, match="never timed"):
        restamp_space_version(tmp_path, H200)
    assert read_manifest(tmp_path)["space_version"] == "gemm-old"


def _strip_persistent(config):
    from rooftune.candidates import Config

    return Config(tuple(p for p in config.params if p[0] != "PERSISTENT"), config.num_warps, config.num_stages)


def test_carry_copies_the_shapes_whose_legal_set_is_unchanged(tmp_path):
    """An earlier space's dataset (no PERSISTENT parameter): the shape where no persistent config is
    legal is carried with PERSISTENT=0 added and `carried_from` set; the multi-wave shape, whose space-3
    legal set has configs never timed, is left to sweep; a second run carries nothing more."""
    from rooftune.eval.migrate import carry_unchanged

    src, dst = tmp_path / "old", tmp_path / "new"
    small, big = SHAPE, GemmShape(4096, 4096, 4096, "nk")
    write_manifest(src, {"kernel": "gemm", "space_version": "gemm-old", "gpu_profile": "NVIDIA H200", "sms": None})
    for shape in (small, big):
        old = [_strip_persistent(c) for c in legal_configs(GEMM_SPACE, shape, H200).configs
               if c["PERSISTENT"] == 0]
        rows = tuple(ConfigResult(c, 10.0 + i) for i, c in enumerate(old))
        write_shape(src, ShapeResult(shape, rows, {"cublas": 9.0}, {"space_version": "gemm-old"}))
    assert carry_unchanged(src, dst, H200) == (1, 1)
    (path,) = shape_files(dst)
    carried = read_shape(path)
    assert carried.shape == small and carried.baselines_us == {"cublas": 9.0}
    assert carried.meta["space_version"] == GEMM_SPACE.version and carried.meta["carried_from"] == "gemm-old"
    assert {r.config for r in carried.rows} == set(legal_configs(GEMM_SPACE, small, H200).configs)
    assert [r.time_us for r in carried.rows] == [10.0 + i for i in range(len(carried.rows))]
    manifest = read_manifest(dst)
    assert manifest["space_version"] == GEMM_SPACE.version and manifest["carried_from"] == "gemm-old"
    assert manifest["shapes_done"] == 1
    assert carry_unchanged(src, dst, H200) == (0, 1)
