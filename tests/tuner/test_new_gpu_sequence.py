"""The README's sequence for a GPU rooftune ships nothing for, end to end on the CPU with fakes for the GPU: `hwprobe`
writes a profile under a new name, `tune --gpu` ranks with it, a short `sweep` records the user's shapes, `eval`
scores on them, and `fit --check` decides whether a sibling GPU's residual ranks there."""

import dataclasses
import json
import zlib

from fakes import QuickMeasurer
from typer.testing import CliRunner

from rooftune.candidates import GEMM_SPACE, GemmShape, configs_to_columns, legal_configs
from rooftune.candidates.shapes import load_shapes
from rooftune.eval.sweeping import sweep
from rooftune.eval.scoring.replay import RecordedMeasurer
from rooftune.hwprofiles import hwprobe, load_profile
from rooftune.roofline import predict
from rooftune.roofline.releases import shipped_residual_path
from rooftune.tuner.cli.app import app

runner = CliRunner()
SHAPES = [{"m": 64, "n": 4096, "k": 4096, "layout": "nk"}, {"m": 512, "n": 2048, "k": 1024, "layout": "nk"},
          {"m": 8, "n": 1024, "k": 8192, "layout": "nk"}, {"m": 2048, "n": 2048, "k": 2048, "layout": "nk"}]


def _probed():
    """What `hwprobe --sms 66 --name my-gpu` reads on an H200, as a fake probe returns it."""
    full = load_profile("h200")
    return dataclasses.replace(full, name="my-gpu", sm_count=66, bf16_tflops=0.6 * full.bf16_tflops,
                               meta={"gpu": "NVIDIA H200", "sm_partition": "fake, 66 of 132 SMs", "triton": "3.6.0"})


def _times(shape, configs, profile) -> list[float]:
    """`configs` 'measured' at the model's time, each off by a fixed factor (so the model's first is not always best)."""
    times = predict(shape, configs_to_columns(configs), profile).time_us
    return [float(t) * (1 + zlib.crc32(str(c).encode()) % 7 / 50) for c, t in zip(configs, times)]


def _device(profile) -> QuickMeasurer:
    """The sweep's compile-then-measure device (any config, the space's or an extra), answering from `_times`."""
    return QuickMeasurer(0.0, times=lambda shape, configs: _times(shape, list(configs), profile),
                         baselines={"cublas": 100.0})


def _timed(shape, profile):
    """Every legal config of the GEMM space, timed by `_times`, as a sweep records them."""
    configs = legal_configs(GEMM_SPACE, shape, profile).configs
    return _device(profile).measure(shape, configs, compiled=None)


def test_a_new_gpu_from_probe_to_eval(tmp_path, monkeypatch, live_from):
    monkeypatch.setattr(hwprobe, "probe", lambda name=None, sms=None, log=None: _probed())
    monkeypatch.setattr(hwprobe, "require_cuda", lambda: None)
    monkeypatch.setattr(hwprobe, "nvml_gpu_name", lambda device=0: "NVIDIA H200")
    monkeypatch.delenv("ROOFTUNE_PROFILE", raising=False)
    my_gpu = tmp_path / "my_gpu.json"

    # 1. profile it once
    result = runner.invoke(app, ["hwprobe", "--sms", "66", "--name", "my-gpu", "--out", str(my_gpu)])
    assert result.exit_code == 0, result.output
    profile = load_profile(my_gpu)
    assert profile.name == "my-gpu" and profile.sm_count == 66

    # 2. tune with it: its model ranks (no residual is fitted for it), and no warning that it is another GPU
    shape = GemmShape(4096, 4096, 4096, "nk")
    live_from(RecordedMeasurer(_timed(shape, profile)), baseline_us=100.0)
    out = tmp_path / "tune.json"
    result = runner.invoke(app, ["tune", "gemm", "--shape", "4096x4096x4096", "--layout", "nk", "--gpu", str(my_gpu),
                                 "--budget", "5", "--cache", "none", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    tuned = json.loads(out.read_text())
    assert len(tuned["trials"]) == 5 and "no residual is fitted for gemm on my-gpu" in tuned["residual_note"]

    # 3. a short sweep of the user's own shapes (the GPU faked at the measurer)
    shapes = tmp_path / "my_shapes.json"
    shapes.write_text(json.dumps(SHAPES))

    def fake_sweep_gemm(kernel, path, out, profile, **options):
        assert kernel == "gemm"
        return sweep.run_sweep(load_shapes(path), out, _device(profile), profile,
                               manifest={"sms": options.get("sms"), "device": {"triton": "3.6.0"},
                                         "shapes_file": "my_shapes.json"})

    monkeypatch.setattr(sweep, "sweep_shapes", fake_sweep_gemm)
    data = tmp_path / "my_data"
    result = runner.invoke(app, ["sweep", "gemm", "--shapes", str(shapes), "--out", str(data), "--gpu", str(my_gpu),
                                 "--sms", "66"])
    assert result.exit_code == 0, result.output

    # 4. check it on those shapes: rooftune's pick against the exhaustive best
    summary = tmp_path / "eval.json"
    result = runner.invoke(app, ["eval", "gemm", "--data", str(data), "--budget", "5", "--gpu", str(my_gpu),
                                 "--methods", "rooftune,model", "--json", str(summary)])
    assert result.exit_code == 0, result.output
    scores = json.loads(summary.read_text())
    assert scores["n_shapes"] == 4 and 0.5 < scores["methods"]["rooftune"]["mean"] <= 1.0

    # 5. a sibling GPU's residual, checked on the sweep: written as this GPU's only where it ranks at least as well
    # as the model alone. Here the fake GPU runs at the model's own times (within 12%), so the model alone ranks
    # best and the check refuses (tests/tuner/test_partition.py has the check that writes).
    checked = tmp_path / "gemm-my-gpu.json"
    result = runner.invoke(app, ["fit", "gemm", "--data", str(data), "--gpu", str(my_gpu), "--check",
                                 str(shipped_residual_path("gemm", load_profile("h200"), "3.6")), "--out", str(checked)])
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "on my-gpu the residual ranks worse than the model alone" in text
    assert not checked.exists()
