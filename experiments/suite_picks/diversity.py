"""Which five of the generic model's ranking to time: the top five, or a spread of them (no more than `cap` of one
tile set, or of one tile set and warp count), scored leave-one-kernel-out on a suite dataset's TRAINING kernels only
(each kernel's calls ranked by the shipped residual's settings fitted on the other training kernels).

    python experiments/suite_picks/diversity.py datasets/h100/suite
"""

from __future__ import annotations

import sys

import numpy as np

from rooftune.hwprofiles import load_profile
from rooftune.tuner.generic_fitting import geometric_mean, held_back, training_calls


def tile(config) -> tuple:
    return tuple(config.params)


def picks(order: list[int], configs, budget: int, cap: int, by) -> list[int]:
    """The first `budget` of `order` with at most `cap` sharing `by(config)`; the rest of the order fills up."""
    chosen, seen = [], {}
    for i in order:
        k = by(configs[i])
        if seen.get(k, 0) < cap:
            chosen.append(i)
            seen[k] = seen.get(k, 0) + 1
        if len(chosen) == budget:
            return chosen
    return chosen + [i for i in order if i not in chosen][:budget - len(chosen)]


STRATEGIES = {
    "top": lambda o, c, b: o[:b],
    "tile<=1": lambda o, c, b: picks(o, c, b, 1, tile),
    "tile<=2": lambda o, c, b: picks(o, c, b, 2, tile),
    "tile<=3": lambda o, c, b: picks(o, c, b, 3, tile),
    "tile+warps<=1": lambda o, c, b: picks(o, c, b, 1, lambda x: (tile(x), x.num_warps)),
    "tile+warps<=2": lambda o, c, b: picks(o, c, b, 2, lambda x: (tile(x), x.num_warps)),
    "warps<=2": lambda o, c, b: picks(o, c, b, 2, lambda x: x.num_warps),
}


def main(folder: str) -> None:
    prepared = training_calls(folder, load_profile("h100_sxm"))
    scores = {name: {b: [] for b in (1, 3, 5)} for name in STRATEGIES}
    per_kernel = {name: {} for name in STRATEGIES}
    for kernel, d, best, coef in held_back(prepared):
        c = np.array([coef.get(n, 0.0) for n in d.names])
        order = list(np.argsort(np.where(d.fits, d.log_predicted + d.x @ c, np.inf), kind="stable"))
        times = d.source.time_us
        for name, strategy in STRATEGIES.items():
            for b in (1, 3, 5):
                t = times[strategy(order, d.source.configs, b)]
                s = best / np.nanmin(t) if np.isfinite(t).any() else 0.0
                scores[name][b].append(s)
                if b == 5:
                    per_kernel[name].setdefault(kernel, []).append(s)
    for name in STRATEGIES:
        row = []
        for b in (1, 3, 5):
            s = np.array(scores[name][b])
            worst = np.sort(s)[:max(1, len(s) // 10)].mean()
            row.append(f"b{b} {geometric_mean(s):.4f}/{worst:.3f}")
        lowest = sorted((geometric_mean(v), k) for k, v in per_kernel[name].items())[:3]
        print(f"{name:15s} " + "  ".join(row) + "   lowest at 5: " + ", ".join(f"{k} {v:.3f}" for v, k in lowest))


if __name__ == "__main__":
    main(sys.argv[1])
