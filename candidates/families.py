"""The kernel families: one frozen record per tunable kernel (`KernelSpec`) that every layer reads.

A family's record holds what every layer needs of it: its shape type, parser, list reader, file-name key and
dataset header, published space and extras, library baseline, prose label and help text, and, as
"module:attribute" paths, each layer's own implementation (its cost model and residual features in roofline/,
its Triton module, bench and prebuild jobs in kernels/, its report and backfill in eval/, its eval methods and
table writer in tuner/). A path is resolved (`load_implementation`) only by the layer that owns it, so this
module imports none of them and the one-way imports hold; tests/candidates/test_families.py checks both, and
walks every layer for every registered family. A new family is its own files in each layer plus one entry
in `KERNELS`; `space`, `explain`, `eval`, `sweep`, `fit` and `tune` then know it by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from rooftune.candidates.attention_space import ATTENTION_SPACE
from rooftune.candidates.config import Config
from rooftune.candidates.gemm_space import GEMM_SPACE
from rooftune.candidates.moe_fp8_space import MOE_FP8_SPACE, fp8_twin
from rooftune.candidates.moe_space import MOE_SPACE, group_twin
from rooftune.candidates.shapes import (
    FP8_BLOCK,
    FP8_VLLM_DTYPE,
    AttentionShape,
    GemmShape,
    MoeFp8Shape,
    MoeShape,
    ShapeError,
    attention_dims,
    attention_shape_id,
    gemm_dims,
    gemm_shape_id,
    load_attention_shapes,
    load_moe_fp8_shapes,
    load_moe_shapes,
    load_shapes,
    moe_dims,
    moe_fp8_shape_id,
    moe_shape_id,
    parse_attention_shape,
    parse_gemm_shape,
    parse_moe_fp8_shape,
    parse_moe_shape,
)
from rooftune.candidates.space import SearchSpace
from rooftune.candidates.tutorial import gemm_baseline_aliases, gemm_baseline_extras

# Any registered family's shape (a family's `shape_type`).
Shape: TypeAlias = GemmShape | AttentionShape | MoeShape | MoeFp8Shape


def no_extras(shape, configs: list[Config]) -> list[Config]:
    return []


def no_aliases(shape, recorded) -> dict[Config, Config]:
    return {}


def same_config(shape, config: Config) -> Config:
    return config


@dataclass(frozen=True)
class TableDtype:
    """One dtype of a serving engine's layer tables (vLLM's fused-MoE config files) that a family's shapes are
    tuned under: `dtype` the word `tune moe --dtype` takes (vLLM's `benchmark_moe.py --dtype` word for quantized
    weights, 'fp8_w8a8'; the activations' dtype for unquantized ones, 'bf16'), `file_dtype` the one the table's file
    name carries (vLLM's `get_config_dtype_str`: None for bf16 and fp16), `block_shape` the weights' scale block
    ([N, K]; None for per-tensor scales or none), and `options`, the shape fields that make a shape of this dtype."""

    dtype: str
    file_dtype: str | None = None
    block_shape: tuple[int, int] | None = None
    options: tuple[tuple[str, object], ...] = ()

    @property
    def label(self) -> str:
        """'bf16', 'fp8_w8a8', 'fp8_w8a8,block_shape=[128,128]'."""
        return self.dtype + (f",block_shape=[{self.block_shape[0]},{self.block_shape[1]}]" if self.block_shape else "")


@dataclass(frozen=True)
class KernelSpec:
    """One kernel family. Its data: `name` (the CLI's and the manifests' word), `label` (its name in prose),
    `shape_type` and `parse(text, **options)` with the options the CLI passes it (`parse_options`, each a
    `--NAME` option), a shape in its `shape_form` (`example`) and the `--shape` help text; the reader of a
    sweep's shape list (`load_list(path)`), the shape's file-name key (`shape_id`) and its `dims` as `parse`
    reads them; a dataset header's fields (`header_keys`, the first naming the family; `header_optional`
    written where they differ from the shape built without them); the published `space`, `extras(shape, legal
    configs)` -> configs outside the space timed beside it (rows with in_space = 0) and `aliases(shape,
    recorded)` -> those of them a recorded config runs as; the library baseline's key and its name in prose;
    the config parameters the kernel takes as run-time integers (`runtime_params`: configs that differ only in
    them compile once); the dtypes its Triton kernel computes as named (`dtypes`: its dots leave the input
    precision at Triton's default, TF32, so fp32 inputs would be timed as TF32 under the fp32 name;
    `check_sweep_dtypes` refuses them); its parameters' names in the GEMM's vocabulary (`gemm_names`: (own, GEMM) pairs, for
    the search's embedding); the shape fields a cross-validation fold keeps together (`fold_keys`); the
    file of the H200 probe folder that holds it (`probe_file`); the PyTorch ops that run it (`ops`).

    Its layers' implementations, "module:attribute" paths resolved with `load_implementation` by the layer
    named: `module` (kernels: the Triton kernel's module), `model` (roofline: its `CostModel`), `features`
    (roofline: its residual `FeatureSet`), `bench` (kernels: its `Bench` class), `jobs` (kernels: the prebuild's
    binary jobs), `report` (eval: its `ReportKind`), `backfill` (eval, where it has one), `eval_methods` (tuner:
    the methods `rooftune eval` compares, so a strategy that knows one family is listed only there) and `table`
    (tuner: a tuned layer's entry in a serving engine's config table, where it has one) and `layers` (tuner: the
    scorer of an engine's tables by the layer's time, where an engine runs one entry for several of the family's
    shapes, as vLLM runs one fused-MoE config for both GEMMs). `external_methods`: the eval methods that come from an
    outside library (an extra), left out with a note where it cannot run; `route` (roofline: its untuned route's
    features, where a PyTorch op runs it) and `neighbours` (roofline: a shape's coordinates for the neighbour vote of
    the zero-trial pick and the search's prior, `f(shape, profile) -> array`, where the family has one: its CV on
    train gained). `twin(shape, config)`: the config the space holds for one the kernel runs
    alike that its legality drops as a twin (an engine's table may name either; fused MoE: the GROUP_SIZE_M twin, FP8's
    block BLOCK_SIZE_K too). `table_dtypes`: the dtypes of an engine's layer tables this family's shapes are tuned
    under (`TableDtype`; `tune moe --dtype`), where it has them."""

    name: str
    label: str
    shape_type: type
    parse: Callable[..., Shape]
    parse_options: tuple[str, ...]
    example: str
    shape_form: str
    shape_help: str
    load_list: Callable[..., list]
    shape_id: Callable[..., str]
    dims: Callable[..., str]
    header_keys: tuple[str, ...]
    space: SearchSpace
    baseline: str
    baseline_label: str
    module: str
    model: str
    features: str
    bench: str
    jobs: str
    report: str
    eval_methods: str
    header_optional: tuple[str, ...] = ()
    extras: Callable[[object, list[Config]], list[Config]] = no_extras
    aliases: Callable[..., dict[Config, Config]] = no_aliases
    runtime_params: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("bf16", "fp16")
    gemm_names: tuple[tuple[str, str], ...] = ()
    fold_keys: tuple[str, ...] = ()
    probe_file: str | None = None
    ops: str | None = None
    backfill: str | None = None
    table: str | None = None
    layers: str | None = None
    external_methods: tuple[str, ...] = ()
    route: str | None = None
    neighbours: str | None = None
    twin: Callable[..., Config] = same_config
    table_dtypes: tuple[TableDtype, ...] = ()

    def fold_group(self, shape) -> tuple | None:
        """What a cross-validation fold keeps together: the shape's `fold_keys` (fused MoE: its layer, as its
        held-out list is split by model), or None where each shape stands alone."""
        return tuple(getattr(shape, k) for k in self.fold_keys) if self.fold_keys else None


# The layer each implementation field belongs to: its path points into that layer, which alone resolves it.
IMPLEMENTATION_LAYERS = {"module": "kernels", "model": "roofline", "features": "roofline", "bench": "kernels",
                         "jobs": "kernels", "report": "eval", "backfill": "eval", "eval_methods": "tuner",
                         "table": "tuner", "layers": "tuner", "route": "roofline",
                         "neighbours": "roofline"}


def load_implementation(path: str):
    """The object a family's "module:attribute" path names (a bare module path: the module), imported on
    first use. Call it only from the layer the field belongs to (`IMPLEMENTATION_LAYERS`)."""
    module, _, attribute = path.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


KERNELS: dict[str, KernelSpec] = {
    # SPLIT_K is a run-time integer of the GEMM too, but SPLIT_K > 1 adds the reduction's binary.
    "gemm": KernelSpec(
        "gemm", "GEMM", GemmShape, parse_gemm_shape, ("layout", "dtype"), "4096x4096x4096", "MxNxK",
        "MxNxK: C[M,N] = A[M,K] @ B", load_shapes, gemm_shape_id, gemm_dims, ("m", "n", "k", "layout", "dtype"),
        GEMM_SPACE, "cublas", "cuBLAS", "rooftune.kernels.gemm", "rooftune.roofline.gemm:GEMM_MODEL",
        "rooftune.roofline.residual:GEMM_FEATURES", "rooftune.kernels.harness.benches:GemmBench",
        "rooftune.kernels.harness.prebuild:gemm_jobs", "rooftune.eval.scoring.reports:GEMM_REPORT",
        "rooftune.tuner.search.methods:gemm_eval_methods", extras=gemm_baseline_extras,
        aliases=gemm_baseline_aliases, runtime_params=("GROUP_M",), probe_file="gemm_probe.csv.gz",
        ops="matmul, rooftune.linear", backfill="rooftune.eval.sweeping.backfill:backfill_gemm",
        external_methods=("tpe", "nvmmh"), route="rooftune.roofline.route:GEMM_ROUTE",
        neighbours="rooftune.roofline.neighbours:gemm_point", table="rooftune.tuner.llm.tables:gemm_table_entry"),
    "attention": KernelSpec(
        "attention", "attention", AttentionShape, parse_attention_shape, ("dtype",), "1x32x4096x128", "BxHxSxD[xKV]",
        "BxHxSxD (batch, heads, seq, head_dim), or BxHxSxDxKV with KV key/value heads (grouped-query)",
        load_attention_shapes, attention_shape_id, attention_dims,
        ("batch", "heads", "seq", "head_dim", "causal", "dtype"), ATTENTION_SPACE, "sdpa", "SDPA",
        "rooftune.kernels.attention", "rooftune.roofline.attention:ATTENTION_MODEL",
        "rooftune.roofline.residual:ATTENTION_FEATURES", "rooftune.kernels.harness.benches:AttentionBench",
        "rooftune.kernels.harness.prebuild:attention_jobs", "rooftune.eval.scoring.reports:ATTENTION_REPORT",
        "rooftune.tuner.search.methods:attention_eval_methods", header_optional=("kv_heads",),
        probe_file="attention_probe.csv.gz", ops="attention",
        backfill="rooftune.eval.sweeping.backfill:backfill_attention_routes",
        route="rooftune.roofline.route:ATTENTION_ROUTE", neighbours="rooftune.roofline.neighbours:attention_point"),
    # One GEMM of a fused MoE layer (gate_up or down) at one token count, vLLM's kernel form and grid; its
    # baseline is torch's grouped GEMM over the same routed rows (kernels/harness/benches.py MoeBench).
    "moe": KernelSpec(
        "moe", "fused-MoE", MoeShape, parse_moe_shape, ("gemm", "dtype"), "128x8x2048x768x64",
        "ExTOPKxHIDDENxINTERMEDIATExTOKENS", "ExTOPKxHIDDENxINTERMEDIATExTOKENS: experts, top-k, hidden size, "
        "intermediate size per tensor-parallel shard, tokens (vLLM's M)", load_moe_shapes, moe_shape_id, moe_dims,
        ("experts", "topk", "hidden", "intermediate", "tokens", "gemm", "dtype", "seed"), MOE_SPACE, "grouped_mm",
        "torch._grouped_mm", "rooftune.kernels.moe", "rooftune.roofline.moe:MOE_MODEL",
        "rooftune.roofline.residual:MOE_FEATURES", "rooftune.kernels.harness.benches:MoeBench",
        "rooftune.kernels.harness.prebuild:moe_jobs", "rooftune.eval.scoring.reports:MOE_REPORT",
        "rooftune.tuner.search.methods:moe_eval_methods", runtime_params=("GROUP_SIZE_M",),
        # The fused-MoE space names its tiles as vLLM does; they take the GEMM's coordinates.
        gemm_names=(("BLOCK_SIZE_M", "BLOCK_M"), ("BLOCK_SIZE_N", "BLOCK_N"), ("BLOCK_SIZE_K", "BLOCK_K")),
        fold_keys=("experts", "topk", "hidden", "intermediate"), twin=group_twin,
        table_dtypes=(TableDtype("bf16", options=(("dtype", "bf16"),)), TableDtype("fp16", options=(("dtype", "fp16"),))),
        layers="rooftune.tuner.llm.moe_eval:score_tables"),
    # The same fused-MoE GEMM on FP8 e4m3 weights and activations (vLLM's `dtype=fp8_w8a8` tables), one family
    # for both scale layouts: the shape's `quant` ('w8a8' per tensor, 'block' 128×128) is data the kernel, the
    # legality and the model read, as the sizes are, so neither variant is a branch of any other layer.
    "moe-fp8": KernelSpec(
        "moe-fp8", "FP8 fused-MoE", MoeFp8Shape, parse_moe_fp8_shape, ("gemm", "quant"), "256x8x7168x256x64",
        "ExTOPKxHIDDENxINTERMEDIATExTOKENS", "ExTOPKxHIDDENxINTERMEDIATExTOKENS: experts, top-k, hidden size, "
        "intermediate size per tensor-parallel shard, tokens (vLLM's M); --quant picks the scales",
        load_moe_fp8_shapes, moe_fp8_shape_id, moe_dims,
        ("quant", "experts", "topk", "hidden", "intermediate", "tokens", "gemm", "seed"), MOE_FP8_SPACE,
        "grouped_mm", "torch._grouped_mm on dequantized bf16 weights", "rooftune.kernels.moe_fp8",
        "rooftune.roofline.moe_fp8:MOE_FP8_MODEL", "rooftune.roofline.residual:MOE_FP8_FEATURES",
        "rooftune.kernels.harness.benches:MoeFp8Bench", "rooftune.kernels.harness.prebuild:moe_fp8_jobs",
        "rooftune.eval.scoring.reports:MOE_REPORT", "rooftune.tuner.search.methods:moe_fp8_eval_methods",
        runtime_params=("GROUP_SIZE_M",), dtypes=("fp8e4m3",),
        gemm_names=(("BLOCK_SIZE_M", "BLOCK_M"), ("BLOCK_SIZE_N", "BLOCK_N"), ("BLOCK_SIZE_K", "BLOCK_K")),
        fold_keys=("experts", "topk", "hidden", "intermediate", "quant"), twin=fp8_twin,
        table_dtypes=(TableDtype(FP8_VLLM_DTYPE, FP8_VLLM_DTYPE, options=(("quant", "w8a8"),)),
                      TableDtype(FP8_VLLM_DTYPE, FP8_VLLM_DTYPE, FP8_BLOCK, (("quant", "block"),))),
        table="rooftune.tuner.llm.moe_tables:moe_fp8_table_entry", layers="rooftune.tuner.llm.moe_eval:score_tables"),
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


def kernel_of_header(fields: Mapping) -> KernelSpec:
    """The registered kernel whose dataset header `fields` are: of those whose first header key they hold, the one
    with the most of its header keys there (an FP8 MoE header holds MoE's keys and its own `quant` first)."""
    named = [spec for spec in KERNELS.values() if spec.header_keys[0] in fields]
    if named:
        return max(named, key=lambda spec: sum(k in fields for k in spec.header_keys))
    raise UnknownKernelError(f"no registered kernel has a shape with fields {', '.join(map(str, fields))}")


def shape_id(shape) -> str:
    """File-name key of a shape, its family's `shape_id`: GEMM '4096x4096x4096-nk-bf16', attention
    '4x32x4096x128-causal-bf16', MoE 'moe-128x8x2048x768-m64-gate_up-bf16'."""
    return kernel_of(shape).shape_id(shape)


def shape_header(shape) -> dict:
    """A dataset header's "shape": the family's `header_keys`, and each of its `header_optional` where the
    shape differs from the one built without it (attention: kv_heads only where it is not heads)."""
    spec = kernel_of(shape)
    fields = {k: getattr(shape, k) for k in spec.header_keys}
    bare = spec.shape_type(**fields)
    fields.update({k: getattr(shape, k) for k in spec.header_optional if getattr(shape, k) != getattr(bare, k)})
    return fields


def header_shape(fields: Mapping):
    """The shape a dataset header's "shape" fields rebuild (`shape_header`)."""
    return kernel_of_header(fields).shape_type(**fields)


def table_dtype_of(shape) -> TableDtype:
    """The engine-table dtype of `shape` (its family's `table_dtypes` entry whose options the shape holds)."""
    spec = kernel_of(shape)
    for t in spec.table_dtypes:
        if all(getattr(shape, field) == value for field, value in t.options):
            return t
    raise UnknownKernelError(f"the {spec.name} family names no engine table dtype for {shape}")


def layer_family(dtype: str | None = None, block_shape: tuple[int, int] | None = None) -> tuple[KernelSpec, TableDtype]:
    """The family and table dtype of a layer tuned as `dtype` (a `TableDtype.dtype` word; None: the one whose
    entries take `block_shape`, or the first registered without one, bf16) with the weights' scale block
    `block_shape` (None: none, or per-tensor scales). A ShapeError for a dtype no family tunes, or a block shape that
    dtype's space does not take (the FP8 space models 128×128 blocks only, vLLM's block_shape=[128,128])."""
    offered = [(spec, t) for spec in KERNELS.values() for t in spec.table_dtypes]
    words = list(dict.fromkeys(t.dtype for _, t in offered))
    if dtype is None:
        dtype = next((t.dtype for _, t in offered if block_shape is not None and t.block_shape == block_shape),
                     words[0] if block_shape is None else None)
    block = "" if block_shape is None else ",".join(map(str, block_shape))
    if dtype is None:
        blocks = sorted({",".join(map(str, t.block_shape)) for _, t in offered if t.block_shape})
        raise ShapeError(f"--block-shape {block}: no tuned dtype takes that weight-scale block (only "
                         f"{' or '.join(blocks)}, vLLM's block_shape=[128,128] of FP8 checkpoints)")
    if dtype not in words:
        raise ShapeError(f"--dtype must be one of {', '.join(words)}, got {dtype!r}")
    kinds = [(spec, t) for spec, t in offered if t.dtype == dtype]
    match = next(((spec, t) for spec, t in kinds if t.block_shape == block_shape), None)
    if match is not None:
        return match
    blocks = [",".join(map(str, t.block_shape)) for _, t in kinds if t.block_shape]
    if not blocks:
        raise ShapeError(f"--block-shape {block}: {dtype} weights have no scale blocks (a block shape is an FP8 "
                         f"checkpoint's: --dtype fp8_w8a8 --block-shape 128,128)")
    raise ShapeError(f"--block-shape {block}: {dtype} layers are tuned with per-tensor scales (no --block-shape) or "
                     f"--block-shape {' or '.join(blocks)}: the FP8 space's block rule and its kernel's scale "
                     f"layout are those of vLLM's block_shape=[128,128]")
