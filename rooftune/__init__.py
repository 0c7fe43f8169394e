"""rooftune: few-trial autotuning of Triton kernels from a roofline + occupancy model.

`rooftune.matmul`, `rooftune.linear` and `rooftune.attention` are PyTorch ops on rooftune's tuned
Triton kernels (kernels/ops.py, configs from tuner/pytorch/ops.py); they load torch on first access, so
`import rooftune` stays light. `rooftune.autotune` is `@triton.autotune` for any Triton kernel, timing only the
configs the model ranks first (tuner/pytorch/autotune.py); `rooftune.explain_kernel` shows that ranking and why
(tuner/kernel_explanation.py); `rooftune.warm_up()` starts what a first tune waits for (its compile workers) in the
background, for a program to call at its start.
"""

__version__ = "0.1.0"

TORCH_OPS = ("matmul", "linear", "attention")


def __getattr__(name: str):
    if name in TORCH_OPS:
        from rooftune.tuner.pytorch.ops import torch_ops

        return getattr(torch_ops(), name)
    if name == "autotune":
        from rooftune.tuner.pytorch.autotune import autotune

        return autotune
    if name == "warm_up":
        from rooftune.tuner.pytorch.kernel_order import warm_up

        return warm_up
    if name == "explain_kernel":
        from rooftune.tuner.kernel_explanation import explain_kernel

        return explain_kernel
    raise AttributeError(f"module 'rooftune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *TORCH_OPS, "autotune", "explain_kernel", "warm_up"])
