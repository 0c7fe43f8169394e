"""A second device from an SM partition (green context): a two-shape `sweep --sms` and a `tune --sms`, on the GPU."""

import json

import pytest
from typer.testing import CliRunner

from rooftune.tuner.cli.app import app

runner = CliRunner()
SHAPES = [{"m": 16, "n": 1024, "k": 1024}, {"m": 512, "n": 512, "k": 2048}]


@pytest.mark.gpu
def test_a_two_shape_sweep_inside_66_sms(tmp_path):
    from rooftune.eval.datasets.format import read_dataset, read_manifest

    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps(SHAPES))
    out = tmp_path / "d"
    result = runner.invoke(app, ["sweep", "gemm", "--shapes", str(shapes), "--out", str(out), "--gpu", "h200",
                                 "--sms", "66"])
    assert result.exit_code == 0, result.output
    assert read_manifest(out)["sms"] == 66
    records = read_dataset(out)
    assert len(records) == 2 and all(r.best_us and r.best_us > 0 for r in records)


@pytest.mark.gpu
def test_a_tune_inside_66_sms_is_slower_than_the_whole_chip_on_a_compute_bound_shape(tmp_path):
    """A 4096³ GEMM is compute bound: 66 of 132 SMs take clearly longer (the partition is real). Each tune runs in
    a process of its own, as `rooftune tune` does: a partition is entered before the process's first CUDA work."""
    import subprocess
    import sys

    times = {}
    for sms in (None, 66):
        out = tmp_path / f"{sms}.json"
        args = [sys.executable, "-m", "rooftune.tuner.cli.app", "tune", "gemm", "--shape", "4096x4096x4096",
                "--budget", "3", "--gpu", "h200", "--cache", "none", "--json", str(out)]
        run = subprocess.run(args + (["--sms", str(sms)] if sms else []), capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        times[sms] = json.loads(out.read_text())["time_us"]
    assert times[66] > 1.4 * times[None]


@pytest.mark.gpu
def test_a_partition_entered_after_whole_chip_work_in_the_same_process_is_still_a_partition():
    """`tune` on the whole chip, then inside 66 SMs, in one process (as a library user may): the second is slower."""
    from rooftune.candidates import GemmShape
    from rooftune.hwprofiles import load_profile
    from rooftune.tuner import live_tune

    shape, profile = GemmShape(4096, 4096, 4096, "nk"), load_profile("h200")
    whole = live_tune.tune_gemm(shape, profile, budget=3, residual="none")
    part = live_tune.tune_gemm(shape, profile, budget=3, residual="none", sms=66)
    assert part.time_us > 1.4 * whole.time_us
