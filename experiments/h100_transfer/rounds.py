"""Does measuring in smaller rounds rank better at 5 configs? (issue 56's 5-config GEMM target, 0.99 / 0.95.)

Cross-validated on training shapes only, with the shipped setting's ridge and pick (its fold fits computed once) and
no neighbour vote, for several (first_round, round_size) pairs; the other search constants as shipped. A live tune
pays one compile-and-measure latency per round, so smaller rounds cost wall time the replay does not show.

    PYTHONPATH=$PWD python3 experiments/h100_transfer/rounds.py --gpu h100_sxm --data datasets/h100/gemm/train \
        --also datasets/h200/gemm/train
"""
import argparse
from dataclasses import replace

from rooftune.eval.datasets.format import read_manifest
from rooftune.eval.datasets.readers import load_records
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import PickSettings, RidgeSettings, prepare
from rooftune.roofline.releases import shipped_residual_path
from rooftune.roofline.residual import read_residual
from rooftune.tuner.fitting import (CV_BUDGETS, Candidate, cross_validate, fit_shapes_from_records, fold_fits,
                                    objective, refuse_held_out)
from rooftune.tuner.search.gp import SearchSettings

ROUNDS = ((8, 6), (5, 5), (4, 4), (4, 6), (4, 8), (4, 16), (3, 2), (3, 3), (3, 6), (2, 3), (5, 6), (6, 6))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--also", action="append", default=[], help="DIR:GPU, another GPU's training shapes")
    args = ap.parse_args()
    profile = load_profile(args.gpu)
    refuse_held_out(read_manifest(args.data), args.data)
    data = prepare(fit_shapes_from_records(load_records(args.data, kernel="gemm")), profile)
    extra = []
    for item in args.also:
        folder, gpu = item.split(":")
        refuse_held_out(read_manifest(folder), folder)
        extra += prepare(fit_shapes_from_records(load_records(folder, kernel="gemm")), load_profile(gpu))
    shipped = read_residual(shipped_residual_path("gemm", profile, "3.6.0"))
    fit = shipped.fit
    ridge = RidgeSettings(fit["ridge"], fit["near_best_weight"])
    pick = PickSettings(**fit["pick"]) if fit["pick"] else None
    base = SearchSettings.from_dict(shipped.strategy)
    fits = fold_fits(data, ridge, pick, also=extra)
    print(f"{args.data}: {len(data)} shapes (+{len(extra)} in every fit); search as shipped {base.to_dict()}")
    for first, size in ROUNDS:
        cv = cross_validate(data, Candidate(ridge, replace(base, first_round=first, round_size=size), pick), fits=fits)
        cells = "  ".join(f"{cv[b]['mean']:.3f} / {cv[b]['worst_decile_mean']:.3f}" for b in CV_BUDGETS)
        print(f"  rounds {first} then {size}: {cells}   objective {objective(cv):.4f}")


if __name__ == "__main__":
    main()
