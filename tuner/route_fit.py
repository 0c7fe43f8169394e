"""Fitting the untuned route (roofline/route.py) by cross-validation on a training dataset's recorded library times.

Fitting reads training data only: `fit_route_data` refuses a dataset swept from a held-out list before reading
a shape. Each shape's pick is the one a shape the residual was not fitted on gets (`fold_residuals`). The form
(which features, the ridge penalty) and the margin are chosen together over shapes folded at random, several
seeds: the setting whose routed ops never fall below LOW × the library on a held-back shape, with the best
geometric mean of library time ÷ op time, wins and is refitted on every training shape.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rooftune.eval.datasets.format import read_manifest
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import versus_library
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.fit import PickSettings, RidgeSettings, make_residual, prepare
from rooftune.roofline.neighbours import VoteSettings
from rooftune.roofline.residual import triton_release
from rooftune.roofline.route import Route, route_features, route_part
from rooftune.tuner.cache import residual_digest
from rooftune.tuner.fitting import fit_shapes_from_records, fold_fits, neighbour_table, refuse_held_out
from rooftune.tuner.routing import LOW, zero_trial

FOLDS = 5
CV_SEEDS = (0, 1, 2)
ALPHA_GRID = (0.3, 3.0, 30.0)
MARGIN_GRID = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3)


@dataclass(frozen=True)
class RouteRow:
    """One training shape: every route feature, the library's recorded µs and the zero-trial pick's."""

    shape: object
    features: dict
    library_us: float
    pick_us: float


def fold_residuals(records, profile: HardwareProfile, residual) -> dict:
    """Each training shape's residual as a shape it was not fitted on sees it: `residual`'s own setting (ridge, near-
    best weight, pick, vote) refitted on `fit`'s folds without the shape (tuner/fitting.py `fold_assignment`), its
    vote drawn from those folds' shapes only. The route decides on a new shape's pick, so it learns from picks made
    the same way (picks of the residual fitted on all the shapes are its in-sample picks). Empty where `residual`
    records no setting (the model alone; a residual written without one) or there are too few shapes to fold."""
    fit = residual.fit if residual is not None else {}
    if "ridge" not in fit or "near_best_weight" not in fit:
        return {}
    data = prepare(fit_shapes_from_records(records), profile)
    if len(data) < 2:
        return {}
    pick = PickSettings(**fit["pick"]) if fit.get("pick") else None
    out = {}
    for test, fitted in fold_fits(data, RidgeSettings(fit["ridge"], fit["near_best_weight"]), pick):
        fold = make_residual(residual.kernel, profile, fitted.coefficients, residual.strategy, {}, fitted.pick)
        if fit.get("vote"):
            held = set(test)
            pool = [d for i, d in enumerate(data) if i not in held]
            fold = replace(fold, neighbours=neighbour_table(residual.kernel, profile, pool, VoteSettings(**fit["vote"]),
                                                            fold, "fold"))
        out.update({data[i].source.shape: fold for i in test})
    return out


def route_rows(records, profile: HardwareProfile, residual, baseline: str) -> list[RouteRow]:
    """A RouteRow per shape with a recorded `baseline` time and a successful recorded zero-trial pick, the pick made
    by the shape's `fold_residuals` entry (else by `residual` with the shape left out of its vote)."""
    rows, folds = [], fold_residuals(records, profile, residual)
    for r in records:
        library_us = r.baselines_us.get(baseline)
        own_out = folds.get(r.shape) or (residual.without_neighbour(r.shape) if residual is not None else None)
        picked = zero_trial(r.shape, r.candidate_configs(), profile, own_out)
        trial = r.lookup().get(picked[0]) if picked is not None else None
        if library_us is None or trial is None or not trial.ok:
            continue
        rows.append(RouteRow(r.shape, route_features(r.shape, picked[1], profile), library_us, trial.time_us))
    return rows


def ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(mean, scale, coefficients, intercept) of a ridge fit of y on standardized x with penalty `alpha`."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (x - mean) / scale
    coefficients = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ (y - y.mean()))
    return mean, scale, coefficients, float(y.mean())


def held_back_gains(rows: list[RouteRow], features: tuple[str, ...], alpha: float) -> list[np.ndarray]:
    """Per CV seed, each shape's predicted log gain from a fit on the folds without it."""
    x = np.array([[row.features[n] for n in features] for row in rows])
    y = np.log([row.library_us / row.pick_us for row in rows])
    out = []
    for seed in CV_SEEDS:
        order = np.random.default_rng(seed).permutation(len(rows))
        gains = np.empty(len(rows))
        for f in range(FOLDS):
            test = order[f::FOLDS]
            train = np.setdiff1d(order, test)
            mean, scale, coefficients, intercept = ridge(x[train], y[train], alpha)
            gains[test] = intercept + ((x[test] - mean) / scale) @ coefficients
        out.append(gains)
    return out


def routed_ratios(rows: list[RouteRow], keep_kernel) -> np.ndarray:
    """Library µs ÷ op µs per shape: the pick's where the kernel is kept, 1 where the op runs the library."""
    return np.array([row.library_us / row.pick_us if keep else 1.0 for row, keep in zip(rows, keep_kernel)])


def cv_table(rows: list[RouteRow], kernel: str) -> list[dict]:
    """Every (features, alpha, margin) setting with its held-back figure, averaged over the CV seeds."""
    table = []
    for features in route_part(kernel).grid:
        for alpha in ALPHA_GRID:
            gains = held_back_gains(rows, features, alpha)
            for margin in MARGIN_GRID:
                figures = [versus_library(routed_ratios(rows, g > margin), LOW) for g in gains]
                table.append({"features": features, "alpha": alpha, "margin": margin,
                              **{k: float(np.mean([f[k] for f in figures])) for k in figures[0]}})
    return table


def best_setting(table: list[dict]) -> dict:
    """The setting with no held-back shape below LOW (else the fewest) and then the best geometric mean; ties
    to the larger margin (a safer route)."""
    return min(table, key=lambda s: (s["below"], -round(s["geomean"], 4), -s["margin"]))


def fit_route(rows: list[RouteRow], kernel: str, profile: HardwareProfile) -> tuple[Route, dict, list[dict]]:
    """(the route refitted on every row with the chosen setting, the chosen setting's CV figure, the CV table)."""
    table = cv_table(rows, kernel)
    chosen = best_setting(table)
    features = chosen["features"]
    x = np.array([[row.features[n] for n in features] for row in rows])
    y = np.log([row.library_us / row.pick_us for row in rows])
    mean, scale, coefficients, intercept = ridge(x, y, chosen["alpha"])
    route = Route(kernel, profile.name, tuple(features), tuple(mean.tolist()), tuple(scale.tolist()),
                  tuple(coefficients.tolist()), intercept, float(chosen["margin"]),
                  {"alpha": chosen["alpha"], "cv": {k: chosen[k] for k in ("geomean", "p10", "min", "below")}})
    return route, chosen, table


def fit_route_data(data: str | Path, kernel: str, profile: HardwareProfile, residual,
                   baseline: str) -> tuple[Route, dict, list[dict]]:
    """`fit_route` on the training dataset at `data` (refused where it was swept from a held-out list), the route
    recording its data, space version, Triton release and the residual beside whose pick it was fitted."""
    manifest = read_manifest(data)
    refuse_held_out(manifest, str(data))
    rows = route_rows(load_records(data, kernel=kernel), profile, residual, baseline)
    if not rows:
        raise ValueError(f"{data}: no shape with a recorded {baseline} time and a successful zero-trial pick")
    route, chosen, table = fit_route(rows, kernel, profile)
    triton = (manifest.get("device") or {}).get("triton")
    route.fit.update({"data": str(data), "shapes": len(rows), "space_version": manifest.get("space_version"),
                      "triton": [triton_release(triton)] if triton else [], "residual": residual_digest(residual)})
    return route, chosen, table
