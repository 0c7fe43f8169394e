"""Benchmark: how long the model takes to rank the full legal GEMM space of one shape (python3 scripts/bench_model.py)."""

from __future__ import annotations

import time

from rooftune.candidates import GEMM_SPACE, GemmShape, legal_configs
from rooftune.hwprofiles import load_profile
from rooftune.roofline import rank

SHAPES = ((4096, 4096, 4096), (1, 8192, 8192), (8, 28672, 8192), (2048, 8192, 8192), (777, 2048, 3072))
REPEATS = 20


def main(gpu: str = "h200") -> None:
    profile = load_profile(gpu)
    print(f"ranking the legal GEMM space on {profile.name} (best of {REPEATS} runs)")
    for m, n, k in SHAPES:
        shape = GemmShape(m, n, k)
        columns = legal_configs(GEMM_SPACE, shape, profile).columns
        best = float("inf")
        for _ in range(REPEATS):
            start = time.perf_counter()
            rank(shape, columns, profile)
            best = min(best, time.perf_counter() - start)
        print(f"  {str(shape):>16}  {len(columns['BLOCK_M']):5d} configs  {best * 1e3:6.2f} ms")


if __name__ == "__main__":
    main()
