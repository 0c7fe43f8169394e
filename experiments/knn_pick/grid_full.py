"""The whole search's CV on train (budgets 1, 5, 10, 20) over a grid of vote settings; one line per setting."""
import itertools
import sys

from knn_cv import Knn, baseline, cv_full, fmt, load, objective

data, profile, cand, fits = load()
cache = {}
print("base", fmt(baseline(data, cand, fits)), flush=True)
kinds = sys.argv[1].split(",") if len(sys.argv) > 1 else ["mnk", "mnk-waves"]
for kind, k, wp, ws in itertools.product(kinds, (3, 5, 10), (0.5, 0.75, 1.0), (0.0, 0.25, 0.5)):
    cv, _ = cv_full(data, profile, cand, fits, Knn(k=k, kind=kind, top=30, w_pick=wp, w_search=ws), cache)
    print(kind, k, wp, ws, f"obj {objective(cv):.4f}", fmt(cv), flush=True)
