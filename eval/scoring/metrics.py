"""Summary metrics of replay scores: mean, 10th percentile, worst-decile mean, rank correlation; the op-vs-library figure."""

from __future__ import annotations

import math

import numpy as np

# The worst tenth of shapes, at least one shape.
WORST_FRACTION = 0.1


def summarize(scores) -> dict[str, float]:
    """mean, p10 and the mean of the worst tenth (at least one) of per-shape scores in [0, 1]."""
    s = np.sort(np.asarray(scores, dtype=float))
    if s.size == 0:
        return {"mean": math.nan, "p10": math.nan, "worst_decile_mean": math.nan}
    worst = s[: max(1, int(math.ceil(WORST_FRACTION * s.size)))]
    return {"mean": float(s.mean()), "p10": float(np.percentile(s, 10)), "worst_decile_mean": float(worst.mean())}


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of `values`, ties given the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(values.size)
    ranks[order] = np.arange(1, values.size + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(predicted, recorded) -> float:
    """Spearman rank correlation of predicted and recorded times: Pearson's r of their average ranks
    (nan when undefined)."""
    predicted, recorded = np.asarray(predicted, dtype=float), np.asarray(recorded, dtype=float)
    if predicted.size < 2 or np.ptp(predicted) == 0 or np.ptp(recorded) == 0:
        return math.nan
    return float(np.corrcoef(average_ranks(predicted), average_ranks(recorded))[0, 1])


def versus_library(ratios, low: float = 0.97) -> dict[str, float]:
    """The op-vs-library figure of per-shape ratios library µs ÷ op µs (above 1: the op is faster): geometric
    mean, 10th percentile, minimum, and how many shapes fall below `low`; `n` shapes."""
    r = np.asarray(ratios, dtype=float)
    if r.size == 0:
        return {"geomean": math.nan, "p10": math.nan, "min": math.nan, "below": 0, "n": 0}
    return {"geomean": float(np.exp(np.log(r).mean())), "p10": float(np.percentile(r, 10)), "min": float(r.min()),
            "below": int((r < low).sum()), "n": int(r.size)}
