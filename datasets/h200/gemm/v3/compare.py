"""The README's figures on space 3 (persistent tiles) that no `rooftune` command prints, from the committed
data (no GPU).

- persistent: per split, over the shapes swept in space 3 with persistent configs legal (the others were
  carried unchanged from space 2), how often a persistent config is the fastest and what it gains over
  the fastest one-tile-per-program config of the same sweep (same call, same GPU: no cross-call drift);
  and cuBLAS ÷ best by the report's classes, space 2 -> space 3, over all shapes;
- cost: the sweep's measured seconds per shape (each file's `time_s`, compiles excluded), averaged over
  space 2's and space 3's datasets and over the shapes space 3 swept itself;
- worst: the held-out shapes where the shipped residual's 20-config search scores lowest (behind the replay
  `rooftune eval gemm --data datasets/h200/gemm/v3/heldout --budget 20`'s worst tenth), and whether space 3
  swept them or carried them from space 2.

usage (repository root): python3 datasets/h200/gemm/v3/compare.py {persistent,cost,worst}
"""

import statistics
import sys
from pathlib import Path

from rooftune.eval.dataset import read_dataset
from rooftune.eval.reports import geomean, row_class, shape_rows
from rooftune.hwprofiles import load_profile
from rooftune.roofline.residual import load_residual, read_residual
from rooftune.tuner.evaluation import replay
from rooftune.tuner.strategies import rooftune_strategy

ROOT = Path("datasets/h200/gemm")
SPACE2, SPACE3 = ROOT / "v2", ROOT / "v3"


def split_gains(root: Path, split: str, variant, base, what: str, versus: str, shapes=lambda shape: True,
                top: int = 6) -> None:
    """Over the shapes of root/split swept for its space (not carried) that `shapes(shape)` selects, where
    configs with `variant(shape, config)` and with `base(shape, config)` were both timed: how often a
    variant config is the fastest and the best config's speed over the best `base` config of the same sweep."""
    gains = {}
    for rec in read_dataset(root / split):
        if rec.meta.get("carried_from") or not shapes(rec.shape):
            continue
        space = set(rec.candidate_configs())
        ok = [t for t in rec.trials if t.ok and t.config in space]
        var = [t.time_us for t in ok if variant(rec.shape, t.config)]
        rest = [t.time_us for t in ok if base(rec.shape, t.config)]
        if var and rest:
            gains[str(rec.shape)] = min(rest) / min(min(var), min(rest))
    if not gains:
        print(f"{split}: no swept shape has {what} configs")
        return
    wins = sorted(((g, s) for s, g in gains.items() if g > 1.0), reverse=True)
    print(f"{split}: {len(gains)} shapes with {what} configs; one is the fastest on {len(wins)}, "
          f"by more than 1% on {sum(g > 1.01 for g, _ in wins)}; best ÷ best {versus}, "
          f"geometric mean {geomean(gains.values()):.4f}, max {max(gains.values()):.3f}")
    print("  largest gains: " + ", ".join(f"{s} {g:.3f}" for g, s in wins[:top]))


def variant_gains(root: Path, variant, base, what: str, versus: str):
    """`split_gains` for train then held-out, with predicates of the config alone."""
    for split in ("train", "heldout"):
        split_gains(root, split, lambda _, c: variant(c), lambda _, c: base(c), what, versus)
        yield split


def persistent() -> None:
    for split in variant_gains(SPACE3, lambda c: c["PERSISTENT"] == 1, lambda c: c["PERSISTENT"] == 0,
                               "persistent", "one-tile-per-program"):
        cublas_by_class(SPACE2 / split, SPACE3 / split, "space 2", "space 3")


def cublas_by_class(old: Path, new: Path, old_name: str, new_name: str) -> None:
    """cuBLAS ÷ best of two spaces' datasets of one split, over all shapes and the aligned LLM classes."""
    r_old = {r.shape: r for r in shape_rows(old)}
    r_new = {r.shape: r for r in shape_rows(new)}
    classes = {"all": list(r_new)}
    for cls in ("decode", "prefill"):
        classes[f"aligned LLM {cls}"] = [s for s in r_new if r_new[s].aligned and row_class(r_new[s], "gemm") == cls]
    for name, sel in classes.items():
        print(f"  cuBLAS ÷ best, {name} ({len(sel)}): {old_name} {geomean([r_old[s].vs_baseline for s in sel]):.3f} -> "
              f"{new_name} {geomean([r_new[s].vs_baseline for s in sel]):.3f}")


def swept_cost(old: Path, new: Path, split: str, old_name: str, new_name: str) -> None:
    """The sweep's measured seconds per shape (`time_s`) over the shapes the `new` space swept (the rest
    carried from `old`), against the same shapes' `old` sweep, and over all of `new`'s shapes."""
    before = {str(r.shape): r.meta["time_s"] for r in read_dataset(old / split)}
    swept = {str(r.shape): r.meta["time_s"] for r in read_dataset(new / split) if not r.meta.get("carried_from")}
    every = [r.meta["time_s"] for r in read_dataset(new / split)]
    print(f"{split}: seconds per shape over the {len(swept)} shapes {new_name} swept: {old_name} "
          f"{statistics.mean(before[s] for s in swept):.2f}, {new_name} {statistics.mean(swept.values()):.2f}; "
          f"over all {len(every)} shapes of {new_name} {statistics.mean(every):.2f}")


def cost() -> None:
    for split in ("train", "heldout"):
        v2 = [r.meta["time_s"] for r in read_dataset(SPACE2 / split)]
        v3 = read_dataset(SPACE3 / split)
        swept = [r.meta["time_s"] for r in v3 if not r.meta.get("carried_from")]
        print(f"{split}: seconds per shape, space 2 {statistics.mean(v2):.2f} ({len(v2)}), space 3 "
              f"{statistics.mean(r.meta['time_s'] for r in v3):.2f} ({len(v3)}), the shapes space 3 swept "
              f"{statistics.mean(swept):.2f} ({len(swept)})")


def worst(count: int = 8, root: Path = SPACE3, space: str = "space 3", residual: str | None = None) -> None:
    """The held-out shapes where rooftune's 20-config search scores lowest, with the shipped residual
    or the one at `residual` (an earlier space's, kept beside it)."""
    profile = load_profile("h200")
    fitted = read_residual(residual) if residual else load_residual("gemm", profile)
    scores = replay(read_dataset(root / "heldout"), rooftune_strategy(fitted), 20, profile)
    for s in sorted(scores, key=lambda s: s.score)[:count]:
        origin = "carried" if s.records.meta.get("carried_from") else f"swept for {space}"
        print(f"{s.score:.3f} {s.records.shape} ({origin})")


if __name__ == "__main__":
    commands = {"persistent": persistent, "cost": cost, "worst": worst}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__.strip().splitlines()[-1])
    commands[sys.argv[1]]()
