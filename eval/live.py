"""The live measurer: a batch of configs compiled in parallel, checked against the reference and timed
on this GPU by the sweep's `KernelMeasurer`, behind the same `Measurer` seam as a recorded dataset.

Tuning times fewer configs per batch than a sweep and needs an answer in seconds, so it uses
`TUNE_SETTINGS`: fewer screening rounds and a shorter final pass over the few fastest (the final
pass still interleaves them with the baseline; `tuner/tune.py` re-times the winners side by side).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from rooftune.candidates import Config, Trial
from rooftune.eval.sweep import KernelMeasurer, SweepSettings, attention_measurer, gemm_measurer
from rooftune.hwprofiles import HardwareProfile

TUNE_SETTINGS = SweepSettings(rounds=5, retime_top=4, retime_rounds=7, retime_target_ms=1.0)
# Compile workers for tuning: a round compiles a handful of configs (tuner/search.py's rounds of 4).
TUNE_WORKERS = 8


class LiveMeasurer:
    """`measure(shape, configs)`: compile (in parallel; a config that fails is a failed trial), check,
    time. Keeps the seconds spent compiling and the baseline's last time (cuBLAS, SDPA)."""

    def __init__(self, kernel_measurer: KernelMeasurer):
        self.km = kernel_measurer
        self.compile_s = 0.0
        self.last_baseline_us: float | None = None

    def start(self, device: str = "cuda") -> None:
        """Start the compile workers, then this process's CUDA context while they load."""
        import torch

        self.km.pool.start()
        torch.zeros(1, device=device)
        torch.cuda.synchronize(device)

    def measure(self, shape, configs: list[Config]) -> list[Trial]:
        t0 = time.perf_counter()
        compiled = self.km.compile([(shape, c) for c in configs])
        self.compile_s += time.perf_counter() - t0
        result = self.km.measure(shape, list(configs), compiled)
        self.last_baseline_us = result.baselines_us.get(self.km.baseline, self.last_baseline_us)
        return [Trial(r.config, r.time_us, r.error, r.compile_s) for r in result.rows]

    def baseline_us(self) -> float | None:
        return self.last_baseline_us


@contextlib.contextmanager
def live_measurer(kernel: str, profile: HardwareProfile, settings: SweepSettings = TUNE_SETTINGS,
                  **kwargs) -> Iterator[LiveMeasurer]:
    """A LiveMeasurer for 'gemm' (against cuBLAS) or 'attention' (against SDPA) on this GPU; its compile
    workers close with the block."""
    make = {"gemm": gemm_measurer, "attention": attention_measurer}[kernel]
    kwargs.setdefault("workers", TUNE_WORKERS)
    with make(profile, settings, **kwargs) as km:
        live = LiveMeasurer(km)
        live.start(km.device)
        yield live
