"""The tall-tile experiment (datasets/h200/gemm/v7/tallM/tallm.py): C's transpose in up to three power-of-two
parts against a reference on odd shapes (Triton's interpreter on the CPU, fp16), and the choice of heights."""

import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "datasets" / "h200" / "gemm" / "v7" / "tallM"))

import tallm  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@pytest.mark.parametrize("m,n,k,rows,parts", [(100, 70, 72, 32, (32, 16, 8)), (57, 40, 40, 16, (32, 0, 0)),
                                              (130, 33, 104, 32, (64, 16, 0)), (90, 48, 64, 16, (16, 8, 8))])
def test_tall_tiles_match_reference(m, n, k, rows, parts):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(torch.float16).to(DEVICE)
    b = torch.randn(n, k, generator=gen).to(torch.float16).to(DEVICE)
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device=DEVICE)
    cfg = dict(BLOCK_R=rows, W1=parts[0], W2=parts[1], W3=parts[2], BLOCK_K=32, GROUP=2, num_warps=4,
               num_stages=2)
    tallm.make_launcher(cfg, [(a, b)], out)(0)
    ref = a.double() @ b.double().t()
    err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    assert err <= 1e-3, err  # NaN (a part left unwritten) fails too


def test_heights_fill_the_waves_as_cublas_chooses():
    """On shapes where cuBLAS's kernel name gives its tile height (../skfirst/cublas_kernels.log), the best-filling
    split is that height."""
    assert sum(tallm.plans(5311, 1280)[0]) == 208
    assert sum(tallm.plans(3367, 1280)[0]) == 272
    assert sum(tallm.plans(5110, 1280)[0]) == 200
    for parts in tallm.plans(4096, 4096, count=12):
        assert parts[0] >= parts[1] >= parts[2] and all(p == 0 or p & (p - 1) == 0 for p in parts)
