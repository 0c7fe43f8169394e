"""Test setup: Triton's interpreter when there is no GPU, the `gpu` marker, ../shared lookup, and the shared
fakes (tests/fakes.py) importable by name: pytest's importlib mode puts no test folder on sys.path."""

import os
import sys
from pathlib import Path

# As the CLI does (tuner/cli/app.py): one BLAS thread for the small solves of the search and the fit.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.append(str(REPO / "tests"))  # last: its folders (kernels, eval, ...) must shadow nothing


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


HAS_CUDA = _has_cuda()
if not HAS_CUDA:
    # Kernel tests run on the CPU through Triton's interpreter; it must be chosen before triton loads.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_tune_cache(tmp_path, monkeypatch):
    """Commands that default to the per-user tune cache use one of the test's own, never ~/.cache."""
    monkeypatch.setenv("ROOFTUNE_CACHE", str(tmp_path / "rooftune-tune-cache.json"))


@pytest.fixture
def shared_dir() -> Path:
    """../shared beside the checkout; tests that read it skip where it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared is absent (a clone outside the rooftune workplace)")
    return SHARED
