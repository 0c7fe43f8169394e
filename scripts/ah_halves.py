"""The AutoHeuristic logs split in two halves by the crc32 of each shape (even: the half a model constant is
chosen on; odd: the half it is then scored on), each scored as `rooftune eval gemm` scores the whole log.

    python scripts/ah_halves.py [--fma-exposed-clocks C] [--fma-kn-accumulators A] [--fma-kn-slowdown F] [--dtype fp32]
                                [--shared ../shared]
    python scripts/ah_halves.py --fit [--out DIR]
    python scripts/ah_halves.py --by-layout [--dtype fp32] [--half 0|1]

Prints, per log and budget (1 and 5 configs), mean / worst-tenth mean of `rooftune` (the model alone: these logs
are another kernel's) on each half. `--fma-exposed-clocks` replays with roofline.gemm.FMA_EXPOSED_CLOCKS set
(0: the model without the term); `--fma-kn-accumulators` and `--fma-kn-slowdown` with roofline.gemm.FMA_KN_ACCUMULATORS
and FMA_KN_SLOWDOWN set (a slowdown of 1: without the term).
`--by-layout`: no model; per log and (A, B) layout (of the whole log, or of one `--half`), the configs timed on
most of its inputs ranked by their mean score there (best recorded time ÷ the config's), the six best.
`--fit`: a residual for that GPU and the log's kernel fitted on the choosing half
only (`fit_kernel`, its settings chosen by cross-validation there, as `rooftune fit` does), then the scoring half
replayed with the model alone and with it; `--out DIR` keeps each residual (`rooftune eval --residual FILE`).
"""

from __future__ import annotations

import argparse
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np

from rooftune.eval.datasets import readers
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.roofline import gemm
from rooftune.roofline.residual import write_residual
from rooftune.tuner.evaluation import replay
from rooftune.tuner.fitting import fit_kernel, fit_shapes_from_records
from rooftune.tuner.search.strategies import rooftune_strategy

LOGS = (("h100", "h100_sxm"), ("a100", "a100_sxm4_80gb"))


def half(records) -> int:
    """0: the choosing half, 1: the scoring half (crc32 of the shape's text)."""
    return zlib.crc32(str(records.shape).encode()) % 2


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fma-exposed-clocks", type=float, default=None)
    parser.add_argument("--fma-kn-accumulators", type=float, default=None)
    parser.add_argument("--fma-kn-slowdown", type=float, default=None)
    parser.add_argument("--by-layout", action="store_true", help="the best configs per layout, no model")
    parser.add_argument("--half", type=int, choices=(0, 1), default=None, help="with --by-layout: this half only")
    parser.add_argument("--dtype", default=None, help="only the inputs of this dtype (fp32, tf32, bf16, fp16)")
    parser.add_argument("--shared", type=Path, default=Path("../shared"))
    parser.add_argument("--fit", action="store_true", help="fit a residual on the choosing half, score the other")
    parser.add_argument("--out", type=Path, default=None, help="with --fit: write each log's residual here")
    args = parser.parse_args(argv)
    if args.fma_exposed_clocks is not None:
        gemm.FMA_EXPOSED_CLOCKS = args.fma_exposed_clocks
    if args.fma_kn_accumulators is not None:
        gemm.FMA_KN_ACCUMULATORS = args.fma_kn_accumulators
    if args.fma_kn_slowdown is not None:
        gemm.FMA_KN_SLOWDOWN = args.fma_kn_slowdown
    for log, gpu in LOGS:
        profile = load_profile(gpu)
        records = [r for r in readers.load_records(args.shared / "datasets" / "autoheuristic" / f"{log}_mm.txt.gz",
                                                   kernel="gemm")
                   if r.best_candidate_us and (args.dtype is None or r.shape.dtype == args.dtype)]
        if args.fit:
            fit_half(log, profile, records, args.out)
            continue
        if args.by_layout:
            for layouts, ranked in by_layout([r for r in records if args.half in (None, half(r))]).items():
                print(f"{log} A {layouts[0]}, B {layouts[1]}: " + " | ".join(f"{c} {m:.3f}" for c, m in ranked))
            continue
        cells = []
        for budget in (1, 5):
            scores = replay(records, rooftune_strategy(None), budget, profile)
            for h in (0, 1):
                mine = [s.score for s in scores if half(s.records) == h]
                cells.append(f"{budget} config{'s' * (budget > 1)}, half {h} ({len(mine)}): "
                             f"{np.mean(mine):.4f} / {summarize(mine)['worst_decile_mean']:.3f}")
        print(f"{log}{' ' + args.dtype if args.dtype else ''}: " + "; ".join(cells))


def by_layout(records, top: int = 6) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """Per (A, B) layout of `records`: the `top` configs by mean score (best recorded time ÷ the config's) over
    the inputs that timed them, among configs timed on at least 60% of the most-timed config's inputs; each
    config named BLOCK_MxBLOCK_NxBLOCK_K w s (fp32 accumulators a thread)."""
    scores: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        for t in r.trials:
            if t.ok:
                c = t.config
                acc = int(gemm.fma_accumulators(c["BLOCK_M"], c["BLOCK_N"], c.num_warps))
                name = f"{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} w{c.num_warps} s{c.num_stages} ({acc})"
                scores[(r.shape.a_layout, r.shape.layout)][name].append(r.best_candidate_us / t.time_us)
    ranked = {}
    for layouts, by_config in sorted(scores.items()):
        most = max(len(v) for v in by_config.values())
        means = [(c, float(np.mean(v))) for c, v in by_config.items() if len(v) >= 0.6 * most]
        ranked[layouts] = sorted(means, key=lambda cm: -cm[1])[:top]
    return ranked


def fit_half(log: str, profile, records, out: Path | None) -> None:
    """Fit on the choosing half (half 0) only; print its CV and both strategies' scores on the scoring half."""
    choosing = [r for r in records if half(r) == 0]
    scoring = [r for r in records if half(r) == 1]
    report = fit_kernel("gemm", fit_shapes_from_records(choosing), profile, f"{log}_mm.txt.gz, crc32-even half")
    cv = "; ".join(f"{b}: {s['mean']:.3f} / {s['worst_decile_mean']:.3f}" for b, s in sorted(report.cv.items()))
    print(f"{log}: residual fitted on the choosing half ({len(choosing)} inputs), its CV {cv}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_residual(report.residual, out / f"gemm-{log}-choosing-half.json")
    for budget in (1, 5):
        for name, residual in (("model alone", None), ("residual", report.residual)):
            scores = [s.score for s in replay(scoring, rooftune_strategy(residual), budget, profile)]
            print(f"  scoring half ({len(scores)}), {budget} config{'s' * (budget > 1)}, {name}: "
                  f"{np.mean(scores):.3f} / {summarize(scores)['worst_decile_mean']:.3f}")


if __name__ == "__main__":
    main()
