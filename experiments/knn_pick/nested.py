"""Nested CV of the product's vote choice (tuner/fitting.py `choose_vote` over VOTE_GRID), on GEMM train only: per
outer fold, the residual's shipped setting is refitted and the vote chosen by an inner 5-fold CV on the other four
folds; the chosen vote is then scored on the outer fold (neighbours from the other four folds only)."""
import sys

import numpy as np

from rooftune.eval.scoring.metrics import summarize
from rooftune.tuner.fitting import (
    CV_BUDGETS,
    choose_vote,
    cross_validate,
    fold_fits,
    fold_votes,
    prefix_scores,
    replay_search,
)
from knn_cv import load

kernel = sys.argv[1] if len(sys.argv) > 1 else "gemm"
data, profile, cand, fits = load(f"datasets/h200/{kernel}/train", kernel=kernel)
outer = {"alone": np.zeros((len(data), len(CV_BUDGETS))), "vote": np.zeros((len(data), len(CV_BUDGETS)))}
for test, fitted in fits:
    inner = [d for i, d in enumerate(data) if i not in set(test)]
    inner_fits = fold_fits(inner, cand.ridge, cand.pick)
    alone = cross_validate(inner, cand, fits=inner_fits)
    chosen, _, _ = choose_vote(kernel, inner, cand, alone, inner_fits, profile)
    print("fold of", len(test), "chose", chosen.vote, flush=True)
    votes = fold_votes(data, [(test, fitted)], chosen.vote.k, profile) if chosen.vote else {}
    for i in test:
        plain = replay_search(data[i], fitted.coefficients, cand.search, pick=fitted.pick)
        outer["alone"][i] = prefix_scores(data[i], plain, CV_BUDGETS)
        voted = replay_search(data[i], fitted.coefficients, cand.search, pick=fitted.pick, vote=votes.get(i),
                              weights=chosen.vote)
        outer["vote"][i] = prefix_scores(data[i], voted, CV_BUDGETS)
for name, scores in outer.items():
    print(name, "  ".join(f"{b}: {summarize(scores[:, j])['mean']:.4f}/{summarize(scores[:, j])['worst_decile_mean']:.4f}"
                          for j, b in enumerate(CV_BUDGETS)))
