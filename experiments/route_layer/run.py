"""Would the untuned GEMM route generalize better chosen with folds by layer, or with the pick's own tile as
features? Train only (datasets/h200/gemm/train); the rows are the shipped ones (`route_fit.route_rows`: each
shape's pick from the residual refitted without it). For each variant the route's setting (features, ridge,
margin) is chosen by CV as `fit --route` does (no held-back shape below 0.97, then the best geometric mean), with
folds by shape (shipped) or by layer (N, K, layout kept together), and every chosen setting is then scored with
folds by layer on fold seeds it was not chosen on (3-5): library µs ÷ op µs, geometric mean, p10, min, count below
0.97, averaged over those seeds. Printed: the perfect route (kernel wherever it is faster) as the ceiling.

python3 experiments/route_layer/run.py"""
import math
import sys

import numpy as np

from rooftune.candidates import kernel_spec
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import versus_library
from rooftune.hwprofiles import load_profile
from rooftune.roofline.route import GEMM_ROUTE, route_features
from rooftune.tuner import route_fit
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.routing import LOW, zero_trial

TRITON = "3.6.0"
CHOOSE_SEEDS = (0, 1, 2)
SCORE_SEEDS = (3, 4, 5)
_PICK = ("log_bm", "log_bn", "log_bk", "log_split", "log_waves", "wave_fill")


def rows_with_pick(records, profile, residual, baseline):
    folds = route_fit.fold_residuals(records, profile, residual)
    rows = []
    for r in records:
        picked = zero_trial(r.shape, r.candidate_configs(), profile, folds.get(r.shape))
        trial = r.lookup().get(picked[0]) if picked is not None else None
        if r.baselines_us.get(baseline) is None or trial is None or not trial.ok:
            continue
        c, s = picked[0], r.shape
        ctas = math.ceil(s.m / c["BLOCK_M"]) * math.ceil(s.n / c["BLOCK_N"]) * c["SPLIT_K"]
        waves = ctas / profile.sm_count
        features = route_features(s, picked[1], profile)
        features.update({"log_bm": math.log2(c["BLOCK_M"]), "log_bn": math.log2(c["BLOCK_N"]),
                         "log_bk": math.log2(c["BLOCK_K"]), "log_split": math.log2(c["SPLIT_K"]),
                         "log_waves": math.log2(waves), "wave_fill": waves / math.ceil(waves)})
        rows.append(route_fit.RouteRow(s, features, r.baselines_us[baseline], trial.time_us))
    return rows


def folds(rows, by, seed):
    """Test index arrays per fold: shapes at random, or layers (N, K, layout) at random."""
    if by == "shape":
        order = np.random.default_rng(seed).permutation(len(rows))
        return [order[f::route_fit.FOLDS] for f in range(route_fit.FOLDS)]
    keys = sorted({(r.shape.n, r.shape.k, r.shape.layout) for r in rows})
    order = np.random.default_rng(seed).permutation(len(keys))
    fold_of = {keys[j]: i % route_fit.FOLDS for i, j in enumerate(order)}
    of = np.array([fold_of[(r.shape.n, r.shape.k, r.shape.layout)] for r in rows])
    return [np.flatnonzero(of == f) for f in range(route_fit.FOLDS)]


def gains(rows, features, alpha, by, seed):
    x = np.array([[row.features[n] for n in features] for row in rows])
    y = np.log([row.library_us / row.pick_us for row in rows])
    out = np.empty(len(rows))
    for test in folds(rows, by, seed):
        train = np.setdiff1d(np.arange(len(rows)), test)
        mean, scale, coefficients, intercept = route_fit.ridge(x[train], y[train], alpha)
        out[test] = intercept + ((x[test] - mean) / scale) @ coefficients
    return out


def figure(rows, features, alpha, margin, by, seeds):
    figs = [versus_library(route_fit.routed_ratios(rows, gains(rows, features, alpha, by, s) > margin), LOW)
            for s in seeds]
    return {k: float(np.mean([f[k] for f in figs])) for k in figs[0]}


def choose(rows, grid, by):
    table = []
    for features in grid:
        for alpha in route_fit.ALPHA_GRID:
            g = [gains(rows, features, alpha, by, s) for s in CHOOSE_SEEDS]
            for margin in route_fit.MARGIN_GRID:
                figs = [versus_library(route_fit.routed_ratios(rows, gi > margin), LOW) for gi in g]
                table.append({"features": features, "alpha": alpha, "margin": margin,
                              **{k: float(np.mean([f[k] for f in figs])) for k in figs[0]}})
    return route_fit.best_setting(table)


def main():
    profile = load_profile("h200")
    spec = kernel_spec("gemm")
    records = load_records("datasets/h200/gemm/train", kernel="gemm")
    rows = rows_with_pick(records, profile, shipped_residual(spec, profile, TRITON), spec.baseline)
    ratios = np.array([r.library_us / r.pick_us for r in rows])
    print(f"{len(rows)} training shapes; perfect route {versus_library(np.maximum(ratios, 1), LOW)['geomean']:.4f}; "
          f"kernel always {versus_library(ratios, LOW)['geomean']:.4f}")
    shipped = GEMM_ROUTE.grid
    with_pick = shipped + tuple(g + _PICK for g in shipped) + (("log_m", "log_n", "log_k") + _PICK,)
    for name, grid in (("shipped grid", shipped), ("grid + the pick's tile", with_pick)):
        for by in ("shape", "layer"):
            c = choose(rows, grid, by)
            for score_by in ("shape", "layer"):
                f = figure(rows, c["features"], c["alpha"], c["margin"], score_by, SCORE_SEEDS)
                print(f"{name:24s} chosen by {by:5s}: {len(c['features']):2d} features, ridge {c['alpha']:g}, "
                      f"margin {math.exp(c['margin']):.3f} | scored by {score_by:5s}: geomean {f['geomean']:.4f} "
                      f"p10 {f['p10']:.3f} min {f['min']:.3f} below {f['below']:.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
