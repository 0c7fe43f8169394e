"""`rooftune sweep moe` (tests/fakes.py's device) and `rooftune fit moe` (a tiny synthetic training set): the MoE
kernel's ground truth is swept and fitted through the same code as GEMM's and attention's."""

import json
from pathlib import Path

from fakes import QuickMeasurer
from typer.testing import CliRunner

from rooftune.candidates import KERNELS, MOE_SPACE, MoeShape
from rooftune.eval.sweeping import sweep
from rooftune.eval.datasets.format import finished_ids, read_dataset, read_manifest, write_manifest, write_shape
from rooftune.hwprofiles import load_profile
from rooftune.roofline.residual import read_residual
from rooftune.tuner.cli.app import app

runner = CliRunner()
PROFILE = load_profile("h200")


def moe_device():
    """Every config compiles and takes a time fixed by its parameters, beside a grouped-GEMM baseline."""
    return QuickMeasurer(0.0, times=lambda shape, configs: [
        5.0 + c["BLOCK_SIZE_M"] / 16 + c["num_stages"] + c["GROUP_SIZE_M"] / 64 for c in configs],
        baselines={"grouped_mm": 9.0}, group_key=lambda shape: shape.gemm)


def _fake_part(kernel, shapes, reporter, *, shapes_path, listed, out, profile, sms, max_minutes, workers, settings):
    return sweep.run_sweep(shapes, out, moe_device(), profile, kernel=KERNELS[kernel],
                           manifest={"shapes_file": Path(shapes_path).name, "shapes_listed": listed},
                           max_minutes=max_minutes, reporter=reporter, device="gpu 0: fake")


def test_sweep_moe_writes_a_moe_dataset_that_eval_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "_sweep_part", _fake_part)
    shapes = tmp_path / "shapes_train.json"
    shapes.write_text(json.dumps([
        {"experts": 8, "topk": 2, "hidden": 256, "intermediate": 512, "tokens": 16, "gemm": "gate_up"},
        {"experts": 8, "topk": 2, "hidden": 256, "intermediate": 512, "tokens": 16, "gemm": "down"}]))
    out = tmp_path / "train"
    result = runner.invoke(app, ["sweep", "moe", "--shapes", str(shapes), "--out", str(out), "--gpu", "h200"])
    assert result.exit_code == 0, result.output
    assert len(finished_ids(out)) == 2 and read_manifest(out)["shapes_done"] == 2
    records = read_dataset(out)
    assert {r.shape.gemm for r in records} == {"gate_up", "down"} and all(isinstance(r.shape, MoeShape) for r in records)
    result = runner.invoke(app, ["sweep", "moe", "--shapes", str(shapes), "--out", str(out), "--gpu", "h200",
                                 "--backfill-extras"])
    assert result.exit_code != 0  # no backfill for MoE: the option does not exist


def test_fit_moe_fits_on_train_and_refuses_held_out(tmp_path, synthetic):
    root = tmp_path / "train"
    write_manifest(root, {"kernel": "moe", "space_version": MOE_SPACE.version, "gpu_profile": PROFILE.name,
                          "shapes_file": "shapes_train.json"})
    for tokens in (1, 8, 64, 256, 1024, 4096):
        write_shape(root, synthetic(MoeShape(16, 2, 1024, 1024, tokens), PROFILE))
    out = tmp_path / "moe-residual.json"
    result = runner.invoke(app, ["fit", "moe", "--data", str(root), "--gpu", "h200", "--out", str(out)])
    assert result.exit_code == 0, result.output
    residual = read_residual(out)
    assert residual.kernel == "moe" and residual.fit["space_version"] == MOE_SPACE.version
    assert residual.fit["static_list"]
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "shapes_file": "shapes_heldout.json"}))
    result = runner.invoke(app, ["fit", "moe", "--data", str(root), "--gpu", "h200", "--out", str(tmp_path / "x.json")])
    assert result.exit_code == 2 and "held-out" in " ".join(result.output.split())
