"""The README's figures on space 4 (split-K summed in the GEMM kernel where M <= 64) that no `rooftune`
command prints, from the committed data (no GPU).

- fixup: per split, over the shapes space 4 swept (M <= 64 with split-K configs; the others were carried
  unchanged from space 3), how often a FIXUP config is the fastest and what it gains over the fastest
  config without split-K of the same sweep (same call, same GPU); and cuBLAS ÷ best by the report's
  classes, space 3 -> space 4, over all shapes (each ratio from one pass: no cross-call drift);
- cost: the sweep's measured seconds per shape (`time_s`, compiles excluded) over the shapes space 4
  swept, against the same shapes' space-3 sweep;
- worst: the held-out shapes where space 4's residual (`-space4.json`) scores lowest at 20 configs;
- pointer: what pointer loads beside TMA could add on aligned decode, at most: per shape the better of
  space 1's (pointer loads) and space 3's (TMA) cuBLAS ratio, each from its own pass.

usage (repository root): python3 datasets/h200/gemm/v4/compare.py {fixup,cost,worst,pointer}
"""

import importlib.util
import statistics
import sys
from pathlib import Path

from rooftune.eval.dataset import read_dataset
from rooftune.eval.reports import geomean, row_class, shape_rows

ROOT = Path("datasets/h200/gemm")
SPACE3, SPACE4 = ROOT / "v3", ROOT / "v4"
_spec = importlib.util.spec_from_file_location("compare_v3", Path(__file__).resolve().parents[1] / "v3" / "compare.py")
compare_v3 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_v3)


def fixup() -> None:
    for split in compare_v3.variant_gains(SPACE4, lambda c: c["FIXUP"] == 1, lambda c: c["SPLIT_K"] == 1,
                                          "FIXUP", "without split-K"):
        compare_v3.cublas_by_class(SPACE3 / split, SPACE4 / split, "space 3", "space 4")


def cost() -> None:
    for split in ("train", "heldout"):
        v3 = {str(r.shape): r.meta["time_s"] for r in read_dataset(SPACE3 / split)}
        swept = {str(r.shape): r.meta["time_s"] for r in read_dataset(SPACE4 / split) if not r.meta.get("carried_from")}
        print(f"{split}: seconds per shape over the {len(swept)} shapes space 4 swept: space 3 "
              f"{statistics.mean(v3[s] for s in swept):.2f}, space 4 {statistics.mean(swept.values()):.2f}")


def worst() -> None:
    compare_v3.worst(root=SPACE4, space="space 4", residual="hwprofiles/residuals/gemm-NVIDIA_H200-space4.json")


def pointer() -> None:
    for split in ("train", "heldout"):
        r1 = {r.shape: r for r in shape_rows(ROOT / split)}
        r3 = {r.shape: r for r in shape_rows(SPACE3 / split)}
        sel = [s for s in r3 if r3[s].aligned and row_class(r3[s], "gemm") == "decode"]
        print(f"{split}: aligned LLM decode ({len(sel)}) cuBLAS ÷ best, space 3 {geomean([r3[s].vs_baseline for s in sel]):.3f}; "
              f"the better of spaces 1 and 3 per shape {geomean([max(r1[s].vs_baseline, r3[s].vs_baseline) for s in sel]):.3f}")


if __name__ == "__main__":
    commands = {"fixup": fixup, "cost": cost, "worst": worst, "pointer": pointer}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__.strip().splitlines()[-1])
    commands[sys.argv[1]]()
