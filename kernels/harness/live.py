"""The live measurer: a batch of configs compiled in parallel, checked against the reference and timed
on this GPU by `KernelMeasurer` (the sweep's measurer), behind the same `Measurer` seam as a recorded dataset.

Tuning needs an answer in seconds, so:
- `TUNE_SETTINGS`: fewer screening rounds and a shorter final pass over the few fastest than a sweep
  (the final pass still interleaves them with the baseline; `tuner/tune.py` re-times the winners
  side by side);
- the compile workers start before this process loads torch, compile for the GPU's architecture
  (read through NVML) without a CUDA context of their own, and a search may `prefetch` configs it is
  likely to ask for: they compile in the background while earlier rounds are timed, behind any config
  a round asks for that was not prefetched; configs that differ only in the kernel's run-time
  parameters (GEMM's GROUP_M) share one compile;
- this process loads torch, creates its CUDA context and loads the kernel's module (triton) only
  when the first round is measured (`cuda_s`), so the search's first round and prefetches, chosen by
  the model without a GPU, are already compiling meanwhile;
- rounds are timed apart, under clocks that drift (an idle H200 starts at a few hundred MHz), so the
  first round's fastest config is timed again in every later round as an anchor, and the round's
  times are scaled by anchor time in round one / anchor time now.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace

from rooftune.candidates import Config, Trial, kernel_spec
from rooftune.hwprofiles import HardwareProfile, hwprobe
from rooftune.kernels.harness import compile_pool
from rooftune.kernels.harness.compile_pool import usable_cpus
from rooftune.kernels.harness.measure import SweepSettings, kernel_measurer

TUNE_SETTINGS = SweepSettings(rounds=5, retime_top=4, retime_rounds=7, retime_target_ms=1.0)


def tune_workers() -> int:
    """Compile workers for tuning: every core but two (this process times while they compile), 2 to 16."""
    return max(2, min(16, usable_cpus() - 2))


class LiveMeasurer:
    """`measure(shape, configs)`: compile (in parallel; a config that fails is a failed trial), check,
    time, anchored across rounds; `prefetch(shape, configs)`: compile in the background. Keeps the
    seconds spent waiting on compiles, the seconds the deferred CUDA start took (`cuda_started`
    False: `start_cuda` runs before the first measurement), when the first measurement began
    (`first_measure_at`, perf_counter seconds) and the baseline's last time (cuBLAS, SDPA)."""

    def __init__(self, kernel_measurer, cuda_started: bool = True):
        self.km = kernel_measurer
        self.compile_s = 0.0
        self.cuda_s = 0.0
        self.first_measure_at: float | None = None
        self._cuda_started = cuda_started
        self.last_baseline_us: float | None = None
        self._futures: dict = {}   # (shape, config) -> Future of compile seconds or error text
        self._binaries: dict = {}  # (shape, config without run-time parameters) -> its compile's Future
        self._anchor: dict = {}    # shape -> (config, its time in the first round)

    def start_cuda(self, device: str = "cuda") -> None:
        """torch, the CUDA context and the kernel's module (triton): all the first measurement needs
        before it waits on the compiles."""


        torch = hwprobe.require_cuda()
        torch.zeros(1, device=device)
        torch.cuda.synchronize(device)
        importlib.import_module(self.km.kernel.module)

    def _cuda_up(self) -> None:
        if self.first_measure_at is None:
            self.first_measure_at = time.perf_counter()
        if not self._cuda_started:
            self._cuda_started = True
            t0 = time.perf_counter()
            self.start_cuda(self.km.device)
            self.cuda_s += time.perf_counter() - t0

    def _submit(self, shape, config: Config):
        """The compile of `config`: a twin's already submitted (one binary: they differ only in run-time
        parameters) unless that one was cancelled or failed to run, else a new one."""
        runtime = self.km.kernel.runtime_params
        key = (shape, tuple(p for p in config.params if p[0] not in runtime), config.num_warps, config.num_stages)
        future = self._binaries.get(key)
        if future is None or future.cancelled() or (future.done() and future.exception() is not None):
            future = self._binaries[key] = self.km.pool.submit(shape, config)
        return future

    def prefetch(self, shape, configs: list[Config]) -> None:
        for c in configs:
            if (shape, c) not in self._futures:
                self._futures[(shape, c)] = self._submit(shape, c)

    def _compiled(self, shape, configs: list[Config]) -> dict:
        missing = [c for c in configs if (shape, c) not in self._futures]
        if missing:  # ahead of prefetched configs still waiting for a worker: those go back in the queue after
            waiting = [key for key, future in self._futures.items() if future.cancel()]
            for key in waiting:
                del self._futures[key]
            self.prefetch(shape, missing)
            for key in waiting:
                self._futures[key] = self._submit(*key)
        t0 = time.perf_counter()
        deadline = t0 + self.km.compile_timeout_s(len(configs))
        out, again = {}, []
        for c in configs:
            try:
                out[c] = self._futures[(shape, c)].result(timeout=max(0.0, deadline - time.perf_counter()))
            except BrokenProcessPool:
                again.append(c)  # a worker died: compile these one at a time, so the crash names its culprit
            except FuturesTimeout:
                out[c] = "compile timeout"
        if again:
            for c in again:
                self._futures.pop((shape, c), None)
            out.update(self.km.compile([(shape, c) for c in again]))
        self.compile_s += time.perf_counter() - t0
        return out

    def measure(self, shape, configs: list[Config]) -> list[Trial]:
        self._cuda_up()
        anchor = self._anchor.get(shape)
        timed = list(configs) + ([anchor[0]] if anchor and anchor[0] not in configs else [])
        result = self.km.measure(shape, timed, self._compiled(shape, timed))
        # This call's baseline only: a later shape must never report an earlier shape's cuBLAS time.
        self.last_baseline_us = result.baselines_us.get(self.km.baseline)
        rows = {r.config: r for r in result.trials}
        scale = 1.0
        if anchor is not None:
            now = rows[anchor[0]].time_us
            scale = anchor[1] / now if now else 1.0
        else:
            ok = [r for r in result.trials if r.time_us is not None and r.error is None]
            if ok:
                first = min(ok, key=lambda r: r.time_us)
                self._anchor[shape] = (first.config, first.time_us)
        return [rows[c] if rows[c].error or scale == 1.0 else replace(rows[c], time_us=rows[c].time_us * scale)
                for c in configs]

    def baseline_us(self) -> float | None:
        return self.last_baseline_us


@contextlib.contextmanager
def live_measurer(kernel: str, profile: HardwareProfile, settings: SweepSettings = TUNE_SETTINGS, *,
                  workers: int | None = None, sms: int | None = None) -> Iterator[LiveMeasurer]:
    """A LiveMeasurer for 'gemm' (against cuBLAS) or 'attention' (against SDPA) on this GPU (an SM
    partition of it with `sms`). The compile workers start first, before torch loads here, and close
    with the block; on the whole GPU, torch and the CUDA context load at the first measurement (an SM
    partition needs them at once). Raises NoGpuError without a GPU (where NVML sees none: at once;
    else at the first measurement)."""

    pool = compile_pool.gpu_pool(kernel_spec(kernel).module, tune_workers() if workers is None else workers)
    try:
        km = kernel_measurer(kernel, profile, settings, pool=pool)  # loads neither torch, CUDA nor triton
        if sms is None:
            yield LiveMeasurer(km, cuda_started=False)
            return
        hwprobe.require_cuda()
        with hwprobe.sm_partition(sms):
            live = LiveMeasurer(km)
            live.start_cuda(km.device)
            yield live
    finally:
        # Workers may still be compiling prefetched configs nobody will ask for: stop them rather than
        # wait (Triton writes its cache entries atomically, so an interrupted compile leaves none).
        pool.close(kill=True)
