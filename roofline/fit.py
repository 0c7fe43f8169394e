"""Fitting the residual correction: weighted ridge regression of log(measured / predicted time) on the
residual's features, within each shape, solved with SciPy; then the zero-trial pick's own change to it,
fitted for the score of the first config rooftune runs (`fit_pick`).

Input is plain data (`FitShape`: a shape, its configs and their measured times), so this module never
opens a dataset: the caller decides what it is fitted on (tuner/fitting.py refuses held-out data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

from rooftune.candidates import Config, configs_to_columns, kernel_of
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline import predict
from rooftune.roofline.residual import Residual, feature_set, is_pick_feature


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
    x: np.ndarray               # features [config, feature] of the shape's kernel (its registry entry's `features`)
    breakdown: object


def prepare(shapes: Sequence[FitShape], profile: HardwareProfile) -> list[Prepared]:
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


@dataclass(frozen=True)
class PickSettings:
    """`temperature`: of the softmax over a shape's corrected log times that stands in for their argmin
    (0.03: configs predicted 3% apart share the pick as e : 1); `penalty`: L2 on the standardized change.
    Chosen by 5-fold cross-validation on the GEMM training set: temperatures 0.02–0.05 and penalties
    0.03–1 (and a squared loss that weighs the worst shapes more) agreed within 0.005 of the budget-1
    worst-decile mean; letting the shape products change too gained nothing."""

    temperature: float = 0.03
    penalty: float = 0.1


def fit_pick(data: Sequence[Prepared], coefficients: dict[str, float],
             settings: PickSettings = PickSettings()) -> dict[str, float]:
    """The change δ to `coefficients` on the pick's features (residual.is_pick_feature) with which the
    corrected model's best scores best:

        minimize  mean over shapes of (1 − Σᵢ pᵢ · best / tᵢ) + penalty · |δ ⊙ σ|²,
        pᵢ = softmax over the shape's launchable configs of −(log model + xᵢ·(β + δ)) / temperature,

    the expected budget-1 score (a failed config scores 0) of a softened argmin, started from δ = 0.
    The ridge fit (`fit_coefficients`) matches every near-best config's time; this spends its few
    parameters on which one comes first. Non-convex, so it stays near the ridge's coefficients: the
    penalty pulls toward them, and L-BFGS starts there."""
    names = data[0].names if data else ()
    free = np.array([i for i, n in enumerate(names) if is_pick_feature(n)])
    beta = np.array([coefficients.get(n, 0.0) for n in names])
    xs, bases, rels, sizes = [], [], [], []
    for d in data:
        t = d.source.time_us[d.fits]
        ok = np.isfinite(t) & (t > 0)
        if ok.sum() < 2:
            continue
        x = d.x[d.fits]
        xs.append(x[:, free])
        bases.append(d.log_predicted[d.fits] + x @ beta)
        rels.append(np.where(ok, t[ok].min() / np.where(ok, t, np.inf), 0.0))
        sizes.append(len(t))
    if not xs:
        raise ValueError("no shape has two successful configs to fit the pick on")
    x, base, rel = np.concatenate(xs), np.concatenate(bases), np.concatenate(rels)
    # A feature constant over every config of the data (attention's tma, wgmma, order_reverse on the H200) moves
    # every config alike: its change is not identified, and scaled by a vanishing sd it ran off to ±1000.
    varies = x.std(axis=0) > 1e-9
    free, x = free[varies], x[:, varies]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    shape_of = np.repeat(np.arange(len(sizes)), sizes)
    sigma = x.std(axis=0)
    x_std = x / sigma
    tau = settings.temperature

    def loss(u: np.ndarray) -> tuple[float, np.ndarray]:
        """Loss and gradient in u = δ ⊙ σ."""
        logit = -(base + x_std @ u) / tau
        e = np.exp(logit - np.maximum.reduceat(logit, starts)[shape_of])
        p = e / np.add.reduceat(e, starts)[shape_of]
        score = np.add.reduceat(p * rel, starts)                    # expected score per shape
        d_logit = p * (rel - score[shape_of])                        # d score / d logit
        value = 1.0 - score.mean() + settings.penalty * (u @ u)
        grad = (x_std.T @ d_logit) / (tau * len(sizes)) + 2.0 * settings.penalty * u
        return float(value), grad

    result = scipy.optimize.minimize(loss, np.zeros(len(free)), jac=True, method="L-BFGS-B")
    unchanged = {n: 0.0 for n in names if is_pick_feature(n)}
    return {**unchanged, **{names[i]: float(v) for i, v in zip(free, result.x / sigma)}}


def make_residual(kernel: str, profile: HardwareProfile, coefficients: dict[str, float],
                  strategy: dict[str, float], fit: dict, pick: dict[str, float] | None = None) -> Residual:
    return Residual(kernel, profile.name, feature_set(kernel).version, coefficients, strategy, fit, pick or {})
