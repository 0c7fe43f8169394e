"""The search's constants re-chosen with the vote in its prior (mnk-waves, k = 5, w_pick 0.5, w_search 0.5)."""
import itertools
from dataclasses import replace

from knn_cv import Knn, baseline, cv_full, fmt, load, objective

data, profile, cand, fits = load()
cache = {}
for kappa, length, sd in itertools.product((1.0, 2.0), (1.0, 2.0), (0.05, 0.1)):
    c = replace(cand, search=replace(cand.search, kappa=kappa, length_scale=length, prior_sd=sd))
    base = baseline(data, c, fits)
    for ws in (0.0, 0.5):
        cv, _ = cv_full(data, profile, c, fits, Knn(k=5, kind="mnk-waves", top=30, w_pick=0.5, w_search=ws), cache)
        print(kappa, length, sd, ws, f"obj {objective(cv):.4f} (no vote {objective(base):.4f})", fmt(cv), flush=True)
