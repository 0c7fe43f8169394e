"""A live tune of one shape (`rooftune tune`, `tune moe`, the PyTorch ops' tune on first use): the tune cache
first, then the `rooftune` strategy through the tune loop on this GPU's live measurer, the result stored."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from rooftune.candidates import Measurer, kernel_of
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton, partition_profile
from rooftune.kernels.harness import live
from rooftune.outputs import OutputError
from rooftune.tuner.cache import TuneCache, tune_key
from rooftune.tuner.residual_choice import ranking_residual
from rooftune.tuner.search.strategies import rooftune_strategy
from rooftune.tuner.tune import TuneResult, tune


def tune_shape(shape, profile: HardwareProfile, budget: int = 20, *, measurer: Measurer | None = None,
               cache: str | Path | None = None, sms: int | None = None, residual="shipped") -> TuneResult:
    """Tune `shape` (of any registered kernel) live with the `rooftune` strategy (model + residual +
    search). `measurer`: by default the live GPU measurer on this GPU (an SM partition of it with
    `sms`); tests pass a recorded one (its `baseline_us()`, where it has one, is the baseline). With
    `cache`, a stored result for the same key is returned without measuring, and a new one is stored
    atomically (where that fails, the result says why in `cache_error`). `residual`: "shipped" (the one fitted for
    this kernel on this GPU over this space, if any), "none" or None (the model alone), or a Residual.
    Raises ValueError (budget), NoGpuError, TuneCacheError, TuneError."""
    t_start = time.perf_counter()
    spec = kernel_of(shape)
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    triton = installed_triton()
    residual, note = ranking_residual(residual, spec, profile, triton)
    # On an SM partition the model ranks for the SMs the configs will run on (waves, split-K).
    model_profile = partition_profile(profile, sms)
    store = TuneCache(cache) if cache is not None else None
    key = None
    if store is not None:
        key = tune_key(shape, profile, budget, residual, sms, triton)
        hit = store.get(key)
        if hit is not None:
            return hit
    if measurer is not None:  # a measurer that times the library beside the configs reports it too
        result = tune(shape, measurer, rooftune_strategy(residual), budget, profile=model_profile,
                      space=spec.space, baseline=getattr(measurer, "baseline_us", None))
    else:
        with live.live_measurer(spec.name, profile, sms=sms) as gpu:
            t_ready = time.perf_counter()
            # The compile workers are starting: the model ranks meanwhile.
            result = tune(shape, gpu, rooftune_strategy(residual), budget, profile=model_profile,
                          space=spec.space, baseline=gpu.baseline_us)
            # Start-up: everything before the first measurement (the model's ranking and the first
            # compiles' submission among it) and the CUDA start deferred to it (kernels/harness/live.py).
            first_measure_at = getattr(gpu, "first_measure_at", None) or t_ready
            cuda_s = getattr(gpu, "cuda_s", 0.0)
            phases = {"startup_s": round(first_measure_at - t_start + cuda_s, 3),
                      "compile_s": round(gpu.compile_s, 3), **(result.phases_s or {})}
            phases["measure_s"] = round(phases["measure_s"] - gpu.compile_s - cuda_s, 3)
            result = replace(result, phases_s=phases)
    result = replace(result, phases_s={**(result.phases_s or {}), "total_s": round(time.perf_counter() - t_start, 3)},
                     triton=triton, residual_note=note)
    if store is not None:
        try:
            store.put(key, result)
        except OutputError as exc:  # the tune's result stands; the caller says it was not kept
            result = replace(result, cache_error=str(exc))
    return result


def tune_gemm(shape, profile: HardwareProfile, budget: int = 20, **kwargs) -> TuneResult:
    """`tune_shape` for a GEMM shape."""
    return tune_shape(shape, profile, budget, **kwargs)
