"""The README's figures on space 7 (composite tiles: BLOCK_N + BLOCK_N2 columns in two accumulators, where they
fill the SMs' waves) that no `rooftune` command prints, from the committed data (no GPU).

- composite: over the shapes space 7 swept (those with a legal composite config; the others were carried from
  space 6 unchanged), how often a composite config is the fastest and the best config's speed over the best
  one-accumulator config of the same sweep (same call, same GPU: no cross-call drift), then cuBLAS ÷ best by
  the report's classes, space 6 -> space 7;
- below: the shapes whose best config is below 0.80 of cuBLAS, space 6 and space 7;
- cost: the sweep's measured seconds per shape over the shapes space 7 swept, against space 6's;
- worst: the held-out shapes where the shipped residual's 20-config search scores lowest;
- ranks: on the training shapes with composite configs, where the shipped model × residual ranks the shape's
  fastest config and how close its first 8 come (training data only: what chose the model's composite term);
- scores: per split, the search's mean at 1 and 5 configs on the shapes with composite configs and on the
  others, and how many of each are in the worst tenth (reported, chooses nothing).
`--residual FILE` (last argument pair) scores another fit, e.g. datasets/h200/gemm/v7/logs/fit1/gemm-NVIDIA_H200.json
(whose figures in the README came from the model of commit d600a9f).

usage (repository root): python3 datasets/h200/gemm/v7/compare.py {composite,below,cost,worst,ranks,scores} [SPLIT ...] [--residual FILE]
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np

from rooftune.eval.dataset import read_dataset
from rooftune.eval.reports import shape_rows
from rooftune.hwprofiles import load_profile
from rooftune.roofline.residual import load_residual, read_residual
from rooftune.tuner.evaluation import replay
from rooftune.tuner.strategies import corrected_prior, rooftune_strategy

ROOT = Path("datasets/h200/gemm")
SPACE6, SPACE7 = ROOT / "v6", ROOT / "v7"
_spec = importlib.util.spec_from_file_location("compare_v3", Path(__file__).resolve().parents[1] / "v3" / "compare.py")
compare_v3 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_v3)


def composite(splits) -> None:
    for split in splits:
        compare_v3.split_gains(SPACE7, split, lambda _, c: c["BLOCK_N2"] > 0, lambda _, c: c["BLOCK_N2"] == 0,
                               "composite", "with one accumulator", top=12)
        compare_v3.cublas_by_class(SPACE6 / split, SPACE7 / split, "space 6", "space 7")


def below(splits, bound: float = 0.80) -> None:
    for split in splits:
        old = {r.shape: r.vs_baseline for r in shape_rows(SPACE6 / split)}
        new = {r.shape: r.vs_baseline for r in shape_rows(SPACE7 / split)}
        low = sorted((s for s in new if min(old[s], new[s]) < bound), key=lambda s: new[s])
        print(f"{split}: below {bound} of cuBLAS: space 6 {sum(old[s] < bound for s in old)}, "
              f"space 7 {sum(new[s] < bound for s in new)}")
        for s in low:
            print(f"  {s}: {old[s]:.3f} -> {new[s]:.3f}")


def cost(splits) -> None:
    for split in splits:
        compare_v3.swept_cost(SPACE6, SPACE7, split, "space 6", "space 7")


def worst(splits) -> None:
    compare_v3.worst(root=SPACE7, space="space 7")


RESIDUAL = None  # --residual FILE; the shipped fit when None


def _fit(profile):
    return read_residual(RESIDUAL) if RESIDUAL else load_residual("gemm", profile)


def _composite(rec) -> bool:
    return any(c.get("BLOCK_N2") for c in rec.candidate_configs())


def ranks(splits) -> None:
    profile = load_profile("h200")
    fitted = _fit(profile)
    for rec in read_dataset(SPACE7 / "train"):
        if not _composite(rec):
            continue
        times = {t.config: t.time_us for t in rec.trials if t.ok}
        configs, log_pred = corrected_prior(rec.shape, rec.candidate_configs(), profile, fitted)
        order = [configs[i] for i in np.argsort(log_pred)]
        best = min(times, key=times.get)
        first8 = min(times[c] for c in order[:8] if c in times)
        print(f"{str(rec.shape):28} fastest {'composite' if best['BLOCK_N2'] else 'one accumulator'}, ranked "
              f"{order.index(best) + 1}; composite configs among the first 8: "
              f"{sum(1 for c in order[:8] if c['BLOCK_N2'])}; best ÷ best of the first 8 {times[best] / first8:.3f}")


def scores(splits) -> None:
    profile = load_profile("h200")
    strategy = rooftune_strategy(_fit(profile))
    for split in splits:
        recs = read_dataset(SPACE7 / split)
        for budget in (1, 5):
            got = replay(recs, strategy, budget, profile)
            comp = [s.score for s in got if _composite(s.records)]
            rest = [s.score for s in got if not _composite(s.records)]
            tenth = sorted(got, key=lambda s: s.score)[:max(1, len(got) // 10)]
            print(f"{split} at {budget}: mean {np.mean(comp):.3f} on {len(comp)} shapes with composite configs, "
                  f"{np.mean(rest):.3f} on the other {len(rest)}; {sum(_composite(s.records) for s in tenth)} of "
                  f"the worst {len(tenth)} have composite configs")


if __name__ == "__main__":
    if "--residual" in sys.argv:
        i = sys.argv.index("--residual")
        RESIDUAL = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    commands = {"composite": composite, "below": below, "cost": cost, "worst": worst, "ranks": ranks,
                "scores": scores}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__.strip().splitlines()[-1])
    commands[sys.argv[1]](sys.argv[2:] or ["train", "heldout"])
