"""Fused-MoE tables scored by the layer's time on recorded data: rooftune's tables replayed (`tune moe --gemm both`
and `split` with the recorded measurer), vLLM's shipped table and its default rule, and any table as written; bf16
and FP8 layers alike (the `layers` of both MoE families)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping

from rooftune.candidates import Config
from rooftune.candidates.families import table_dtype_of
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.scoring.layers import (
    LayerKey,
    LayerScore,
    best_single,
    layer_label,
    layer_records,
    score_layer,
    split_gain,
)
from rooftune.eval.scoring.replay import RecordsMeasurer
from rooftune.hwprofiles import HardwareProfile
from rooftune.tuner.llm.moe_tables import lookup, shipped_tables
from rooftune.tuner.llm.moe_tune import tune_moe_table
from rooftune.tuner.search.vllm import as_candidate, vllm_config, vllm_default_config

TABLE_METHODS = ("rooftune", "rooftune-split", "vllm-shipped", "vllm-default")
Pair = dict[str, ShapeRecords]


def replayed_tables(layer: LayerKey, by_m: dict[int, Pair], profile: HardwareProfile, budget: int, residual,
                    gemm: str) -> tuple[dict[int, Config], dict[int, Config]]:
    """`tune moe --gemm {gemm}` replayed on one layer's records (every recorded token count): its up table and
    its down table (the up table again with --gemm both, whose one entry serves both GEMMs)."""
    experts, topk, hidden, n, _ = layer
    dtype = table_dtype_of(next(iter(by_m.values()))["gate_up"].shape)
    measurer = RecordsMeasurer([r for pair in by_m.values() for r in pair.values()])
    tuned = tune_moe_table(experts, topk, hidden, n, list(by_m), profile, budget, gemm=gemm, dtype=dtype.dtype,
                           block_shape=dtype.block_shape, residual=residual,
                           measurer_for=lambda kernel: contextlib.nullcontext(measurer))
    up = tuned.table()
    return up, (tuned.down_table() if gemm == "split" else up)


def _as_run(pair: Pair, up: Config, down: Config) -> dict[str, Config]:
    """What each GEMM runs for a table's entries: its twin, else the nearest legal config (vllm.py's rule)."""
    return {g: as_candidate(pair[g].shape, c, pair[g].candidate_configs()) for g, c in (("gate_up", up),
                                                                                        ("down", down))}


def table_entry(by_m: dict[int, Pair], up: Mapping[int, Config], down: Mapping[int, Config] | None = None):
    """The entry function of `score_layer` for written tables: each GEMM's config at the nearest M key (vLLM's
    and SGLang's lookup); `down` the `_down` table, else the up table serves both."""
    def entry(m: int) -> dict[str, Config] | None:
        if not up:
            return None
        return _as_run(by_m[m], lookup(up, m), lookup(down or up, m))
    return entry


def vllm_entry(by_m: dict[int, Pair], profile: HardwareProfile, tables, default: bool):
    """vLLM's entry for both GEMMs: its shipped table at the nearest M, else (or with `default`) its default rule."""
    def entry(m: int) -> dict[str, Config]:
        shape = by_m[m]["gate_up"].shape
        config = vllm_default_config(shape) if default else vllm_config(shape, profile, tables)
        return _as_run(by_m[m], config, config)
    return entry


def score_tables(records: list[ShapeRecords], profile: HardwareProfile, budget: int, residual,
                 methods=TABLE_METHODS) -> dict[str, list[LayerScore]]:
    """Per method, each recorded layer's `LayerScore` (layers with both GEMMs recorded at some token count)."""
    layers = layer_records(records)
    tables = shipped_tables()
    out: dict[str, list[LayerScore]] = {m: [] for m in methods}
    for layer, by_m in layers.items():
        if not by_m:
            continue
        for method in methods:
            if method.startswith("rooftune"):
                up, down = replayed_tables(layer, by_m, profile, budget, residual,
                                           "split" if method == "rooftune-split" else "both")
                entry = table_entry(by_m, up, down)
            else:
                entry = vllm_entry(by_m, profile, tables, default=method == "vllm-default")
            out[method].append(score_layer(layer, by_m, entry))
    return out


def layer_summary(scores: dict[str, list[LayerScore]], records: list[ShapeRecords]) -> dict:
    """The JSON-able summary: per layer what separate configs can gain (`split_gain`); per method and layer the
    mean and worst entry against the best single config and against the best shared-BLOCK_SIZE_M pair; and with
    rooftune-split its layer time against the best single config's, as a geometric mean over the layers where
    separate configs gain (`split_vs_single`)."""
    layers = {k: by_m for k, by_m in layer_records(records).items() if by_m}
    gains = {k: split_gain(by_m) for k, by_m in layers.items()}
    summary = {"layers": {layer_label(k): {"split_gain": g} for k, g in gains.items()},
               "methods": {method: {layer_label(s.layer): {"mean": s.mean, "worst": s.worst, "split_mean": s.split_mean,
                                                           "split_worst": s.split_worst} for s in per_layer}
                           for method, per_layer in scores.items()}}
    if "rooftune-split" in scores:
        logs = [math.log(sum(best_single(pair)[1] for pair in layers[s.layer].values()) / s.time_us)
                for s in scores["rooftune-split"] if gains[s.layer] > 1.0 and math.isfinite(s.time_us)]
        summary["split_vs_single"] = {"layers": len(logs),
                                      "geomean": math.exp(sum(logs) / len(logs)) if logs else math.nan}
    return summary
