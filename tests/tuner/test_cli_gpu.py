"""The GPU commands through typer's CliRunner: errors without a GPU, bad input, and the thin wiring."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rooftune.tuner.cli.app import app

runner = CliRunner()


def _has_cuda():
    import torch

    return torch.cuda.is_available()


no_gpu_only = pytest.mark.skipif(_has_cuda(), reason="checks the no-GPU error")
ATTENTION_LIST = [{"batch": 1, "heads": 2, "seq": 64, "head_dim": 64}]
# kernel -> (its library function in eval/sweeping/sweep.py, a valid shape list)
KERNELS = {"gemm": ("gemm", [{"m": 1, "n": 64, "k": 64}]), "attention": ("attention", ATTENTION_LIST)}


def test_help_lists_gpu_commands_without_importing_torch():
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom rooftune.tuner.cli.app import app\n"
            "out = ''.join(CliRunner().invoke(app, [*c.split(), '--help']).output for c in ('hwprobe', 'sweep gemm'))\n"
            "assert '--sms' in out and '--max-minutes' in out and '--backfill-extras' in out, out\n"
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


@no_gpu_only
def test_hwprobe_without_gpu_fails_clearly():
    result = runner.invoke(app, ["hwprobe", "--out", "x.json"])
    assert result.exit_code == 2 and "no CUDA GPU" in result.output


@no_gpu_only
@pytest.mark.parametrize("kernel", KERNELS)
def test_sweep_without_gpu_fails_clearly(tmp_path, kernel):
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps(KERNELS[kernel][1]))
    result = runner.invoke(app, ["sweep", kernel, "--shapes", str(shapes), "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "no CUDA GPU" in result.output
    assert not (tmp_path / "d").exists()


def test_sweep_input_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"m": 1}')
    result = runner.invoke(app, ["sweep", "gemm", "--shapes", str(bad), "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "JSON list" in result.output
    result = runner.invoke(app, ["sweep", "conv", "--shapes", str(bad), "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "No such command 'conv'" in result.output


@pytest.mark.parametrize("kernel", KERNELS)
def test_sweep_calls_the_library_and_reports(tmp_path, monkeypatch, kernel):
    from rooftune.eval.sweeping import sweep

    seen = {}

    def fake_sweep(shapes, out, profile, **kwargs):
        seen.update(shapes=shapes, out=out, profile=profile.name, **kwargs)
        return sweep.SweepSummary(done=3, skipped=1, remaining=2, stopped_early=True, seconds=42.0)

    def sweep_shapes(swept, *args, **kwargs):
        assert swept == kernel, f"`sweep {kernel}` ran another kernel's sweep"
        return fake_sweep(*args, **kwargs)

    _, listed = KERNELS[kernel]
    monkeypatch.setattr(sweep, "sweep_shapes", sweep_shapes)
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps(listed))
    result = runner.invoke(app, ["sweep", kernel, "--shapes", str(shapes), "--out", "d", "--sms", "66",
                                 "--max-minutes", "8", "--workers", "4"])
    assert result.exit_code == 0, result.output
    assert "done 3" in result.output and "time budget reached" in result.output
    assert seen["sms"] == 66 and seen["max_minutes"] == 8.0 and seen["profile"] == "NVIDIA H200"
    assert seen["workers"] == 4 and seen["out"] == "d"


@no_gpu_only
def test_backfill_without_gpu_fails_clearly(tmp_path):
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([{"m": 1, "n": 64, "k": 64}]))
    result = runner.invoke(app, ["sweep", "gemm", "--shapes", str(shapes), "--out", str(tmp_path / "d"),
                                 "--backfill-extras"])
    assert result.exit_code == 2 and "no CUDA GPU" in result.output
    assert not (tmp_path / "d").exists()


def test_backfill_flag_calls_the_backfill_and_reports(tmp_path, monkeypatch):
    from rooftune.eval.sweeping import backfill, sweep

    seen = {}

    def fake_backfill_gemm(shapes, out, profile, **kwargs):
        seen.update(shapes=shapes, out=out, profile=profile.name, **kwargs)
        return backfill.BackfillSummary(done=5, already=2, not_needed=0, failed=1, remaining=3, stopped_early=True,
                                     seconds=40.0)

    def no_sweep(*args, **kwargs):
        raise AssertionError("--backfill-extras must not sweep")

    monkeypatch.setattr(backfill, "backfill_gemm", fake_backfill_gemm)
    monkeypatch.setattr(sweep, "sweep_shapes", no_sweep)
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([{"m": 1, "n": 64, "k": 64}]))
    result = runner.invoke(app, ["sweep", "gemm", "--shapes", str(shapes), "--out", "d", "--backfill-extras",
                                 "--max-minutes", "8.5"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "backfilled 5" in out and "re-timed) 1, left 3" in out and "time budget reached" in out
    assert seen["out"] == "d" and seen["max_minutes"] == 8.5 and seen["profile"] == "NVIDIA H200"


@pytest.mark.parametrize("kernel", KERNELS)
def test_sweep_stops_with_code_3_when_a_config_kills_the_context(tmp_path, monkeypatch, kernel):
    from rooftune.eval.sweeping import sweep
    from rooftune.eval.sweeping.quarantine import ContextQuarantined

    def dies(shapes, out, profile, **kwargs):
        raise ContextQuarantined("64x4096x4096-nk-bf16: config BLOCK_M=64 killed the CUDA context (illegal "
                                 "memory access); it is quarantined in d/quarantine.json. Run the same command again")

    _, listed = KERNELS[kernel]
    monkeypatch.setattr(sweep, "sweep_shapes", lambda swept, *a, **k: dies(*a, **k))
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps(listed))
    result = runner.invoke(app, ["sweep", kernel, "--shapes", str(shapes), "--out", "d"])
    out = " ".join(result.output.split())
    assert result.exit_code == 3 and "quarantined in d/quarantine.json" in out and "Traceback" not in out


@pytest.mark.parametrize("kernel", KERNELS)
def test_sweep_stops_with_code_4_when_the_context_dies_under_no_single_config(tmp_path, monkeypatch, kernel):
    from rooftune.eval.sweeping import sweep
    from rooftune.eval.sweeping.quarantine import ContextLostUnattributed

    def dies(shapes, out, profile, **kwargs):
        raise ContextLostUnattributed("64x4096x4096-nk-bf16: the CUDA context died while running 'cublas'")

    _, listed = KERNELS[kernel]
    monkeypatch.setattr(sweep, "sweep_shapes", lambda swept, *a, **k: dies(*a, **k))
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps(listed))
    result = runner.invoke(app, ["sweep", kernel, "--shapes", str(shapes), "--out", "d"])
    assert result.exit_code == 4 and "'cublas'" in result.output and "Traceback" not in result.output


def test_attention_sweep_input_errors(tmp_path, monkeypatch):
    from rooftune.eval.sweeping import sweep

    def no_sweep(*args, **kwargs):
        raise AssertionError("a bad list must fail before any GPU work")

    monkeypatch.setattr(sweep, "sweep_shapes", no_sweep)
    bad = tmp_path / "bad.json"
    for text, message in (('[{"m": 1, "n": 2, "k": 3}]', "keys batch, heads, seq, head_dim"),
                          (json.dumps([{**ATTENTION_LIST[0], "head_dim": 48}]), "entry 0")):
        bad.write_text(text)
        result = runner.invoke(app, ["sweep", "attention", "--shapes", str(bad), "--out", str(tmp_path / "d")])
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    bad.write_text(json.dumps(ATTENTION_LIST))
    result = runner.invoke(app, ["sweep", "attention", "--shapes", str(bad), "--out", "d", "--backfill-extras"])
    assert result.exit_code == 2 and "No such option: --backfill-extras" in result.output



@pytest.mark.parametrize("kernel", KERNELS)
def test_sweep_passes_shard_and_gpus_and_reports_each_gpu(tmp_path, monkeypatch, kernel):
    from rooftune.eval.sweeping import sweep

    seen = {}

    def fake_sweep(shapes, out, profile, **kwargs):
        seen.update(kwargs)
        part = sweep.SweepSummary(done=2, skipped=0, remaining=1, stopped_early=False, seconds=30.0)
        return sweep.SweepSummary(done=4, skipped=0, remaining=2, stopped_early=False, seconds=31.0,
                                  by_gpu={0: part, 2: part})

    _, listed = KERNELS[kernel]
    monkeypatch.setattr(sweep, "sweep_shapes", lambda swept, *a, **k: fake_sweep(*a, **k))
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps(listed))
    result = runner.invoke(app, ["sweep", kernel, "--shapes", str(shapes), "--out", "d", "--shard", "1/3",
                                 "--gpus", "0, 2"])
    assert result.exit_code == 0, result.output
    assert seen["shard"] == (1, 3) and seen["gpus"] == [0, 2]
    assert "gpu 0: done 2, already there 0, left 1; 30 s" in result.output
    assert "gpu 2: done 2" in result.output and "done 4, already there 0, left 2; 31 s" in result.output


def test_sweep_rejects_bad_shard_and_gpus(tmp_path, monkeypatch):
    from rooftune.eval.sweeping import sweep

    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps(KERNELS["gemm"][1]))
    base = ["sweep", "gemm", "--shapes", str(shapes), "--out", str(tmp_path / "d")]
    for args, message in ((["--shard", "2/2"], "between 0 and N-1 = 1"), (["--shard", "x"], "must be I/N"),
                          (["--shard", "1"], "must be I/N"), (["--shard", "-1/2"], "must be I/N"),
                          (["--shard", "0/0"], "N must be at least 1"), (["--gpus", "0,0"], "twice"),
                          (["--gpus", "a"], "--gpus must be integers from 0 up"),
                          (["--gpus", "0", "--backfill-extras"], "--backfill-extras runs on one GPU"),
                          (["--shard", "0/2", "--backfill-extras"], "--backfill-extras runs on one GPU")):
        monkeypatch.setattr(sweep, "sweep_shapes", lambda *a, **k: pytest.fail("bad input must fail first"))
        result = runner.invoke(app, base + args)
        assert result.exit_code == 2 and message in " ".join(result.output.split()), (args, result.output)
    monkeypatch.undo()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    result = runner.invoke(app, base + ["--gpus", "1,5"])  # the real library: no worker starts
    assert result.exit_code == 2 and "--gpus names GPU 5, but this machine shows GPUs 0-1" in result.output
    assert not (tmp_path / "d").exists()


def test_the_live_commands_default_to_the_profile_of_the_gpu_the_driver_names(monkeypatch, tmp_path):
    from rooftune.hwprofiles import hwprobe
    from rooftune.tuner.cli import args

    monkeypatch.delenv("ROOFTUNE_PROFILE", raising=False)
    names = {"name": "NVIDIA A100-SXM4-80GB"}
    monkeypatch.setattr(hwprobe, "nvml_gpu_name", lambda device=0: names["name"])
    assert args.gpu_of_this_machine() == "a100_sxm4_80gb"
    assert args.live_gpu(None).name == "NVIDIA A100-SXM4-80GB"
    monkeypatch.setenv("ROOFTUNE_PROFILE", "b200")  # as rooftune's PyTorch ops read it
    assert args.gpu_of_this_machine() == "b200"
    monkeypatch.delenv("ROOFTUNE_PROFILE")
    names["name"] = None  # no GPU: the default, and the command's own no-GPU error (or a cache hit) after it
    assert args.gpu_of_this_machine() == "h200"
    names["name"] = "RTX 9090"  # a GPU with no shipped profile: said at once, before any work
    result = runner.invoke(app, ["tune", "gemm", "--shape", "64x64x64", "--cache", "none"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "no shipped hardware profile for GPU 'RTX 9090'" in text and "--gpu" in text
    steps = ["rooftune hwprobe --out my_gpu.json", "rooftune tune gemm --shape MxNxK --gpu my_gpu.json",
             "rooftune sweep gemm", "rooftune eval gemm --data DATA --gpu my_gpu.json", "rooftune fit gemm"]
    assert [text.index(step) for step in steps] == sorted(text.index(step) for step in steps)  # the sequence, in order
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps(KERNELS["gemm"][1]))
    result = runner.invoke(app, ["sweep", "gemm", "--shapes", str(shapes), "--out", str(tmp_path / "d")])
    assert result.exit_code == 2 and "RTX 9090" in result.output and not (tmp_path / "d").exists()
    # an explicit --gpu that is not this GPU's profile is used, with a warning
    names["name"] = "NVIDIA A100-SXM4-80GB"
    result = runner.invoke(app, ["tune", "gemm", "--shape", "64x64x64", "--gpu", "h200", "--cache", "none"])
    text = " ".join(result.output.split())
    assert "--gpu h200 is NVIDIA H200, but this GPU is NVIDIA A100-SXM4-80GB" in text
    # ... but a sweep, which records the profile's GPU's ground truth, refuses before it writes
    result = runner.invoke(app, ["sweep", "gemm", "--shapes", str(shapes), "--out", str(tmp_path / "d"),
                                 "--gpu", "h200"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "but this GPU is NVIDIA A100-SXM4-80GB: a sweep records" in text, text
    assert not (tmp_path / "d").exists()
    # a profile of an SM partition of this GPU (hwprobe --sms) is this GPU's: no warning
    names["name"] = "NVIDIA H200"
    partition = tmp_path / "h200_66.json"
    from rooftune.hwprofiles import load_profile, profile_to_dict
    partition.write_text(json.dumps({**profile_to_dict(load_profile("h200")), "name": "NVIDIA H200 (66 SMs)"}))
    result = runner.invoke(app, ["tune", "gemm", "--shape", "64x64x64", "--gpu", str(partition), "--cache", "none"])
    assert "warning" not in result.output, result.output


def test_a_tune_inside_a_partition_says_how_many_sms_it_ran_on(monkeypatch):
    """`tune --sms 66` on an H200: the title names the 72 SMs the green context gets, as the model counted them."""
    from rooftune.candidates import Config, Trial
    from rooftune.hwprofiles import load_profile
    from rooftune.tuner.cli import tune
    from rooftune.tuner.tune import TuneResult

    seen = {}
    config = Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, SPLIT_K=1, TMA=1, PERSISTENT=0,
                         FIXUP=0, BLOCK_N2=0)

    def fake_tune(problem, profile, budget, **kw):
        seen.update(kw)
        return TuneResult(problem, config, 10.0, (Trial(config, 10.0),), "rooftune", profile.name, "v")

    monkeypatch.setattr(tune, "live_gpu", lambda name: load_profile("h200"))
    monkeypatch.setattr(tune, "tune_shape", fake_tune)
    result = runner.invoke(app, ["tune", "gemm", "--shape", "512x512x512", "--sms", "66", "--cache", "none"])
    assert result.exit_code == 0, result.output
    assert "inside 72 SMs (--sms 66)" in " ".join(result.output.split()) and seen["sms"] == 66
