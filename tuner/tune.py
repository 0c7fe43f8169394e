"""The tune loop: `tune` runs a strategy against a measurer (the live GPU or a recorded dataset: the same
code either way), confirms the winner, and returns a `TuneResult`.

`rooftune tune` calls it through `tune_shape` (tuner/live_tune.py: the tune cache, then the live measurer and
the `rooftune` strategy); `rooftune eval` calls it with a dataset's recorded measurer for every method it
compares. The tune cache is tuner/cache.py; which correction ranks a live tune, tuner/residual_choice.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from rooftune.candidates import Config, Measurer, Trial, kernel_of, legal_configs, no_legal_config
from rooftune.hwprofiles import HardwareProfile

# The fastest few trials are timed again side by side before the winner is named: trials of
# different rounds were timed apart, under clocks that may have drifted between them.
CONFIRM_TOP = 3


class TuneError(RuntimeError):
    """Tuning produced no usable config (every measured config failed)."""


@dataclass(frozen=True)
class TuneResult:
    """The outcome of `tune`: the winner and every trial in the order measured (with the model's
    corrected prediction where the strategy made one), the baseline beside it (live only)."""

    shape: object
    winner: Config
    time_us: float
    trials: tuple[Trial, ...]
    strategy: str
    profile: str
    space_version: str
    baseline_us: float | None = None
    phases_s: dict | None = None  # live: start-up, compile, measure, confirm seconds
    kernel: str = "gemm"
    triton: str | None = None  # the Triton version a live tune compiled with (None: replayed)
    residual_note: str | None = None  # which correction ranked the configs, and why (live tunes)
    cached: bool = False
    cache_error: str | None = None  # why the result could not be stored in the cache (a full disk), if so

    @property
    def tflops(self) -> float:
        """Winner throughput: FLOPs / time_us / 1e6 = TFLOP/s."""
        return self.shape.flops / self.time_us / 1e6


class _Budgeted:
    """One shape's batch measure for a strategy: counts distinct configs against the budget, records
    every trial, and attaches the prior prediction where known."""

    def __init__(self, measurer: Measurer, shape, budget: int):
        self.measurer, self.shape, self.budget = measurer, shape, budget
        self.trials: list[Trial] = []
        self.measure_s = 0.0
        self.predicted_us: dict[Config, float] = {}

    def annotate(self, predicted_us: dict[Config, float]) -> None:
        """The strategy's predicted time per config (µs), kept on the trials it measures."""
        self.predicted_us.update(predicted_us)

    def prefetch(self, configs: list[Config]) -> None:
        """Configs the strategy may ask for soon: a live measurer compiles them in the background."""
        ahead = getattr(self.measurer, "prefetch", None)
        if ahead is not None:
            ahead(self.shape, list(configs))

    def __call__(self, configs: list[Config]) -> list[Trial]:
        seen = {t.config for t in self.trials}
        new = {c for c in configs if c not in seen}
        if len(self.trials) + len(new) > self.budget:
            raise ValueError(f"strategy asked for {len(self.trials) + len(new)} configs with a budget of {self.budget}")
        t0 = time.perf_counter()
        measured = self.measurer.measure(self.shape, list(configs))
        self.measure_s += time.perf_counter() - t0
        if len(measured) != len(configs):
            raise ValueError(f"measurer returned {len(measured)} trials for {len(configs)} configs")
        self.trials.extend(replace(t, predicted_us=self.predicted_us.get(t.config)) for t in measured
                           if t.config not in seen)
        return measured


def run_strategy(shape, measurer: Measurer, strategy, budget: int, profile: HardwareProfile,
                 candidates: list[Config]) -> tuple[list[Trial], float]:
    """The strategy's trials on `shape` (distinct configs, at most `budget`) and the seconds spent measuring."""
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    budgeted = _Budgeted(measurer, shape, budget)
    strategy(shape, candidates, budgeted, budget, profile)
    return budgeted.trials, budgeted.measure_s


def confirm(shape, measurer: Measurer, trials: list[Trial], top: int = CONFIRM_TOP) -> Trial | None:
    """The winner: the `top` fastest successful trials timed again side by side, the fastest of that
    pass (its time from that pass). A recorded measurer returns the recorded times: the fastest trial."""
    ok = sorted((t for t in trials if t.ok), key=lambda t: t.time_us)[:top]
    if not ok:
        return None
    if len(ok) == 1:
        return ok[0]
    again = [t for t in measurer.measure(shape, [t.config for t in ok]) if t.ok]
    return min(again, key=lambda t: t.time_us) if again else ok[0]


def tune(shape, measurer: Measurer, strategy, budget: int, *, profile: HardwareProfile,
         candidates: list[Config] | None = None, space=None, baseline=None) -> TuneResult:
    """Run `strategy` on `shape` through `measurer` within `budget` distinct configs, then confirm the
    winner (`confirm`). `space`: default the shape's registered kernel's. `candidates`: the configs to
    choose from (default: the space's legal configs
    for the shape on `profile`; replay passes the dataset's). `baseline()`: a library time to report
    beside the winner (live: cuBLAS), if any. Raises ValueError (budget, no candidates), NoLegalConfigError,
    TuneError."""
    space = space or kernel_of(shape).space
    if candidates is None:
        candidates = legal_configs(space, shape, profile).configs
        if not candidates:
            raise no_legal_config(space.kernel, shape, profile)
    trials, measure_s = run_strategy(shape, measurer, strategy, budget, profile, list(candidates))
    t0 = time.perf_counter()
    winner = confirm(shape, measurer, trials)
    if winner is None:
        first = next((t.error for t in trials), "no trial")
        raise TuneError(f"all {len(trials)} measured configs failed for {shape} on {profile.name}; first error: {first}")
    phases = {"measure_s": round(measure_s, 3), "confirm_s": round(time.perf_counter() - t0, 3)}
    return TuneResult(shape, winner.config, winner.time_us, tuple(trials), getattr(strategy, "__name__", "strategy"),
                      profile.name, space.version, baseline() if baseline else None, phases, kernel_of(shape).name)
