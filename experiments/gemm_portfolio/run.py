"""A portfolio first round for the GEMM search: after the zero-trial pick, the next configs are chosen so that,
on the new shape's nearest training shapes, the best of the chosen set is as fast as it can be (a greedy cover of
the neighbours' top configs), instead of the GP's lowest bounds on the prior. Cross-validated on train, folds by
shape (as `rooftune fit`) and by layer (N, K, layout), beside the shipped search on the same folds.

For a held-back shape: the fold's residual and vote (the shipped setting: ridge 0.1, weight 5, vote of 3 at 0.5 /
0.5, kappa 2) give the prior and the pick, as shipped. The neighbours are the k nearest training shapes of the other
folds (roofline/neighbours.py `point`), each known only by its top 30 configs' regrets (what a shipped neighbour
table holds); a config outside a neighbour's top 30 counts as 0 there. Among the prior's best `pool` configs, the
greedy adds the one that most raises the mean over neighbours of max over the set of exp(-regret); ties (and
configs no neighbour knows) go by the prior. The first round of 8 is: the pick, the portfolio's `extra` configs, then
the GP's own choices; later rounds are the shipped GP's. Train only; nothing shipped is read or changed.

python3 run.py [--seeds 0,1,2] [--by shape|layer] [--pick]   (--pick: the pick itself by the neighbours)"""
import math
import sys

import numpy as np

from rooftune.candidates.families import KernelSpec
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.neighbours import VoteSettings, nearest, point
from rooftune.tuner import fitting
from rooftune.tuner.search.gp import FAILED_PENALTY, Belief, SearchSettings, config_embedding, next_round

BUDGETS = fitting.CV_BUDGETS
SEARCH = SearchSettings(kappa=2.0, length_scale=2.0, prior_sd=0.1)
VOTE = VoteSettings(3, 0.5, 0.5)
RIDGE = RidgeSettings(0.1, 5.0)
# (name, neighbours, pool, portfolio configs after the pick)
VARIANTS = [("shipped", 0, 0, 0)] + [(f"k {k}, pool {p}, +{e}", k, p, e)
                                    for k in (3, 5, 10) for p in (10, 20, 60) for e in (2, 4)]
# --pick: the pick itself by the neighbours (extra -1): the config of the pick's own ranking's best `pool` that the
# k nearest training shapes rate best on average (ties by that ranking); the search otherwise as shipped
PICK_VARIANTS = [("shipped", 0, 0, 0)] + [(f"pick k {k}, pool {p}", k, p, -1) for k in (3, 5, 10) for p in (2, 3, 5, 10)]


def neighbour_pick(own, configs, tops, pool):
    """The config of `own`'s best `pool` with the best mean exp(-regret) over the neighbours' top configs."""
    order = [int(x) for x in np.argsort(own, kind="stable")[:pool]]
    perf = [np.mean([math.exp(-t[configs[x]]) if configs[x] in t else 0.0 for t in tops]) for x in order]
    return order[int(np.argmax(perf))]


def portfolio(pick, prior, configs, tops, pool, extra):
    """The pick, then `extra` configs of the prior's best `pool` that most raise the neighbours' mean best."""
    order = [int(i) for i in np.argsort(prior, kind="stable")[:pool]]
    perf = np.array([[math.exp(-top[configs[i]]) if configs[i] in top else 0.0 for i in order] for top in tops])
    chosen, best = [pick], np.zeros(len(tops))
    if configs[pick] in [configs[i] for i in order]:
        best = perf[:, order.index(pick)]
    for _ in range(extra):
        gains = np.maximum(perf, best[:, None]).mean(axis=0) - best.mean()
        gains[[order.index(c) for c in chosen if c in order]] = -1.0
        j = int(np.argmax(gains))  # first of the ties: the prior's order
        if gains[j] <= 1e-9:
            break
        chosen.append(order[j])
        best = np.maximum(best, perf[:, j])
    return chosen


def search_from(configs, prior, measure, budget, first):
    """tuner/search/gp.py `search` with the first round starting with `first` (indices), the GP filling the rest."""
    belief = Belief(np.asarray(prior, dtype=float), config_embedding(configs), SEARCH)
    size = min(SEARCH.first_round, budget, len(configs))
    batch = list(first) + [i for i in next_round(belief, size, SEARCH.kappa) if i not in first]
    batch = batch[:size]
    trials = []
    while batch:
        for i, trial in zip(batch, measure([configs[i] for i in batch])):
            trials.append(trial)
            belief.add(i, math.log(trial.time_us) if trial.ok else belief.prior[i] + FAILED_PENALTY)
        left = min(budget - len(trials), len(configs) - len(trials))
        if left <= 0:
            break
        batch = next_round(belief, min(SEARCH.round_size, left), SEARCH.kappa)
    return trials


def seed_scores(data, profile, tops_all, points):
    fits = fitting.fold_fits(data, RIDGE, None)
    votes = fitting.fold_votes(data, fits, VOTE.k, profile)
    out = {name: np.zeros((len(data), len(BUDGETS))) for name, *_ in VARIANTS}
    for test, fitted in fits:
        held = set(test)
        pool_idx = [j for j in range(len(data)) if j not in held and tops_all[j]]
        coef = np.array([fitted.coefficients.get(n, 0.0) for n in data[0].names])
        for i in test:
            d = data[i]
            keep = np.flatnonzero(d.fits)
            configs, measure = fitting.recorded_measure(d)
            base = d.log_predicted[keep] + d.x[keep] @ coef
            prior = base + VOTE.w_search * votes[i][keep]
            own = base + VOTE.w_pick * votes[i][keep]
            pick = int(np.argmin(own))
            for name, k, pool, extra in VARIANTS:
                first = [pick]
                if k:
                    tops = [tops_all[pool_idx[n]] for n in nearest(points[pool_idx], points[i], k)]
                    first = ([neighbour_pick(own, configs, tops, pool)] if extra < 0
                             else portfolio(pick, prior, configs, tops, pool, extra))
                out[name][i] = fitting.prefix_scores(d, search_from(configs, prior, measure, max(BUDGETS), first),
                                                     BUDGETS)
    return out


def main(seeds, by, pick):
    global VARIANTS
    if pick:
        VARIANTS = PICK_VARIANTS
    if by == "layer":
        KernelSpec.fold_group = lambda self, shape: (shape.n, shape.k, shape.layout) if self.name == "gemm" else None
    profile = load_profile("h200")
    shapes = fitting.fit_shapes_from_records(load_records("datasets/h200/gemm/train", kernel="gemm"))
    data = fitting.prepare(shapes, profile)
    tops_all = [(e.regret if e is not None else {}) for e in (fitting.shape_neighbour(d) for d in data)]
    points = np.stack([point(d.source.shape, profile) for d in data])
    print(f"{len(data)} training shapes; folds by {by}", flush=True)
    for seed in seeds:
        fitting.FOLD_SEED = seed
        scores = seed_scores(data, profile, tops_all, points)
        for name, *_ in VARIANTS:
            s = scores[name]
            cells = "  ".join(f"{b}: {summarize(s[:, j])['mean']:.4f} / {summarize(s[:, j])['worst_decile_mean']:.4f}"
                              for j, b in enumerate(BUDGETS))
            print(f"seed {seed} | {name:20s} | {cells}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    seeds, by, pick = (0, 1, 2), "shape", "--pick" in args
    args = [a for a in args if a != "--pick"]
    while args:
        flag, value, args = args[0], args[1], args[2:]
        if flag == "--seeds":
            seeds = tuple(int(x) for x in value.split(","))
        elif flag == "--by":
            by = value
    main(seeds, by, pick)
