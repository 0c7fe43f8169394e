"""Replay evaluation: run a strategy against recorded timings and score its picks per shape."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates import Config, Trial
from rooftune.eval.metrics import spearman, summarize
from rooftune.eval.records import ShapeRecords
from rooftune.hwprofiles import HardwareProfile

NOT_RECORDED = "not recorded in the dataset"


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
    """Score = best recorded time in the space / recorded time of the strategy's fastest successful
    trial (0 if none). The strategy chooses from the records' candidates (the space); `measure` finds
    any recorded config, so a baseline whose configs lie outside the space (the Triton tutorial's)
    can score above 1 where it beats every config of the space."""
    candidates = records.candidate_configs()
    trials = tuple(strategy(records.shape, candidates, recorded_measure(records), budget, profile))
    if len(trials) > budget:
        raise ValueError(f"strategy made {len(trials)} trials with a budget of {budget}")
    ok = [t.time_us for t in trials if t.ok]
    best = records.best_candidate_us
    score = best / min(ok) if ok and best else 0.0
    return ShapeScore(records, trials, score)


def replay(records: list[ShapeRecords], strategy, budget: int, profile: HardwareProfile) -> list[ShapeScore]:
    """Replay `strategy` on every shape whose space has at least one successful recorded config."""
    return [replay_shape(r, strategy, budget, profile) for r in records if r.best_candidate_us is not None]


def model_spearman(records: list[ShapeRecords], profile: HardwareProfile) -> float:
    """Mean over shapes of the Spearman correlation of predicted vs recorded time (successful configs of the space)."""
    from rooftune.candidates import configs_to_columns
    from rooftune.roofline import predict

    values = []
    for r in records:
        allowed = set(r.candidate_configs())
        ok = [t for t in r.trials if t.ok and t.config in allowed]
        if len(ok) < 2:
            continue
        predicted = predict(r.shape, configs_to_columns([t.config for t in ok]), profile).time_us
        rho = spearman(predicted, [t.time_us for t in ok])
        if not np.isnan(rho):
            values.append(rho)
    return float(np.mean(values)) if values else float("nan")


def evaluate(records: list[ShapeRecords], budget: int, profile: HardwareProfile, methods: dict) -> dict:
    """The `rooftune eval` summary: per method, mean / p10 / worst-decile mean of the per-shape scores.

    `methods` maps a name to a strategy, or to a list of strategies (e.g. random seeds) whose
    per-shape scores are averaged before summarizing. Also reports the model's mean Spearman."""
    records = [r for r in records if r.best_candidate_us is not None]
    summary = {}
    for name, strategies in methods.items():
        runs = strategies if isinstance(strategies, (list, tuple)) else [strategies]
        per_run = [[s.score for s in replay(records, strategy, budget, profile)] for strategy in runs]
        summary[name] = summarize(np.mean(np.array(per_run), axis=0) if records else [])
    return {"n_shapes": len(records), "budget": budget, "methods": summary,
            "spearman": model_spearman(records, profile)}
