"""What can be chosen: shapes, configs, the published search spaces and their legality."""

from rooftune.candidates.attention_space import ATTENTION_SPACE
from rooftune.candidates.config import Config, ConfigError, configs_to_columns, parse_config
from rooftune.candidates.gemm_space import GEMM_SPACE
from rooftune.candidates.families import (
    KERNELS,
    LIBRARY_ROUTE,
    KernelSpec,
    Shape,
    UnknownKernelError,
    header_shape,
    kernel_of,
    kernel_spec,
    load_implementation,
    shape_header,
    shape_id,
)
from rooftune.candidates.moe_fp8_space import MOE_FP8_SPACE
from rooftune.candidates.moe_space import MOE_SPACE
from rooftune.candidates.records import MeasureBatch, Measurer, ShapeRecords, Trial
from rooftune.candidates.shapes import (
    AttentionShape,
    GemmShape,
    MoeFp8Shape,
    MoeShape,
    ShapeError,
    parse_attention_shape,
    parse_gemm_shape,
    parse_moe_shape,
)
from rooftune.candidates.space import (
    LegalSet,
    NoLegalConfigError,
    SearchSpace,
    check_in_grid,
    config_legality,
    illegal_mask,
    legal_configs,
    no_legal_config,
)

SPACES = {name: spec.space for name, spec in KERNELS.items()}

__all__ = [
    "ATTENTION_SPACE", "GEMM_SPACE", "KERNELS", "MOE_FP8_SPACE", "MOE_SPACE", "SPACES", "AttentionShape", "Config",
    "ConfigError", "GemmShape", "MoeFp8Shape", "MoeShape",
    "KernelSpec", "LIBRARY_ROUTE", "LegalSet", "Shape", "UnknownKernelError", "header_shape", "kernel_of", "kernel_spec",
    "load_implementation", "MeasureBatch", "Measurer", "NoLegalConfigError", "SearchSpace", "ShapeError",
    "ShapeRecords", "Trial", "check_in_grid", "config_legality", "configs_to_columns", "shape_header", "shape_id",
    "illegal_mask", "legal_configs", "no_legal_config", "parse_attention_shape", "parse_config", "parse_gemm_shape",
    "parse_moe_shape",
]
