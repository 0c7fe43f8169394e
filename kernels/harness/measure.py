"""The GPU measurer: a batch of one shape's configs checked against the reference and timed on this GPU,
the same for every kernel but for its bench (kernels/harness/benches.py).

`KernelMeasurer.measure` checks every compiled config against the fp32/fp64 reference on fresh random
inputs (a failure is a recorded error), times all of them plus the library baseline (cuBLAS or SDPA)
in one interleaved pass of the harness (kernels/harness/timing.py; the baseline does not set the pruning
pace), then re-times the `retime_top` fastest and the baseline in a second, independent interleaved
pass with more rounds and no pruning, and stores the agreement of the two passes (`repeatability`).
The sweep (eval/sweeping/sweep.py) drives it over whole spaces; live tuning (kernels/harness/live.py) over a search's
rounds. torch loads inside the methods, so the sweep's orchestration imports this module without it.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
import zlib
from collections.abc import Hashable
from dataclasses import asdict, dataclass, field

from rooftune.candidates import Config, Shape, shape_id
from rooftune.candidates.records import ShapeRecords, Trial, nearest_rank
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import software_versions
from rooftune.kernels.harness import context
from rooftune.kernels.harness.benches import AttentionBench, Bench, GemmBench, bench_of
from rooftune.kernels.harness.compile_pool import CompilePool
from rooftune.kernels.harness.context import ContextLost
from rooftune.outputs import file_digest



@dataclass(frozen=True)
class SweepSettings:
    """How each shape is measured (recorded in the manifest as the timing method)."""

    rounds: int = 7
    target_ms: float = 0.5
    prune_ratio: float = 3.0
    mid_ratio: float = 1.3
    mid_rounds: int = 3
    retime_top: int = 10
    retime_rounds: int = 15
    retime_target_ms: float = 2.0
    seed: int = 0



def repeatability(first: dict[Hashable, float], second: dict[Hashable, float]) -> dict[str, float | bool]:
    """Agreement of two passes over the same candidates: |t2 − t1| / t1 (median, p90), the same for
    each candidate's ratio to its pass's fastest, and whether pass 1's fastest is within 1% of
    pass 2's fastest in pass-2 times (`best_within_1pct`)."""
    keys = [k for k in first if k in second and first[k] and second[k]]
    if len(keys) < 2:
        return {}
    abs_d = [abs(second[k] - first[k]) / first[k] for k in keys]
    b1, b2 = min(first[k] for k in keys), min(second[k] for k in keys)
    ratio_d = [abs(second[k] / b2 - first[k] / b1) / (first[k] / b1) for k in keys]
    best1 = min(keys, key=lambda k: first[k])
    return {"abs_median": statistics.median(abs_d), "abs_p90": nearest_rank(abs_d, 0.9),
            "ratio_median": statistics.median(ratio_d), "ratio_p90": nearest_rank(ratio_d, 0.9),
            "best_within_1pct": second[best1] <= 1.01 * b2}


# Why a sweep recorded no time for an extra route: it was built but not timed in the final passes (sweeps
# before the fix that put every route in them); `rooftune sweep attention --backfill-routes` times those.
ROUTE_UNTIMED = "no time in both final passes"


@dataclass(frozen=True)
class RetimePasses:
    """Two independent interleaved passes over the same candidates (configs and the baseline's key): each
    candidate's per-round times in µs per launch; `errors` for configs that failed to compile, the
    reference check or to run (no times); `meta`: facts of the measurement (clock range, seconds)."""

    first_us: dict[Hashable, tuple[float, ...]]
    second_us: dict[Hashable, tuple[float, ...]]
    errors: dict[Hashable, str] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)



class KernelMeasurer:
    """Measures shapes on the current CUDA device with the Triton kernel and baseline of `bench`
    (kernels/harness/benches.py); the baseline's key is `bench.kernel.baseline`.

    Its compile workers live as long as it does: use it in a `with` block (or `close()` it). A batch
    of n compiles times out after `timeout_base_s` + `timeout_per_config_s` × n / workers (~5x a
    config's median compile on an H200 host), or the caller's `timeout_s` when that is sooner."""

    def __init__(self, bench: Bench, profile: HardwareProfile, settings: SweepSettings = SweepSettings(),
                 device: str = "cuda", workers: int | None = None, timeout_base_s: float = 60.0,
                 timeout_per_config_s: float = 2.0, pool=None, all_baselines: bool = False):

        self.bench, self.profile, self.settings = bench, profile, settings
        self.kernel = bench.kernel  # what run_sweep sweeps with this measurer
        self.baseline = bench.kernel.baseline
        self.kernel_sha = file_digest(importlib.util.find_spec(bench.kernel.module).origin)  # not loaded yet
        self.device = device
        # `pool`: a CompilePool already started (live tuning starts it before torch loads here).
        self.pool = pool if pool is not None else CompilePool(bench.module.warmup, workers=workers, device=device)
        self.timeout_base_s, self.timeout_per_config_s = timeout_base_s, timeout_per_config_s
        # A sweep times the library's other routes too (the bench's extra_baselines); a tune does not.
        self.all_baselines = all_baselines

    def __enter__(self) -> KernelMeasurer:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.pool.close(kill=exc_type is not None)

    def close(self) -> None:
        self.pool.close()

    def group_key(self, shape: Shape) -> Hashable:
        return self.bench.module.specialization_key(shape)

    def compile_timeout_s(self, n: int) -> float:
        """How long a batch of `n` compiles may take on this measurer's workers."""
        return self.timeout_base_s + self.timeout_per_config_s * n / max(1, self.pool.workers)

    def compile(self, jobs, timeout_s=None):
        own_s = self.compile_timeout_s(len(jobs))
        return self.pool.compile(jobs, timeout_s=own_s if timeout_s is None else min(own_s, timeout_s))

    def _seed(self, shape: Shape, salt: int) -> int:
        return (zlib.crc32(shape_id(shape).encode()) + 7919 * salt + 104729 * self.settings.seed) % 2**31

    def _check(self, shape, configs, compiled) -> dict[Config, str]:
        """Errors of configs that did not compile, fail the reference check, or raise. Raises
        ContextLost when a failing config leaves the CUDA context dead (nothing after it could run)."""

        errors: dict[Config, str] = {}
        seed = self._seed(shape, 1)  # fresh inputs, unlike the timing ones; one seed per shape
        for c in configs:
            if isinstance(compiled.get(c), str):
                errors[c] = f"compile: {compiled[c]}"
                continue
            try:
                problem = self.bench.check(c, shape, self.device, seed)
            except Exception as exc:
                problem = f"{type(exc).__name__}: {exc}"
            if problem:
                if context.context_error(self.device):
                    raise ContextLost(c, problem)
                errors[c] = f"check: {problem}"[:300]
        return errors

    def _launchers(self, shape, configs, errors) -> tuple[dict, int, list, dict]:
        """A launcher per config without an error (one that cannot be built gains one) and per
        baseline, over input sets rotated to touch > 3x L2 between reuses; how many sets; the
        baselines' keys (the library's own first, then the extra routes); why an extra route is absent."""
        from rooftune.kernels.harness.timing import input_sets_needed

        bench = self.bench
        sets = input_sets_needed(bench.bytes_per_set(shape), self.profile.l2_bytes)
        inputs = [bench.inputs(shape, self.device, self._seed(shape, 100 + i)) for i in range(sets)]
        out = bench.output(shape, self.device)
        launchers = {}
        for c in configs:
            if c in errors:
                continue
            try:
                launchers[c] = bench.launcher(c, shape, inputs, out)
            except Exception as exc:
                errors[c] = f"launcher: {type(exc).__name__}: {exc}"[:300]
        launchers[self.baseline] = bench.baseline(shape, inputs, out)
        extras, absent = bench.extra_baselines(shape, inputs, out) if self.all_baselines else ({}, {})
        launchers.update(extras)
        return launchers, sets, [self.baseline, *extras], absent

    def _final_passes(self, shape, launchers, keys, salts) -> list[dict]:
        """Independent interleaved passes over `keys`, one per seed salt: no pruning, longer bursts."""
        from rooftune.kernels.harness.timing import time_candidates

        s = self.settings
        final = dict(rounds=s.retime_rounds, prune_ratio=float("inf"), mid_ratio=None, target_ms=s.retime_target_ms)
        return [time_candidates({k: launchers[k] for k in keys}, seed=self._seed(shape, salt), **final)
                for salt in salts]

    @staticmethod
    def _clock_range(*passes) -> dict:
        mhz = [v for timings in passes for t in timings.values() for v in (t.clock_mhz_min, t.clock_mhz_max) if v]
        return {"clock_mhz_min": min(mhz) if mhz else None, "clock_mhz_max": max(mhz) if mhz else None}

    def measure(self, shape, configs, compiled):
        import torch

        from rooftune.kernels.harness.timing import time_candidates

        s, base = self.settings, self.baseline
        t0 = time.perf_counter()
        errors = self._check(shape, configs, compiled)
        t_check = time.perf_counter() - t0
        launchers, sets, bases, absent = self._launchers(shape, configs, errors)
        first = time_candidates(launchers, rounds=s.rounds, prune_ratio=s.prune_ratio, mid_ratio=s.mid_ratio,
                                mid_rounds=s.mid_rounds, target_ms=s.target_ms, baseline_keys=tuple(bases),
                                seed=self._seed(shape, 2))
        t_first = time.perf_counter() - t0 - t_check
        ok = sorted((k for k, t in first.items() if k not in bases and t.median_us is not None),
                    key=lambda k: first[k].median_us)
        top = ok[: s.retime_top] + bases
        # Two independent final passes over the fastest configs, the baseline and every extra route:
        # longer bursts, fresh orders. Their agreement is the shape's measured repeatability.
        pass_a, pass_b = self._final_passes(shape, launchers, top, (3, 4))
        pooled = {k: statistics.median([*pass_a[k].times_us, *pass_b[k].times_us]) for k in top
                  if pass_a[k].median_us is not None and pass_b[k].median_us is not None}
        scale = statistics.median([pooled[k] / first[k].median_us for k in pooled if k not in bases] or [1.0])
        rows = []
        for c in configs:
            t = first.get(c)
            err = errors.get(c) or (t.error if t else None)
            a, b = pass_a.get(c), pass_b.get(c)
            rows.append(Trial(
                config=c, time_us=None if err else pooled.get(c, t.median_us * scale), error=err,
                compile_s=compiled[c] if isinstance(compiled.get(c), float) else None,
                rounds=t.rounds if t else 0, spread=t.spread if t and not err else None,
                screen_us=None if err else t.median_us,
                retime_us=a.median_us if a else None, retime2_us=b.median_us if b else None,
                retime_rounds=a.rounds if a else None))
        meta = {
            "space_version": self.bench.kernel.space.version, "errors": len(errors),
            "input_sets": sets, "check_s": round(t_check, 2), "time_s": round(t_first, 2),
            "retime_s": round(time.perf_counter() - t0 - t_check - t_first, 2),
            **self._clock_range(first, pass_a, pass_b),
            "clock_repeats": max((t.repeats for t in first.values()), default=0),
            f"{base}_first_us": first[base].median_us,
            "screen_scale": scale, "kernel_sha": self.kernel_sha, "paced_by": "configs",
            "repeatability": repeatability({k: pass_a[k].median_us for k in top if k not in bases},
                                           {k: pass_b[k].median_us for k in top if k not in bases}),
        }
        baselines = {k: pooled[k] for k in bases if k in pooled}
        for k in bases[1:]:  # why a route timed beside the baseline has no time
            if k not in baselines:
                t = first.get(k)
                absent[k] = f"time: {t.error}" if t is not None and t.error else ROUTE_UNTIMED
        if absent:
            meta["baseline_errors"] = absent
        del launchers
        torch.cuda.empty_cache()
        return ShapeRecords(shape=shape, trials=tuple(rows), baselines_us=baselines, meta=meta)

    def measure_extras(self, shape, extras, finals, compiled):
        """The backfills' measurement: every config checked as in `measure` (the finals again too),
        then the extras, the finals, the baseline and its extra routes (AttentionBench: each SDPA
        backend; no config at all for the routes backfill) in two independent final passes (fresh
        seeds); `meta["baseline_errors"]` says why a route could not be built."""
        import torch

        t0 = time.perf_counter()
        configs = [*extras, *finals]
        errors = self._check(shape, configs, compiled)
        t_check = time.perf_counter() - t0
        launchers, sets, _, absent = self._launchers(shape, configs, errors)
        pass_a, pass_b = self._final_passes(shape, launchers, list(launchers), (5, 6))
        for timings in (pass_a, pass_b):
            errors.update((k, f"time: {t.error}") for k, t in timings.items() if t.error and k not in errors)
        first = {k: t.times_us for k, t in pass_a.items() if k not in errors and not t.error}
        second = {k: t.times_us for k, t in pass_b.items() if k not in errors and not t.error}
        meta = {"input_sets": sets, "check_s": round(t_check, 2),
                "retime_s": round(time.perf_counter() - t0 - t_check, 2), **self._clock_range(pass_a, pass_b),
                "kernel_sha": self.kernel_sha, **({"baseline_errors": absent} if absent else {})}
        del launchers
        torch.cuda.empty_cache()
        return RetimePasses(first, second, {k: v for k, v in errors.items() if k != self.baseline}, meta)


def kernel_measurer(kernel: str, profile: HardwareProfile, settings: SweepSettings = SweepSettings(),
                    **kwargs) -> KernelMeasurer:
    """The registered kernel's Triton module against its library baseline (`KernelMeasurer`'s keyword arguments)."""
    return KernelMeasurer(bench_of(kernel), profile, settings, **kwargs)


def gemm_measurer(profile: HardwareProfile, settings: SweepSettings = SweepSettings(), **kwargs) -> KernelMeasurer:
    """The GEMM kernel of kernels/gemm.py against cuBLAS (`KernelMeasurer`'s keyword arguments)."""
    return KernelMeasurer(GemmBench(), profile, settings, **kwargs)


def attention_measurer(profile: HardwareProfile, settings: SweepSettings = SweepSettings(),
                       **kwargs) -> KernelMeasurer:
    """The attention forward of kernels/attention.py against PyTorch's SDPA (its own choice and, held
    to each backend, every backend that runs the shape)."""
    return KernelMeasurer(AttentionBench(), profile, settings, **{"all_baselines": True, **kwargs})


def describe_device(settings: SweepSettings, sms: int | None, baseline: str = "cuBLAS") -> dict:
    """Manifest facts about this machine and the timing method (needs a GPU)."""

    return {"sms": sms, "device": software_versions(),
            "timing": {"method": "interleaved CUDA-graph replay, median over shuffled rounds, "
                                 "progressive pruning (kernels/harness/timing.py); two independent final passes "
                                 f"re-time the fastest configs and {baseline} (2 ms bursts); other configs "
                                 "scaled to the final passes (screen_scale)",
                       **asdict(settings)}}
