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
