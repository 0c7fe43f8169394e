"""The AutoHeuristic logs split in two halves by the crc32 of each shape (even: the half a model constant is
chosen on; odd: the half it is then scored on), each scored as `rooftune eval gemm` scores the whole log.

    python scripts/ah_halves.py [--fma-exposed-clocks C] [--dtype fp32] [--shared ../shared]

Prints, per log and budget (1 and 5 configs), mean / worst-tenth mean of `rooftune` (the model alone: these logs
are another kernel's) on each half. `--fma-exposed-clocks` replays with roofline.gemm.FMA_EXPOSED_CLOCKS set
(0: the model without the term).
"""

from __future__ import annotations

import argparse
import zlib
from pathlib import Path

import numpy as np

from rooftune.eval import readers
from rooftune.eval.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline import gemm
from rooftune.tuner.evaluation import replay
from rooftune.tuner.search.strategies import rooftune_strategy

LOGS = (("h100", "h100_sxm"), ("a100", "a100_sxm4_80gb"))


def half(records) -> int:
    """0: the choosing half, 1: the scoring half (crc32 of the shape's text)."""
    return zlib.crc32(str(records.shape).encode()) % 2


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fma-exposed-clocks", type=float, default=None)
    parser.add_argument("--dtype", default=None, help="only the inputs of this dtype (fp32, tf32, bf16, fp16)")
    parser.add_argument("--shared", type=Path, default=Path("../shared"))
    args = parser.parse_args(argv)
    if args.fma_exposed_clocks is not None:
        gemm.FMA_EXPOSED_CLOCKS = args.fma_exposed_clocks
    for log, gpu in LOGS:
        profile = load_profile(gpu)
        records = [r for r in readers.load_records(args.shared / "datasets" / "autoheuristic" / f"{log}_mm.txt.gz",
                                                   kernel="gemm")
                   if r.best_candidate_us and (args.dtype is None or r.shape.dtype == args.dtype)]
        cells = []
        for budget in (1, 5):
            scores = replay(records, rooftune_strategy(None), budget, profile)
            for h in (0, 1):
                mine = [s.score for s in scores if half(s.records) == h]
                cells.append(f"{budget} config{'s' * (budget > 1)}, half {h} ({len(mine)}): "
                             f"{np.mean(mine):.3f} / {summarize(mine)['worst_decile_mean']:.3f}")
        print(f"{log}{' ' + args.dtype if args.dtype else ''}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
