"""The kernel registry: one entry per tunable kernel (its shape type and parser, published space,
configs timed beside the space, library baseline, Triton module), so that every command dispatches by
kernel name. Registering a kernel here is what makes `space`, `explain`, `eval`, `sweep` and `tune`
know it; its cost model is found by shape type (roofline.predict) and its bench by name (kernels/harness/benches.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rooftune.candidates.attention_space import ATTENTION_SPACE
from rooftune.candidates.tutorial import gemm_baseline_extras
from rooftune.candidates.config import Config
from rooftune.candidates.gemm_space import GEMM_SPACE
from rooftune.candidates.moe_space import MOE_SPACE
from rooftune.candidates.shapes import (
    AttentionShape,
    GemmShape,
    MoeShape,
    ShapeError,
    load_attention_shapes,
    load_moe_shapes,
    load_shapes,
    parse_attention_shape,
    parse_gemm_shape,
    parse_moe_shape,
)
from rooftune.candidates.space import SearchSpace


def no_extras(shape, configs: list[Config]) -> list[Config]:
    return []


@dataclass(frozen=True)
class KernelSpec:
    """`name` (the CLI's and the manifests' word), `shape_type` and `parse(text, **options)`, the
    reader of a sweep's shape list (`load_list(path)`), the published `space`, `extras(shape, legal configs)` -> configs outside the space timed beside it
    (rows with in_space = 0), the library baseline's key and its name in prose, the Triton kernel's
    module (imported only where a GPU works), the shape's form for help texts, the config
    parameters the kernel takes as run-time integers (`runtime_params`: no binary depends on their
    value, so configs that differ only in them compile once), and the dtypes its Triton kernel computes
    as named (`dtypes`: its dots leave the input precision at Triton's default, TF32, so fp32 inputs
    would be timed as TF32 under the fp32 name; `check_sweep_dtypes` refuses them)."""

    name: str
    shape_type: type
    parse: Callable[..., object]
    load_list: Callable[..., list]
    space: SearchSpace
    extras: Callable[[object, list[Config]], list[Config]]
    baseline: str
    baseline_label: str
    module: str
    shape_form: str
    runtime_params: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("bf16", "fp16")


KERNELS: dict[str, KernelSpec] = {
    # SPLIT_K is a run-time integer of the GEMM too, but SPLIT_K > 1 adds the reduction's binary.
    "gemm": KernelSpec("gemm", GemmShape, parse_gemm_shape, load_shapes, GEMM_SPACE, gemm_baseline_extras, "cublas",
                       "cuBLAS", "rooftune.kernels.gemm", "MxNxK", runtime_params=("GROUP_M",)),
    "attention": KernelSpec("attention", AttentionShape, parse_attention_shape, load_attention_shapes, ATTENTION_SPACE,
                            no_extras, "sdpa", "SDPA", "rooftune.kernels.attention", "BxHxSxD[xKV]"),
    # One GEMM of a fused MoE layer (gate_up or down) at one token count, vLLM's kernel form and grid; its
    # baseline is torch's grouped GEMM over the same routed rows (kernels/harness/benches.py MoeBench).
    "moe": KernelSpec("moe", MoeShape, parse_moe_shape, load_moe_shapes, MOE_SPACE, no_extras, "grouped_mm",
                      "torch._grouped_mm", "rooftune.kernels.moe", "ExTOPKxHIDDENxINTERMEDIATExTOKENS",
                      runtime_params=("GROUP_SIZE_M",)),
}


def check_sweep_dtypes(spec: KernelSpec, shapes: list) -> None:
    """Raise ShapeError naming the first shape of `shapes` whose dtype `spec`'s kernel does not compute as
    named (KernelSpec `dtypes`), and how many there are."""
    wrong = [s for s in shapes if s.dtype not in spec.dtypes]
    if wrong:
        raise ShapeError(f"rooftune's {spec.name} kernel computes {' and '.join(spec.dtypes)} inputs; "
                         f"{len(wrong)} of the list's shapes {'are' if len(wrong) > 1 else 'is'} "
                         f"{wrong[0].dtype} (first: {wrong[0]}), which its dots would run as TF32, not as "
                         f"{wrong[0].dtype}")


# What a config resolver answers instead of a config where a tune timed the library's own op (KernelSpec
# `baseline`: torch.matmul's cuBLAS, SDPA) faster than its winner, side by side: rooftune's PyTorch ops then
# run the library's op for that shape (kernels/ops.py; tuner/pytorch/ops.py decides).
LIBRARY_ROUTE = "library"


class UnknownKernelError(ValueError):
    """A kernel name the registry does not hold."""


def kernel_spec(name: str) -> KernelSpec:
    if name not in KERNELS:
        raise UnknownKernelError(f"unknown kernel {name!r}; expected one of {', '.join(KERNELS)}")
    return KERNELS[name]


def kernel_of(shape) -> KernelSpec:
    """The registered kernel whose shape type `shape` is."""
    for spec in KERNELS.values():
        if isinstance(shape, spec.shape_type):
            return spec
    raise UnknownKernelError(f"no registered kernel takes a {type(shape).__name__}")
