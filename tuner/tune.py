"""Tuning one shape: `tune` runs a strategy against a measurer (the live GPU or a recorded dataset: the
same code either way), confirms the winner, and keeps results in a JSON cache.

`rooftune tune` calls `tune` with the live measurer and the `rooftune` strategy; `rooftune eval`
calls it with a dataset's recorded measurer for every method it compares.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rooftune.candidates import Config, Measurer, Trial, kernel_of, kernel_spec, legal_configs, parse_config
from rooftune.eval.datasets.format import shape_id
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton, partition_profile
from rooftune.kernels.harness import live
from rooftune.kernels.harness.measure import file_digest  # no torch at import
from rooftune.outputs import OutputError, write_atomic
from rooftune.roofline.residual import Residual, load_residual, residual_to_dict
from rooftune.tuner.search.strategies import rooftune_strategy

CACHE_FORMAT = "rooftune-tune-cache-2"
# The fastest few trials are timed again side by side before the winner is named: trials of
# different rounds were timed apart, under clocks that may have drifted between them.
CONFIRM_TOP = 3


class TuneError(RuntimeError):
    """Tuning produced no usable config (every measured config failed)."""


class TuneCacheError(ValueError):
    """A tune cache file that cannot be read."""


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
    beside the winner (live: cuBLAS), if any. Raises ValueError (budget, no candidates), TuneError."""
    space = space or kernel_of(shape).space
    if candidates is None:
        candidates = legal_configs(space, shape, profile).configs
        if not candidates:
            raise ValueError(f"no legal config for {shape} on {profile.name}")
    trials, measure_s = run_strategy(shape, measurer, strategy, budget, profile, list(candidates))
    t0 = time.perf_counter()
    winner = confirm(shape, measurer, trials)
    if winner is None:
        first = next((t.error for t in trials), "no trial")
        raise TuneError(f"all {len(trials)} measured configs failed for {shape} on {profile.name}; first error: {first}")
    phases = {"measure_s": round(measure_s, 3), "confirm_s": round(time.perf_counter() - t0, 3)}
    return TuneResult(shape, winner.config, winner.time_us, tuple(trials), getattr(strategy, "__name__", "strategy"),
                      profile.name, space.version, baseline() if baseline else None, phases, kernel_of(shape).name)


# --- the cache -----------------------------------------------------------------------------------------

def kernel_digest(module: str = "rooftune.kernels.gemm") -> str:
    """Digest of a kernel's source, found without importing it (that would import torch and triton)."""
    return file_digest(importlib.util.find_spec(module).origin)


def residual_digest(residual) -> str:
    """Digest of what in `residual` moves a ranking (its features, coefficients, pick and search constants),
    not of its record of how it was fitted: a check under another Triton keeps the cached tunes."""
    if residual is None:
        return "model-only"
    ranking = {k: v for k, v in residual_to_dict(residual).items() if k != "fit"}
    return hashlib.sha256(json.dumps(ranking, sort_keys=True).encode()).hexdigest()[:12]


def cache_key(shape, profile: HardwareProfile, budget: int, sms: int | None = None, *, space_version: str,
              digest: str, tuner: str, triton: str | None) -> str:
    """GPU (the profile's name, with the SM partition), shape id, space version, kernel digest, the
    Triton version that compiles it (a tune under another Triton is not reused: a new compiler can move
    the configs' order), the tuner (strategy and residual digest), budget."""
    gpu = profile.name if sms is None else f"{profile.name} ({sms} SMs)"
    return "|".join((gpu, shape_id(shape), space_version, digest, f"triton={triton or 'none'}", tuner,
                     f"budget={budget}"))


def residual_choice(spec, profile: HardwareProfile, triton: str | None) -> tuple[object, str]:
    """The residual a live tune under Triton `triton` uses by default, and a line saying which and why: the
    one fitted for `spec`'s kernel on this GPU over this version of its space, where it was fitted or
    checked under this Triton release; else None (the model alone)."""
    residual = load_residual(spec.name, profile)
    if residual is None:
        return None, f"the model alone: no residual is fitted for {spec.name} on {profile.name}"
    why = residual.mismatch(spec.space.version, triton)
    if why:
        return None, f"the model alone: the shipped residual was {why}"
    under = f" under Triton {', '.join(residual.tritons)}" if residual.tritons else ""
    return residual, f"the model × the residual fitted on {residual.fit.get('data')}{under}"


def shipped_residual(spec, profile: HardwareProfile, triton: str | None = None):
    """`residual_choice`'s residual (under Triton `triton`; None: the installed one)."""
    return residual_choice(spec, profile, triton or installed_triton())[0]


def tune_key(shape, profile: HardwareProfile, budget: int, residual, sms: int | None = None,
             triton: str | None = None) -> str:
    """The cache key under which `tune_shape` stores a `rooftune`-strategy tune of `shape` over `residual`
    compiled by Triton `triton` (None: the installed one)."""
    spec = kernel_of(shape)
    return cache_key(shape, profile, budget, sms, space_version=spec.space.version,
                     digest=kernel_digest(spec.module), tuner=f"rooftune:{residual_digest(residual)}",
                     triton=triton or installed_triton())


CACHE_ENV = "ROOFTUNE_CACHE"


def cache_path() -> Path:
    """The per-user tune cache that `rooftune tune` and the PyTorch ops share: $ROOFTUNE_CACHE, else
    tune.json under $XDG_CACHE_HOME/rooftune (default ~/.cache/rooftune)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rooftune" / "tune.json"


def read_cache(path: Path, fmt: str = CACHE_FORMAT, kind: str = "tune") -> dict:
    """A cache file of format `fmt` ({"format", "entries"}; empty where there is none): the tune cache,
    or tuner/pytorch/autotune.py's (`kind` names it in errors)."""
    if not path.exists():
        return {"format": fmt, "entries": {}}
    if not path.is_file():  # a device such as /dev/full would be read forever
        raise TuneCacheError(f"{path}: not a regular file, so not a rooftune {kind} cache; pass a file path "
                             f"(${CACHE_ENV} or --cache)")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TuneCacheError(f"{path}: not a readable rooftune {kind} cache ({exc}); delete it or pass "
                             f"another --cache") from exc
    if not isinstance(data, dict) or data.get("format") != fmt or not isinstance(data.get("entries"), dict):
        raise TuneCacheError(f"{path}: not a rooftune {kind} cache (expected format {fmt!r}); delete it "
                             f"or pass another --cache")
    return data


def result_to_dict(result: TuneResult) -> dict:
    """A JSON-ready form of `result` (configs in their string form); `result_from_dict` reads it back."""
    d = asdict(result)
    d["shape"] = asdict(result.shape)
    d["winner"] = str(result.winner)
    d["trials"] = [{**asdict(t), "config": str(t.config)} for t in result.trials]
    d.pop("cached")
    d.pop("cache_error")
    return d


def result_from_dict(d: dict) -> TuneResult:
    shape_type = kernel_spec(d.get("kernel", "gemm")).shape_type
    return TuneResult(**{**d, "shape": shape_type(**d["shape"]), "winner": parse_config(d["winner"]),
                         "trials": tuple(Trial(**{**t, "config": parse_config(t["config"])}) for t in d["trials"])})


def cached_result(path: Path, key: str) -> TuneResult | None:
    stored = read_cache(path)["entries"].get(key)
    if stored is None:
        return None
    try:
        return replace(result_from_dict(stored), cached=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise TuneCacheError(f"{path}: entry {key!r} is malformed ({exc}); delete the file") from exc


def store_result(path: Path, key: str, result: TuneResult) -> None:
    data = read_cache(path)  # again: another run may have written since
    data["entries"][key] = result_to_dict(result)
    write_atomic(path, (json.dumps(data, indent=1) + "\n").encode())


# --- live tuning ---------------------------------------------------------------------------------------

def ranking_residual(residual, spec, profile: HardwareProfile, triton: str | None) -> tuple[object, str | None]:
    """What a live tune ranks with, and the line saying which: "shipped" is `residual_choice`'s; "none" or None the
    model alone, a Residual itself (no line: the caller chose). Anything else raises ValueError."""
    if residual == "shipped":
        return residual_choice(spec, profile, triton)
    if residual == "none":
        return None, None
    if residual is not None and not isinstance(residual, Residual):
        raise ValueError(f'residual must be "shipped", "none", None or a Residual, got {residual!r}')
    return residual, None


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
    path = Path(cache) if cache is not None else None
    key = None
    if path:
        key = tune_key(shape, profile, budget, residual, sms, triton)
        hit = cached_result(path, key)
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
    if path:
        try:
            store_result(path, key, result)
        except OutputError as exc:  # the tune's result stands; the caller says it was not kept
            result = replace(result, cache_error=str(exc))
    return result


def tune_gemm(shape, profile: HardwareProfile, budget: int = 20, **kwargs) -> TuneResult:
    """`tune_shape` for a GEMM shape."""
    return tune_shape(shape, profile, budget, **kwargs)
