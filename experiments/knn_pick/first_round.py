"""Variant: the vote orders the first round only (w_search in its prior), later GP rounds keep the residual's prior."""
import math

import numpy as np

from knn_cv import BUDGETS, Knn, load, tables_for, Table, error_row, vote, fmt, baseline
from rooftune.candidates import Trial
from rooftune.eval.scoring.metrics import summarize
from rooftune.tuner.fitting import prefix_scores, prior_log_us
from rooftune.tuner.search.gp import Belief, FAILED_PENALTY, config_embedding, next_round


def search_first_round(candidates, prior, first_prior, measure, budget, settings, first):
    belief = Belief(np.asarray(first_prior, float), config_embedding(candidates), settings)
    size = min(settings.first_round, budget, len(candidates))
    batch = next_round(belief, size, settings.kappa)
    batch = [first] + [i for i in batch if i != first][:size - 1]
    belief = Belief(np.asarray(prior, float), belief.z * settings.length_scale, settings)
    trials = []
    while batch:
        for i, t in zip(batch, measure([candidates[i] for i in batch])):
            trials.append(t)
            belief.add(i, math.log(t.time_us) if t.ok else belief.prior[i] + FAILED_PENALTY)
        left = min(budget - len(trials), len(candidates) - len(trials))
        if left <= 0:
            break
        batch = next_round(belief, min(settings.round_size, left), settings.kappa)
    return trials


data, profile, cand, fits = load()
print("base", fmt(baseline(data, cand, fits)))
cache = {}
for ws in (0.5, 1.0):
    knn = Knn(k=5, kind="mnk-waves", top=30, w_pick=0.5, w_search=ws)
    tables = tables_for(data, profile, knn, cache)
    scores = np.zeros((len(data), len(BUDGETS)))
    for test, fitted in fits:
        pool = [Table(tables[j].features, error_row(data[j], tables[j], prior_log_us(data[j], fitted.coefficients)))
                for j in range(len(data)) if j not in set(test)]
        for i in test:
            d = data[i]
            v = vote(d, pool, profile, knn)
            keep = np.flatnonzero(d.fits)
            configs = [d.source.configs[j] for j in keep]
            times = {c: d.source.time_us[j] for c, j in zip(configs, keep)}
            measure = lambda b: [Trial(c, float(times[c])) if math.isfinite(times[c]) else Trial(c, None, error="f") for c in b]
            prior = prior_log_us(d, fitted.coefficients)[keep]
            first = int(np.argmin(prior + 0.5 * v[keep]))
            trials = search_first_round(configs, prior, prior + ws * v[keep], measure, 20, cand.search, first)
            scores[i] = prefix_scores(d, trials, BUDGETS)
    print("first round only, w_search", ws, fmt({b: summarize(scores[:, j]) for j, b in enumerate(BUDGETS)}), flush=True)
