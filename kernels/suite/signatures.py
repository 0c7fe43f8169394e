"""Compiling a suite kernel's configs in the compile pool's workers: a call's signature without its tensors, and the
workers' `warmup`, which compiles one config from it with Triton's MockTensor (no torch, no GPU memory).

What a binary specializes on is in the signature: each tensor's dtype (its pointer is aligned, as MockTensor's null
pointer is), each integer's value (1, or divisible by 16), floats, and the derived constexprs; the binary lands in
Triton's on-disk cache, where the parent's first launch finds it (kernels/harness/compile_pool.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import triton.language as tl
from triton.runtime.jit import MockTensor

from rooftune.kernels.suite import SUITE

# torch's dtype names -> Triton's, for the tensors of a signature
TRITON_OF = {"bfloat16": tl.bfloat16, "float16": tl.float16, "float32": tl.float32, "float64": tl.float64,
             "float8_e4m3fn": tl.float8e4nv, "int64": tl.int64, "int32": tl.int32, "int16": tl.int16,
             "int8": tl.int8, "uint8": tl.uint8, "bool": tl.int1}


def signature(args: Mapping[str, object]) -> tuple:
    """A call's arguments as a hashable, picklable signature: a tensor as ('tensor', dtype name, shape), anything
    else (ints, floats, derived constexprs) as its value; in `args`' order."""
    out = []
    for name, value in args.items():
        if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
            out.append((name, ("tensor", str(value.dtype).removeprefix("torch."), tuple(value.shape))))
        else:
            out.append((name, value))
    return tuple(out)


def mock_args(sig: tuple) -> dict:
    """The keyword arguments a warmup compiles with: MockTensors of the signature's dtypes and shapes."""
    return {name: MockTensor(TRITON_OF[value[1]], list(value[2]))
            if isinstance(value, tuple) and value[:1] == ("tensor",) else value for name, value in sig}


def warmup(job: tuple, config_index: int, device: str = "cuda") -> float:
    """Compile config `config_index` of the suite kernel for `job` = (kernel name, signature); the seconds spent.
    The worker imports the registry, which needs Triton alone."""
    name, sig = job
    kernel = SUITE[name]
    start = time.perf_counter()
    kernel.fn.warmup(**mock_args(sig), grid=(1,), **kernel.configs[config_index].all_kwargs())
    return time.perf_counter() - start


warmup.needs_torch = False  # the pool's workers skip importing torch (compile_pool.py `_init_worker`)
