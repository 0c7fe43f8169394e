"""Would more training shapes sharpen the GEMM zero-trial pick? A learning curve on the training data only.

    PYTHONPATH=$PWD python3 experiments/gemm_pick/learning_curve.py [--data DIR --release 3.9] [--seeds 3]

Each of `rooftune fit`'s five folds (the same seeded assignment) is scored by a residual fitted on N shapes drawn
from the other four folds (N = a quarter, a half, three quarters, all of them; `--seeds` draws each), with the
neighbour vote drawn from the same N shapes. The settings (ridge, near-best weight, pick correction, vote, search
constants) are those of the shipped residual fitted under the data's Triton release, held fixed: only the number of
shapes varies. Prints, per N, the mean and worst-tenth mean over every training shape at 1, 5 and 20 configs.
A held-out folder is refused, as `rooftune fit` refuses it (`refuse_held_out`: by the lists its manifest records).
"""
import argparse
import time

import numpy as np

from rooftune.eval.datasets.format import read_manifest
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import PickSettings, RidgeSettings
from rooftune.roofline.neighbours import VoteSettings
from rooftune.roofline.releases import load_residual
from rooftune.tuner.fitting import (
    fit_residual,
    fit_shapes_from_records,
    fold_assignment,
    fold_votes,
    prefix_scores,
    prepare,
    refuse_held_out,
    replay_search,
)
from rooftune.tuner.search.gp import SearchSettings

BUDGETS = (1, 5, 20)


def settings_of(release: str):
    """The shipped GEMM residual's chosen settings under `release`: ridge, pick, vote, search."""
    shipped = load_residual("gemm", load_profile("h200"), release)
    fit = shipped.fit
    pick = PickSettings(**fit["pick"]) if fit.get("pick") else None
    vote = VoteSettings(**fit["vote"]) if fit.get("vote") else None
    return RidgeSettings(fit["ridge"], fit["near_best_weight"]), pick, vote, SearchSettings.from_dict(shipped.strategy)


def score_fold(data, test: list[int], train: list[int], settings, profile) -> np.ndarray:
    """The test shapes' scores at BUDGETS under a residual (and vote) from `train` only."""
    ridge, pick, vote, search = settings
    fitted = fit_residual([data[i] for i in train], ridge, pick)
    sub = [data[i] for i in train] + [data[i] for i in test]
    held = list(range(len(train), len(sub)))
    votes = fold_votes(sub, [(held, fitted)], vote.k, profile) if vote else {}
    out = []
    for j in held:
        trials = replay_search(sub[j], fitted.coefficients, search, pick=fitted.pick or None,
                               vote=votes.get(j), weights=vote)
        out.append(prefix_scores(sub[j], trials, BUDGETS))
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="datasets/h200/gemm/train")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--release", default="3.6", help="the Triton release the data were swept under (its settings)")
    args = ap.parse_args()
    refuse_held_out(read_manifest(args.data), args.data)
    start = time.time()
    profile = load_profile("h200")
    settings = settings_of(args.release)
    data = prepare(fit_shapes_from_records(load_records(args.data)), profile)
    folds = fold_assignment(data)
    pool_size = len(data) - max(len(f) for f in folds)
    sizes = sorted({max(8, round(pool_size * q)) for q in (0.25, 0.5, 0.75)} | {pool_size})
    print(f"{args.data}: {len(data)} shapes, Triton {args.release}'s shipped settings; N of each fold's "
          f"{pool_size}+ other shapes")
    for n in sizes:
        runs = []
        for seed in range(args.seeds if n < pool_size else 1):
            scores = np.zeros((len(data), len(BUDGETS)))
            rng = np.random.default_rng(seed)
            for test in folds:
                held = set(test)
                pool = [i for i in range(len(data)) if i not in held]
                train = sorted(rng.choice(pool, size=min(n, len(pool)), replace=False).tolist())
                scores[test] = score_fold(data, test, train, settings, profile)
            runs.append([summarize(scores[:, b]) for b in range(len(BUDGETS))])
        cells = []
        for b, budget in enumerate(BUDGETS):
            mean = np.mean([r[b]["mean"] for r in runs])
            worst = np.mean([r[b]["worst_decile_mean"] for r in runs])
            cells.append(f"{budget:>2}: {mean:.3f} / {worst:.3f}")
        print(f"N {n:>3} ({len(runs)} draw{'s' if len(runs) > 1 else ''})  " + "   ".join(cells))
    print(f"({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
