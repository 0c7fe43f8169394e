"""A risk-averse GEMM zero-trial pick from a bagged residual, cross-validated on train with folds by layer (N, K,
layout) over fold seeds, beside the shipped setting on the same folds.

In each fold, besides the shipped residual (ridge 0.1, weight 5) fitted on the fold's training layers, B residuals
are fitted on bootstrap resamples of those layers (whole layers drawn with replacement). For every config of a
held-back shape they give B corrections: their spread says how far the training data pin that config's
correction down. The pick ranks by log model + correction + the shipped vote's pick share + lam * spread
(lam > 0: a config whose correction rests on few layers must look better to be picked); "bag mean" variants use the
bags' mean correction in place of the full fit's. The search after the pick is the shipped one (its prior
unchanged), so budgets past 1 move only through the first trial. Train only; nothing shipped is read or changed.

python3 run.py [--seeds 0,1,2] [--bags 16]"""
import sys

import numpy as np

from rooftune.candidates.families import KernelSpec
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.neighbours import VoteSettings
from rooftune.tuner import fitting
from rooftune.tuner.search.gp import SearchSettings, search

KernelSpec.fold_group = lambda self, shape: (shape.n, shape.k, shape.layout) if self.name == "gemm" else None
BUDGETS = fitting.CV_BUDGETS
SEARCH = SearchSettings(kappa=2.0, length_scale=2.0, prior_sd=0.1)
VOTE = VoteSettings(3, 0.5, 0.5)
RIDGE = RidgeSettings(0.1, 5.0)
# (name, use the bags' mean correction in the pick, lam)
VARIANTS = [("shipped", False, 0.0)] + [(f"full + {lam:g} sd", False, lam) for lam in (-1.0, 0.5, 1.0, 2.0)] + [
    (f"bag mean + {lam:g} sd", True, lam) for lam in (-1.0, -0.5, 0.0, 0.5)]


def correction(d, coefficients, keep):
    return d.x[keep] @ np.array([coefficients.get(n, 0.0) for n in d.names])


def replay(d, prior, own):
    configs, measure = fitting.recorded_measure(d)
    return search(configs, prior, measure, max(BUDGETS), SEARCH, int(np.argmin(own)))


def bag_fits(data, train, layers, bags, rng):
    """`bags` residuals, each fitted on the training shapes of layers drawn with replacement."""
    names = sorted({layers[i] for i in train})
    by_layer = {g: [i for i in train if layers[i] == g] for g in names}
    out = []
    for _ in range(bags):
        drawn = rng.choice(len(names), size=len(names), replace=True)
        out.append(fitting.fit_residual([data[i] for g in drawn for i in by_layer[names[g]]], RIDGE, None))
    return out


def seed_scores(data, profile, layers, bags):
    fits = fitting.fold_fits(data, RIDGE, None)
    votes = fitting.fold_votes(data, fits, VOTE.k, profile)
    rng = np.random.default_rng(1000 + fitting.FOLD_SEED)
    out = {name: np.zeros((len(data), len(BUDGETS))) for name, _, _ in VARIANTS}
    for test, fitted in fits:
        held = set(test)
        bagged = bag_fits(data, [i for i in range(len(data)) if i not in held], layers, bags, rng)
        for i in test:
            d = data[i]
            keep = np.flatnonzero(d.fits)
            base = d.log_predicted[keep]
            full = correction(d, fitted.coefficients, keep)
            each = np.stack([correction(d, b.coefficients, keep) for b in bagged])
            spread = each.std(axis=0)
            vote = votes[i][keep]
            prior = base + full + VOTE.w_search * vote
            for name, mean, lam in VARIANTS:
                own = base + (each.mean(axis=0) if mean else full) + VOTE.w_pick * vote + lam * spread
                out[name][i] = fitting.prefix_scores(d, replay(d, prior, own), BUDGETS)
    return out


def main(seeds, bags):
    profile = load_profile("h200")
    shapes = fitting.fit_shapes_from_records(load_records("datasets/h200/gemm/train", kernel="gemm"))
    data = fitting.prepare(shapes, profile)
    layers = [(d.source.shape.n, d.source.shape.k, d.source.shape.layout) for d in data]
    print(f"{len(data)} training shapes, {len(set(layers))} layers; folds by layer; {bags} bags", flush=True)
    for seed in seeds:
        fitting.FOLD_SEED = seed
        scores = seed_scores(data, profile, layers, bags)
        base = scores["shipped"]
        for name, _, _ in VARIANTS:
            s = scores[name]
            cells = "  ".join(f"{b}: {summarize(s[:, j])['mean']:.4f} / {summarize(s[:, j])['worst_decile_mean']:.4f}"
                              for j, b in enumerate(BUDGETS))
            diff = s[:, 0] - base[:, 0]
            print(f"seed {seed} | {name:18s} | {cells} | d@1 {diff.mean():+.4f}, better/worse "
                  f"{int((diff > 1e-9).sum())}/{int((diff < -1e-9).sum())}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    seeds, bags = (0, 1, 2), 16
    while args:
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--seeds":
            seeds = tuple(int(x) for x in value.split(","))
        elif flag == "--bags":
            bags = int(value)
    main(seeds, bags)
