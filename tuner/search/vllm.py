"""vLLM's own choice for a fused-MoE shape (bf16 or FP8), replayed as strategies: its shipped table for the GPU
looked up as vLLM looks it up (the table of the shape's dtype: `dtype=fp8_w8a8[,block_shape=[128,128]]` for FP8),
and its default rule for a layer without a table (its unquantized one; its FP8 rules are not modelled).

Each measures one config whatever the budget (vLLM runs one). The config is the space's form of vLLM's:
its twin (the family's `twin`: the GROUP_SIZE_M twin, the same binary in the same program order; for FP8 block
scales also BLOCK_SIZE_K 256, which vLLM launches as 128), or where the space's legality drops it as dominated (a
tile taller than any expert's rows, wider than N or K) or out of its grid its nearest legal config
(`nearest_legal`), which replay can time; the shipped bf16 H200 tables and the default rule need neither on the
lists' shapes (tests/candidates/test_moe_space.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from rooftune.candidates import Config, MoeShape, kernel_of
from rooftune.candidates.families import table_dtype_of
from rooftune.hwprofiles import HardwareProfile
from rooftune.tuner.llm.moe_tables import default_config, lookup, shape_table_name, shipped_tables
from rooftune.tuner.llm.tables import TableError
from rooftune.tuner.search.external import Unavailable
from rooftune.tuner.search.strategies import Strategy, measure_in_order, nearest_legal


def vllm_table(shape: MoeShape, profile: HardwareProfile, tables: Mapping[str, Mapping[int, Config]]
               ) -> Mapping[int, Config] | None:
    """The table vLLM reads for `shape`'s layer on `profile`'s GPU (E, the shard's intermediate size N, the device
    name, the weights' dtype and block shape), or None where it ships none."""
    return tables.get(shape_table_name(shape, profile.name))


def vllm_config(shape: MoeShape, profile: HardwareProfile, tables: Mapping[str, Mapping[int, Config]]) -> Config:
    """What vLLM runs for `shape`: its table's entry for the M key nearest the tokens (both GEMMs share it), else
    its default rule (`default_config`: a TableError for a quantized layer, whose rule is not modelled)."""
    table = vllm_table(shape, profile, tables)
    if table is not None:
        return lookup(table, shape.tokens)
    return vllm_default_config(shape)


def vllm_default_config(shape) -> Config:
    """vLLM's default rule for `shape`'s layer (`default_config`, with the dtype its table's name carries)."""
    return default_config(shape.tokens, shape.experts, shape.intermediate, shape.hidden, shape.topk,
                          table_dtype_of(shape).file_dtype)


def as_candidate(shape: MoeShape, config: Config, candidates: list[Config]) -> Config:
    """`config` as the space holds it for `shape`: its twin (the family's `twin`), else the nearest legal candidate."""
    twin = kernel_of(shape).twin(shape, config)
    return twin if twin in set(candidates) else nearest_legal([twin], candidates)[0]


def _one_config(choose, name: str) -> Strategy:
    # A fused-MoE method: `moe_eval_methods` lists it.
    def strategy(shape, candidates, measure, budget, profile):
        return measure_in_order([as_candidate(shape, choose(shape, profile), candidates)], measure, budget)

    strategy.__name__ = name
    return strategy


def vllm_shipped(tables: Mapping[str, Mapping[int, Config]] | None = None) -> Strategy:
    """What vLLM runs on this GPU: its shipped table (default: the H200 tables of datasets/h200/moe/vllm and
    moe_fp8/vllm) where it has one for the layer, else its default rule, as vLLM falls back."""
    tables = shipped_tables() if tables is None else tables
    return _one_config(lambda shape, profile: vllm_config(shape, profile, tables), "vllm-shipped")


def vllm_default() -> Strategy:
    """vLLM's default rule for a layer without a table."""
    return _one_config(lambda shape, profile: vllm_default_config(shape), "vllm-default")


def unavailable_vllm_methods(records, profile: HardwareProfile, tables: Mapping[str, Mapping[int, Config]] | None = None
                             ) -> dict[str, Unavailable]:
    """vLLM's methods that cannot choose for every shape of `records` on `profile`'s GPU, with why: `vllm-default`
    where its rule for a shape's dtype is not modelled (FP8), `vllm-shipped` where a shape's layer also has no stored
    table (`tables`, default the stored H200 ones). Only shapes of families with engine tables (`table_dtypes`)."""
    tables = shipped_tables() if tables is None else tables
    shapes = [r.shape for r in records if kernel_of(r.shape).table_dtypes]
    missing = {}
    for method, choose, why in (
            ("vllm-shipped", lambda s: vllm_config(s, profile, tables),
             lambda s, exc: f"vLLM's {shape_table_name(s, profile.name)} is not stored here and {exc}"),
            ("vllm-default", vllm_default_config, lambda s, exc: str(exc))):
        failed = []
        for shape in shapes:
            try:
                choose(shape)
            except TableError as exc:
                failed.append(f"{shape}: {why(shape, exc)}")
        if failed:
            missing[method] = Unavailable(f"no choice of vLLM's for {len(failed)} of {len(shapes)} shapes (first: "
                                          f"{failed[0]})", True)
    return missing
