"""The reference check: relative error, NaN poisoning, and check_gemm catching wrong or unwritten outputs."""

import math

import pytest
import torch

from rooftune.candidates import Config, GemmShape
from rooftune.kernels.harness.check import check_gemm, poison_, relative_error

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
CONFIG = Config.make(4, 2, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=8, SPLIT_K=2)
SHAPE = GemmShape(33, 20, 50, layout="nk", dtype="fp16")


def test_relative_error():
    ref = torch.tensor([[3.0, 4.0]])
    assert relative_error(ref.clone(), ref) == 0.0
    assert math.isclose(relative_error(torch.tensor([[3.0, 3.0]]), ref), 0.2)
    assert relative_error(torch.tensor([[3.0, float("nan")]]), ref) == math.inf
    assert relative_error(torch.tensor([[3.0, float("inf")]]), ref) == math.inf


def test_poison_fills_with_nan():
    t = poison_(torch.zeros(3, 4, dtype=torch.float16))
    assert bool(t.isnan().all())


def test_check_gemm_passes_the_kernel():
    assert check_gemm(CONFIG, SHAPE, "nk", DEVICE, seed=0) is None
    assert check_gemm(CONFIG, GemmShape(7, 9, 11, dtype="fp32"), device=DEVICE, seed=1) is None


def test_check_gemm_catches_unwritten_elements():
    def skips_last_row(a, b, out):
        out[:-1] = (a.float() @ b.float().T)[:-1].to(out.dtype)

    assert "reference check failed: rel err inf" in check_gemm(CONFIG, SHAPE, "nk", DEVICE, 0, run=skips_last_row)


def test_check_gemm_catches_a_wrong_result():
    def wrong_layout(a, b, out):  # reads the [N, K] weight as if it were [K, N]'s transpose, shuffled
        out.copy_((a.float() @ b.float().flip(0).T).to(out.dtype))

    assert check_gemm(CONFIG, SHAPE, "nk", DEVICE, 0, run=wrong_layout).startswith("reference check failed")


def test_check_gemm_reports_a_failing_run():
    def raises(a, b, out):
        raise RuntimeError("out of resources: shared memory\nmore detail")

    assert check_gemm(CONFIG, SHAPE, "nk", DEVICE, 0, run=raises) == \
        "run failed: RuntimeError: out of resources: shared memory"
