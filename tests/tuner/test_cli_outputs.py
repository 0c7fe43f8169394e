"""Outputs that fail only when written (a full disk, /proc, a device): every command that writes says which
path and why (exit 2, no traceback), leaves no partial or temporary file, and still writes its other outputs."""

import errno
import json
import os
import stat
from pathlib import Path

import pytest
from fakes import cli_error, heldout_copy
from typer.testing import CliRunner

from rooftune.candidates import GemmShape
from rooftune.hwprofiles import load_profile
from rooftune.outputs import OutputError
from rooftune.tuner.cli.app import app

runner = CliRunner()
PROFILE = load_profile("h200")


def _unwritable(tmp_path: Path, monkeypatch, name: str) -> Path:
    """A path in `tmp_path` that passes every check before the work but whose write fails as on a full
    disk (fsync refuses it; other files write normally)."""
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / f".{name}.")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return tmp_path / name


def _no_temporary_files(folder: Path) -> None:
    assert not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux's /proc")


def test_report_writes_the_good_output_when_another_fails(tmp_path, monkeypatch):
    root = heldout_copy(tmp_path)
    bad = _unwritable(tmp_path, monkeypatch, "t.md")
    result = runner.invoke(app, ["report", "gemm", "--data", str(root), "--json", str(tmp_path / "ok.json"),
                                 "--markdown", str(bad)])
    cli_error(result, "t.md: could not be written (No space left on device)")
    assert json.loads((tmp_path / "ok.json").read_text())["summary"]["shapes"] == 1
    assert not bad.exists()
    _no_temporary_files(tmp_path)


def test_eval_names_a_json_path_that_fails_at_write_time(tmp_path, monkeypatch):
    root = heldout_copy(tmp_path)
    bad = _unwritable(tmp_path, monkeypatch, "e.json")
    result = runner.invoke(app, ["eval", "gemm", "--data", str(root), "--budget", "2", "--methods", "model",
                                 "--json", str(bad)])
    cli_error(result, "e.json: could not be written (No space left on device)")
    assert not bad.exists()
    _no_temporary_files(tmp_path)


def test_fit_refuses_a_device_before_fitting_and_never_replaces_it(tmp_path):
    """`fit --out /dev/full` (as root) once replaced the device node with a regular file."""
    root = heldout_copy(tmp_path)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["shapes_file"] = "shapes_train.json"
    (root / "manifest.json").write_text(json.dumps(manifest))
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for out in [str(fifo)] + (["/dev/full"] if Path("/dev/full").exists() else []):
        before = os.stat(out)
        result = runner.invoke(app, ["fit", "gemm", "--data", str(root), "--out", out])
        cli_error(result, f"--out {out}: is not a regular file")
        assert "training shapes" not in result.output  # refused before the work
        after = os.stat(out)
        assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_rdev == before.st_rdev


def test_fit_prints_its_figures_before_a_write_that_fails(tmp_path, monkeypatch):
    from rooftune.tuner.cli import fit as cli_fit

    def refuse(residual, path):
        raise OutputError(f"{path}: could not be written (No space left on device); left as it was")

    monkeypatch.setattr(cli_fit, "write_residual", refuse)
    monkeypatch.setattr(cli_fit, "fit_kernel", _fake_fit)
    root = heldout_copy(tmp_path, shapes=2)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["shapes_file"] = "shapes_train.json"
    (root / "manifest.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["fit", "gemm", "--data", str(root), "--out", str(tmp_path / "r.json")])
    text = cli_error(result, "r.json: could not be written (No space left on device)")
    assert "CV at 20 configs: mean 0.990" in text


def _fake_fit(kernel, shapes, profile, data, progress=None, also=()):
    from types import SimpleNamespace

    from rooftune.roofline.residual import GEMM_FEATURES_VERSION, Residual

    residual = Residual("gemm", profile.name, GEMM_FEATURES_VERSION, {}, {}, {"data": data})
    return SimpleNamespace(residual=residual, chosen=SimpleNamespace(ridge="ridge", pick=None, search="search", vote=None),
                           cv={20: {"mean": 0.99, "p10": 0.95, "worst_decile_mean": 0.9}})


@pytest.fixture
def live(synthetic_gpu, live_from):
    """Any shape 'measured' from tests/tuner/conftest.py's synthetic records, the library at a fixed time."""
    return live_from(synthetic_gpu(PROFILE, 50.0), baseline_us=50.0)


def test_tune_keeps_its_result_when_the_cache_cannot_be_written(tmp_path, monkeypatch, live):
    cache = _unwritable(tmp_path, monkeypatch, "cache.json")
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["tune", "gemm", "--shape", "256x512x1024", "--gpu", "h200", "--budget", "3",
                                 "--cache", str(cache), "--json", str(out)])
    text = cli_error(result, "not stored in the cache", "cache.json: could not be written (No space left")
    assert "winner (*)" in text and json.loads(out.read_text())["winner"]
    assert not cache.exists()
    _no_temporary_files(tmp_path)


def test_tune_names_a_json_path_that_fails_at_write_time(tmp_path, monkeypatch, live):
    bad = _unwritable(tmp_path, monkeypatch, "r.json")
    result = runner.invoke(app, ["tune", "gemm", "--shape", "256x512x1024", "--gpu", "h200", "--budget", "3",
                                 "--cache", str(tmp_path / "c.json"), "--json", str(bad)])
    text = cli_error(result, "r.json: could not be written (No space left on device)")
    assert "winner (*)" in text and not bad.exists()
    assert json.loads((tmp_path / "c.json").read_text())["entries"]  # the cache is another output: written


def test_tune_model_writes_every_table_it_can_and_names_the_others(tmp_path, live):
    out = tmp_path / "tables"
    out.mkdir()
    (out / "N=4608,K=3584,device_name=NVIDIA_H200.json").mkdir()  # a folder where a table goes
    (out / "N=3584,K=3584,device_name=NVIDIA_H200.json").write_text("[not a table")
    result = runner.invoke(app, ["tune", "model", "--config", "qwen2.5-7b", "--batch", "8", "--budget", "3",
                                 "--cache", "none", "--out", str(out)], env={"COLUMNS": "100"})
    text = cli_error(result, "2 of 7 outputs not written",
                        "N=4608,K=3584,device_name=NVIDIA_H200.json: not a config table to add to ([Errno 21] Is a",
                        "N=3584,K=3584,device_name=NVIDIA_H200.json: not a config table")
    written = sorted(p.name for p in out.iterdir() if p.is_file())
    assert len(written) == 6 and "qwen2.5-7b.report.json" in written and "qwen2.5-7b.report.md" in written
    assert (out / "N=3584,K=3584,device_name=NVIDIA_H200.json").read_text() == "[not a table"  # left as it was
    assert "forward" in text
    _no_temporary_files(out)


def test_hwprobe_prints_the_profile_when_its_file_cannot_be_written(tmp_path, monkeypatch):
    from rooftune.hwprofiles import hwprobe

    monkeypatch.setattr(hwprobe, "probe", lambda name=None, sms=None, log=None: PROFILE)
    bad = _unwritable(tmp_path, monkeypatch, "p.json")
    result = runner.invoke(app, ["hwprobe", "--out", str(bad)])
    text = cli_error(result, "p.json: could not be written (No space left on device)")
    assert '"sm_count": 132' in text and not bad.exists()


def test_every_shape_gets_its_own_cache_error_in_a_model_tune(tmp_path, monkeypatch, live):
    from rooftune.tuner.llm.shapes import load_model_config
    from rooftune.tuner.llm.tune import tune_model

    cache = _unwritable(tmp_path, monkeypatch, "c.json")
    tuned = tune_model(load_model_config("qwen2.5-7b"), [8], PROFILE, 3, cache=cache)
    errors = [lt.result.cache_error for lt in tuned.layers if lt.result]
    assert errors and all("No space left on device" in e for e in errors)
    assert isinstance(tuned.layers[0].layer.shape, GemmShape)


def test_a_device_or_pipe_is_refused_before_the_work_by_every_command(tmp_path):
    root = heldout_copy(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for args, option in [(["eval", "gemm", "--data", str(root), "--budget", "2"], "--json"),
                         (["report", "gemm", "--data", str(root)], "--json"),
                         (["report", "gemm", "--data", str(root)], "--markdown"),
                         (["tune", "gemm", "--shape", "64x64x64"], "--json"),
                         (["tune", "gemm", "--shape", "64x64x64"], "--cache"),
                         (["hwprobe"], "--out")]:
        result = runner.invoke(app, [*args, option, str(fifo)])
        cli_error(result, f"{option} {fifo}: is not a regular file")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_tune_model_writes_its_tables_when_the_cache_cannot_be_written(tmp_path, monkeypatch, live):
    cache = _unwritable(tmp_path, monkeypatch, "c.json")
    out = tmp_path / "tables"
    result = runner.invoke(app, ["tune", "model", "--config", "qwen2.5-7b", "--batch", "8", "--budget", "3",
                                 "--cache", str(cache), "--out", str(out)], env={"COLUMNS": "100"})
    cli_error(result, "wrote 5 GEMM tables and the report", "the tunes of 6 shapes were not stored in the cache",
                 "c.json: could not be written (No space left on device)")
    assert len(list(out.iterdir())) == 7 and not cache.exists()
    _no_temporary_files(tmp_path)
