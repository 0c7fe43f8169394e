"""Tuning a whole model: every kernel shape of its forward pass (tuner/llm/shapes.py) through
`tune_shape`, cache-aware, and the forward pass's time with rooftune's kernels against torch's."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rooftune.candidates import Measurer, kernel_of, legal_configs
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import partition_profile
from rooftune.kernels.harness import live
from rooftune.tuner.cache import TuneCache, tune_key
from rooftune.tuner.live_tune import tune_shape
from rooftune.tuner.llm.shapes import LayerShape, ModelConfig, model_shapes
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.tune import TuneError, TuneResult

NO_LEGAL_CONFIG = "no legal config in the published space"

# kernel name ('gemm', 'attention') -> a context manager giving that kernel's measurer; the live one by default.
MeasurerFactory = Callable[[str], AbstractContextManager[Measurer]]


class Reporter(Protocol):
    """Progress over the distinct shapes (cli_gpu.RichReporter is one)."""

    def start(self, total: int, done: int) -> None: ...
    def phase(self, shape, text: str) -> None: ...
    def finished(self, shape, seconds: float) -> None: ...


@dataclass(frozen=True)
class LayerTime:
    """One layer of the forward pass: its tune result (shared by every layer of the same shape), or why none."""

    layer: LayerShape
    result: TuneResult | None = None
    skipped: str | None = None


@dataclass(frozen=True)
class ForwardTime:
    """One forward pass of `tokens` tokens: Σ time_us × count over the layers with a result, with
    rooftune's winners and with torch's baseline (None where a layer has no baseline time)."""

    tokens: int
    rooftune_us: float
    torch_us: float | None
    skipped: tuple[str, ...]  # layers left out of both sums

    @property
    def speedup(self) -> float | None:
        """torch time / rooftune time: above 1, rooftune's kernels are faster."""
        return self.torch_us / self.rooftune_us if self.torch_us and self.rooftune_us else None


@dataclass(frozen=True)
class ModelTune:
    """The outcome of `tune_model`: every layer in forward order, per token count."""

    config: ModelConfig
    profile: str
    budget: int
    seq: int
    layers: tuple[LayerTime, ...]
    tuned: int   # distinct shapes measured in this run
    cached: int  # distinct shapes found in the cache

    def forward_times(self) -> list[ForwardTime]:
        """The forward pass's time per token count, in the order the counts were given."""
        out = []
        for tokens in dict.fromkeys(lt.layer.tokens for lt in self.layers):
            rows = [lt for lt in self.layers if lt.layer.tokens == tokens]
            timed = [lt for lt in rows if lt.result is not None]
            base = [lt.result.baseline_us for lt in timed]
            torch_us = (sum(b * lt.layer.count for b, lt in zip(base, timed))
                        if timed and all(b is not None for b in base) else None)
            out.append(ForwardTime(tokens, sum(lt.result.time_us * lt.layer.count for lt in timed), torch_us,
                                   tuple(lt.layer.layer for lt in rows if lt.result is None)))
        return out

    def not_cached(self) -> dict:
        """shape -> why its tune of this run was not stored in the tune cache (empty: every tune stored)."""
        return {lt.layer.shape: lt.result.cache_error for lt in self.layers if lt.result and lt.result.cache_error}

    def failed(self) -> list[LayerTime]:
        """The layers whose measured configs all failed (not those without a legal config), in forward order."""
        return [lt for lt in self.layers if lt.skipped and lt.skipped != NO_LEGAL_CONFIG]


def live_measurers(profile: HardwareProfile, sms: int | None = None) -> MeasurerFactory:
    """The live measurer of each kernel on this GPU (an SM partition of it with `sms`)."""
    def factory(kernel: str):
        return live.live_measurer(kernel, profile, sms=sms)

    return factory


def tune_model(config: ModelConfig, tokens: list[int], profile: HardwareProfile, budget: int = 20, *,
               seq: int = 2048, measurer_for: MeasurerFactory | None = None, cache: str | Path | None = None,
               sms: int | None = None, reporter: Reporter | None = None) -> ModelTune:
    """Tune every distinct kernel shape of `config`'s forward pass for each token count (`model_shapes`)
    with `tune_shape` (the `rooftune` strategy, the shipped residual). With `cache`, shapes already
    there are not measured (no measurer is opened when all are) and new results are stored. One
    measurer per kernel, opened by `measurer_for` (default: the live GPU one) and closed before the
    next. A shape with no legal config, or whose measured configs all failed, is kept as a skipped
    layer. Raises ModelConfigError, NoGpuError, TuneCacheError, and what a live measurer raises
    (ContextQuarantined: run again, the cache keeps what was done)."""
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    layers = model_shapes(config, tokens, seq)
    distinct = list(dict.fromkeys(lt.shape for lt in layers))
    model_profile = partition_profile(profile, sms)
    residuals = {spec.name: shipped_residual(spec, profile) for spec in {kernel_of(s) for s in distinct}}
    path = Path(cache) if cache is not None else None
    results: dict = {}
    skipped: dict = {}
    todo: dict[str, list] = {}  # kernel -> shapes to measure
    for shape in distinct:
        spec = kernel_of(shape)
        if not legal_configs(spec.space, shape, model_profile).configs:
            skipped[shape] = NO_LEGAL_CONFIG
            continue
        hit = TuneCache(path).get(tune_key(shape, profile, budget, residuals[spec.name], sms)) if path else None
        if hit is not None:
            results[shape] = hit
        else:
            todo.setdefault(spec.name, []).append(shape)
    cached = len(results)
    if reporter is not None:
        reporter.start(cached + sum(map(len, todo.values())), cached)
    measurer_for = measurer_for or live_measurers(profile, sms)
    for kernel, shapes in todo.items():
        with measurer_for(kernel) as measurer:
            for shape in shapes:
                t0 = time.perf_counter()
                if reporter is not None:
                    reporter.phase(shape, f"tuning ({budget} configs at most)")
                try:
                    results[shape] = tune_shape(shape, profile, budget, measurer=measurer, cache=path, sms=sms,
                                                residual=residuals[kernel])
                except TuneError as exc:
                    skipped[shape] = str(exc)
                if reporter is not None:
                    reporter.finished(shape, time.perf_counter() - t0)
    times = tuple(LayerTime(lt, results.get(lt.shape), skipped.get(lt.shape)) for lt in layers)
    return ModelTune(config, profile.name, budget, seq, times, sum(map(len, todo.values())), cached)
