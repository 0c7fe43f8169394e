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


def _dataset_with_extra(root, extra_error):
    """SHAPE's legal set timed, plus one config the rules exclude (BLOCK_K 256 past what K needs), failed or not."""
    from rooftune.candidates import Config

    configs = legal_configs(GEMM_SPACE, SHAPE, H200).configs
    extra = Config.make(4, 2, BLOCK_M=16, BLOCK_N=16, BLOCK_K=256, GROUP_M=1, SPLIT_K=16, TMA=1, PERSISTENT=0, FIXUP=1, BLOCK_N2=0)
    assert extra not in configs
    rows = tuple(ConfigResult(c, 10.0 + i) for i, c in enumerate(configs))
    rows += (ConfigResult(extra, None, "OutOfResources") if extra_error else ConfigResult(extra, 5.0),)
    write_manifest(root, {"kernel": "gemm", "space_version": "gemm-old"})
    write_shape(root, ShapeResult(SHAPE, rows, {}, {"space_version": "gemm-old"}))
    return extra


def test_restamp_drops_only_failed_configs_the_new_rules_exclude(tmp_path):
    """A recorded config that is no longer legal: refused without drop_failed, and with it when it ran (its
    time could be the best); kept as a row out of the space when it failed."""
    ran, failed = tmp_path / "ran", tmp_path / "failed"
    _dataset_with_extra(ran, extra_error=False)
    extra = _dataset_with_extra(failed, extra_error=True)
    for root, drop in ((ran, True), (failed, False)):
        with pytest.raises(DatasetError, match="no longer legal"):
            restamp_space_version(root, H200, drop_failed=drop)
        assert read_manifest(root)["space_version"] == "gemm-old"
    assert restamp_space_version(failed, H200, drop_failed=True) == 1
    rows = {r.config: r for r in read_shape(shape_files(failed)[0]).rows}
    assert not rows[extra].in_space and rows[extra].error == "OutOfResources"
    assert {c for c, r in rows.items() if r.in_space} == set(legal_configs(GEMM_SPACE, SHAPE, H200).configs)


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


def test_carry_sweeps_again_the_shapes_with_a_config_whose_code_changed(tmp_path):
    """`rerun` {PERSISTENT: 1}: both shapes' legal sets are recorded whole, but only the one without a
    persistent config is carried (the other's persistent times are of the old kernel); the CLI parses
    --rerun PARAM=VALUE and refuses anything else."""
    import subprocess
    import sys

    from rooftune.eval.migrate import carry_unchanged

    src, dst = tmp_path / "old", tmp_path / "new"
    small, big = SHAPE, GemmShape(4096, 4096, 4096, "nk")
    write_manifest(src, {"kernel": "gemm", "space_version": "gemm-old", "gpu_profile": "NVIDIA H200", "sms": None})
    for shape in (small, big):
        rows = tuple(ConfigResult(c, 10.0) for c in legal_configs(GEMM_SPACE, shape, H200).configs)
        write_shape(src, ShapeResult(shape, rows, {}, {"space_version": "gemm-old"}))
    assert carry_unchanged(src, dst, H200, rerun={"PERSISTENT": 1}) == (1, 1)
    assert [read_shape(p).shape for p in shape_files(dst)] == [small]
    assert carry_unchanged(tmp_path / "old", tmp_path / "all", H200) == (2, 0)
    cli = [sys.executable, "-m", "rooftune.eval.migrate", "--carry", str(src), str(tmp_path / "cli")]
    ok = subprocess.run(cli + ["--rerun", "PERSISTENT=1"], capture_output=True, text=True)
    assert ok.returncode == 0 and "carried 1 shapes" in ok.stdout and "1 to sweep" in ok.stdout, ok.stderr
    bad = subprocess.run(cli + ["--rerun", "TILES=1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "want PARAM=INT" in bad.stderr
