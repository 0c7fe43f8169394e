"""The README's figures on space 5 (64-row wgmma tiles for any M on sm_90; split-K summed both ways where
32 < M <= 64) that no `rooftune` command prints, from the committed data (no GPU).

- wgmma: over the shapes space 5 swept with M <= 32, how often a 64-row tile (new there: BLOCK_M above
  M's power of two) is the fastest config, and the best config's speed over the best config without
  one, both of the same sweep (same call, same GPU: no cross-call drift). M <= 16 reads v5/wide/, the
  sweep under the first rules (gemm-rules-6) that had them; they never won there, so space 5 dropped them;
- sums: the same for split-K summed in the reduction kernel (FIXUP 0) against the rest, over the shapes
  swept with 32 < M <= 64, and for the in-kernel sum (FIXUP 1) against the rest;
- cublas: cuBLAS ÷ best by the report's classes, space 4 -> space 5, over all shapes (each from its own pass);
- cost: the sweep's measured seconds per shape over the shapes space 5 swept, against space 4's;
- worst: the held-out shapes where space 5's residual (`-space5.json`) scores lowest at 20 configs;
- fill: matmul_fill_first.json's and matmul_fill.json's figures (what gemm()'s kept workspaces and launch
  functions save a caller).

usage (repository root): python3 datasets/h200/gemm/v5/compare.py {wgmma,sums,cublas,cost,worst,fill} [SPLIT ...]
"""

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path("datasets/h200/gemm")
SPACE4, SPACE5 = ROOT / "v4", ROOT / "v5"
WIDE = SPACE5 / "wide"  # the first space-5 sweep of the shapes with M <= 16, 64-row tiles included (gemm-rules-6)
_spec = importlib.util.spec_from_file_location("compare_v3", Path(__file__).resolve().parents[1] / "v3" / "compare.py")
compare_v3 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_v3)


def gains(split: str, shapes, variant, what: str, root: Path = SPACE5) -> None:
    """`compare_v3.split_gains` over the shapes `shapes(shape)` selects: the variant against the rest."""
    compare_v3.split_gains(root, split, variant, lambda s, c: not variant(s, c), what, "without", shapes, top=8)


def wgmma(splits) -> None:
    for split in splits:
        for lo, hi, root in ((1, 16, WIDE), (17, 32, SPACE5)):
            gains(split, lambda s: lo <= s.m <= hi, lambda s, c: c["BLOCK_M"] == 64, f"64-row tiles over M {lo}-{hi}",
                  root)


def sums(splits) -> None:
    for split in splits:
        both = lambda s: 32 < s.m <= 64
        gains(split, both, lambda s, c: c["SPLIT_K"] > 1 and not c["FIXUP"], "reduction-kernel split (33 <= M <= 64)")
        gains(split, both, lambda s, c: c["SPLIT_K"] > 1 and c["FIXUP"] == 1, "in-kernel split (33 <= M <= 64)")


def cublas(splits) -> None:
    for split in splits:
        print(split)
        compare_v3.cublas_by_class(SPACE4 / split, SPACE5 / split, "space 4", "space 5")


def cost(splits) -> None:
    for split in splits:
        compare_v3.swept_cost(SPACE4, SPACE5, split, "space 4", "space 5")


def worst(splits) -> None:
    compare_v3.worst(root=SPACE5, space="space 5", residual="hwprofiles/residuals/gemm-NVIDIA_H200-space5.json")


def fill(splits) -> None:
    for name in ("matmul_fill_first.json", "matmul_fill.json"):
        print(name)
        for row in json.loads((SPACE5 / name).read_text()):
            print(f"  {row['shape']}: " + ", ".join(f"{k} {v:.1f} µs" for k, v in row.items() if k not in ("shape", "config")))


if __name__ == "__main__":
    commands = {"wgmma": wgmma, "sums": sums, "cublas": cublas, "cost": cost, "worst": worst, "fill": fill}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](sys.argv[2:] or ("train", "heldout"))
