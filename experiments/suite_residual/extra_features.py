"""Three more residual features, each added to the shipped warps-and-stages set and scored leave-one-kernel-out on a
suite dataset's training kernels only (tuner/generic_fitting.py `training_calls`, `held_back`, which never open a
held-out kernel's files):

- log_programs: log2 of the grid's programs (the data: on memory-bound row kernels, fewer and larger programs run
  slower than the model says);
- spill_noloop: 1 where a config spills and its kernel has no loop (rmsnorm_fwd's picks spill 96-128 bytes a thread
  and run 6-10% slower than predicted against the configs that do not spill);
- atomic_share: the atomic adds a config issues (split-K's C tiles, the norm backwards' dW and dB partial rows), at a
  nominal 1e12 a second, over its predicted time (split-K's times grow ~2-3 µs per million adds).

    python experiments/suite_residual/extra_features.py datasets/h100/suite > experiments/suite_residual/extra_features.log
"""

import dataclasses
import sys

import numpy as np

from rooftune.eval.datasets.suite import read_manifest, read_suite
from rooftune.hwprofiles import load_profile
from rooftune.roofline.fit import RidgeSettings
from rooftune.tuner.generic_fitting import (
    FITTED_FEATURES,
    call_scores,
    geometric_mean,
    held_back,
    prepare_call,
    summaries,
    training_kernels,
)

RIDGES = (1.0, 3.0, 10.0, 30.0)
NOMINAL_ATOMICS_PER_S = 1e12


def atomic_adds(kernel: str, sizes: dict, configs, programs: np.ndarray) -> np.ndarray:
    """Atomic adds per config of the suite's three kernels that issue them (0 for the rest)."""
    if kernel == "splitk_gemm":
        return np.array([np.ceil(sizes["M"] / c["BLOCK_M"]) * c["BLOCK_M"] * sizes["N"] * c["SPLIT_K"]
                         for c in configs], dtype=float)
    if kernel in ("rmsnorm_bwd", "layernorm_bwd"):
        return programs * sizes["N"] * (2.0 if kernel == "layernorm_bwd" else 1.0)
    return np.zeros(len(configs))


def extra(name: str, kernel: str, d, counts) -> np.ndarray:
    bd = d.breakdown
    if name == "log_programs":
        return (np.log2(np.maximum(bd.programs, 1)) - 10.0) / 4.0
    if name == "spill_noloop":
        loops = np.array([k.loop_iterations for k in counts], dtype=float)
        return ((bd.local_bytes_per_thread > 0) & (loops <= 1)).astype(float)
    if name == "atomic_share":
        adds = atomic_adds(kernel, dict(d.source.shape.sizes), d.source.configs, bd.programs.astype(float))
        return adds / NOMINAL_ATOMICS_PER_S * 1e6 / bd.time_us
    raise KeyError(name)


def main(folder: str) -> None:
    manifest = read_manifest(folder)
    profile = load_profile(manifest["profile"])
    calls = []
    for call in read_suite(folder, training_kernels(manifest)):
        d = prepare_call(call, profile, FITTED_FEATURES)
        if d is not None and np.isfinite(call.time_us).any():
            calls.append((call.kernel, d, float(np.nanmin(call.time_us)), [c for c in call.counts if c is not None]))

    def scored(names, ridge):
        prepared = []
        for kernel, d, best, counts in calls:
            x = np.concatenate([d.x] + [extra(n, kernel, d, counts)[:, None] for n in names], axis=1)
            prepared.append((kernel, dataclasses.replace(d, x=x, names=d.names + tuple(names)), best))
        per_call = [(k, call_scores(d, c, b)) for k, d, b, c in held_back(prepared, RidgeSettings(ridge=ridge))]
        kernels = {k: geometric_mean([s[1] for n, s in per_call if n == k]) for k, _ in per_call}
        return summaries([s for _, s in per_call]), kernels

    print(f"{len(calls)} calls of {len({k for k, *_ in calls})} training kernels; leave-one-kernel-out, budget 1 "
          f"(worst tenth), budget 5; kernels moved by more than 0.002 at budget 1")
    for ridge in RIDGES:
        base, base_kernels = scored((), ridge)
        for names in ((), ("log_programs",), ("spill_noloop",), ("atomic_share",)):
            s, kernels = scored(names, ridge) if names else (base, base_kernels)
            moved = ", ".join(f"{k} {kernels[k] - base_kernels[k]:+.3f}" for k in sorted(kernels)
                              if abs(kernels[k] - base_kernels[k]) > 0.002)
            print(f"ridge {ridge:5.1f} {'+'.join(names) or 'shipped set':14s}: b1 {s['budget_1']['geomean']:.4f} "
                  f"({s['budget_1']['worst_decile_mean']:.3f}), b5 {s['budget_5']['geomean']:.4f}  {moved}")


if __name__ == "__main__":
    main(sys.argv[1])
