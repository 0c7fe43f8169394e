"""The suite's reference check: a config's outputs, poisoned first, against the kernel's float64 reference."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import triton

from rooftune.kernels.harness.check import relative_error
from rooftune.kernels.harness.context import error_line
from rooftune.kernels.suite.record import SuiteKernel


def poison_outputs(kernel: SuiteKernel, args: dict) -> None:
    """Every output filled with NaN (integers with -1), so that an element the kernel fails to write fails."""
    for name in kernel.outputs:
        t = args[name]
        t.fill_(float("nan") if t.dtype.is_floating_point else -1)


def compare(kernel: SuiteKernel, args: dict, expected: dict, names: Iterable[str] | None = None) -> str | None:
    """None when each output of `names` (default all) is within the kernel's tolerance for its dtype, else why not."""
    for name in kernel.outputs if names is None else names:
        out = args[name]
        dtype = str(out.dtype).removeprefix("torch.")
        rel = relative_error(out, expected[name])
        if not rel <= kernel.tolerance[dtype]:
            return f"reference check failed: {name} rel err {rel:.3g} > {kernel.tolerance[dtype]:g}"
    return None


def check_config(kernel: SuiteKernel, args: dict, expected: dict, config: triton.Config,
                 names: Iterable[str] | None = None) -> str | None:
    """None when `config` computes `expected` (the reference of `args`) within tolerance, else a short reason; a
    failure to compile or run is a reason too, not an exception. `names`: the outputs compared (default all)."""
    poison_outputs(kernel, args)
    try:
        kernel.launch(args, config)
        if any(isinstance(t, torch.Tensor) and t.is_cuda for t in args.values()):
            torch.cuda.synchronize()
    except Exception as exc:  # a compile error, out of resources or a launch failure is a result here
        return f"run failed: {error_line(exc)}"
    return compare(kernel, args, expected, names)


def check_configs(kernel: SuiteKernel, shape: dict, configs: Iterable[triton.Config], device, dtype=None,
                  seed: int = 1) -> dict[triton.Config, str | None]:
    """Each config's verdict (`check_config`) on one set of fresh inputs of `shape` (drawn from `seed`), whose
    reference is computed once. Off the GPU only the outputs the interpreter computes faithfully are compared."""
    args = kernel.make_args(shape, device, dtype, seed=seed)
    expected = kernel.reference(args)
    names = kernel.interpreted if torch.device(device).type != "cuda" else None
    return {c: check_config(kernel, args, expected, c, names) for c in configs}
