"""`rooftune sweep gemm --gpus ...` with each GPU's worker (and its compile processes) pinned to its own
cores: the GPU's NUMA-local CPUs as NVML reports them, split evenly between the GPUs that share them.
An experiment for x2_check.sh (does the ~5% per-shape slowdown with both GPUs busy come from the CPU
side?); the sweep itself is eval/sweep.py's, unchanged.

usage: python3 datasets/h200/gemm/x2_pin.py SHAPES.json OUT_DIR 0,1
"""

from __future__ import annotations

import functools
import os
import sys
import time


def gpu_cpus(gpus: list[int]) -> dict[int, list[int]]:
    """gpu -> the CPUs its worker runs on: NVML's CPU affinity of the GPU (its NUMA node's cores) within
    this process's CPUs, each set shared by several of `gpus` cut into equal disjoint runs; every usable
    CPU, split evenly, where NVML cannot tell."""
    usable = sorted(os.sched_getaffinity(0))
    local: dict[int, tuple[int, ...]] = {}
    try:
        import pynvml

        pynvml.nvmlInit()
        words = max(usable) // 64 + 1  # 64-bit words of the mask, up to the highest CPU number here
        for g in gpus:
            mask = pynvml.nvmlDeviceGetCpuAffinity(pynvml.nvmlDeviceGetHandleByIndex(g), words)
            cpus = [64 * w + b for w, m in enumerate(mask) for b in range(64) if (int(m) >> b) & 1]
            local[g] = tuple(c for c in cpus if c in usable) or tuple(usable)
    except Exception as exc:  # no NVML: one even split of every CPU
        print(f"NVML CPU affinity unavailable ({exc}); splitting all CPUs", flush=True)
        local = {g: tuple(usable) for g in gpus}
    out: dict[int, list[int]] = {}
    for cpus in set(local.values()):
        sharing = [g for g in gpus if local[g] == cpus]
        share = len(cpus) // len(sharing)
        for i, g in enumerate(sharing):
            out[g] = list(cpus[i * share:(i + 1) * share])
    return out


def pinned_part(part, reporter, *, sweep_part):
    cpus, shapes = part
    os.sched_setaffinity(0, cpus)
    return sweep_part(shapes, reporter, workers=len(cpus))


class PrintReporter:
    def __init__(self):
        self.t0 = time.monotonic()

    def start(self, total, done):
        print(f"{total} shapes, {done} done", flush=True)

    def phase(self, shape, text):
        pass

    def finished(self, shape, seconds):
        print(f"{shape}  {seconds:.1f} s  (at {time.monotonic() - self.t0:.1f} s)", flush=True)


def main(shapes_path: str, out: str, gpus_text: str) -> None:
    from rooftune.candidates import KERNELS
    from rooftune.eval.gpus import run_on_gpus
    from rooftune.eval.shard import shard_of, sweep_cost_us
    from rooftune.eval.sweep import _sweep_part
    from rooftune.hwprofiles import load_profile
    from rooftune.kernels.measure import SweepSettings

    gpus = [int(g) for g in gpus_text.split(",")]
    profile, settings = load_profile("h200"), SweepSettings()
    shapes = KERNELS["gemm"].load_list(shapes_path)
    cost = functools.cache(functools.partial(sweep_cost_us, profile=profile, replay_us=1000.0 * settings.target_ms))
    cpus = gpu_cpus(gpus)
    print("cpus:", {g: f"{c[0]}-{c[-1]} ({len(c)})" for g, c in cpus.items()}, flush=True)
    part = functools.partial(_sweep_part, "gemm", shapes_path=shapes_path, listed=len(shapes), out=out,
                             profile=profile, sms=None, max_minutes=None, settings=settings)
    started = time.monotonic()
    by_gpu = run_on_gpus(functools.partial(pinned_part, sweep_part=part),
                         [(cpus[g], shard_of(shapes, i, len(gpus), cost)) for i, g in enumerate(gpus)],
                         gpus, PrintReporter())
    print({g: str(s) for g, s in by_gpu.items()}, f"{time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
