"""vLLM's own choice for a fused-MoE shape, replayed as strategies: its shipped table for the GPU looked up as
vLLM looks it up, and its default rule for a layer without a table.

Each measures one config whatever the budget (vLLM runs one). The config is the space's form of vLLM's:
its GROUP_SIZE_M twin (`group_twin`: the same binary, the same program order), or where the space's legality
drops it as dominated (a tile taller than any expert's rows, wider than N or K) its nearest legal config
(`nearest_legal`), which replay can time; the shipped H200 tables and the default rule need neither on the
lists' shapes (tests/candidates/test_moe_space.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from rooftune.candidates import Config, MoeShape
from rooftune.candidates.moe_space import group_twin
from rooftune.hwprofiles import HardwareProfile
from rooftune.tuner.llm.moe_tables import default_config, lookup, shipped_tables, table_file_name
from rooftune.tuner.search.strategies import Strategy, measure_in_order, nearest_legal


def vllm_table(shape: MoeShape, profile: HardwareProfile, tables: Mapping[str, Mapping[int, Config]]
               ) -> Mapping[int, Config] | None:
    """The table vLLM reads for `shape`'s layer on `profile`'s GPU (E, the shard's intermediate size N, the device
    name; unquantized), or None where it ships none."""
    return tables.get(table_file_name(shape.experts, shape.intermediate, profile.name))


def vllm_config(shape: MoeShape, profile: HardwareProfile, tables: Mapping[str, Mapping[int, Config]]) -> Config:
    """What vLLM runs for `shape`: its table's entry for the M key nearest the tokens (both GEMMs share it), else
    its default rule (`default_config`)."""
    table = vllm_table(shape, profile, tables)
    if table is not None:
        return lookup(table, shape.tokens)
    return default_config(shape.tokens, shape.experts, shape.intermediate, shape.hidden, shape.topk)


def as_candidate(shape: MoeShape, config: Config, candidates: list[Config]) -> Config:
    """`config` as the space holds it for `shape`: its GROUP_SIZE_M twin, else the nearest legal candidate."""
    twin = group_twin(shape, config)
    return twin if twin in set(candidates) else nearest_legal([twin], candidates)[0]


def _one_config(choose, name: str) -> Strategy:
    # A fused-MoE method: `moe_eval_methods` lists it.
    def strategy(shape, candidates, measure, budget, profile):
        return measure_in_order([as_candidate(shape, choose(shape, profile), candidates)], measure, budget)

    strategy.__name__ = name
    return strategy


def vllm_shipped(tables: Mapping[str, Mapping[int, Config]] | None = None) -> Strategy:
    """What vLLM runs on this GPU: its shipped table (default: the H200 tables of datasets/h200/moe/vllm) where
    it has one for the layer, else its default rule, as vLLM falls back."""
    tables = shipped_tables() if tables is None else tables
    return _one_config(lambda shape, profile: vllm_config(shape, profile, tables), "vllm-shipped")


def vllm_default() -> Strategy:
    """vLLM's default rule for a layer without a table."""
    return _one_config(lambda shape, profile: default_config(shape.tokens, shape.experts, shape.intermediate,
                                                             shape.hidden, shape.topk), "vllm-default")
