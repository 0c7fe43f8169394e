"""Where the GEMM zero-trial pick loses on the training data (never the held-out), cross-validated as `rooftune fit`
does: each shape's pick comes from the residual fitted on the other folds, with the neighbour vote drawn from them.

    PYTHONPATH=$PWD python3 experiments/gemm_groupm/analyse.py [--worst 25] [--cv-only] [--fold-seed S]

The setting is the shipped residual's (ridge 1, weight 5, pick by the ridge fit, vote of 5 at 0.5 / 0.5, the
search's constants); `--cv-only` prints the CV at 1, 5, 10 and 20 configs under it and stops (the grid's choice,
`rooftune fit`, may differ; this is the quick check a model change gets first).
"""
import argparse
import sys
import time

import numpy as np

from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.neighbours import VoteSettings
from rooftune.tuner import fitting
from rooftune.tuner.fitting import (
    CV_BUDGETS,
    fit_shapes_from_records,
    fold_fits,
    fold_votes,
    prefix_scores,
    prepare,
    prior_log_us,
    replay_search,
)
from rooftune.tuner.search.gp import SearchSettings

DATA = "datasets/h200/gemm/train"
RIDGE = RidgeSettings(1.0, 5.0)
VOTE = VoteSettings(5, 0.5, 0.5)
SEARCH = SearchSettings.from_dict({"first_round": 8, "round_size": 6, "prior_sd": 0.1, "length_scale": 1.0,
                                   "offset_sd": 0.3, "noise_sd": 0.01, "kappa": 2.0})
TERMS = ("compute_us", "smem_us", "l2_us", "memory_us", "latency_us", "splitk_us", "waves", "wave_efficiency",
         "ctas_per_sm", "occupancy", "padding_efficiency")


def config_text(c) -> str:
    p = dict(c.kernel_params())
    return (f"{p['BLOCK_M']}x{p['BLOCK_N']}" + (f"+{p['BLOCK_N2']}" if p.get("BLOCK_N2") else "")
            + f"x{p['BLOCK_K']} g{p['GROUP_M']} sk{p['SPLIT_K']}" + (" fix" if p.get("FIXUP") else "")
            + (" pers" if p.get("PERSISTENT") else "") + (" tma" if p.get("TMA") else "")
            + f" w{c.num_warps} s{c.num_stages}")


def terms_text(bd, i) -> str:
    return " ".join(f"{name.replace('_us', '')}={float(getattr(bd, name)[i]):.3g}" for name in TERMS)


FAMILIES = {"same tile, BLOCK_K, split, schedule": ("BLOCK_M", "BLOCK_N", "BLOCK_N2", "BLOCK_K", "SPLIT_K", "FIXUP",
                                                   "PERSISTENT"),
            "same tile": ("BLOCK_M", "BLOCK_N", "BLOCK_N2")}


def shape_class(s, best_us: float) -> str:
    """The regimes the worst picks fall in."""
    if best_us < 6.0:
        return "tiny (best < 6 us)"
    if s.m <= 32:
        return "decode (M <= 32)"
    if min(s.m, s.n, s.k) >= 768 and s.m * s.n >= 2 ** 22:
        return "large (M, N, K >= 768, M*N >= 4M)"
    return "other"


def family_scores(d, pick: int, t: np.ndarray) -> list[float]:
    """The score had the pick been the best measured config of its family (FAMILIES): how much of the loss is the
    tile, how much BLOCK_K / split-K / schedule, how much stages, warps and GROUP_M."""
    params = [dict(c.kernel_params()) for c in d.source.configs]
    out = []
    for keys in FAMILIES.values():
        own = [j for j, p in enumerate(params) if all(p[k] == params[pick][k] for k in keys) and np.isfinite(t[j])]
        out.append(float(np.nanmin(t) / np.min(t[own])))
    return out


def large_shape_bias(data, coefficients, votes, classes, top: int = 30) -> None:
    """On the large shapes, the pick's prior minus the measured log time of each shape's `top` fastest configs (centred
    on their mean): by tile, BLOCK_K and warps, the configs it favours (negative) or holds back (positive)."""
    groups: dict = {}
    for i, name in classes.items():
        if not name.startswith("large"):
            continue
        d = data[i]
        t = np.where(d.fits, d.source.time_us, np.nan)
        err = prior_log_us(d, coefficients[i]) + VOTE.w_pick * votes[i] - np.log(t)
        fastest = np.argsort(np.where(np.isfinite(t), t, np.inf))[:top]
        err = err - err[fastest].mean()
        for c in fastest:
            cfg = d.source.configs[c]
            p = dict(cfg.kernel_params())
            key = (f"{p['BLOCK_M']}x{p['BLOCK_N']}" + (f"+{p['BLOCK_N2']}" if p["BLOCK_N2"] else "")
                   + f"x{p['BLOCK_K']} w{cfg.num_warps}" + (" pers" if p["PERSISTENT"] else ""))
            groups.setdefault(key, []).append(err[c])
    print(f"large shapes: the pick's prior - measured log time of each shape's {top} fastest (centred), by config kind")
    for key, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:12]:
        print(f"  {key:26s} {len(v):3d}  {np.mean(v):+.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--worst", type=int, default=25)
    ap.add_argument("--cv-only", action="store_true")
    ap.add_argument("--ridge", type=float, default=RIDGE.ridge)
    ap.add_argument("--weight", type=float, default=RIDGE.near_best_weight, help="near-best weight of the ridge fit")
    ap.add_argument("--dump", help="write each shape's scores at 1, 5, 10, 20 configs to this file")
    ap.add_argument("--fold-seed", type=int, default=fitting.FOLD_SEED, help="which shapes share a fold")
    args = ap.parse_args()
    fitting.FOLD_SEED = args.fold_seed
    if "heldout" in args.data:
        sys.exit("training data only")
    start = time.time()
    profile = load_profile("h200")
    data = prepare(fit_shapes_from_records(load_records(args.data)), profile)
    fits = fold_fits(data, RidgeSettings(args.ridge, args.weight), None)
    votes = fold_votes(data, fits, VOTE.k, profile)
    scores = np.zeros((len(data), len(CV_BUDGETS)))
    coefficients = {}
    for test, fitted in fits:
        for i in test:
            coefficients[i] = fitted.coefficients
            trials = replay_search(data[i], fitted.coefficients, SEARCH, vote=votes[i], weights=VOTE)
            scores[i] = prefix_scores(data[i], trials, CV_BUDGETS)
    for j, b in enumerate(CV_BUDGETS):
        s = summarize(scores[:, j])
        print(f"CV at {b:>2}: mean {s['mean']:.4f} p10 {s['p10']:.4f} worst-decile {s['worst_decile_mean']:.4f}")
    print(f"({time.time() - start:.0f} s)")
    if args.dump:
        with open(args.dump, "w") as f:
            for d, row in zip(data, scores):
                s = d.source.shape
                f.write(f"{s.m}x{s.n}x{s.k}-{s.layout} " + " ".join(f"{v:.4f}" for v in row) + "\n")
    if args.cv_only:
        return
    picks, classes, family = {}, {}, {}
    for test, fitted in fits:
        for i in test:
            d = data[i]
            t = np.where(d.fits, d.source.time_us, np.nan)
            picks[i] = int(np.argmin(prior_log_us(d, coefficients[i]) + VOTE.w_pick * votes[i]))
            classes[i] = shape_class(d.source.shape, float(np.nanmin(t)))
            family[i] = family_scores(d, picks[i], t)
    worst = set(np.argsort(scores[:, 0])[:max(1, len(data) // 10)].tolist())
    print("\nbudget-1 loss by class: shapes, mean score, shapes among the worst tenth, share of the summed loss")
    loss = 1.0 - scores[:, 0]
    for name in sorted(set(classes.values())):
        members = [i for i in classes if classes[i] == name]
        print(f"  {name:36s} {len(members):3d}  {scores[members, 0].mean():.3f}  {len(worst & set(members)):2d}  "
              f"{loss[members].sum() / loss.sum():.2f}")
    f = np.array([family[i] for i in range(len(data))])
    order = np.argsort(scores[:, 0])[:max(1, len(data) // 10)]
    print("had the pick been its family's best (mean / worst-tenth mean of the pick's shapes):")
    print(f"  as picked{'':28s} {scores[:, 0].mean():.4f} / {scores[order, 0].mean():.4f}")
    for j, name in enumerate(FAMILIES):
        print(f"  {name:36s} {f[:, j].mean():.4f} / {f[order, j].mean():.4f}")
    large_shape_bias(data, coefficients, votes, classes)
    kinds = {"split-K": lambda c: c["SPLIT_K"] > 1, "2 stages": lambda c: c.num_stages == 2,
             "8 warps": lambda c: c.num_warps == 8, "composite": lambda c: c["BLOCK_N2"] > 0}
    print("shapes whose pick / whose best is of a kind:")
    for name, test in kinds.items():
        best = [int(np.nanargmin(np.where(d.fits, d.source.time_us, np.nan))) for d in data]
        print(f"  {name:10s} {sum(test(data[i].source.configs[picks[i]]) for i in picks):3d} / "
              f"{sum(test(d.source.configs[b]) for d, b in zip(data, best)):3d}")
    for i in np.argsort(scores[:, 0])[:args.worst]:
        d = data[i]
        t = np.where(d.fits, d.source.time_us, np.nan)
        model = np.exp(d.log_predicted)
        corrected = prior_log_us(d, coefficients[i])
        pick_prior = corrected + VOTE.w_pick * votes[i]
        p, b = int(np.argmin(pick_prior)), int(np.nanargmin(t))
        rank = int((t < t[p]).sum()) + 1
        s = d.source.shape
        print(f"\n{scores[i, 0]:.3f} (5: {scores[i, 1]:.3f}) {s.m}x{s.n}x{s.k} {s.layout} pick's measured rank {rank}")
        for tag, c in (("pick", p), ("best", b)):
            print(f"  {tag} {config_text(d.source.configs[c]):44s} meas {t[c]:8.2f}  model {model[c]:8.2f}  "
                  f"corr {np.exp(corrected[c] - corrected[b]):.3f}x best  vote {votes[i][c]:+.3f}")
            print(f"       {terms_text(d.breakdown, c)}")


if __name__ == "__main__":
    main()
