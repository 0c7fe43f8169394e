"""The suite's ground truth on the CPU: a one-kernel suite swept in Triton's interpreter with a fake timer, written
as a suite dataset with each config's counts and its split; a wrong result is an error row; a re-run resumes."""

from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl

from rooftune.eval.datasets.suite import read_kernel_rows, read_suite_manifest
from rooftune.eval.sweeping.suite import sweep_suite

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@triton.jit
def double_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


def _suite(wrong: bool = False):
    def make_args(shape, device):
        x = torch.randn(shape["N"], device=device)
        return {"x": x, "y": torch.empty_like(x), "n": shape["N"]}

    def grid(args, meta):
        return (triton.cdiv(args["n"], meta["BLOCK"]),)

    def launch(args, config):
        double_kernel[grid(args, config.kwargs)](**args, **config.all_kwargs())

    kernel = SimpleNamespace(
        fn=double_kernel, configs=tuple(triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 256) for w in (1, 4)),
        shapes=({"N": 1000}, {"N": 3000}), make_args=make_args, grid=grid, launch=launch, outputs=("y",),
        reference=lambda a: {"y": a["x"].double() * (3 if wrong else 2)}, tolerance={"float32": 1e-6}, kind="memory")
    return {"double": kernel}


def _timer(launchers):
    for launch in launchers.values():
        launch(0)
    return {i: 10.0 + i for i in launchers}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))  # not the knob: setting it outlives the test


def test_every_config_of_every_shape_is_timed_beside_its_counts(tmp_path):
    out = tmp_path / "suite"
    assert sweep_suite(_suite(), {"double": "train"}, out, "h100_sxm", device="cpu", timer=_timer, log=lambda s: None) \
        == ["double"]
    manifest = read_suite_manifest(out)
    assert manifest["kernels"]["double"]["split"] == "train" and manifest["profile"] == "h100_sxm"
    rows = read_kernel_rows(out, "double")
    assert [r.shape for r in rows] == [{"N": 1000}] * 4 + [{"N": 3000}] * 4
    assert [r.time_us for r in rows[:4]] == [10.0, 11.0, 12.0, 13.0] and all(r.error is None for r in rows)
    assert rows[0].config == {"BLOCK": 64, "num_warps": 1, "num_stages": 3}
    assert rows[0].counts.programs == 16 and rows[0].counts.tensors[0].load_bytes == 16 * 64 * 4
    assert sweep_suite(_suite(), {"double": "train"}, out, "h100_sxm", device="cpu", timer=_timer,
                       log=lambda s: None) == []  # resumed: nothing left to measure


def test_a_wrong_result_is_an_error_row_not_a_time(tmp_path):
    out = tmp_path / "suite"
    sweep_suite(_suite(wrong=True), {"double": "heldout"}, out, "h100_sxm", device="cpu", timer=_timer,
                log=lambda s: None)
    rows = read_kernel_rows(out, "double")
    assert all(r.time_us is None and r.error.startswith("wrong result: y off by") for r in rows)
    assert read_suite_manifest(out)["kernels"]["double"]["split"] == "heldout"
