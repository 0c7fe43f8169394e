"""Does the untuned route judge a new shape's pick by the pick it was fitted on? The route (tuner/route_fit.py) is
fitted on rows of (library µs, zero-trial pick µs) over the training shapes, each pick made by the shipped residual,
which was fitted on those very shapes (only the neighbour vote leaves the shape out). A new shape's pick comes from a
residual that never saw it, and the route decides on that pick. This script compares, on train only:

- the pick's score (best recorded ÷ the pick's µs) in sample and out of fold (`route_fit.fold_residuals`: the shipped
  residual's setting refitted on the folds without the shape, vote from those folds' shapes: what a new shape gets),
  folds by shape (`fit`'s own folds for GEMM, which the route now uses) or by layer (N, K, layout);
- routes fitted as shipped (in-sample rows) and on out-of-fold rows, each cross-validated as `fit --route` does, and
  both scored on the out-of-fold rows (the route's held-back prediction on each shape's out-of-fold pick):
  library µs ÷ op µs, geometric mean, p10, min, count below 0.97.

python3 run.py gemm|attention [--by shape|layer]"""
import sys

import numpy as np

from rooftune.candidates import kernel_spec
from rooftune.candidates.families import KernelSpec
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import summarize, versus_library
from rooftune.hwprofiles import load_profile
from rooftune.roofline.route import route_features
from rooftune.tuner import route_fit
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.routing import LOW, zero_trial

TRITON = "3.6.0"


def in_sample_rows(records, profile, residual, baseline):
    """RouteRows as the route learned from them until 2026-12-06: picks by the residual fitted on every shape, each
    shape left out of its vote only."""
    rows = {}
    for r in records:
        picked = zero_trial(r.shape, r.candidate_configs(), profile, residual.without_neighbour(r.shape))
        trial = r.lookup().get(picked[0]) if picked is not None else None
        if r.baselines_us.get(baseline) is not None and trial is not None and trial.ok:
            rows[r.shape] = route_fit.RouteRow(r.shape, route_features(r.shape, picked[1], profile),
                                               r.baselines_us[baseline], trial.time_us)
    return rows


def best_of(records):
    return {r.shape: min(t.time_us for t in r.lookup().values() if t.ok) for r in records}


def scored(rows, kernel, truth):
    """The route fitted as `fit --route` on `rows`: its chosen setting, and per CV seed the held-back decisions
    applied to `truth`'s rows (same shapes, in order): library ÷ op figures averaged over seeds."""
    table = route_fit.cv_table(rows, kernel)
    chosen = route_fit.best_setting(table)
    x_truth = np.array([[row.features[n] for n in chosen["features"]] for row in truth])
    x = np.array([[row.features[n] for n in chosen["features"]] for row in rows])
    y = np.log([row.library_us / row.pick_us for row in rows])
    figures = []
    for seed in route_fit.CV_SEEDS:
        order = np.random.default_rng(seed).permutation(len(rows))
        keep = np.zeros(len(rows), dtype=bool)
        for f in range(route_fit.FOLDS):
            test = order[f::route_fit.FOLDS]
            train = np.setdiff1d(order, test)
            mean, scale, coefficients, intercept = route_fit.ridge(x[train], y[train], chosen["alpha"])
            keep[test] = intercept + ((x_truth[test] - mean) / scale) @ coefficients > chosen["margin"]
        figures.append(versus_library(route_fit.routed_ratios(truth, keep), LOW))
    return chosen, {k: float(np.mean([f[k] for f in figures])) for k in figures[0]}


def main(kernel, by):
    if by == "layer":
        KernelSpec.fold_group = lambda self, shape: ((shape.n, shape.k, shape.layout) if self.name == "gemm"
                                                     else None)
    profile = load_profile("h200")
    spec = kernel_spec(kernel)
    records = load_records(f"datasets/h200/{kernel}/train", kernel=kernel)
    residual = shipped_residual(spec, profile, TRITON)
    inside = in_sample_rows(records, profile, residual, spec.baseline)
    outside = {row.shape: row for row in route_fit.route_rows(records, profile, residual, spec.baseline)}
    shapes = [s for s in inside if s in outside]
    best = best_of(records)
    print(f"{kernel}: {len(shapes)} training shapes with both rows; out-of-fold picks with folds by {by}")
    for name, rows in (("in sample", inside), ("out of fold", outside)):
        s = summarize(np.array([best[sh] / rows[sh].pick_us for sh in shapes]))
        ratios = np.array([rows[sh].library_us / rows[sh].pick_us for sh in shapes])
        always = versus_library(ratios, LOW)
        print(f"  pick {name:11s}: score {s['mean']:.4f} / {s['worst_decile_mean']:.4f}; library ÷ pick always: "
              f"geomean {always['geomean']:.3f}, min {always['min']:.3f}, below {always['below']:.0f}")
    truth = [outside[s] for s in shapes]
    for name, rows in (("route on in-sample rows (shipped)", inside), ("route on out-of-fold rows", outside)):
        chosen, fig = scored([rows[s] for s in shapes], kernel, truth)
        print(f"  {name}: ridge {chosen['alpha']:g}, margin {np.exp(chosen['margin']):.3f}, "
              f"{len(chosen['features'])} features; its own CV geomean {chosen['geomean']:.3f} below "
              f"{chosen['below']:.1f} | on out-of-fold picks: geomean {fig['geomean']:.3f}, p10 {fig['p10']:.3f}, "
              f"min {fig['min']:.3f}, below {fig['below']:.1f}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[2] if args[1:2] == ["--by"] else "shape")
