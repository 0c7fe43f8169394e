"""Replay evaluation: run a strategy against recorded timings and score its picks per shape."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates import Config, Trial
from rooftune.eval.metrics import spearman, summarize
from rooftune.eval.records import ShapeRecords
from rooftune.hwprofiles import HardwareProfile

NOT_RECORDED = "not recorded in the dataset"
RANDOM_SEEDS = tuple(range(10))
# Share of (shape, tutorial config) pairs a dataset must have recorded for the tutorial method.
TUTORIAL_MIN_RECORDED = 0.5


def recorded_measure(records: ShapeRecords):
    """measure(config) -> the recorded Trial; a config never recorded becomes a failed trial."""
    table = records.lookup()

    def measure(config: Config) -> Trial:
        trial = table.get(config)
        return trial if trial is not None else Trial(config, None, error=NOT_RECORDED)

    return measure


@dataclass(frozen=True)
class ShapeScore:
    """One shape's replay: the trials made, and best recorded time / time of the strategy's pick."""

    records: ShapeRecords
    trials: tuple[Trial, ...]
    score: float


def replay_shape(records: ShapeRecords, strategy, budget: int, profile: HardwareProfile) -> ShapeScore:
    """Score = best recorded time / recorded time of the strategy's fastest successful trial (0 if none)."""
    candidates = [t.config for t in records.trials]
    trials = tuple(strategy(records.shape, candidates, recorded_measure(records), budget, profile))
    if len(trials) > budget:
        raise ValueError(f"strategy made {len(trials)} trials with a budget of {budget}")
    ok = [t.time_us for t in trials if t.ok]
    best = records.best_us
    score = best / min(ok) if ok and best else 0.0
    return ShapeScore(records, trials, score)


def replay(records: list[ShapeRecords], strategy, budget: int, profile: HardwareProfile) -> list[ShapeScore]:
    """Replay `strategy` on every shape that has at least one successful recorded trial."""
    return [replay_shape(r, strategy, budget, profile) for r in records if r.best_us is not None]


def model_spearman(records: list[ShapeRecords], profile: HardwareProfile) -> float:
    """Mean over shapes of the Spearman correlation of predicted vs recorded time (successful trials)."""
    from rooftune.candidates import configs_to_columns
    from rooftune.roofline import predict

    values = []
    for r in records:
        ok = [t for t in r.trials if t.ok]
        if len(ok) < 2:
            continue
        predicted = predict(r.shape, configs_to_columns([t.config for t in ok]), profile).time_us
        rho = spearman(predicted, [t.time_us for t in ok])
        if not np.isnan(rho):
            values.append(rho)
    return float(np.mean(values)) if values else float("nan")


def evaluate_gemm(records: list[ShapeRecords], budget: int, profile: HardwareProfile,
                  seeds=RANDOM_SEEDS) -> dict:
    """The `rooftune eval gemm` summary: per method mean / p10 / worst-decile mean of the scores.

    Methods: `model` (the model's order), `random` (per-shape scores averaged over `seeds`), and
    `tutorial` when the dataset recorded most of the Triton tutorial's configs (the probe; an
    AutoHeuristic log holds one or two of them, where the method would only measure failures)."""
    from rooftune.tuner.strategies import model_order, random_order, tutorial, tutorial_configs

    records = [r for r in records if r.best_us is not None]
    methods = {"model": summarize([s.score for s in replay(records, model_order, budget, profile)])}
    per_seed = [[s.score for s in replay(records, random_order(seed), budget, profile)] for seed in seeds]
    methods["random"] = summarize(np.mean(np.array(per_seed), axis=0) if records else [])
    tutorial_set = set(tutorial_configs())
    recorded = sum(len(tutorial_set & set(r.lookup())) for r in records)
    if records and recorded >= TUTORIAL_MIN_RECORDED * len(tutorial_set) * len(records):
        methods["tutorial"] = summarize([s.score for s in replay(records, tutorial, budget, profile)])
    return {"n_shapes": len(records), "budget": budget, "methods": methods,
            "spearman": model_spearman(records, profile)}
