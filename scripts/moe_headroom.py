"""How far the fused-MoE space's best config is from the roofline, per shape of a swept dataset (CPU): where the
levers the space leaves out (SPLIT_K, TMA loads) could pay.

    python scripts/moe_headroom.py [--data datasets/h200/moe/train] [--gpu h200] [--worst 8]

A shape's bound is the larger of its DRAM time (the active experts' weights, the routed rows' inputs and outputs,
once each, at the profile's DRAM bandwidth) and its tensor-core time (its useful FLOPs at the profile's bf16 rate,
padding excluded); the figure is bound ÷ best recorded time (1: at the roofline; above 1 where the probed
bandwidth is below what the kernel reaches). Printed by GEMM and by decode-sized (≤ 64 tokens) or prefill-sized
token counts: median, p10 and the fraction of shapes whose bound is DRAM's; then the shapes furthest from it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from rooftune.candidates.routing import expert_rows
from rooftune.eval.datasets import readers
from rooftune.eval.scoring.reports import MOE_DECODE_TOKENS
from rooftune.hwprofiles import load_profile


def bound_us(shape, profile) -> tuple[float, bool]:
    """(the shape's roofline time in µs, whether DRAM sets it)."""
    active = int((expert_rows(shape) > 0).sum())
    dram_bytes = 2 * (active * shape.n * shape.k + shape.rows * shape.k + shape.rows * shape.n)
    dram_us = dram_bytes / (profile.dram_bw_gbps * 1e3)
    mma_us = shape.flops / (profile.bf16_tflops * 1e6)
    return max(dram_us, mma_us), dram_us >= mma_us


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=Path("datasets/h200/moe/train"))
    p.add_argument("--gpu", default="h200")
    p.add_argument("--worst", type=int, default=8)
    args = p.parse_args(argv)
    profile = load_profile(args.gpu)
    rows = []
    for r in readers.load_records(args.data):
        if r.best_candidate_us:
            bound, dram = bound_us(r.shape, profile)
            rows.append((r.shape, bound / r.best_candidate_us, dram))
    print(f"{args.data}: {len(rows)} shapes; roofline bound / best recorded time")
    for gemm in ("gate_up", "down"):
        for decode in (True, False):
            group = [(f, d) for s, f, d in rows if s.gemm == gemm and (s.tokens <= MOE_DECODE_TOKENS) == decode]
            if not group:
                continue
            fractions = np.array([f for f, _ in group])
            band = f"tokens <= {MOE_DECODE_TOKENS}" if decode else f"tokens > {MOE_DECODE_TOKENS}"
            print(f"  {gemm:8s} {band:13s} ({len(group):3d}): median {np.median(fractions):.2f}, p10 "
                  f"{np.percentile(fractions, 10):.2f}, DRAM-bound {sum(d for _, d in group) / len(group):.0%}")
    print("furthest from the roofline:")
    for shape, fraction, dram in sorted(rows, key=lambda x: x[1])[:args.worst]:
        print(f"  {str(shape):34s} {fraction:.2f} ({'DRAM' if dram else 'tensor cores'})")


if __name__ == "__main__":
    main()
