"""The generic residual's leave-one-kernel-out check at several ridge strengths and feature sets, on a suite
dataset's training kernels only: `rooftune fit generic`'s own fit and check (tuner/generic_fitting.py `fit_generic`,
which never opens a held-out kernel's files), one setting at a time.

    python experiments/suite_residual/ridge_loko.py datasets/h100/suite > experiments/suite_residual/ridge_loko.log
"""

import sys

from rooftune.eval.datasets.suite import read_manifest
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings
from rooftune.roofline.generic_residual import FEATURE_NAMES
from rooftune.tuner.generic_fitting import fit_generic

FEATURE_SETS = {
    "all": FEATURE_NAMES,
    "fractions": ("tensor_frac", "vector_frac", "sfu_frac", "smem_frac", "l2_frac", "memory_frac", "latency_frac",
                  "serial_frac", "launch_frac"),
    "occupancy": ("occupancy", "ctas_per_sm", "log_waves", "wave_eff", "log_warps", "log_warps_sq", "stages",
                  "stages_sq"),
    "warps_stages": ("log_warps", "log_warps_sq", "stages", "stages_sq"),
}


def main(folder: str) -> None:
    profile = load_profile(read_manifest(folder)["profile"])
    for set_name, names in FEATURE_SETS.items():
        for ridge in (0.1, 1.0, 10.0, 100.0):
            fit = fit_generic(folder, profile, settings=RidgeSettings(ridge=ridge), features=names).fit
            if set_name == "all" and ridge == 0.1:
                alone = fit["model_alone"]
                print(f"{fit['calls']} calls of {len(fit['kernels'])} training kernels; model alone: b1 "
                      f"{alone['budget_1']['geomean']:.3f} (worst tenth {alone['budget_1']['worst_decile_mean']:.3f}),"
                      f" b5 {alone['budget_5']['geomean']:.3f}")
            cv = fit["cross_validated"]
            print(f"{set_name:13s} ridge {ridge:6.1f}: leave-one-kernel-out b1 {cv['budget_1']['geomean']:.3f} "
                  f"(worst tenth {cv['budget_1']['worst_decile_mean']:.3f}), b5 {cv['budget_5']['geomean']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
