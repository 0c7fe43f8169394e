"""The README's figures on space 6 (persistent tiles store C through a tensor descriptor in two halves along N
where C's rows are 16-byte aligned) that no `rooftune` command prints, from the committed data (no GPU).

- persistent: over the shapes space 6 swept (those with a legal persistent config; the others were carried
  from space 5 unchanged), how often a persistent config is the fastest, and each shape's cuBLAS ÷ best in
  space 5 and space 6; cuBLAS is timed in the same pass as the configs, so the ratio of the two ratios
  cancels most of the drift between the two sweeps' calls;
- cublas: cuBLAS ÷ best by the report's classes, space 5 -> space 6, over all shapes (each from its own pass);
- cost: the sweep's measured seconds per shape over the shapes space 6 swept, against space 5's;
- worst: the held-out shapes where the shipped residual's 20-config search scores lowest.

usage (repository root): python3 datasets/h200/gemm/v6/compare.py {persistent,cublas,cost,worst} [SPLIT ...]
"""

import importlib.util
import sys
from pathlib import Path

from rooftune.eval.dataset import read_shape, shape_files
from rooftune.eval.reports import geomean, shape_rows

ROOT = Path("datasets/h200/gemm")
SPACE5, SPACE6 = ROOT / "v5", ROOT / "v6"
_spec = importlib.util.spec_from_file_location("compare_v3", Path(__file__).resolve().parents[1] / "v3" / "compare.py")
compare_v3 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_v3)


def persistent(splits) -> None:
    for split in splits:
        swept = {}
        for path in shape_files(SPACE6 / split):
            res = read_shape(path)
            if not res.meta.get("carried_from"):
                rows = [r for r in res.rows if r.in_space and r.time_us and not r.error]
                swept[str(res.shape)] = min(rows, key=lambda r: r.time_us).config["PERSISTENT"] == 1
        old = {r.shape: r for r in shape_rows(SPACE5 / split)}
        new = {r.shape: r for r in shape_rows(SPACE6 / split)}
        gains = {s: new[s].vs_baseline / old[s].vs_baseline for s in swept}
        wins5 = sum(1 for p in shape_files(SPACE5 / split) if str(read_shape(p).shape) in swept and min(
            (r for r in read_shape(p).rows if r.in_space and r.time_us and not r.error),
            key=lambda r: r.time_us).config["PERSISTENT"] == 1)
        print(f"{split}: {len(swept)} shapes swept; a persistent config is the fastest on {sum(swept.values())} "
              f"(space 5: {wins5}); cuBLAS ÷ best, space 5 {geomean(old[s].vs_baseline for s in swept):.3f} -> "
              f"space 6 {geomean(new[s].vs_baseline for s in swept):.3f}; space 6 ÷ space 5 per shape: geometric "
              f"mean {geomean(gains.values()):.3f}, min {min(gains.values()):.3f}, max {max(gains.values()):.3f}")
        for s, g in sorted(gains.items(), key=lambda kv: -kv[1])[:5]:
            print(f"  {s}: {old[s].vs_baseline:.3f} -> {new[s].vs_baseline:.3f}")


def cublas(splits) -> None:
    for split in splits:
        print(split)
        compare_v3.cublas_by_class(SPACE5 / split, SPACE6 / split, "space 5", "space 6")


def cost(splits) -> None:
    for split in splits:
        compare_v3.swept_cost(SPACE5, SPACE6, split, "space 5", "space 6")


def worst(splits) -> None:
    compare_v3.worst(root=SPACE6, space="space 6")


if __name__ == "__main__":
    commands = {"persistent": persistent, "cublas": cublas, "cost": cost, "worst": worst}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__.strip().splitlines()[-1])
    commands[sys.argv[1]](sys.argv[2:] or ["train", "heldout"])
