"""Search strategies: plain functions that propose configs to `measure` and return the trials made."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import numpy as np

from rooftune.candidates import AttentionShape, Config, GemmShape, Trial, configs_to_columns
from rooftune.candidates.baselines import tutorial_configs
from rooftune.hwprofiles import HardwareProfile

Measure = Callable[[Config], Trial]
# strategy(shape, candidates, measure, budget, profile) -> the trials it made, in order
Strategy = Callable[[object, list[Config], Measure, int, HardwareProfile], list[Trial]]

RANDOM_SEEDS = tuple(range(10))
# Share of the tutorial's configs every shape of a dataset must have recorded for the tutorial method.
TUTORIAL_MIN_RECORDED = 0.5


def best_trial(trials: list[Trial]) -> Trial | None:
    """The fastest successful trial, or None."""
    ok = [t for t in trials if t.ok]
    return min(ok, key=lambda t: t.time_us) if ok else None


def _measure_in_order(configs: Iterable[Config], measure: Measure, budget: int) -> list[Trial]:
    # islice: a strategy's order may be lazy over the whole space; only the first `budget` are drawn.
    return [measure(c) for c in itertools.islice(configs, max(budget, 0))]


def model_ranking(shape, candidates: list[Config], profile: HardwareProfile) -> list[tuple[Config, float]]:
    """The candidates the model judges possible on `profile` (e.g. shared memory within the per-block
    limit), predicted fastest first (stable on ties), each with its predicted time in µs."""
    from rooftune.roofline import predict

    if not candidates:
        return []
    breakdown = predict(shape, configs_to_columns(candidates), profile)
    order = np.argsort(breakdown.time_us, kind="stable")
    return [(candidates[i], float(breakdown.time_us[i])) for i in order if breakdown.fits[i]]


def model_order(shape, candidates: list[Config], measure: Measure, budget: int,
                profile: HardwareProfile) -> list[Trial]:
    """Measure the `budget` candidates the model predicts fastest (`model_ranking`)."""
    return _measure_in_order((c for c, _ in model_ranking(shape, candidates, profile)), measure, budget)


def random_order(seed: int) -> Strategy:
    """A strategy that measures `budget` candidates drawn uniformly without replacement."""

    def strategy(shape, candidates, measure, budget, profile):
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(candidates))
        return _measure_in_order((candidates[i] for i in order), measure, budget)

    strategy.__name__ = f"random_order({seed})"
    return strategy


def tutorial(shape, candidates: list[Config], measure: Measure, budget: int, profile: HardwareProfile) -> list[Trial]:
    """The Triton tutorial's 8 GEMM configs in their listed order (candidates are ignored)."""
    if not isinstance(shape, GemmShape):
        raise TypeError("the tutorial strategy only knows GEMM configs")
    return _measure_in_order(tutorial_configs(), measure, budget)


def gemm_eval_methods(records, seeds=RANDOM_SEEDS) -> dict:
    """The methods `rooftune eval gemm` compares: `model`, `random` (one strategy per seed, averaged),
    and `tutorial` where every shape recorded most of the tutorial's configs (the probe; a rooftune
    dataset whose shapes carry the tutorial's configs outside the space). Not where some shapes lack
    them (an AutoHeuristic log holds one or two; a dataset swept before the extras and not yet fully
    backfilled), where the method would mostly measure unrecorded configs, as failures."""
    methods: dict = {"model": model_order, "random": [random_order(seed) for seed in seeds]}
    tutorial_set = set(tutorial_configs())
    fewest = min((len(tutorial_set & set(r.lookup())) for r in records), default=0)
    if records and fewest >= TUTORIAL_MIN_RECORDED * len(tutorial_set):
        methods["tutorial"] = tutorial
    return methods


# The tutorial-style attention list of the H200 probe's README: BLOCK_M {64, 128} × BLOCK_N {32, 64}
# × num_stages {2, 3, 4} × num_warps {4, 8}, query blocks first-to-last (ORDER 0), in that order.
STATIC_ATTENTION = tuple((bm, bn, stages, warps) for bm in (64, 128) for bn in (32, 64)
                         for stages in (2, 3, 4) for warps in (4, 8))


def static_attention_configs() -> list[Config]:
    """The 24 static attention configs with the attention space's parameter names (ORDER 0)."""
    return [Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, ORDER=0) for bm, bn, s, w in STATIC_ATTENTION]


def static_attention(shape, candidates: list[Config], measure: Measure, budget: int,
                     profile: HardwareProfile) -> list[Trial]:
    """The static attention list in its order (candidates are ignored)."""
    if not isinstance(shape, AttentionShape):
        raise TypeError("the static attention strategy only knows attention configs")
    return _measure_in_order(static_attention_configs(), measure, budget)


def attention_eval_methods(records, seeds=RANDOM_SEEDS) -> dict:
    """The methods `rooftune eval attention` compares: `model`, `random` (averaged over seeds) and
    `static`, the tutorial-style list, as a baseline."""
    return {"model": model_order, "random": [random_order(seed) for seed in seeds], "static": static_attention}
