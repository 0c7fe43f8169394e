"""Replay: the recorded measurer (a dataset behind the same seam as the live GPU) and scoring picks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates import Config, Trial, configs_to_columns
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.scoring.metrics import spearman
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline import predict

NOT_RECORDED = "not recorded in the dataset"


class RecordedMeasurer:
    """`Measurer` over one shape's records: each config's recorded Trial; a config never recorded
    becomes a failed trial. Asked again for a config, it returns the same record (a live measurer
    would re-time it)."""

    def __init__(self, records: ShapeRecords):
        self.records = records
        self._table = records.lookup()

    def measure(self, shape, configs: list[Config]) -> list[Trial]:
        if shape != self.records.shape:
            raise ValueError(f"recorded measurer of {self.records.shape} asked for {shape}")
        return [self._one(c) for c in configs]

    def _one(self, config: Config) -> Trial:
        trial = self._table.get(config)
        return trial if trial is not None else Trial(config, None, error=NOT_RECORDED)


def recorded_measure(records: ShapeRecords):
    """measure(config) -> the recorded Trial, one config at a time (tests and ad-hoc lookups)."""
    measurer = RecordedMeasurer(records)
    return lambda config: measurer.measure(records.shape, [config])[0]


@dataclass(frozen=True)
class ShapeScore:
    """One shape's replay: the trials made, and best recorded time / recorded time of the pick."""

    records: ShapeRecords
    trials: tuple[Trial, ...]
    score: float


def score_trials(records: ShapeRecords, trials: tuple[Trial, ...] | list[Trial]) -> ShapeScore:
    """Score = best recorded time in the space / recorded time of the fastest successful trial (0 if
    none). A baseline's configs outside the space (the Triton tutorial's) can score above 1."""
    ok = [t.time_us for t in trials if t.ok]
    best = records.best_candidate_us
    return ShapeScore(records, tuple(trials), best / min(ok) if ok and best else 0.0)


def model_spearman(records: list[ShapeRecords], profile: HardwareProfile) -> float:
    """Mean over shapes of the Spearman correlation of predicted vs recorded time (successful configs of the space)."""

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


class RecordsMeasurer:
    """`Measurer` over many shapes' records (a layer's GEMMs, a table's token counts): each shape's
    `RecordedMeasurer`; a shape without records is an error of the caller."""

    def __init__(self, records):
        self.by_shape = {r.shape: RecordedMeasurer(r) for r in records}

    def measure(self, shape, configs: list[Config]) -> list[Trial]:
        if shape not in self.by_shape:
            raise ValueError(f"no records of {shape}")
        return self.by_shape[shape].measure(shape, configs)
