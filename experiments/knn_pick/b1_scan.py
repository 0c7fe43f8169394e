"""Budget-1 scans on a training set (CV on the fit's 5 folds; neighbours from the other folds only): the brief's
regret vote and the error vote (the corrected model's misses, as shipped) over a grid, then each nested (the setting
chosen by an inner CV on the other four folds, scored on the fifth).

    PYTHONPATH=. python3 experiments/knn_pick/b1_scan.py gemm|attention|moe
"""
import sys

import numpy as np

from knn_cv import Knn, b1_scores, baseline, error_scores, fmt, load, nested_b1, summarize

kernel = sys.argv[1] if len(sys.argv) > 1 else "gemm"
data, profile, cand, fits = load(f"datasets/h200/{kernel}/train", kernel=kernel)
print(kernel, len(data), "shapes; the residual alone:", fmt(baseline(data, cand, fits, budgets=(1,))), flush=True)
kinds = ("mnk", "mnk-waves") if kernel == "gemm" else ("family",)
grid = [Knn(k=k, kind=kind, top=30) for kind in kinds for k in (3, 5, 10)]
ws = (0.25, 0.5, 0.75, 1.0)
for name, scorer in (("regret vote", b1_scores), ("error vote", error_scores)):
    cache = {}
    scores = scorer(data, profile, fits, set(), grid, ws, cache)
    rows = {key: summarize(list(v.values())) for key, v in scores.items()}
    for (knn, w), s in rows.items():
        print(f"  {name}: {knn.kind} k {knn.k} w {w}: {s['mean']:.4f}/{s['worst_decile_mean']:.4f}")
    print(f"{name}, every setting's average: {np.mean([s['mean'] for s in rows.values()]):.4f}/"
          f"{np.mean([s['worst_decile_mean'] for s in rows.values()]):.4f}; "
          f"range of the mean {min(s['mean'] for s in rows.values()):.4f}-{max(s['mean'] for s in rows.values()):.4f}")
    nested, chosen = nested_b1(data, profile, cand, fits, grid, (0.0,) + ws, cache, scorer=scorer)
    print(f"{name}, nested: {nested['mean']:.4f}/{nested['worst_decile_mean']:.4f}; chosen per fold: "
          + "; ".join(f"{k.kind} k {k.k} w {w}" for k, w in chosen), flush=True)
