"""Measurement records: one `Trial` per measured config, one `ShapeRecords` per measured shape, and the
one measurement seam (`Measurer`) that live tuning, the sweep's datasets and replay all go through.

A trial comes from a live GPU timer (kernels/harness/measure.py), a dataset file (eval/datasets/format.py) or
another kernel's log (eval/datasets/readers.py); the same record flows to the search, the tune cache, the
dataset writer and replay. Fields past `error` are how it was measured, where the source knows it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Protocol

from rooftune.candidates.config import Config
from rooftune.candidates.families import Shape


# The least time a measured kernel can take, µs: no GPU kernel completes faster than its launch, about 1 µs (the
# profiles' launch_overhead_us, ~0.9 µs in a CUDA graph; the committed datasets' fastest config takes 1.9 µs). A
# recorded or cached time below it (1e-308, a unit slip of seconds for µs) is damage, never a measurement: every
# score, ratio and TFLOP/s figure divides by it.
MIN_TIME_US = 0.1


US_PER_UNIT = {"µs": 1.0, "ms": 1e3}


def check_time_us(value: object, what: str, unit: str = "µs") -> float:
    """`value` (a kernel's time in `unit`, µs or ms) as a float where it is a real number, finite and at least
    MIN_TIME_US; else a ValueError saying which (`what`) and what it should be."""
    least = MIN_TIME_US / US_PER_UNIT[unit]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= least:
        return float(value)
    raise ValueError(f"{what} = {value!r} is not a finite, positive time of at least {least:g} {unit} (no GPU "
                     f"kernel runs faster)")


@dataclass(frozen=True)
class Trial:
    """The outcome of measuring one config: `time_us` (the kernel's time per launch) or, instead, `error`
    (compile error, out of resources, failed reference check). Errors are data, never an inf sentinel.

    How it was measured, where known: `compile_s`; the screening pass's `rounds`, `spread` ((max − min) /
    median over its rounds) and raw median `screen_us`; for a config in a sweep's final passes, the two
    passes' medians `retime_us`, `retime2_us` and rounds `retime_rounds`. `in_space`: False for a config
    outside the published space timed beside it (a baseline's). `predicted_us`: the model's (corrected)
    prediction, where a tuner attached it."""

    config: Config
    time_us: float | None
    error: str | None = None
    compile_s: float | None = None
    rounds: int = 0
    spread: float | None = None
    screen_us: float | None = None
    retime_us: float | None = None
    retime2_us: float | None = None
    retime_rounds: int | None = None
    in_space: bool = True
    predicted_us: float | None = field(default=None, kw_only=True)

    def __post_init__(self):
        if (self.time_us is None) == (self.error is None):
            raise ValueError("a Trial has exactly one of time_us and error")

    @property
    def ok(self) -> bool:
        return self.error is None


# One shape's measurer, bound to its shape: a batch of configs in, one Trial per config out, in order.
MeasureBatch = Callable[[list[Config]], list[Trial]]


class Measurer(Protocol):
    """The one measurement seam: a batch of configs of one shape in, one Trial per config out, in order
    (a live GPU measurer compiles the batch in parallel, checks each config against the reference and
    times them together; a recorded measurer looks them up in a dataset). A config may be asked for
    again: a live measurer re-times it beside the others, a recorded one returns the same record."""

    def measure(self, shape, configs: list[Config]) -> list[Trial]: ...


@dataclass(frozen=True)
class ShapeRecords:
    """Every measured config of one shape. `baselines_us` holds non-config references timed beside them
    (e.g. {'cublas': 18.4}); `meta` holds per-shape facts (space version, noise, the device, ...).

    `candidates`: the configs a strategy chooses from (the published space), where the trials also
    hold configs outside it (a baseline's configs timed beside the space); None: every trial.
    `aliases`: config -> recorded config that runs the same kernel (e.g. a tutorial config whose
    GROUP_M has no effect on this shape -> its GROUP_M=1 twin in the space), for `lookup`."""

    shape: Shape
    trials: tuple[Trial, ...]
    baselines_us: dict[str, float] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)
    candidates: tuple[Config, ...] | None = None
    aliases: dict[Config, Config] = field(default_factory=dict)

    @property
    def best_us(self) -> float | None:
        """Fastest successful recorded time (any trial, in the space or not), or None when every config failed."""
        times = [t.time_us for t in self.trials if t.ok]
        return min(times) if times else None

    @cached_property  # replay asks once per shape per strategy run; the records never change
    def best_candidate(self) -> Trial | None:
        """The fastest successful trial among the candidates (the best config of the space; the first on a tie),
        or None."""
        allowed = None if self.candidates is None else set(self.candidates)
        ok = [t for t in self.trials if t.ok and (allowed is None or t.config in allowed)]
        return min(ok, key=lambda t: t.time_us) if ok else None

    @property
    def best_candidate_us(self) -> float | None:
        """Fastest successful time among the candidates, or None."""
        best = self.best_candidate
        return None if best is None else best.time_us

    def candidate_configs(self) -> list[Config]:
        """The configs a strategy may choose from, in recorded order."""
        return list(self.candidates) if self.candidates is not None else [t.config for t in self.trials]

    def lookup(self) -> Mapping[Config, Trial]:
        """Config -> Trial for every recorded config and every alias (as a Trial of the alias's config);
        read-only, built once (replay asks for it once per shape per strategy run)."""
        return self._table

    @cached_property
    def _table(self) -> Mapping[Config, Trial]:
        table = {t.config: t for t in self.trials}
        for alias, target in self.aliases.items():
            if alias not in table and target in table:
                table[alias] = replace(table[target], config=alias)
        return MappingProxyType(table)


def nearest_rank(values, q: float) -> float:
    """The q-quantile by nearest rank, sorted(values)[round(q·(n−1))]: always one of `values`, never
    interpolated (how the final passes' agreement is reported)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]
