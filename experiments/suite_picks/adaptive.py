"""Whether the five configs timed should be chosen one at a time, each measurement correcting the model's ranking of
the rest (a ridge over one-hot tile set, warps and stages fitted to the measured log(time / prediction)), rather than
the model's top five at once; scored leave-one-kernel-out on a suite dataset's TRAINING kernels only.

    python experiments/suite_picks/adaptive.py datasets/h100/suite
"""

from __future__ import annotations

import sys

import numpy as np

from rooftune.hwprofiles import load_profile
from rooftune.tuner.generic_fitting import geometric_mean, held_back, training_calls

BUDGETS = (1, 3, 5)


def one_hot(configs, parts) -> np.ndarray:
    columns = []
    for part in parts:
        values = [part(c) for c in configs]
        for v in sorted(set(values), key=repr):
            columns.append([1.0 if x == v else 0.0 for x in values])
    return np.array(columns).T if columns else np.zeros((len(configs), 0))


PARTS = {
    "tile": lambda c: tuple(c.params),
    "warps": lambda c: c.num_warps,
    "stages": lambda c: c.num_stages,
    "tile_warps": lambda c: (tuple(c.params), c.num_warps),
}


def adaptive(pred: np.ndarray, times: np.ndarray, configs, budget: int, parts: list[str], ridge: float,
             first: int = 1) -> list[int]:
    """Indices timed: the model's first `first`, then one at a time by the corrected ranking."""
    x = one_hot(configs, [PARTS[p] for p in parts])
    order = list(np.argsort(pred, kind="stable"))
    chosen = order[:min(first, budget)]
    while len(chosen) < min(budget, len(order)):
        measured = [i for i in chosen if np.isfinite(times[i]) and np.isfinite(pred[i])]
        corrected = pred.copy()
        if measured:
            r = np.log(times[measured]) - pred[measured]
            r = r - r.mean()
            xm = x[measured]
            coef = np.linalg.solve(xm.T @ xm + ridge * np.eye(x.shape[1]), xm.T @ r)
            corrected = pred + x @ coef
        rest = [i for i in np.argsort(corrected, kind="stable") if i not in chosen]
        chosen.append(rest[0])
    return chosen


def main(folder: str) -> None:
    prepared = training_calls(folder, load_profile("h100_sxm"))
    strategies = {"top": None}
    for parts in (["tile"], ["warps"], ["tile", "warps"], ["tile", "warps", "stages"], ["tile_warps"]):
        for ridge in (0.3, 1.0, 3.0):
            for first in (1, 2):
                strategies[f"{'+'.join(parts)} ridge {ridge} first {first}"] = (parts, ridge, first)
    scores = {name: {b: [] for b in BUDGETS} for name in strategies}
    for _, d, best, coef in held_back(prepared):
        c = np.array([coef.get(n, 0.0) for n in d.names])
        pred = np.where(d.fits, d.log_predicted + d.x @ c, np.inf)
        times = d.source.time_us
        for name, setting in strategies.items():
            for b in BUDGETS:
                if setting is None:
                    chosen = list(np.argsort(pred, kind="stable"))[:b]
                else:
                    chosen = adaptive(np.where(np.isfinite(pred), pred, 1e9), times, d.source.configs, b, *setting)
                t = times[chosen]
                scores[name][b].append(best / np.nanmin(t) if np.isfinite(t).any() else 0.0)
    for name in strategies:
        row = []
        for b in BUDGETS:
            s = np.array(scores[name][b])
            worst = np.sort(s)[:max(1, len(s) // 10)].mean()
            row.append(f"b{b} {geometric_mean(s):.4f}/{worst:.3f}")
        print(f"{name:38s} " + "  ".join(row))


if __name__ == "__main__":
    main(sys.argv[1])
