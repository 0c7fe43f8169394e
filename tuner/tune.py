"""Live tuning: the model's top configs of a GEMM shape compiled and timed on this GPU, with a JSON cache."""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rooftune.candidates import GEMM_SPACE, Config, GemmShape, legal_configs
from rooftune.eval.benches import GEMM_SWEEP
from rooftune.eval.dataset import atomic_write_bytes, shape_id
from rooftune.tuner.strategies import model_ranking
from rooftune.hwprofiles import HardwareProfile

CACHE_FORMAT = "rooftune-tune-cache-1"


class TuneError(RuntimeError):
    """Tuning produced no usable config (every planned config failed)."""


class TuneCacheError(ValueError):
    """A tune cache file that cannot be read."""


@dataclass(frozen=True)
class Ranked:
    """A legal config with the model's predicted time (µs) and its rank (1 = predicted fastest)."""

    config: Config
    predicted_us: float
    rank: int


@dataclass(frozen=True)
class TuneTrial:
    """One planned config as measured: a time (µs per launch) or an error, never both."""

    config: Config
    predicted_us: float
    rank: int
    time_us: float | None
    error: str | None = None
    compile_s: float | None = None


@dataclass(frozen=True)
class TuneResult:
    """The outcome of `tune_gemm`: the winner, cuBLAS beside it, every trial in model order."""

    shape: GemmShape
    winner: Config
    time_us: float
    cublas_us: float | None
    trials: tuple[TuneTrial, ...]
    space_version: str
    profile: str
    compile_s: float
    measure_s: float
    cached: bool = False

    @property
    def tflops(self) -> float:
        """Winner throughput: FLOPs / time_us / 1e6 = TFLOP/s."""
        return self.shape.flops / self.time_us / 1e6


def plan(shape: GemmShape, profile: HardwareProfile, budget: int = 20) -> list[Ranked]:
    """The first `budget` legal configs of GEMM_SPACE in the model's order (`model_ranking`, the order
    `model_order` measures), or all of them where the shape has fewer. Raises ValueError for budget < 1."""
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    ranking = model_ranking(shape, legal_configs(GEMM_SPACE, shape, profile).configs, profile)
    if not ranking:
        raise ValueError(f"no legal gemm config for {shape} on {profile.name}")
    return [Ranked(c, us, rank) for rank, (c, us) in enumerate(ranking[:budget], start=1)]


def kernel_digest() -> str:
    """Digest of kernels/gemm.py, found without importing it (that would import torch and triton)."""
    from rooftune.eval.sweep import file_digest

    return file_digest(importlib.util.find_spec("rooftune.kernels.gemm").origin)


def cache_key(shape: GemmShape, profile: HardwareProfile, budget: int, sms: int | None = None,
              space_version: str | None = None, digest: str | None = None) -> str:
    """GPU (the profile's name, with the SM partition), shape id, space version, kernel digest, budget."""
    gpu = profile.name if sms is None else f"{profile.name} ({sms} SMs)"
    return "|".join((gpu, shape_id(shape), space_version or GEMM_SPACE.version, digest or kernel_digest(),
                     f"budget={budget}"))


def _read_cache(path: Path) -> dict:
    if not path.exists():
        return {"format": CACHE_FORMAT, "entries": {}}
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TuneCacheError(f"{path}: not a readable rooftune tune cache ({exc}); delete it or pass "
                             f"another --cache") from exc
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or not isinstance(data.get("entries"), dict):
        raise TuneCacheError(f"{path}: not a rooftune tune cache (expected format {CACHE_FORMAT!r}); delete it "
                             f"or pass another --cache")
    return data


def _config_json(config: Config) -> dict:
    return dict(config.items())


def _config_from(d: dict) -> Config:
    d = dict(d)
    return Config.make(d.pop("num_warps"), d.pop("num_stages"), **d)


def result_to_dict(result: TuneResult) -> dict:
    """A JSON-ready form of `result` (configs as {parameter: value}); `result_from_dict` reads it back."""
    d = asdict(result)
    d["shape"] = asdict(result.shape)
    d["winner"] = _config_json(result.winner)
    d["trials"] = [{**asdict(t), "config": _config_json(t.config)} for t in result.trials]
    d.pop("cached")
    return d


def result_from_dict(d: dict) -> TuneResult:
    return TuneResult(**{**d, "shape": GemmShape(**d["shape"]), "winner": _config_from(d["winner"]),
                         "trials": tuple(TuneTrial(**{**t, "config": _config_from(t["config"])})
                                         for t in d["trials"])})


def _measure(shape, planned: list[Config], measurer) -> tuple[object, dict, float, float]:
    t0 = time.perf_counter()
    compiled = measurer.compile([(shape, c) for c in planned])
    t1 = time.perf_counter()
    result = measurer.measure(shape, planned, compiled)
    return result, compiled, t1 - t0, time.perf_counter() - t1


def tune_gemm(shape: GemmShape, profile: HardwareProfile, budget: int = 20, *, measurer=None,
              cache: str | Path | None = None, sms: int | None = None) -> TuneResult:
    """Compile and time the `budget` configs the model ranks first (`plan`) as the sweep does
    (`KernelMeasurer`: reference check, interleaved CUDA-graph passes, the fastest re-timed beside cuBLAS);
    the winner is the fastest config without an error. Failing configs are trials with an error; if all
    fail, TuneError. `measurer`: a `Measurer` (tests pass a fake); by default `gemm_measurer` on this GPU
    (an SM partition of it with `sms`). With `cache`, a stored result for the same key is returned
    without measuring, and a new one is stored (atomically). Raises ValueError (budget), NoGpuError,
    TuneCacheError, TuneError."""
    # On an SM partition the model ranks for the SMs the configs will run on (waves, split-K).
    ranked = plan(shape, profile if sms is None else replace(profile, sm_count=sms), budget)
    path = Path(cache) if cache is not None else None
    key = cache_key(shape, profile, budget, sms) if path else None
    if path:
        stored = _read_cache(path)["entries"].get(key)
        if stored is not None:
            try:
                return replace(result_from_dict(stored), cached=True)
            except (KeyError, TypeError, ValueError) as exc:
                raise TuneCacheError(f"{path}: entry {key!r} is malformed ({exc}); delete the file") from exc
    planned = [r.config for r in ranked]
    if measurer is not None:
        shape_result, compiled, compile_s, measure_s = _measure(shape, planned, measurer)
    else:
        from rooftune.eval.sweep import SweepSettings, gemm_measurer
        from rooftune.hwprofiles.hwprobe import require_cuda, sm_partition

        require_cuda()
        with sm_partition(sms), gemm_measurer(profile, SweepSettings()) as live:
            shape_result, compiled, compile_s, measure_s = _measure(shape, planned, live)
    rows = {row.config: row for row in shape_result.rows}
    trials = []
    for r in ranked:
        row = rows.get(r.config)
        error = "not measured" if row is None else row.error
        if error is None and row.time_us is None:
            error = "no time recorded"
        compile_s_of = compiled.get(r.config) if isinstance(compiled.get(r.config), float) else None
        trials.append(TuneTrial(r.config, r.predicted_us, r.rank, None if error else row.time_us, error, compile_s_of))
    ok = [t for t in trials if t.error is None]
    if not ok:
        raise TuneError(f"all {len(trials)} planned configs failed for {shape} on {profile.name}; first error: "
                        f"{trials[0].error}")
    best = min(ok, key=lambda t: t.time_us)
    result = TuneResult(shape=shape, winner=best.config, time_us=best.time_us,
                        cublas_us=shape_result.baselines_us.get(GEMM_SWEEP.baseline), trials=tuple(trials),
                        space_version=GEMM_SPACE.version, profile=profile.name,
                        compile_s=round(compile_s, 3), measure_s=round(measure_s, 3))
    if path:
        data = _read_cache(path)  # again: another run may have written since
        data["entries"][key] = result_to_dict(result)
        atomic_write_bytes(path, (json.dumps(data, indent=1) + "\n").encode())
    return result
