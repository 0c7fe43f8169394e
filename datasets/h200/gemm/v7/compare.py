"""The README's figures on space 7 (composite tiles: BLOCK_N + BLOCK_N2 columns in two accumulators, where they
fill the SMs' waves) that no `rooftune` command prints, from the committed data (no GPU).

- composite: over the shapes space 7 swept (those with a legal composite config; the others were carried from
  space 6 unchanged), how often a composite config is the fastest and the best config's speed over the best
  one-accumulator config of the same sweep (same call, same GPU: no cross-call drift), then cuBLAS ÷ best by
  the report's classes, space 6 -> space 7;
- below: the shapes whose best config is below 0.80 of cuBLAS, space 6 and space 7;
- cost: the sweep's measured seconds per shape over the shapes space 7 swept, against space 6's;
- worst: the held-out shapes where the shipped residual's 20-config search scores lowest.

usage (repository root): python3 datasets/h200/gemm/v7/compare.py {composite,below,cost,worst} [SPLIT ...]
"""

import importlib.util
import sys
from pathlib import Path

from rooftune.eval.reports import shape_rows

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


if __name__ == "__main__":
    commands = {"composite": composite, "below": below, "cost": cost, "worst": worst}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__.strip().splitlines()[-1])
    commands[sys.argv[1]](sys.argv[2:] or ["train", "heldout"])
