"""The GEMM model's last partial wave: its shared L2 and DRAM terms counted over ceil(CTAs / SMs) CTAs on each SM it
uses (the model as shipped) or over the wave's own CTAs (`gemm_main_loop(..., exact_last_wave=True)`, the fused-MoE
model's form), each replayed with the model alone (no residual) on the AutoHeuristic logs' halves (crc32 of the
shape: even, the choosing half; odd, the scoring half) and on the H200 training sets.

    python experiments/exact-last-wave-gemm/replay_halves.py ["h100 even" "h200 train" ...]   # repository root
"""

import sys
import zlib

import numpy as np

from rooftune.eval.datasets import readers
from rooftune.hwprofiles import load_profile
from rooftune.roofline import gemm
from rooftune.tuner.evaluation import replay
from rooftune.tuner.search.strategies import rooftune_strategy

SHIPPED = gemm.gemm_main_loop
AH = "../shared/datasets/autoheuristic"
SETS = [  # name, data, profile, half (None: all), budgets
    ("h100 even", f"{AH}/h100_mm.txt.gz", "h100_sxm", 0, (1, 5)),
    ("h100 odd", f"{AH}/h100_mm.txt.gz", "h100_sxm", 1, (1, 5)),
    ("a100 even", f"{AH}/a100_mm.txt.gz", "a100_sxm4_80gb", 0, (1, 5)),
    ("a100 odd", f"{AH}/a100_mm.txt.gz", "a100_sxm4_80gb", 1, (1, 5)),
    ("h200 train", "datasets/h200/gemm/train", "h200", None, (1, 5, 20)),
    ("sm66 train", "datasets/h200-sm66/gemm/train", "h200-sm66", None, (1, 5, 20)),
    ("h200 probe", "../shared/datasets/h200-probe", "h200", None, (1, 5, 20)),
]


def exact_last_wave(*args, **kwargs):
    kwargs.setdefault("exact_last_wave", True)
    return SHIPPED(*args, **kwargs)


def exact_single_wave(shape, t, r, tr, profile, **kwargs):
    """The exact count where the grid is one partial wave (every CTA starts at once), the rounding after full waves."""
    if kwargs.get("exact_last_wave"):
        return SHIPPED(shape, t, r, tr, profile, **kwargs)
    rounded, exact = SHIPPED(shape, t, r, tr, profile), SHIPPED(shape, t, r, tr, profile, exact_last_wave=True)
    single = r.full_waves == 0
    return type(rounded)(**{f: np.where(single, getattr(exact, f), getattr(rounded, f))
                            for f in ("main_s", "dominant", "n_waves", "prologues")})


def half(records) -> int:
    return zlib.crc32(str(records.shape).encode()) % 2


def summary(records, profile, budgets) -> dict[int, str]:
    """Per budget, mean / worst-tenth mean of `rooftune` with the model alone."""
    out = {}
    for budget in budgets:
        scores = np.array([s.score for s in replay(records, rooftune_strategy(None), budget, profile)])
        worst = np.sort(scores)[: max(1, len(scores) // 10)]
        out[budget] = f"{scores.mean():.4f} / {worst.mean():.3f}"
    return out


def main(names: list[str]) -> None:
    for name, path, gpu, which, budgets in SETS:
        if names and name not in names:
            continue
        profile = load_profile(gpu)
        records = [r for r in readers.load_records(path) if which is None or half(r) == which]
        results = {}
        for label, loop in (("shipped", SHIPPED), ("exact", exact_last_wave), ("single", exact_single_wave)):
            gemm.gemm_main_loop = loop
            results[label] = summary(records, profile, budgets)
        gemm.gemm_main_loop = SHIPPED
        print(f"{name} ({len(records)} shapes): shipped {results['shipped']} | exact {results['exact']} | exact in a "
              f"single wave {results['single']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
