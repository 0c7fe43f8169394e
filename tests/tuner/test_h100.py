"""The H100 as a GPU of its own: its probed profile (the fields the model reads), the H200's residual carried to it
or refused by `fit --check`, a residual of both GPUs (`fit --also`), `eval` on its data, and the device call that
sweeps into its folders only on an H100."""

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rooftune.candidates import AttentionShape, GemmShape, configs_to_columns, kernel_of, kernel_spec, legal_configs
from rooftune.hwprofiles import load_profile
from rooftune.roofline import predict
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.releases import shipped_residual_path
from rooftune.roofline.residual import read_residual
from rooftune.tuner import fitting
from rooftune.tuner.cli.app import app
from rooftune.tuner.residual_choice import residual_choice
from rooftune.tuner.search.gp import SearchSettings

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
H100, H200 = load_profile("h100_sxm"), load_profile("h200")
DATASHEET = ROOT / "datasets/h100/probe/h100_sxm_datasheet.json"
# what hwprobe measures (every other field is a CUDA limit, an architecture constant or a stated estimate)
PROBED = ("sm_count", "sm_clock_mhz", "mem_clock_mhz", "smem_per_sm_bytes", "smem_per_block_bytes", "regs_per_sm",
          "max_threads_per_sm", "l2_bytes", "dram_bw_gbps", "l2_bw_gbps", "bf16_tflops", "fp16_tflops",
          "tf32_tflops", "fp32_tflops", "launch_overhead_us")


def _out(result) -> str:
    return " ".join(result.output.split())


def test_the_h100_profile_is_probed_and_keeps_the_datasheet_it_replaced():
    assert H100.meta["kind"] == "probed" and H100.meta["gpu"] == "NVIDIA H100 80GB HBM3"
    assert all(H100.sources[f].startswith("probed") for f in PROBED)
    sheet = load_profile(str(DATASHEET))
    assert sheet.meta["kind"] == "datasheet" and sheet.name == H100.name
    # the probe measured what the device gives (ANCHORS: ~800 TFLOP/s, ~3.0 TB/s), below the datasheet's figures
    assert H100.bf16_tflops < sheet.bf16_tflops and H100.dram_bw_gbps < sheet.dram_bw_gbps
    # the same SM as the H200's: legality is the same, so both GPUs' datasets are over the same legal sets
    for field in ("sm_count", "smem_per_block_bytes", "regs_per_sm", "max_threads_per_sm"):
        assert getattr(H100, field) == getattr(H200, field)


@pytest.mark.parametrize("field", ["bf16_tflops", "dram_bw_gbps", "l2_bw_gbps", "launch_overhead_us"])
def test_the_model_reads_the_probed_fields(field):
    """Each probed rate moves some config's predicted time of a GEMM or an attention shape: the model reads it."""
    moved = False
    for shape in (GemmShape(4096, 4096, 4096), GemmShape(16, 8192, 8192), AttentionShape(2, 32, 4096, 128)):
        configs = configs_to_columns(legal_configs(kernel_of(shape).space, shape, H100).configs[:200])
        base = predict(shape, configs, H100).time_us
        changed = predict(shape, configs, replace(H100, **{field: getattr(H100, field) * 2})).time_us
        moved |= not np.allclose(base, changed)
    assert moved


def _tiny(src: Path, dst: Path, count: int) -> Path:
    """The first `count` shape files of a committed dataset folder, with its manifest: a small recorded set."""
    (dst / "shapes").mkdir(parents=True)
    shutil.copy(src / "manifest.json", dst / "manifest.json")
    for f in sorted((src / "shapes").iterdir())[:count]:
        shutil.copy(f, dst / "shapes" / f.name)
    return dst


@pytest.fixture
def quick_fit(monkeypatch):
    monkeypatch.setattr(fitting, "candidates_grid", lambda: [fitting.Candidate(RidgeSettings(1.0, 5.0), SearchSettings())])
    monkeypatch.setattr(fitting, "VOTE_GRID", ())


@pytest.fixture
def h100_train(tmp_path):
    return _tiny(ROOT / "datasets/h100/attention/train", tmp_path / "h100_train", 10)


def test_fit_check_carries_the_h200_residual_to_the_h100_where_it_ranks_well(h100_train, tmp_path):
    out = tmp_path / "carried.json"
    result = runner.invoke(app, ["fit", "attention", "--data", str(h100_train), "--gpu", "h100_sxm", "--check",
                                 str(shipped_residual_path("attention", H200, "3.6")), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"checked on {H100.name}, ranks for it" in _out(result)
    written = read_residual(out)
    assert written.profile == H200.name and written.neighbours is None  # the vote's regrets were the H200's
    assert written.fit["gpu_checks"][H100.name]["ranks_well"] is True


def test_fit_check_refuses_a_carried_residual_that_ranks_worse_on_the_h100(h100_train, tmp_path):
    data = json.loads(shipped_residual_path("attention", H200, "3.6").read_text())
    data["coefficients"] = {k: max(-90.0, min(90.0, -40 * v)) for k, v in data["coefficients"].items()}
    data["pick"], data["fit"]["vote"] = {}, None
    bad, out = tmp_path / "bad.json", tmp_path / "x.json"
    bad.write_text(json.dumps(data))
    result = runner.invoke(app, ["fit", "attention", "--data", str(h100_train), "--gpu", "h100_sxm", "--check",
                                 str(bad), "--out", str(out)])
    assert result.exit_code == 1 and f"on {H100.name} the residual ranks worse" in _out(result)
    assert not out.exists()


def test_fit_also_fits_a_residual_of_both_gpus_scored_on_the_fitted_gpus_shapes(h100_train, tmp_path, quick_fit):
    h200_train = _tiny(ROOT / "datasets/h200/attention/train", tmp_path / "h200_train", 6)
    out = tmp_path / "hopper.json"
    result = runner.invoke(app, ["fit", "attention", "--data", str(h100_train), "--gpu", "h100_sxm",
                                 "--also", str(h200_train), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"with 6 training shapes of {H200.name}" in _out(result) and "10 training shapes" in _out(result)
    residual = read_residual(out)
    assert residual.profile == H100.name and residual.fit["shapes"] == 10
    assert residual.fit["also"] == [{"data": str(h200_train), "gpu": H200.name, "shapes": 6}]
    alone = tmp_path / "alone.json"
    assert runner.invoke(app, ["fit", "attention", "--data", str(h100_train), "--gpu", "h100_sxm",
                               "--out", str(alone)]).exit_code == 0
    assert read_residual(alone).coefficients != residual.coefficients  # the H200's shapes entered the fit


@pytest.mark.parametrize("case", ["held-out", "same GPU", "with --check"])
def test_fit_also_refuses_what_it_cannot_fit_beside(h100_train, tmp_path, case):
    also = {"held-out": _tiny(ROOT / "datasets/h200/attention/heldout", tmp_path / "h200_heldout", 3),
            "same GPU": h100_train, "with --check": _tiny(ROOT / "datasets/h200/attention/train", tmp_path / "t", 3)}
    extra = ["--check", "shipped"] if case == "with --check" else []
    out = tmp_path / "x.json"
    result = runner.invoke(app, ["fit", "attention", "--data", str(h100_train), "--gpu", "h100_sxm",
                                 "--also", str(also[case]), "--out", str(out), *extra])
    assert result.exit_code == 2 and not out.exists()
    assert {"held-out": "held-out", "same GPU": "own data", "with --check": "not with --check"}[case] in _out(result)


def test_the_h100_ranks_with_its_own_shipped_attention_residual(shipped_triton):
    residual, note = residual_choice(kernel_spec("attention"), H100, "3.6.0")
    assert residual is not None and residual.profile == H100.name
    assert residual.fit["data"].endswith("datasets/h100/attention/train") and "also" not in residual.fit


@pytest.mark.parametrize(("kernel", "said"), [("attention", "the route fitted on datasets/h100/attention/train"),
                                              ("gemm", "the route fitted on datasets/h100/gemm/train")])
def test_eval_on_h100_data_ranks_with_the_h100s_profile_residual_and_route(tmp_path, kernel, said):
    data = _tiny(ROOT / f"datasets/h100/{kernel}/heldout", tmp_path / "heldout", 5)
    result = runner.invoke(app, ["eval", kernel, "--data", str(data), "--budget", "5", "--gpu", "h100_sxm",
                                 "--methods", "rooftune,model"])
    assert result.exit_code == 0, result.output
    text = _out(result)
    assert f"on {H100.name}: 5 shapes" in text and said in text


@pytest.mark.parametrize("kernel", ["gemm", "attention"])
def test_the_h100s_ground_truth_holds_every_shape_of_its_lists_under_one_release(kernel):
    """The whole H100 set: the H200's 200 held-out shapes and the committed training subsample, all under 3.6."""
    from rooftune.eval.datasets.format import read_manifest

    for split, listed in (("heldout", ROOT / f"datasets/h200/{kernel}/shapes_heldout.json"),
                          ("train", ROOT / f"datasets/h100/{kernel}/shapes_train.json")):
        folder = ROOT / f"datasets/h100/{kernel}/{split}"
        manifest = read_manifest(folder)
        assert manifest["device"]["triton"] == "3.6.0" and manifest["device"]["gpu"] == "NVIDIA H100 80GB HBM3"
        count = len(json.loads(listed.read_text()))
        assert manifest["shapes_done"] == manifest["shapes_listed"] == count == len(list((folder / "shapes").iterdir()))
        assert all("H100" in d for d in manifest["shape_devices"].values())


def test_the_h100_call_sweeps_into_the_h100s_folders_only_on_an_h100(tmp_path):
    """scripts/device/h100.sh on another GPU files nothing into datasets/h100 (exit 3)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text('#!/bin/bash\necho "NVIDIA A100-SXM4-80GB"\n')
    (bin_ / "rooftune").write_text(f'#!/bin/bash\necho "$@" >> {tmp_path / "rooftune.log"}\n')
    (bin_ / "python3").write_text("#!/bin/bash\nexit 0\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    run = subprocess.run(["bash", "scripts/device/h100.sh", "100"], cwd=ROOT, capture_output=True, text=True,
                         env={"PATH": f"{bin_}:/usr/bin:/bin", "OUT": str(out), "TMPDIR": str(tmp_path)}, timeout=60)
    assert run.returncode == 3 and "not an H100" in run.stdout
    assert not (tmp_path / "rooftune.log").exists() and not list(out.iterdir())


def test_the_h100_ranks_gemm_with_the_residual_of_both_gpus_chosen_on_its_training_shapes(shipped_triton):
    residual, _ = residual_choice(kernel_spec("gemm"), H100, "3.6.0")
    assert residual is not None and residual.profile == H100.name
    assert residual.fit["data"].endswith("datasets/h100/gemm/train")
    assert [(a["gpu"], a["data"].endswith("datasets/h200/gemm/train")) for a in residual.fit["also"]] == [(H200.name, True)]


@pytest.mark.parametrize(("gpu", "nvml"), [("h100_sxm", "NVIDIA H200"), ("h200", "NVIDIA H100 80GB HBM3")])
def test_a_sweep_records_ground_truth_only_on_its_profiles_gpu(tmp_path, monkeypatch, gpu, nvml):
    """`rooftune sweep --gpu PROFILE` on another GPU is refused before anything is timed or written: the H100's times
    never enter the H200's folder, nor the reverse."""
    from rooftune.hwprofiles import hwprobe

    monkeypatch.setattr(hwprobe, "nvml_gpu_name", lambda device=0: nvml)
    out = tmp_path / "data"
    result = runner.invoke(app, ["sweep", "attention", "--shapes", str(ROOT / "datasets/h100/attention/shapes_train.json"),
                                 "--out", str(out), "--gpu", gpu])
    assert result.exit_code == 2 and f"but this GPU is {nvml}" in _out(result) and not out.exists()
