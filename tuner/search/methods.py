"""The methods `rooftune eval` compares, by kernel: the product (`rooftune`) and every baseline strategy."""

from __future__ import annotations

from rooftune.candidates import Config
from rooftune.candidates.tutorial import param_names, tutorial_configs
from rooftune.tuner.search.external import Unavailable, external_gemm_methods, unavailable_gemm_methods
from rooftune.tuner.search.strategies import (
    RANDOM_SEEDS,
    TUTORIAL_MIN_RECORDED,
    model_order,
    random_order,
    rooftune_strategy,
    static_attention,
    static_list,
    tutorial,
)
from rooftune.tuner.search.vllm import unavailable_vllm_methods, vllm_default, vllm_shipped


def gemm_eval_methods(records, seeds=RANDOM_SEEDS, residual=None, static: list[Config] | None = None,
                      profile=None) -> dict:
    """The methods `rooftune eval gemm` compares: `rooftune` (the product: model + residual + search),
    `model` (model order alone), `static` (a list learned on training data, where one is given),
    `random` (one strategy per seed, each summarized, summaries averaged), and `tutorial` where every
    shape recorded most of the tutorial's configs (the probe; a rooftune dataset whose shapes carry the
    tutorial's configs outside the space); not where some shapes lack them (an AutoHeuristic log holds
    one or two), where the method would mostly measure unrecorded configs, as failures. Then the
    outside libraries' baselines whose optional extra is installed (tuner/search/external.py: `tpe`, `nvmmh`, the
    latter where it knows `profile`'s GPU)."""
    methods: dict = {"rooftune": rooftune_strategy(residual), "model": model_order}
    if static:
        methods["static"] = static_list(static)
    methods["random"] = [random_order(seed) for seed in seeds]
    tutorial_set = set(tutorial_configs(param_names(records[0].lookup()) if records else ()))
    fewest = min((len(tutorial_set & set(r.lookup())) for r in records), default=0)
    if records and fewest >= TUTORIAL_MIN_RECORDED * len(tutorial_set):
        methods["tutorial"] = tutorial
    methods.update(external_gemm_methods(profile=profile))
    return methods


def attention_eval_methods(records, seeds=RANDOM_SEEDS, residual=None, static: list[Config] | None = None) -> dict:
    """The methods `rooftune eval attention` compares: `rooftune` (model + residual, where one applies,
    + search), `model`, `random` (averaged over seeds) and `static`: the list learned on train where
    one is given (as for GEMM), else the tutorial-style list."""
    return {"rooftune": rooftune_strategy(residual), "model": model_order,
            "random": [random_order(seed) for seed in seeds],
            "static": static_list(static) if static else static_attention}


def moe_eval_methods(records, seeds=RANDOM_SEEDS, residual=None, static: list[Config] | None = None,
                     tables=None) -> dict:
    """The methods `rooftune eval moe` compares: `rooftune`, `model`, `static` (the list learned on train, where
    a fitted residual carries one, as for GEMM), `random` (averaged over seeds), and vLLM's own choices:
    `vllm-shipped` (its table for the GPU where it ships one, looked up at the nearest M, else its default rule,
    as vLLM runs) and `vllm-default` (its rule for a missing table). `tables`: vLLM's tables (default: the
    shipped H200 ones)."""
    methods: dict = {"rooftune": rooftune_strategy(residual), "model": model_order}
    if static:
        methods["static"] = static_list(static)
    methods["random"] = [random_order(seed) for seed in seeds]
    methods["vllm-shipped"] = vllm_shipped(tables)
    methods["vllm-default"] = vllm_default()
    return methods


def moe_fp8_eval_methods(records, seeds=RANDOM_SEEDS, residual=None, static: list[Config] | None = None,
                         tables=None) -> dict:
    """The methods `rooftune eval moe-fp8` compares: MoE's (`moe_eval_methods`), vLLM's read from its FP8 tables
    (`dtype=fp8_w8a8[,block_shape=[128,128]]`; its FP8 default rule is not modelled, so where a layer has no shipped
    table `unavailable_methods` leaves them out)."""
    return moe_eval_methods(records, seeds, residual, static, tables)


def unavailable_methods(spec, profile, records=()) -> dict[str, Unavailable]:
    """The methods `rooftune eval` would compare that cannot run here, with why: left out of the comparison, and an
    error where asked for by name. The outside-library ones (`spec.external_methods`: a library not installed, or
    not knowing `profile`'s GPU), and vLLM's where some shape of `records` has neither a shipped table for
    `profile`'s GPU nor a default rule modelled here (an FP8 layer without a table)."""
    missing = {m: why for m, why in unavailable_gemm_methods(profile).items() if m in spec.external_methods}
    missing.update(unavailable_vllm_methods(records, profile))
    return missing
