"""Live tuning on the CPU: the plan, tune_gemm with a fake measurer, the cache, and `rooftune tune`."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rooftune.candidates import GEMM_SPACE, GemmShape, Trial, configs_to_columns, legal_configs, parse_gemm_shape
from rooftune.eval.dataset import ConfigResult, ShapeResult
from rooftune.hwprofiles import load_profile
from rooftune.tuner import tune
from rooftune.tuner.cli import app
from rooftune.tuner.strategies import model_order

runner = CliRunner()
PROFILE = load_profile("h200")
SHAPE = parse_gemm_shape("512x512x512")


def _has_cuda():
    import torch

    return torch.cuda.is_available()


class FakeMeasurer:
    """Records what it is asked to compile and measure; times = predicted rank order reversed, so the
    last planned config wins; configs in `failing` get an error; cuBLAS at 10 µs."""

    def __init__(self, failing=(), compile_error=()):
        self.compiled, self.measured = [], []
        self.failing, self.compile_error = set(failing), set(compile_error)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def compile(self, jobs, timeout_s=None):
        self.compiled.append(list(jobs))
        return {c: "boom" if c in self.compile_error else 0.5 for _, c in jobs}

    def measure(self, shape, configs, compiled):
        self.measured.append((shape, list(configs), compiled))
        rows = []
        for i, c in enumerate(configs):
            err = "compile: boom" if isinstance(compiled[c], str) else ("check: wrong" if c in self.failing else None)
            rows.append(ConfigResult(config=c, time_us=None if err else 100.0 - i, error=err,
                                     compile_s=compiled[c] if not err else None))
        return ShapeResult(shape=shape, rows=tuple(rows), baselines_us={"cublas": 10.0})


def test_plan_ranks_like_model_order_and_explain():
    ranked = tune.plan(SHAPE, PROFILE, budget=8)
    configs = legal_configs(GEMM_SPACE, SHAPE, PROFILE).configs
    seen = model_order(SHAPE, configs, lambda c: Trial(c, 1.0), 8, PROFILE)
    assert [r.config for r in ranked] == [t.config for t in seen]
    assert [r.rank for r in ranked] == list(range(1, 9))
    from rooftune.roofline import predict

    bd = predict(SHAPE, configs_to_columns(configs), PROFILE)
    best = int(np.argsort(bd.time_us, kind="stable")[0])  # `rooftune explain`'s first row
    assert ranked[0].config == configs[best] and ranked[0].predicted_us == pytest.approx(bd.time_us[best])
    assert all(a.predicted_us <= b.predicted_us for a, b in zip(ranked, ranked[1:]))


def test_plan_budget_bounds():
    legal = len(legal_configs(GEMM_SPACE, SHAPE, PROFILE))
    assert len(tune.plan(SHAPE, PROFILE, budget=1)) == 1
    # a budget above the shape's legal count plans all of them (as model_order measures them all)
    assert 0 < len(tune.plan(SHAPE, PROFILE, budget=legal + 1)) <= legal
    for bad in (0, -3):
        with pytest.raises(ValueError, match="budget must be at least 1"):
            tune.plan(SHAPE, PROFILE, budget=bad)


def test_plan_on_an_sm_partition_ranks_for_its_sms():
    """`tune_gemm(..., sms=N)` plans with the profile's sm_count set to N: waves and split-K differ."""
    from dataclasses import replace

    shape = GemmShape(64, 4096, 4096)
    full, part = tune.plan(shape, PROFILE, budget=20), tune.plan(shape, replace(PROFILE, sm_count=16), budget=20)
    assert [r.config for r in full] != [r.config for r in part]
    fake = FakeMeasurer()
    tune.tune_gemm(shape, PROFILE, budget=20, measurer=fake, sms=16)
    assert fake.measured[0][1] == [r.config for r in part]


def test_tune_gemm_measures_exactly_the_plan_and_picks_the_fastest_ok():
    planned = [r.config for r in tune.plan(SHAPE, PROFILE, budget=5)]
    fake = FakeMeasurer(failing={planned[4]}, compile_error={planned[2]})
    result = tune.tune_gemm(SHAPE, PROFILE, budget=5, measurer=fake)
    assert fake.compiled == [[(SHAPE, c) for c in planned]]
    assert [m[1] for m in fake.measured] == [planned]
    assert result.winner == planned[3] and result.time_us == 97.0  # planned[4] (96 µs) failed its check
    assert result.cublas_us == 10.0 and result.profile == PROFILE.name
    assert result.space_version == GEMM_SPACE.version and not result.cached
    assert [t.config for t in result.trials] == planned and [t.rank for t in result.trials] == [1, 2, 3, 4, 5]
    assert result.trials[2].error == "compile: boom" and result.trials[2].time_us is None
    assert result.trials[2].compile_s is None and result.trials[0].compile_s == 0.5
    assert result.trials[4].error == "check: wrong"
    assert result.tflops == pytest.approx(SHAPE.flops / 97.0 / 1e6)


def test_tune_gemm_all_failing_is_a_clear_error():
    planned = [r.config for r in tune.plan(SHAPE, PROFILE, budget=3)]
    with pytest.raises(tune.TuneError, match="all 3 planned configs failed"):
        tune.tune_gemm(SHAPE, PROFILE, budget=3, measurer=FakeMeasurer(failing=planned))


def test_cache_hit_skips_the_measurer_and_key_changes_miss(tmp_path):
    path = tmp_path / "tune.json"
    first = tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=FakeMeasurer(), cache=path)
    hit = tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=None, cache=path)  # None: a miss would need a GPU
    assert hit.cached and hit == tune.replace(first, cached=True)
    other = FakeMeasurer()
    tune.tune_gemm(SHAPE, PROFILE, budget=3, measurer=other, cache=path)
    assert other.measured, "a changed budget must miss"
    data = json.loads(path.read_text())
    assert len(data["entries"]) == 2
    # entries stored under an older space version do not match this one
    old = {k.replace(GEMM_SPACE.version, "gemm-older"): v for k, v in data["entries"].items()}
    path.write_text(json.dumps({**data, "entries": old}))
    again = FakeMeasurer()
    tune.tune_gemm(SHAPE, PROFILE, budget=4, measurer=again, cache=path)
    assert again.measured
    assert not list(tmp_path.glob(".*.tmp"))


def test_corrupt_cache_names_the_file(tmp_path):
    path = tmp_path / "tune.json"
    path.write_text("{not json")
    with pytest.raises(tune.TuneCacheError, match="tune.json"):
        tune.tune_gemm(SHAPE, PROFILE, budget=2, measurer=FakeMeasurer(), cache=path)
    path.write_text(json.dumps({"something": "else"}))
    with pytest.raises(tune.TuneCacheError, match="not a rooftune tune cache"):
        tune.tune_gemm(SHAPE, PROFILE, budget=2, measurer=FakeMeasurer(), cache=path)


@pytest.mark.skipif(_has_cuda(), reason="checks the no-GPU error")
def test_cli_without_gpu_fails_like_sweep():
    result = runner.invoke(app, ["tune", "gemm", "--shape", "512x512x512", "--budget", "3"])
    assert result.exit_code == 2 and "no CUDA GPU" in result.output


@pytest.mark.parametrize("args, field", [
    (["tune", "gemm", "--shape", "512x0x512"], "n must be"),
    (["tune", "gemm", "--shape", "512x512"], "MxNxK"),
    (["tune", "gemm", "--shape", "512x512x512", "--budget", "0"], "--budget"),
    (["tune", "gemm", "--shape", "512x512x512", "--gpu", "nope"], "unknown GPU profile"),
    (["tune", "gemm", "--shape", "512x512x512", "--layout", "xy"], "layout"),
    (["tune", "attention", "--shape", "1x2x64x64"], "tune attention is not available yet"),
])
def test_cli_bad_input_exits_2(args, field):
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and field in " ".join(result.output.split()), result.output


def test_cli_json_with_a_fake_measurer(tmp_path, monkeypatch):
    from rooftune.eval import sweep
    from rooftune.hwprofiles import hwprobe

    fake = FakeMeasurer()
    monkeypatch.setattr(hwprobe, "require_cuda", lambda: None)
    monkeypatch.setattr(sweep, "gemm_measurer", lambda profile, settings: fake)
    out, cache = tmp_path / "r.json", tmp_path / "c.json"
    args = ["tune", "gemm", "--shape", "512x512x512", "--budget", "4", "--json", str(out), "--cache", str(cache)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "winner" in text and "97.00 µs" in text and "cuBLAS 10.00 µs" in text and "cuBLAS/winner 0.103" in text
    data = json.loads(out.read_text())
    planned = [r.config for r in tune.plan(SHAPE, PROFILE, budget=4)]
    assert data["winner"] == dict(planned[3].items()) and data["time_us"] == 97.0 and data["cublas_us"] == 10.0
    assert [t["rank"] for t in data["trials"]] == [1, 2, 3, 4] and not data["cached"]
    assert tune.result_from_dict({k: v for k, v in data.items() if k not in ("cached", "tflops")}).winner == planned[3]
    monkeypatch.setattr(sweep, "gemm_measurer", lambda profile, settings: pytest.fail("cache hit measured"))
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "from the cache" in " ".join(result.output.split()) and json.loads(out.read_text())["cached"]


@pytest.mark.gpu
def test_tune_gemm_on_the_gpu():
    result = tune.tune_gemm(SHAPE, PROFILE, budget=5)
    assert len(result.trials) == 5 and result.time_us > 0 and result.cublas_us and result.cublas_us > 0
    assert result.winner in [t.config for t in result.trials if t.error is None]



def test_tune_help_does_not_import_torch():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "rooftune.tuner.cli", "tune", "gemm", "--help"],
                         capture_output=True, text=True, check=True)
    assert "--budget" in run.stdout and "--cache" in run.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert not {"torch", "triton"} & imported
