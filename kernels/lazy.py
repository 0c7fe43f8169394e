"""torch on first use, so that the kernels' modules load without it.

A live tune's compile workers need Triton alone (they compile for the GPU's architecture with Triton's
MockTensor and Triton's dtypes, kernels/harness/compile_pool.py), and a worker that imports torch starts seconds
later: the first round of a tune waits for it. The kernels' modules therefore reach torch through
`torch` here, which imports it at the first attribute access, and name dtypes in both worlds.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping

import triton.language as tl

# rooftune's dtype names -> Triton's (what a compile specializes on) and torch's attribute names.
TRITON_DTYPES = {"bf16": tl.bfloat16, "fp16": tl.float16, "fp32": tl.float32, "tf32": tl.float32}
_TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "tf32": "float32"}


class _Torch:
    """The torch module, imported at the first attribute access (later ones find it in sys.modules)."""

    def __getattr__(self, name: str):
        return getattr(sys.modules.get("torch") or importlib.import_module("torch"), name)


torch = _Torch()


class TorchDtypes(Mapping):
    """rooftune's dtype names -> torch dtypes, resolved when asked (importing torch then)."""

    def __getitem__(self, name: str):
        return getattr(torch, _TORCH_NAMES[name])

    def __iter__(self) -> Iterator[str]:
        return iter(_TORCH_NAMES)

    def __len__(self) -> int:
        return len(_TORCH_NAMES)
