"""`rooftune fit generic` and `rooftune eval generic`: the generic model's residual (roofline/generic_residual.py)
fitted across the training kernels of a suite dataset (eval/datasets/suite.py), never on a held-out kernel: asking
for one is refused (`training_kernels`), as `rooftune fit` refuses a held-out shape list (tuner/fitting.py
`refuse_held_out`), and a held-out kernel's file is never opened. Leave-one-kernel-out cross-validation says what
the correction gains over the model alone: each training kernel's calls scored by a residual fitted on the others.

A call's score at budget b is the best recorded time over the best of the b configs ranked first (a config that
failed or that the model could not read scores 0 where it is picked); the fit is roofline/fit.py's ridge.
`evaluate_generic` scores the held-out kernels the issue's way (a geometric mean over kernel × shape).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from rooftune.eval.datasets.suite import SuiteRecords, kernels_in, read_manifest, read_suite
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.fit import FitShape, Prepared, RidgeSettings, fit_coefficients
from rooftune.roofline.generic import predict_generic
from rooftune.roofline.generic_residual import FEATURE_NAMES, GenericResidual, generic_features
from rooftune.tuner.fitting import FitError, HeldOutError

SCORE_BUDGETS = (1, 5)
# What the fit corrects: the warps and stages (log2 of the warps and its square, the stages and their square) only,
# with a strong ridge. Chosen by leave-one-kernel-out on the H100 suite's 15 training kernels
# (experiments/suite_residual/ridge_loko.log, 16 settings: four feature sets × four ridges): every feature at the fit's
# default ridge 0.1 loses to the model alone on kernels it was not fitted on (budget 1: 0.919 against 0.962, geometric
# means), the warps and stages at ridge 10 gain (0.968, worst tenth 0.890 against 0.866; 0.989 against 0.986 at
# five); the other features stay in the file at 0.
FITTED_FEATURES = ("log_warps", "log_warps_sq", "stages", "stages_sq")
GENERIC_RIDGE = RidgeSettings(ridge=10.0)


def training_kernels(manifest: dict, asked: Sequence[str] | None = None) -> list[str]:
    """The kernels a fit reads: `asked` (all the training kernels where None). HeldOutError where one asked for is
    held out; FitError where one is not in the dataset."""
    kernels = manifest["kernels"]
    if asked is None:
        return kernels_in(manifest, "train")
    unknown = [k for k in asked if k not in kernels]
    if unknown:
        raise FitError(f"not in the dataset: {', '.join(unknown)}; it holds {', '.join(sorted(kernels))}")
    held = [k for k in asked if kernels[k]["split"] == "heldout"]
    if held:
        raise HeldOutError(f"{', '.join(held)}: held out of the suite's training kernels; fitting reads training "
                           f"kernels only")
    return list(asked)


def prepare_call(call: SuiteRecords, profile: HardwareProfile, features: Sequence[str] = FEATURE_NAMES
                 ) -> Prepared | None:
    """A call's configs the model read, with their predictions and `features` (None where fewer than two)."""
    keep = [i for i, c in enumerate(call.counts) if c is not None]
    if len(keep) < 2:
        return None
    counts = [call.counts[i] for i in keep]
    bd = predict_generic(counts, profile)
    names, x = generic_features(bd, counts)
    columns = [names.index(n) for n in features]
    source = FitShape(call.shape, tuple(call.configs[i] for i in keep), call.time_us[keep])
    return Prepared(source, np.log(bd.time_us), np.asarray(bd.fits, bool), tuple(features), x[:, columns], bd)


def call_scores(d: Prepared, coefficients: dict[str, float], best_us: float) -> dict[int, float]:
    """Budget -> best recorded time over the best of the configs ranked first (0 where none ran)."""
    coef = np.array([coefficients.get(n, 0.0) for n in d.names])
    ranked = np.argsort(np.where(d.fits, d.log_predicted + d.x @ coef, np.inf), kind="stable")
    times = d.source.time_us[ranked]
    return {b: float(best_us / np.nanmin(times[:b])) if np.isfinite(times[:b]).any() else 0.0 for b in SCORE_BUDGETS}


def score(prepared: list[tuple[str, Prepared, float]], coefficients: dict[str, float]) -> dict[str, dict]:
    """Each budget's summaries over the calls."""
    return summaries([call_scores(d, coefficients, best) for _, d, best in prepared])


def summaries(per_call: Sequence[dict[int, float]]) -> dict[str, dict]:
    """Each budget's geometric mean (the issue's figure), arithmetic mean, p10 and worst-decile mean over calls."""
    return {f"budget_{b}": {"geomean": geometric_mean([s[b] for s in per_call]), **summarize([s[b] for s in per_call])}
            for b in SCORE_BUDGETS}


def training_calls(folder: str | os.PathLike, profile: HardwareProfile, kernels: Sequence[str] | None = None,
                   features: Sequence[str] = FITTED_FEATURES, manifest: dict | None = None
                   ) -> list[tuple[str, Prepared, float]]:
    """(kernel, prepared call, best recorded µs) of each timed call of the suite dataset `folder`'s training kernels
    (`kernels`, checked by `training_kernels`; all of them where None) whose configs the model read (`manifest`:
    the folder's, where the caller has read it)."""
    manifest = read_manifest(folder) if manifest is None else manifest
    prepared = []
    for call in read_suite(folder, training_kernels(manifest, kernels)):
        d = prepare_call(call, profile, features)
        if d is not None and np.isfinite(call.time_us).any():
            prepared.append((call.kernel, d, float(np.nanmin(call.time_us))))
    return prepared


def held_back(prepared: list[tuple[str, Prepared, float]], settings: RidgeSettings = GENERIC_RIDGE
              ) -> list[tuple[str, Prepared, float, dict[str, float]]]:
    """Each call of `prepared` with the coefficients fitted on the other kernels' calls (leave one kernel out)."""
    out = []
    for kernel in sorted({k for k, _, _ in prepared}):
        coefficients = fit_coefficients([d for k, d, _ in prepared if k != kernel], settings)
        out += [(k, d, best, coefficients) for k, d, best in prepared if k == kernel]
    return out


def fit_generic(folder: str | os.PathLike, profile: HardwareProfile, kernels: Sequence[str] | None = None,
                settings: RidgeSettings = GENERIC_RIDGE, features: Sequence[str] = FITTED_FEATURES) -> GenericResidual:
    """The generic residual fitted on the training kernels of the suite dataset `folder` (module docstring)."""
    manifest = read_manifest(folder)
    prepared = training_calls(folder, profile, kernels, features, manifest)
    fitted_on = sorted({k for k, _, _ in prepared})
    if len(fitted_on) < 2:
        raise FitError(f"{folder}: {len(fitted_on)} training kernel(s) with two configs read and timed; the fit and "
                       f"its leave-one-kernel-out check need two or more")
    cross_validated = [call_scores(d, c, best) for _, d, best, c in held_back(prepared, settings)]
    coefficients = fit_coefficients([d for _, d, _ in prepared], settings)
    fit = {"data": str(folder), "kernels": fitted_on, "calls": len(prepared), "triton": manifest.get("triton"),
           "ridge": settings.ridge, "features": list(features), "model_alone": score(prepared, {}),
           "cross_validated": summaries(cross_validated)}
    return GenericResidual(profile.name, {n: float(coefficients.get(n, 0.0)) for n in FEATURE_NAMES}, fit)


def gains(residual: GenericResidual) -> bool:
    """Whether the residual's leave-one-kernel-out check ranks at least as well as the model alone at budget 1
    (geometric means; its worst tenth no worse either): what `fit generic --out shipped` asks before shipping."""
    cv, alone = residual.fit["cross_validated"]["budget_1"], residual.fit["model_alone"]["budget_1"]
    return cv["geomean"] >= alone["geomean"] and cv["worst_decile_mean"] >= alone["worst_decile_mean"]


def geometric_mean(scores) -> float:
    s = np.asarray(scores, dtype=float)
    return float(np.exp(np.log(np.maximum(s, 1e-12)).mean())) if s.size else float("nan")


def evaluate_generic(folder: str | os.PathLike, profile: HardwareProfile, split: str = "heldout",
                     residual: GenericResidual | None = None) -> dict:
    """The issue's figures on the `split` kernels of a suite dataset (held out by default: evaluation reads them,
    a fit never does): per budget the geometric mean over kernel × shape of best recorded time ÷ the best of the
    configs ranked first, the mean of the worst tenth and the 10th percentile; and each kernel's geometric mean."""
    manifest = read_manifest(folder)
    names = kernels_in(manifest, split)
    coefficients = residual.coefficients if residual is not None else {}
    per_call = []
    for call in read_suite(folder, names):
        d = prepare_call(call, profile)
        if not np.isfinite(call.time_us).any():
            continue
        scores = call_scores(d, coefficients, float(np.nanmin(call.time_us))) if d is not None \
            else dict.fromkeys(SCORE_BUDGETS, 0.0)
        per_call.append((call.kernel, scores))
    summary = summaries([s for _, s in per_call])
    summary["kernels"] = {k: geometric_mean([s[1] for n, s in per_call if n == k]) for k in names}
    summary["calls"] = len(per_call)
    return summary
