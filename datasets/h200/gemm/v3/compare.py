"""The README's figures on space 3 (persistent tiles) that no `rooftune` command prints, from the committed
data (no GPU).

- persistent: per split, over the shapes swept in space 3 with persistent configs legal (the others were
  carried unchanged from space 2), how often a persistent config is the fastest and what it gains over
  the fastest one-tile-per-program config of the same sweep (same call, same GPU: no cross-call drift);
  and cuBLAS ÷ best by the report's classes, space 2 -> space 3, over all shapes.

usage (repository root): python3 datasets/h200/gemm/v3/compare.py persistent
"""

import sys
from pathlib import Path

from rooftune.eval.dataset import read_dataset
from rooftune.eval.reports import geomean, row_class, shape_rows

ROOT = Path("datasets/h200/gemm")
SPACE2, SPACE3 = ROOT / "v2", ROOT / "v3"


def persistent() -> None:
    for split in ("train", "heldout"):
        gains = {}
        for rec in read_dataset(SPACE3 / split):
            if rec.meta.get("carried_from"):
                continue
            space = set(rec.candidate_configs())
            ok = [t for t in rec.trials if t.ok and t.config in space]
            pers = [t.time_us for t in ok if t.config["PERSISTENT"] == 1]
            plain = [t.time_us for t in ok if t.config["PERSISTENT"] == 0]
            if pers and plain:
                gains[str(rec.shape)] = min(plain) / min(min(pers), min(plain))
        wins = sorted(((g, s) for s, g in gains.items() if g > 1.0), reverse=True)
        print(f"{split}: {len(gains)} shapes with persistent configs; persistent fastest on {len(wins)}, "
              f"by more than 1% on {sum(g > 1.01 for g, _ in wins)}; best ÷ best one-tile-per-program, "
              f"geometric mean {geomean(gains.values()):.4f}, max {max(gains.values()):.3f}")
        print("  largest gains: " + ", ".join(f"{s} {g:.3f}" for g, s in wins[:6]))
        r2 = {r.shape: r for r in shape_rows(SPACE2 / split)}
        r3 = {r.shape: r for r in shape_rows(SPACE3 / split)}
        classes = {"all": list(r3)}
        for cls in ("decode", "prefill"):
            classes[f"aligned LLM {cls}"] = [s for s in r3 if r3[s].aligned and row_class(r3[s], "gemm") == cls]
        for name, sel in classes.items():
            print(f"  cuBLAS ÷ best, {name} ({len(sel)}): space 2 {geomean([r2[s].vs_baseline for s in sel]):.3f} -> "
                  f"space 3 {geomean([r3[s].vs_baseline for s in sel]):.3f}")


if __name__ == "__main__":
    commands = {"persistent": persistent}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__.strip().splitlines()[-1])
    commands[sys.argv[1]]()
