"""The exhaustive sweep: every legal config of a space, timed per shape, written resumably to a dataset.

The orchestration (`run_sweep`: resume, grouping by compile specialization, the time budget, the
manifest, the quarantine) is GPU-free and takes a `Measurer` and the kernel's `SweepKernel` (space,
extra configs; eval/benches.py) as arguments; `KernelMeasurer` is the GPU one, the same for every
kernel but for its bench (`gemm_measurer`: the GEMM kernel against cuBLAS; `attention_measurer`:
the attention forward against PyTorch's SDPA), tests pass a fake.

Beside the space, each GEMM shape also times the Triton tutorial's configs that are not (as the same
kernel) in its legal set (candidates/baselines.py; attention has no such extras): compiled, checked
and timed like every config, in the same interleaved passes, and written as rows with `in_space` = 0,
so that the tutorial baseline is measured exactly as the strategies' candidates are.

Datasets swept before that lack those rows; the backfill (eval/backfill.py) adds them to finished
shapes, through `run_shapes` and the GPU measurer's `measure_extras`.

A config that kills the CUDA context (an illegal memory access) is quarantined (eval/quarantine.py):
the run writes it to DIR/quarantine.json and stops; the next run records it as an error unrun.

Per shape, the GPU measurer: takes the compile results of the shape's specialization group (compiled
once per config per group, in parallel, only for the shapes about to run, in one pool of workers kept
for the whole run); checks every compiled config against the fp32 reference on fresh random inputs
(a failure is a recorded error); times all of them plus the baseline (cuBLAS or SDPA) in one interleaved
pass of the harness (kernels/timing.py; the baseline does not set its pruning pace); then re-times the
`retime_top` fastest and the baseline in a second, independent interleaved pass with more rounds and no
pruning, and stores the agreement of the two passes (`repeatability`).
"""

from __future__ import annotations

import hashlib
import statistics
import time
import zlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

from rooftune.candidates import Config, legal_configs
from rooftune.candidates.shapes import load_attention_shapes, load_shapes
from rooftune.eval.benches import ATTENTION_SWEEP, BENCHES, GEMM_SWEEP, AttentionBench, Bench, GemmBench, Shape, SweepKernel
from rooftune.eval.dataset import (
    ConfigResult,
    ShapeResult,
    finished_ids,
    open_dataset,
    read_manifest,
    read_shape,
    shape_files,
    shape_id,
    write_manifest,
    write_shape,
)
from rooftune.eval.metrics import nearest_rank
from rooftune.eval.quarantine import quarantining, read_quarantine, with_quarantined
from rooftune.hwprofiles import HardwareProfile


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


class Compiler(Protocol):
    """A device's compile grouping (shapes that share binaries) and parallel compiles: config -> compile
    seconds, or the error text of a config that did not compile (or not within `timeout_s`)."""

    def group_key(self, shape: Shape) -> Hashable: ...

    def compile(self, jobs: list[tuple[Shape, Config]], timeout_s: float | None = None
                ) -> dict[Config, float | str]: ...


class Measurer(Compiler, Protocol):
    """What the sweep needs from a device: compiles, and one shape measured."""

    def measure(self, shape: Shape, configs: list[Config],
                compiled: dict[Config, float | str]) -> ShapeResult: ...


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


def noise_summary(root: str | Path) -> dict[str, float | int]:
    """Repeatability over every finished shape of a dataset: medians of the per-shape figures."""
    per_shape = [read_shape(p).meta.get("repeatability") or {} for p in shape_files(root)]
    per_shape = [r for r in per_shape if r]
    if not per_shape:
        return {}
    summary: dict[str, float | int] = {"shapes": len(per_shape)}
    for key in ("abs_median", "abs_p90", "ratio_median", "ratio_p90"):
        summary[f"{key}_over_shapes_median"] = statistics.median(r[key] for r in per_shape)
    summary["best_within_1pct_fraction"] = sum(bool(r["best_within_1pct"]) for r in per_shape) / len(per_shape)
    return summary


class Reporter(Protocol):
    def start(self, total: int, done: int) -> None: ...

    def phase(self, shape: Shape, text: str) -> None: ...

    def finished(self, shape: Shape, seconds: float) -> None: ...


class SilentReporter:
    def start(self, total, done):
        pass

    def phase(self, shape, text):
        pass

    def finished(self, shape, seconds):
        pass


@dataclass(frozen=True)
class SweepSummary:
    done: int            # shapes finished in this run
    skipped: int         # shapes already in the dataset
    remaining: int       # shapes left for a later run
    stopped_early: bool  # the time budget ended the run
    seconds: float


def order_by_group(shapes: Sequence[Shape], key: Callable[[Shape], Hashable]) -> list[Shape]:
    """Shapes grouped by compile specialization, groups in order of first appearance, list order inside."""
    groups: dict[Hashable, list[Shape]] = {}
    for s in shapes:
        groups.setdefault(key(s), []).append(s)
    return [s for members in groups.values() for s in members]


def run_sweep(shapes: Sequence[Shape], out: str | Path, measurer: Measurer, profile: HardwareProfile,
              *, kernel: SweepKernel | None = None, manifest: dict | None = None,
              max_minutes: float | None = None, lookahead: int = 8,
              reporter: Reporter | None = None, now: Callable[[], float] = time.monotonic,
              first_shape_s: float = 30.0, compile_s_per_config: float = 0.05) -> SweepSummary:
    """Measure every shape of `shapes` not yet in the dataset at `out` and write each when done: the
    legal configs of `kernel.space`, then `kernel.extras` (rows with in_space = 0).

    Resumable: finished shapes are skipped, each is written atomically, so a killed run loses at
    most the shape in progress. `max_minutes`: see `run_shapes`. A config whose run kills the CUDA
    context (the measurer raises ContextLost) is quarantined and the run ends (ContextQuarantined);
    quarantined configs are not measured, their rows carry the error `QUARANTINED`.
    """
    own = getattr(measurer, "kernel", None)  # a KernelMeasurer knows its kernel; fakes may not
    if kernel is not None and own is not None and kernel != own:
        raise ValueError(f"run_sweep: kernel {kernel.name!r} given for a measurer of {own.name!r}")
    kernel = kernel or own or GEMM_SWEEP
    started = now()
    reporter = reporter or SilentReporter()
    open_dataset(out, {"kernel": kernel.name, "space_version": kernel.space.version,
                       "gpu_profile": profile.name, "sms": None, **(manifest or {})})
    done_ids = finished_ids(out)
    unique = list({shape_id(s): s for s in shapes}.values())
    todo = order_by_group([s for s in unique if shape_id(s) not in done_ids], measurer.group_key)
    reporter.start(len(unique), len(unique) - len(todo))
    space = {shape_id(s): legal_configs(kernel.space, s, profile).configs for s in todo}
    # Each shape's rows: the legal configs of the space, then the baseline configs outside it.
    rows_of = {shape_id(s): space[shape_id(s)] + kernel.extras(s, space[shape_id(s)]) for s in todo}
    quarantined = read_quarantine(out)
    measured = {sid: [c for c in configs if c not in quarantined.get(sid, {})] for sid, configs in rows_of.items()}

    def work(shape, compiled):
        sid = shape_id(shape)
        reporter.phase(shape, f"measuring {len(measured[sid])} configs")
        result = measurer.measure(shape, measured[sid], compiled)
        result = with_quarantined(result, rows_of[sid], quarantined.get(sid, {}))
        write_shape(out, _flag_space(result, space[sid]))

    finished, stopped = run_shapes(todo, lambda s: measured[shape_id(s)], measurer, quarantining(out, work),
                                   started=started, max_minutes=max_minutes, lookahead=lookahead,
                                   reporter=reporter, now=now, first_shape_s=first_shape_s,
                                   compile_s_per_config=compile_s_per_config)
    write_manifest(out, {**read_manifest(out), "shapes_done": len(finished_ids(out)), "noise": noise_summary(out)})
    return SweepSummary(done=finished, skipped=len(unique) - len(todo),
                        remaining=len(todo) - finished, stopped_early=stopped, seconds=now() - started)


def run_shapes(todo: Sequence[Shape], configs_of: Callable[[Shape], list[Config]], measurer: Compiler,
               work: Callable[[Shape, dict[Config, float | str]], None], *, started: float,
               max_minutes: float | None, lookahead: int, reporter: Reporter, now: Callable[[], float],
               first_shape_s: float, compile_s_per_config: float) -> tuple[int, bool]:
    """The loop of the sweep and of the backfill over `todo` (ordered by compile group): before each
    shape, compile in one parallel batch what it and the next `lookahead` shapes of its group still
    need (`configs_of`), then `work(shape, compiled)`. With `max_minutes`, a shape is not started when
    the time used plus its estimate (1.25 × the mean shape time so far, `first_shape_s` before any,
    plus the batch's compiles at the compile time per config so far) would pass the budget; when only
    the lookahead's compiles are too many, the batch shrinks to the shape's own; and a batch's compile
    timeout is the budget's time left (a hung compile worker cannot outlast the run's budget).
    Returns (shapes finished, whether the budget stopped the loop)."""
    compiled: dict[Hashable, dict[Config, float | str]] = {}
    durations: list[float] = []
    # Seconds per config over all batches: one small batch (its pool start-up spread over a few
    # configs) must not set the rate for the next group's thousands.
    compile_total_s, compile_total_n = 0.0, 0
    timeout_s = None
    for index, shape in enumerate(todo):
        group = measurer.group_key(shape)
        have = compiled.setdefault(group, {})
        jobs: dict[Config, Shape] = {}
        for s in todo[index: index + 1 + lookahead]:
            if measurer.group_key(s) == group:
                jobs.update((c, s) for c in configs_of(s) if c not in have and c not in jobs)
        if max_minutes is not None:
            compile_rate = compile_total_s / compile_total_n if compile_total_n else compile_s_per_config
            timeout_s = 60 * max_minutes - (now() - started)
            left = timeout_s - (1.25 * statistics.mean(durations) if durations else first_shape_s)
            if len(jobs) * compile_rate > left:  # the lookahead does not fit: this shape's configs only
                jobs = {c: s for c, s in jobs.items() if s == shape}
            if len(jobs) * compile_rate > left:
                return index, True
        t0 = now()
        if jobs:
            reporter.phase(shape, f"compiling {len(jobs)} configs")
            have.update(measurer.compile([(s, c) for c, s in jobs.items()], timeout_s=timeout_s))
            compile_total_s, compile_total_n = compile_total_s + now() - t0, compile_total_n + len(jobs)
        t1 = now()
        work(shape, have)
        durations.append(now() - t1)
        reporter.finished(shape, now() - t0)
    return len(todo), False


def _flag_space(result: ShapeResult, space_configs: list[Config]) -> ShapeResult:
    """Rows of configs outside `space_configs` marked `in_space=False`; counts in the meta."""
    inside = set(space_configs)
    rows = tuple(replace(r, in_space=r.config in inside) for r in result.rows)
    meta = {**result.meta, "legal_configs": sum(r.in_space for r in rows),
            "baseline_configs": sum(not r.in_space for r in rows)}
    return replace(result, rows=rows, meta=meta)


@dataclass(frozen=True)
class RetimePasses:
    """Two independent interleaved passes over the same candidates (configs and the baseline's key): each
    candidate's per-round times in µs per launch; `errors` for configs that failed to compile, the
    reference check or to run (no times); `meta`: facts of the measurement (clock range, seconds)."""

    first_us: dict[Hashable, tuple[float, ...]]
    second_us: dict[Hashable, tuple[float, ...]]
    errors: dict[Config, str] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)


def file_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


class KernelMeasurer:
    """Measures shapes on the current CUDA device with the Triton kernel and baseline of `bench`
    (eval/benches.py); the baseline's key is `bench.kernel.baseline`.

    Its compile workers live as long as it does: use it in a `with` block (or `close()` it). A batch
    of n compiles times out after `timeout_base_s` + `timeout_per_config_s` × n / workers (~5x a
    config's median compile on an H200 host), or the caller's `timeout_s` when that is sooner."""

    def __init__(self, bench: Bench, profile: HardwareProfile, settings: SweepSettings = SweepSettings(),
                 device: str = "cuda", workers: int | None = None, timeout_base_s: float = 60.0,
                 timeout_per_config_s: float = 2.0, pool=None):
        from rooftune.kernels.compile import CompilePool

        self.bench, self.profile, self.settings = bench, profile, settings
        self.kernel = bench.kernel  # what run_sweep sweeps with this measurer
        self.baseline = bench.kernel.baseline
        self.kernel_sha = file_digest(bench.module.__file__)
        self.device = device
        # `pool`: a CompilePool already started (live tuning starts it before torch loads here).
        self.pool = pool if pool is not None else CompilePool(bench.module.warmup, workers=workers, device=device)
        self.timeout_base_s, self.timeout_per_config_s = timeout_base_s, timeout_per_config_s

    def __enter__(self) -> KernelMeasurer:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.pool.close(kill=exc_type is not None)

    def close(self) -> None:
        self.pool.close()

    def group_key(self, shape: Shape) -> Hashable:
        return self.bench.module.specialization_key(shape)

    def compile(self, jobs, timeout_s=None):
        own_s = self.timeout_base_s + self.timeout_per_config_s * len(jobs) / max(1, self.pool.workers)
        return self.pool.compile(jobs, timeout_s=own_s if timeout_s is None else min(own_s, timeout_s))

    def _seed(self, shape: Shape, salt: int) -> int:
        return (zlib.crc32(shape_id(shape).encode()) + 7919 * salt + 104729 * self.settings.seed) % 2**31

    def _check(self, shape, configs, compiled) -> dict[Config, str]:
        """Errors of configs that did not compile, fail the reference check, or raise. Raises
        ContextLost when a failing config leaves the CUDA context dead (nothing after it could run)."""
        from rooftune.kernels.context import ContextLost, context_error

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
                if context_error(self.device):
                    raise ContextLost(c, problem)
                errors[c] = f"check: {problem}"[:300]
        return errors

    def _launchers(self, shape, configs, errors) -> tuple[dict, int]:
        """A launcher per config without an error (one that cannot be built gains one) and the baseline,
        over input sets rotated to touch > 3x L2 between reuses; and how many sets."""
        from rooftune.kernels.timing import input_sets_needed

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
        return launchers, sets

    def _final_passes(self, shape, launchers, keys, salts) -> list[dict]:
        """Independent interleaved passes over `keys`, one per seed salt: no pruning, longer bursts."""
        from rooftune.kernels.timing import time_candidates

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

        from rooftune.kernels.timing import time_candidates

        s, base = self.settings, self.baseline
        t0 = time.perf_counter()
        errors = self._check(shape, configs, compiled)
        t_check = time.perf_counter() - t0
        launchers, sets = self._launchers(shape, configs, errors)
        first = time_candidates(launchers, rounds=s.rounds, prune_ratio=s.prune_ratio, mid_ratio=s.mid_ratio,
                                mid_rounds=s.mid_rounds, target_ms=s.target_ms, baseline_keys=(base,),
                                seed=self._seed(shape, 2))
        t_first = time.perf_counter() - t0 - t_check
        ok = sorted((k for k, t in first.items() if k != base and t.median_us is not None),
                    key=lambda k: first[k].median_us)
        top = ok[: s.retime_top] + [base]
        # Two independent final passes over the fastest configs and the baseline: longer bursts, fresh
        # orders. Their agreement is the shape's measured repeatability.
        pass_a, pass_b = self._final_passes(shape, launchers, top, (3, 4))
        pooled = {k: statistics.median([*pass_a[k].times_us, *pass_b[k].times_us]) for k in top
                  if pass_a[k].median_us is not None and pass_b[k].median_us is not None}
        scale = statistics.median([pooled[k] / first[k].median_us for k in pooled if k != base] or [1.0])
        rows = []
        for c in configs:
            t = first.get(c)
            err = errors.get(c) or (t.error if t else None)
            a, b = pass_a.get(c), pass_b.get(c)
            rows.append(ConfigResult(
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
            "repeatability": repeatability({k: pass_a[k].median_us for k in top if k != base},
                                           {k: pass_b[k].median_us for k in top if k != base}),
        }
        baselines = {base: pooled[base]} if base in pooled else {}
        del launchers
        torch.cuda.empty_cache()
        return ShapeResult(shape=shape, rows=tuple(rows), baselines_us=baselines, meta=meta)

    def measure_extras(self, shape, extras, finals, compiled):
        """The backfill's measurement: every config checked as in `measure` (the finals again too),
        then the extras, the finals and the baseline in two independent final passes (fresh seeds)."""
        import torch

        t0 = time.perf_counter()
        configs = [*extras, *finals]
        errors = self._check(shape, configs, compiled)
        t_check = time.perf_counter() - t0
        launchers, sets = self._launchers(shape, configs, errors)
        pass_a, pass_b = self._final_passes(shape, launchers, list(launchers), (5, 6))
        for timings in (pass_a, pass_b):
            errors.update((k, f"time: {t.error}") for k, t in timings.items() if t.error and k not in errors)
        first = {k: t.times_us for k, t in pass_a.items() if k not in errors and not t.error}
        second = {k: t.times_us for k, t in pass_b.items() if k not in errors and not t.error}
        meta = {"input_sets": sets, "check_s": round(t_check, 2),
                "retime_s": round(time.perf_counter() - t0 - t_check, 2), **self._clock_range(pass_a, pass_b),
                "kernel_sha": self.kernel_sha}
        del launchers
        torch.cuda.empty_cache()
        return RetimePasses(first, second, {k: v for k, v in errors.items() if k != self.baseline}, meta)


def kernel_measurer(kernel: str, profile: HardwareProfile, settings: SweepSettings = SweepSettings(),
                    **kwargs) -> KernelMeasurer:
    """The registered kernel's Triton module against its library baseline (`KernelMeasurer`'s keyword arguments)."""
    return KernelMeasurer(BENCHES[kernel](), profile, settings, **kwargs)


def gemm_measurer(profile: HardwareProfile, settings: SweepSettings = SweepSettings(), **kwargs) -> KernelMeasurer:
    """The GEMM kernel of kernels/gemm.py against cuBLAS (`KernelMeasurer`'s keyword arguments)."""
    return KernelMeasurer(GemmBench(), profile, settings, **kwargs)


def attention_measurer(profile: HardwareProfile, settings: SweepSettings = SweepSettings(),
                       **kwargs) -> KernelMeasurer:
    """The attention forward of kernels/attention.py against PyTorch's SDPA."""
    return KernelMeasurer(AttentionBench(), profile, settings, **kwargs)


def describe_device(settings: SweepSettings, sms: int | None, baseline: str = "cuBLAS") -> dict:
    """Manifest facts about this machine and the timing method (needs a GPU)."""
    from rooftune.hwprofiles.hwprobe import software_versions

    return {"sms": sms, "device": software_versions(),
            "timing": {"method": "interleaved CUDA-graph replay, median over shuffled rounds, "
                                 "progressive pruning (kernels/timing.py); two independent final passes "
                                 f"re-time the fastest configs and {baseline} (2 ms bursts); other configs "
                                 "scaled to the final passes (screen_scale)",
                       **asdict(settings)}}


def _sweep_list(shapes: list[Shape], shapes_path: str | Path, out: str | Path, profile: HardwareProfile,
                kernel: SweepKernel, make_measurer: Callable[..., KernelMeasurer], *, sms: int | None,
                max_minutes: float | None, workers: int | None, settings: SweepSettings,
                reporter: Reporter | None) -> SweepSummary:
    """`shapes` (read from `shapes_path`) swept on this GPU with `make_measurer(profile, settings, workers=)`."""
    from rooftune.hwprofiles.hwprobe import require_cuda, sm_partition

    require_cuda()
    manifest = {**describe_device(settings, sms, kernel.baseline_label), "shapes_file": Path(shapes_path).name,
                "shapes_sha256": file_digest(shapes_path), "shapes_listed": len(shapes)}
    with sm_partition(sms), make_measurer(profile, settings, workers=workers) as measurer:
        return run_sweep(shapes, out, measurer, profile, kernel=kernel, manifest=manifest,
                         max_minutes=max_minutes, reporter=reporter)


def sweep_gemm(shapes_path: str | Path, out: str | Path, profile: HardwareProfile, *, sms: int | None = None,
               max_minutes: float | None = None, workers: int | None = None,
               settings: SweepSettings = SweepSettings(), reporter: Reporter | None = None) -> SweepSummary:
    """`rooftune sweep gemm`: load the shape list, then sweep it on this GPU (an SM partition of it
    with `sms`) into the dataset at `out`. Raises ShapeListError, NoGpuError, DatasetError,
    ContextQuarantined, CompileStalled."""
    return _sweep_list(load_shapes(shapes_path), shapes_path, out, profile, GEMM_SWEEP, gemm_measurer, sms=sms,
                       max_minutes=max_minutes, workers=workers, settings=settings, reporter=reporter)


def sweep_attention(shapes_path: str | Path, out: str | Path, profile: HardwareProfile, *, sms: int | None = None,
                    max_minutes: float | None = None, workers: int | None = None,
                    settings: SweepSettings = SweepSettings(), reporter: Reporter | None = None) -> SweepSummary:
    """`rooftune sweep attention`: as `sweep_gemm`, for the attention forward over a list read by
    `load_attention_shapes`, every legal config of ATTENTION_SPACE timed beside SDPA (key "sdpa")."""
    return _sweep_list(load_attention_shapes(shapes_path), shapes_path, out, profile, ATTENTION_SWEEP,
                       attention_measurer, sms=sms, max_minutes=max_minutes, workers=workers, settings=settings,
                       reporter=reporter)
