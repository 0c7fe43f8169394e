"""The README's figures on space 2 that no `rooftune` command prints, from the committed data (no GPU).

- spaces: per split, over the shapes both spaces have swept, cuBLAS ÷ best by the report's classes (all,
  aligned LLM decode / prefill) for space 1 and space 2, the per-shape speed-up of space 2's best over
  space 1's, and the shapes where space 2's best is more than 1% slower;
- repeat: the second sweep of the training shapes (train-repeat) against the first: best time ratio
  per shape and how often the best config is the same;
- l2: the model alone (no residual) ranking each training shape's recorded configs, within-shape
  Spearman, with the `h200` profile's L2 bandwidth at the 9000 GB/s estimate and at the probed value,
  for space 2's GEMM and for attention; and each GEMM shape's best config measured ÷ predicted
  (p10 / median / p90) on both spaces.

usage (repository root): python3 datasets/h200/gemm/v2/compare.py {spaces,repeat,l2}
"""

import dataclasses
import statistics
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from rooftune.candidates import configs_to_columns
from rooftune.eval.dataset import read_dataset, to_records
from rooftune.eval.reports import geomean, read_results, row_class, shape_rows
from rooftune.hwprofiles import load_profile
from rooftune.roofline import predict

ROOT = Path("datasets/h200")
SPACE1, SPACE2 = ROOT / "gemm", ROOT / "gemm" / "v2"
L2_ESTIMATE_GBPS = 9000.0  # what the h200 profile carried before the probe's figure (its source says so)


def _best(folder: Path) -> dict[str, tuple[float, object]]:
    """Shape -> (best in-space time, its config)."""
    out = {}
    for rec in map(to_records, read_results(folder)):
        space = set(rec.candidate_configs())
        ok = [t for t in rec.trials if t.ok and t.config in space]
        if ok:
            b = min(ok, key=lambda t: t.time_us)
            out[str(rec.shape)] = (b.time_us, b.config)
    return out


def spaces() -> None:
    for split in ("train", "heldout"):
        r1 = {r.shape: r for r in shape_rows(SPACE1 / split)}
        r2 = {r.shape: r for r in shape_rows(SPACE2 / split)}
        common = [s for s in r2 if s in r1]
        print(f"{split}: {len(common)} shapes swept in both spaces (cuBLAS ÷ best, space 1 -> space 2)")
        classes = {"all": common}
        for cls in ("decode", "prefill"):
            classes[f"aligned LLM {cls}"] = [s for s in common if r2[s].aligned and row_class(r2[s], "gemm") == cls]
        for name, sel in classes.items():
            print(f"  {name} ({len(sel)}): {geomean([r1[s].vs_baseline for s in sel]):.3f} -> "
                  f"{geomean([r2[s].vs_baseline for s in sel]):.3f}")
        b1, b2 = _best(SPACE1 / split), _best(SPACE2 / split)
        speedup = {s: b1[s][0] / b2[s][0] for s in common}
        slower = sorted((v, s) for s, v in speedup.items() if v < 0.99)
        print(f"  space 1 best ÷ space 2 best per shape: geometric mean {geomean(speedup.values()):.3f}; "
              f"space 2 more than 1% slower on {len(slower)}: " + ", ".join(f"{s} {v:.3f}" for v, s in slower))


def repeat() -> None:
    first, second = _best(SPACE2 / "train"), _best(SPACE2 / "train-repeat")
    common = sorted(set(first) & set(second))
    ratio = sorted(second[s][0] / first[s][0] for s in common)
    same = sum(first[s][1] == second[s][1] for s in common)
    print(f"{len(common)} shapes: best time ratio (repeat ÷ first) median {statistics.median(ratio):.3f}, "
          f"p10 {ratio[len(ratio) // 10]:.3f}, p90 {ratio[9 * len(ratio) // 10]:.3f}, range "
          f"{ratio[0]:.3f}-{ratio[-1]:.3f}; the same best config on {same}")


def _model_alone(folder: Path, profile) -> tuple[float, np.ndarray]:
    """(mean within-shape Spearman, each shape's best measured ÷ predicted)."""
    rhos, level = [], []
    for rec in read_dataset(folder):
        space = set(rec.candidate_configs())
        ok = [t for t in rec.trials if t.ok and t.config in space]
        if len(ok) < 5:
            continue
        predicted = predict(rec.shape, configs_to_columns([t.config for t in ok]), profile).time_us
        measured = np.array([t.time_us for t in ok])
        rhos.append(spearmanr(predicted, measured).correlation)
        best = int(np.argmin(measured))
        level.append(measured[best] / predicted[best])
    return float(np.mean(rhos)), np.array(level)


def l2() -> None:
    probed = load_profile("h200")
    estimate = dataclasses.replace(probed, l2_bw_gbps=L2_ESTIMATE_GBPS)
    for folder in (SPACE2 / "train", ROOT / "attention" / "train"):
        rho_e, _ = _model_alone(folder, estimate)
        rho_p, _ = _model_alone(folder, probed)
        print(f"{folder}: model alone, within-shape Spearman {rho_e:.4f} at {L2_ESTIMATE_GBPS:.0f} GB/s, "
              f"{rho_p:.4f} at the probed {probed.l2_bw_gbps:.1f}")
    for folder in (SPACE1 / "train", SPACE2 / "train"):
        _, level = _model_alone(folder, probed)
        print(f"{folder}: best config measured ÷ predicted, p10 / median / p90 "
              + " / ".join(f"{q:.2f}" for q in np.percentile(level, [10, 50, 90])))


if __name__ == "__main__":
    commands = {"spaces": spaces, "repeat": repeat, "l2": l2}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        sys.exit(__doc__.strip().splitlines()[-1])
    commands[sys.argv[1]]()
