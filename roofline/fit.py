"""Fitting the residual correction: weighted ridge regression of log(measured / predicted time) on the
residual's features, within each shape, solved with SciPy.

Input is plain data (`FitShape`: a shape, its configs and their measured times), so this module never
opens a dataset: the caller decides what it is fitted on (tuner/fitting.py refuses held-out data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from rooftune.candidates import Config, configs_to_columns, kernel_of
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.residual import Residual, feature_set


@dataclass(frozen=True)
class FitShape:
    """One training shape: its configs and measured times (µs; NaN where the config failed)."""

    shape: object
    configs: tuple[Config, ...]
    time_us: np.ndarray


@dataclass(frozen=True)
class Prepared:
    """A FitShape with the model's prediction and features computed once (fits and CV folds reuse it)."""

    source: FitShape
    log_predicted: np.ndarray   # log(model µs) per config
    fits: np.ndarray            # the config can launch (shared memory within the per-block limit)
    names: tuple[str, ...]
    x: np.ndarray               # features [config, feature] of the shape's kernel (residual.FEATURE_SETS)
    breakdown: object


def prepare(shapes: Sequence[FitShape], profile: HardwareProfile) -> list[Prepared]:
    from rooftune.roofline import predict

    out = []
    for s in shapes:
        columns = configs_to_columns(list(s.configs))
        bd = predict(s.shape, columns, profile)
        names, x = feature_set(kernel_of(s.shape).name).compute(s.shape, columns, bd)
        out.append(Prepared(s, np.log(bd.time_us), np.asarray(bd.fits, bool), names, x, bd))
    return out


@dataclass(frozen=True)
class RidgeSettings:
    """`ridge`: L2 penalty per shape on standardized features; `near_best_weight`: a config's weight is
    exp(−w · log(time / shape's best)), so the fit attends to the configs that compete for first place."""

    ridge: float = 0.1
    near_best_weight: float = 5.0


def fit_coefficients(data: Sequence[Prepared], settings: RidgeSettings) -> dict[str, float]:
    """Minimize Σ_shapes Σ_configs wᵢ (yᵢ − ȳ − (xᵢ − x̄)·β)² + ridge · n_shapes · |β ⊙ σ|², where y = log(measured
    / predicted) and bars are each shape's weighted means (no per-shape constant matters for ranking);
    σ are the features' standard deviations, so the penalty treats every feature alike."""
    if not data:
        raise ValueError("no shapes to fit on")
    rows, targets = [], []
    for d in data:
        t = d.source.time_us
        ok = d.fits & np.isfinite(t) & (t > 0)
        if ok.sum() < 2:
            continue
        y = np.log(t[ok]) - d.log_predicted[ok]
        gap = np.log(t[ok]) - np.log(t[ok].min())
        w = np.exp(-settings.near_best_weight * gap)
        x = d.x[ok]
        x_mean = (w[:, None] * x).sum(0) / w.sum()
        y_mean = (w * y).sum() / w.sum()
        root_w = np.sqrt(w)
        rows.append((x - x_mean) * root_w[:, None])
        targets.append((y - y_mean) * root_w)
    if not rows:
        raise ValueError("no shape has two successful configs to fit on")
    a, b = np.concatenate(rows), np.concatenate(targets)
    sigma = a.std(axis=0) + 1e-9
    a_std = a / sigma
    gram = a_std.T @ a_std + settings.ridge * len(rows) * np.eye(a.shape[1])
    beta = scipy.linalg.solve(gram, a_std.T @ b, assume_a="pos") / sigma
    return dict(zip(data[0].names, (float(v) for v in beta)))


def make_residual(kernel: str, profile: HardwareProfile, coefficients: dict[str, float],
                  strategy: dict[str, float], fit: dict) -> Residual:
    return Residual(kernel, profile.name, feature_set(kernel).version, coefficients, strategy, fit)
