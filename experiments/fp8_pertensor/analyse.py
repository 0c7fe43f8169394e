"""Where the FP8 fused-MoE zero-trial pick loses by scale layout (per tensor `w8a8` against 128x128 `block`), on the
training data only (datasets/h200/moe_fp8/train; never a held-out folder), cross-validated as `rooftune fit moe-fp8`
does: whole layers held back, each shape's pick from the residual fitted on the other folds.

    PYTHONPATH=$PWD python3 experiments/fp8_pertensor/analyse.py [--worst 12] [--cv-only]

The setting is the shipped residual's (ridge 1, weight 5, the pick's own correction at temperature 0.03 and penalty
0.1, κ 2, length 1, prior sd 0.1; no neighbour vote), which `rooftune fit moe-fp8` chooses again on this data;
`--cv-only` prints the CV by layout and GEMM and stops (the quick check a model change gets first).
"""
import argparse
import sys
import time
from collections import Counter

import numpy as np

from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import PickSettings, RidgeSettings
from rooftune.roofline.residual import pick_coefficients
from rooftune.tuner.fitting import (
    fit_shapes_from_records,
    fold_fits,
    prefix_scores,
    prepare,
    prior_log_us,
    replay_search,
)
from rooftune.tuner import fitting
from rooftune.tuner.search.gp import SearchSettings

DATA = "datasets/h200/moe_fp8/train"
BUDGETS = (1, 5, 10, 20)
RIDGE = RidgeSettings(1.0, 5.0)
PICK = PickSettings()
SEARCH = SearchSettings.from_dict({"first_round": 8, "round_size": 6, "prior_sd": 0.1, "length_scale": 1.0,
                                   "offset_sd": 0.3, "noise_sd": 0.01, "kappa": 2.0})
TERMS = ("compute_us", "smem_us", "l2_us", "memory_us", "latency_us", "indirection_us", "empty_us", "scale_us",
         "waves", "wave_efficiency", "ctas_per_sm", "regs_per_thread", "row_efficiency")
PARAMS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")
SHORT = {"BLOCK_SIZE_M": "BM", "BLOCK_SIZE_N": "BN", "BLOCK_SIZE_K": "BK", "GROUP_SIZE_M": "G", "num_warps": "w",
         "num_stages": "s"}


def config_text(c) -> str:
    return f"{c['BLOCK_SIZE_M']}x{c['BLOCK_SIZE_N']}x{c['BLOCK_SIZE_K']} g{c['GROUP_SIZE_M']} w{c.num_warps} s{c.num_stages}"


def terms_text(bd, i) -> str:
    return " ".join(f"{name.replace('_us', '')}={float(getattr(bd, name)[i]):.3g}" for name in TERMS)


def layer_text(s) -> str:
    return f"E{s.experts} top{s.topk} H{s.hidden} I{s.intermediate} {s.quant}"


def cv_table(title: str, scores: np.ndarray, groups: dict[str, list[int]]) -> None:
    print(f"\n{title}: mean / worst-tenth mean at {', '.join(map(str, BUDGETS))} configs")
    for name, members in groups.items():
        cells = [summarize(scores[members, j]) for j in range(len(BUDGETS))]
        print(f"  {name:34s} {len(members):3d}  " + "  ".join(f"{c['mean']:.4f} / {c['worst_decile_mean']:.4f}"
                                                          for c in cells))


def family_scores(d, pick: int, t: np.ndarray) -> list[float]:
    """The score had the pick been the best measured config of its family: same tile and BLOCK_SIZE_K (stages, warps
    and GROUP_SIZE_M free), same tile (BLOCK_SIZE_K free too)."""
    out = []
    for keys in (("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"), ("BLOCK_SIZE_M", "BLOCK_SIZE_N")):
        own = [j for j, c in enumerate(d.source.configs)
               if all(c[k] == d.source.configs[pick][k] for k in keys) and np.isfinite(t[j])]
        out.append(float(np.nanmin(t) / np.min(t[own])))
    return out


def bias_by_param(data, priors, members, top: int = 30) -> None:
    """Over each shape's `top` fastest configs: the pick's prior minus the measured log time, centred per shape, by the
    value of each parameter (negative: the pick favours it beyond its measured time)."""
    for name in PARAMS:
        groups: dict = {}
        for i in members:
            d = data[i]
            t = np.where(d.fits, d.source.time_us, np.nan)
            fastest = np.argsort(np.where(np.isfinite(t), t, np.inf))[:top]
            err = priors[i][fastest] - np.log(t[fastest])
            err -= err.mean()
            for c, e in zip(fastest, err):
                groups.setdefault(d.source.configs[c][name], []).append(e)
        print(f"    {SHORT[name]:3s} " + "  ".join(f"{v}: {np.mean(e):+.3f} ({len(e)})" for v, e in sorted(groups.items())))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--worst", type=int, default=12)
    ap.add_argument("--cv-only", action="store_true")
    ap.add_argument("--fold-seed", type=int, default=fitting.FOLD_SEED,
                    help="which layers share a fold (6 layers in 5 folds): another seed shows the folds' noise")
    args = ap.parse_args()
    if "heldout" in args.data:
        sys.exit("training data only")
    fitting.FOLD_SEED = args.fold_seed
    start = time.time()
    profile = load_profile("h200")
    data = prepare(fit_shapes_from_records(load_records(args.data)), profile)
    fits = fold_fits(data, RIDGE, PICK)
    scores, model_scores = np.zeros((len(data), len(BUDGETS))), np.zeros((len(data), len(BUDGETS)))
    ridge_of, pick_of = {}, {}
    for test, fitted in fits:
        for i in test:
            ridge_of[i], pick_of[i] = fitted.coefficients, pick_coefficients(fitted.coefficients, fitted.pick)
            scores[i] = prefix_scores(data[i], replay_search(data[i], fitted.coefficients, SEARCH, pick=fitted.pick),
                                      BUDGETS)
            model_scores[i] = prefix_scores(data[i], replay_search(data[i], {}, SEARCH), BUDGETS)
    shapes = [d.source.shape for d in data]
    every = list(range(len(data)))
    by = {"all": every}
    for quant in ("w8a8", "block"):
        by[quant] = [i for i in every if shapes[i].quant == quant]
        for gemm in ("gate_up", "down"):
            by[f"{quant} {gemm}"] = [i for i in every if shapes[i].quant == quant and shapes[i].gemm == gemm]
    layers = {}
    for i in every:
        layers.setdefault(layer_text(shapes[i]), []).append(i)
    cv_table("CV (rooftune: the residual of the other folds)", scores, by | layers)
    cv_table("the model alone (its search, nothing fitted)", model_scores, by)
    print(f"({time.time() - start:.0f} s)")
    if args.cv_only:
        return

    picks, priors = {}, {}
    for i in every:
        priors[i] = prior_log_us(data[i], pick_of[i])
        picks[i] = int(np.argmin(priors[i]))
    print("\nhad the pick been its family's best, mean / worst-tenth mean (budget 1):")
    for quant in ("w8a8", "block"):
        members = by[quant]
        fam = np.array([family_scores(data[i], picks[i], np.where(data[i].fits, data[i].source.time_us, np.nan))
                        for i in members])
        worst = np.argsort(scores[members, 0])[:max(1, len(members) // 10)]
        print(f"  {quant:5s} as picked {scores[members, 0].mean():.4f} / {scores[members, 0][worst].mean():.4f}; "
              f"same tile and BLOCK_SIZE_K {fam[:, 0].mean():.4f} / {fam[worst, 0].mean():.4f}; "
              f"same tile {fam[:, 1].mean():.4f} / {fam[worst, 1].mean():.4f}")
    print("\nparameters where the pick differs from the best (shapes of the layout):")
    for quant in ("w8a8", "block"):
        diff = Counter()
        for i in by[quant]:
            d = data[i]
            b = int(np.nanargmin(np.where(d.fits, d.source.time_us, np.nan)))
            diff.update(SHORT[k] for k in PARAMS if d.source.configs[picks[i]][k] != d.source.configs[b][k])
        print(f"  {quant:5s} ({len(by[quant])} shapes) " + ", ".join(f"{k} {v}" for k, v in diff.most_common()))
    ridge = {i: prior_log_us(data[i], ridge_of[i]) for i in every}
    model = {i: np.where(data[i].fits, data[i].log_predicted, np.inf) for i in every}
    print("\nprior - measured log time over each shape's 30 fastest configs (centred), by parameter value; the pick's "
          "prior (its own correction), the ridge fit's, the model alone's; by layout and M class:")
    for quant in ("w8a8", "block"):
        for lo, hi in ((1, 16), (24, 128), (192, 4096)):
            members = [i for i in by[quant] if lo <= shapes[i].tokens <= hi]
            loss = (1 - scores[members, 0]).sum() / (1 - scores[by[quant], 0]).sum()
            print(f" {quant} M {lo}-{hi}: {len(members)} shapes, mean {scores[members, 0].mean():.4f} at 1 config, "
                  f"{loss:.0%} of the layout's summed loss")
            for tag, prior in (("pick", priors), ("ridge", ridge), ("model", model)):
                print(f"  {tag}")
                bias_by_param(data, prior, members)

    for quant in ("w8a8", "block"):
        members = by[quant]
        worst = sorted(members, key=lambda i: scores[i, 0])[:args.worst if quant == "w8a8" else args.worst // 3]
        print(f"\nworst {quant} shapes at 1 config: the pick (corrected: its prior over the best's, x) and the best")
        for i in worst:
            d = data[i]
            t = np.where(d.fits, d.source.time_us, np.nan)
            model = np.exp(d.log_predicted)
            p, b = picks[i], int(np.nanargmin(t))
            rank = int((t < t[p]).sum()) + 1
            s = d.source.shape
            print(f"{scores[i, 0]:.3f} (5: {scores[i, 1]:.3f}) {layer_text(s)} M={s.tokens} {s.gemm} N={s.n} K={s.k} "
                  f"pick's measured rank {rank}; model alone's pick {model_scores[i, 0]:.3f}")
            for tag, c in (("pick", p), ("best", b)):
                print(f"  {tag} {config_text(d.source.configs[c]):28s} meas {t[c]:8.2f}  model {model[c]:8.2f}  "
                      f"corr {np.exp(priors[i][c] - priors[i][b]):.3f}x best")
                print(f"       {terms_text(d.breakdown, c)}")


if __name__ == "__main__":
    main()
