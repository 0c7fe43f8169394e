"""The generic residual's leave-one-kernel-out check at several ridge strengths and feature sets, on the H100
suite's training kernels only (tuner/generic_fitting.py's fit; held-out kernels are never read).

    python experiments/suite_residual/ridge_loko.py datasets/h100/suite > experiments/suite_residual/ridge_loko.log
"""

import dataclasses
import sys

import numpy as np

from rooftune.eval.datasets.suite import read_manifest, read_suite
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings, fit_coefficients
from rooftune.roofline.generic_residual import FEATURE_NAMES
from rooftune.tuner.generic_fitting import call_scores, geometric_mean, prepare_call, training_kernels

FEATURE_SETS = {
    "all": FEATURE_NAMES,
    "fractions": ("tensor_frac", "vector_frac", "sfu_frac", "smem_frac", "l2_frac", "memory_frac", "latency_frac",
                  "serial_frac", "launch_frac"),
    "occupancy": ("occupancy", "ctas_per_sm", "log_waves", "wave_eff", "log_warps", "log_warps_sq", "stages",
                  "stages_sq"),
    "warps_stages": ("log_warps", "log_warps_sq", "stages", "stages_sq"),
}


def main(folder: str) -> None:
    manifest = read_manifest(folder)
    profile = load_profile(manifest["profile"])
    prepared = []
    for call in read_suite(folder, training_kernels(manifest)):
        d = prepare_call(call, profile)
        if d is not None and np.isfinite(call.time_us).any():
            prepared.append((call.kernel, d, float(np.nanmin(call.time_us))))
    kernels = sorted({k for k, _, _ in prepared})
    alone = [call_scores(d, {}, best) for _, d, best in prepared]
    print(f"{len(prepared)} calls of {len(kernels)} training kernels; model alone: "
          f"b1 {geometric_mean([s[1] for s in alone]):.3f}, b5 {geometric_mean([s[5] for s in alone]):.3f}")
    for set_name, names in FEATURE_SETS.items():
        for ridge in (0.1, 1.0, 10.0, 100.0):
            settings = RidgeSettings(ridge=ridge)
            columns = [FEATURE_NAMES.index(n) for n in names]
            subset = [(k, dataclasses.replace(d, names=tuple(names), x=d.x[:, columns]), best)
                      for k, d, best in prepared]
            held = []
            for kernel in kernels:
                coefficients = fit_coefficients([d for k, d, _ in subset if k != kernel], settings)
                held += [call_scores(d, coefficients, best) for k, d, best in subset if k == kernel]
            b1 = sorted(s[1] for s in held)
            worst = np.mean(b1[:max(1, len(b1) // 10)])
            print(f"{set_name:13s} ridge {ridge:6.1f}: leave-one-kernel-out b1 {geometric_mean(b1):.3f} "
                  f"(worst tenth {worst:.3f}), b5 {geometric_mean([s[5] for s in held]):.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
