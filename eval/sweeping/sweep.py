"""The exhaustive sweep: every legal config of a space, timed per shape, written resumably to a dataset.

This module is the orchestration (`run_sweep`: resume, grouping by compile specialization, the time
budget, the manifest, the quarantine); it is GPU-free and takes a `SweepDevice` and the kernel's
registry entry (`KernelSpec`: space, extra configs) as arguments. `KernelMeasurer`
(kernels/harness/measure.py) is the GPU one, the same for every kernel but for its bench (`kernel_measurer`:
the GEMM kernel against cuBLAS; the attention forward against PyTorch's SDPA and each of its backends);
tests pass a fake. Repeatability over a finished dataset is `noise_summary`.

Beside the space, each GEMM shape also times the Triton tutorial's configs that are not (as the same
kernel) in its legal set (candidates/tutorial.py; attention has no such extras): compiled, checked
and timed like every config, in the same interleaved passes, and written as rows with `in_space` = 0,
so that the tutorial baseline is measured exactly as the strategies' candidates are.

Datasets swept before that lack those rows; the backfill (eval/sweeping/backfill.py) adds them to finished
shapes, through `run_shapes` and the GPU measurer's `measure_extras`.

A config that kills the CUDA context (an illegal memory access) is quarantined (eval/sweeping/quarantine.py):
the run writes it to DIR/quarantine.json and stops; the next run records it as an error unrun.

Across machines and GPUs (`sweep_shapes`): `shard` keeps one shard of the list (eval/sweeping/shard.py:
shards of about equal estimated cost, the same on every machine); `gpus` splits it again over one
worker process per GPU (eval/sweeping/workers.py), all writing into the one dataset folder: shape files are
atomic, the manifest and the quarantine are updated under the folder's lock, and each shape's file
and the manifest (`shape_devices`) name the GPU that measured it.

Per shape, the GPU measurer takes the compile results of the shape's specialization group (compiled
once per config per group, in parallel, only for the shapes about to run, in one pool of workers kept
for the whole run) and checks and times them (kernels/harness/measure.py says how).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from rooftune.candidates import KERNELS, Config, KernelSpec, Shape, legal_configs
from rooftune.candidates.families import check_sweep_dtypes
from rooftune.eval.datasets.format import (
    MANIFEST,
    ShapeRecords,
    check_compatible,
    finished_ids,
    open_dataset,
    read_shape,
    shape_file_id,
    shape_files,
    shape_id,
    update_manifest,
    write_shape,
)
from rooftune.eval.sweeping.workers import run_on_gpus
from rooftune.eval.sweeping.quarantine import quarantining, read_quarantine, with_quarantined
from rooftune.eval.sweeping.shard import shard_of, sweep_cost_us
from rooftune.hwprofiles import HardwareProfile, hwprobe
from rooftune.kernels.harness import compile_pool
from rooftune.kernels.harness.compile_pool import usable_cpus
from rooftune.kernels.harness.measure import SweepSettings, describe_device, kernel_measurer
from rooftune.outputs import file_digest


class Compiler(Protocol):
    """A device's compile grouping (shapes that share binaries) and parallel compiles: config -> compile
    seconds, or the error text of a config that did not compile (or not within `timeout_s`)."""

    def group_key(self, shape: Shape) -> Hashable: ...

    def compile(self, jobs: list[tuple[Shape, Config]], timeout_s: float | None = None
                ) -> dict[Config, float | str]: ...


class SweepDevice(Compiler, Protocol):
    """What the sweep needs from a device: compiles, and one shape measured whole (every config given,
    already compiled: `compiled` holds their compile seconds or errors) into its ShapeRecords. Live
    tuning's batches go through the one `Measurer` seam (candidates/records.py) instead."""

    def measure(self, shape: Shape, configs: list[Config],
                compiled: dict[Config, float | str]) -> ShapeRecords: ...


def noise_summary(metas: Sequence[dict]) -> dict[str, float | int]:
    """Repeatability over the finished shapes (their metas) of a dataset: medians of the per-shape figures."""
    per_shape = [m.get("repeatability") or {} for m in metas]
    per_shape = [r for r in per_shape if r]
    if not per_shape:
        return {}
    summary: dict[str, float | int] = {"shapes": len(per_shape)}
    for key in ("abs_median", "abs_p90", "ratio_median", "ratio_p90"):
        summary[f"{key}_over_shapes_median"] = statistics.median(r[key] for r in per_shape)
    summary["best_within_1pct_fraction"] = sum(bool(r["best_within_1pct"]) for r in per_shape) / len(per_shape)
    return summary


def refresh_manifest(root: str | Path) -> dict:
    """Recount the manifest from the shape files, under the dataset's lock (so the last of several
    writers to finish counts every file): `shapes_done`, `noise`, and `shape_devices` (shape id ->
    the GPU that measured it, for the shapes whose file says so). Returns the new manifest."""

    def recount(manifest: dict) -> dict:
        metas = {shape_file_id(p): read_shape(p).meta for p in shape_files(root)}
        devices = {sid: m["device"] for sid, m in metas.items() if m.get("device")}
        return {**manifest, "shapes_done": len(metas), "noise": noise_summary(list(metas.values())),
                **({"shape_devices": devices} if devices else {})}

    return update_manifest(root, recount)


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
    by_gpu: Mapping[int, SweepSummary] = field(default_factory=dict)  # with --gpus: each GPU's part

    def __str__(self) -> str:
        budget = " (time budget reached)" if self.stopped_early else ""
        return f"done {self.done}, already there {self.skipped}, left {self.remaining}{budget}; {self.seconds:.0f} s"


def order_by_group(shapes: Sequence[Shape], key: Callable[[Shape], Hashable]) -> list[Shape]:
    """Shapes grouped by compile specialization, groups in order of first appearance, list order inside."""
    groups: dict[Hashable, list[Shape]] = {}
    for s in shapes:
        groups.setdefault(key(s), []).append(s)
    return [s for members in groups.values() for s in members]


def run_sweep(shapes: Sequence[Shape], out: str | Path, measurer: SweepDevice, profile: HardwareProfile,
              *, kernel: KernelSpec | None = None, manifest: dict | None = None,
              max_minutes: float | None = None, lookahead: int = 8,
              reporter: Reporter | None = None, now: Callable[[], float] = time.monotonic,
              first_shape_s: float = 30.0, compile_s_per_config: float = 0.05,
              device: str | None = None, cost: Callable[[Shape], float] | None = None) -> SweepSummary:
    """Measure every shape of `shapes` not yet in the dataset at `out` and write each when done: the
    legal configs of `kernel.space`, then `kernel.extras` (rows with in_space = 0).

    Resumable: finished shapes are skipped, each is written atomically, so a killed run loses at
    most the shape in progress. `max_minutes` (and `cost`, each shape's estimated cost): see `run_shapes`.
    A config whose run kills the CUDA context (the measurer raises ContextLost) is quarantined and the run
    ends (ContextQuarantined); quarantined configs are not measured, their rows carry the error
    `QUARANTINED`. `device` (which GPU measures, e.g. 'gpu 1: NVIDIA H200') goes into each shape's meta
    and the manifest's `shape_devices`, and the Triton version of `manifest`'s device into its meta's `triton` (a
    folder made under another Triton release is refused: one dataset per release). Several runs (other GPUs,
    other shards) may write into one `out` at once.
    """
    own = getattr(measurer, "kernel", None)  # a KernelMeasurer knows its kernel; fakes may not
    if kernel is not None and own is not None and kernel != own:
        raise ValueError(f"run_sweep: kernel {kernel.name!r} given for a measurer of {own.name!r}")
    kernel = kernel or own or KERNELS["gemm"]
    started = now()
    reporter = reporter or SilentReporter()
    open_dataset(out, {**dataset_identity(kernel, profile, None), **(manifest or {})})
    triton = ((manifest or {}).get("device") or {}).get("triton")
    stamp = {**({"device": device} if device is not None else {}), **({"triton": triton} if triton else {})}
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
        if stamp:
            result = replace(result, meta={**result.meta, **stamp})
        write_shape(out, _flag_space(result, space[sid]))

    finished, stopped = run_shapes(todo, lambda s: measured[shape_id(s)], measurer, quarantining(out, work),
                                   started=started, max_minutes=max_minutes, lookahead=lookahead,
                                   reporter=reporter, now=now, first_shape_s=first_shape_s,
                                   compile_s_per_config=compile_s_per_config, cost=cost)
    refresh_manifest(out)
    return SweepSummary(done=finished, skipped=len(unique) - len(todo),
                        remaining=len(todo) - finished, stopped_early=stopped, seconds=now() - started)


def dataset_identity(kernel: KernelSpec, profile: HardwareProfile, sms: int | None) -> dict:
    """The manifest keys that a resumed or shared dataset must agree on (dataset.COMPATIBLE_KEYS)."""
    return {"kernel": kernel.name, "space_version": kernel.space.version, "gpu_profile": profile.name, "sms": sms}


# A shape's measuring time over its estimate: the mean shape time varies 7× between fused-MoE shapes (4 to 69 s
# on the H200 training list), the cost-scaled estimate (`sweep_cost_us`) within 2× (p90 1.29); a shape started
# that the budget cannot hold is cut by the caller's timeout and lost.
MEAN_MARGIN, COST_MARGIN = 1.25, 1.5


def shape_estimate_s(durations: list[float], costs: list[float], shape_cost: float | None,
                     first_shape_s: float) -> float:
    """Seconds the next shape is expected to take measuring, with a margin: scaled by its cost where costs of the
    finished shapes are known (`sweep_cost_us`), else their mean time; `first_shape_s` before any finished."""
    if not durations:
        return first_shape_s
    if shape_cost is not None and len(costs) == len(durations) and sum(costs) > 0:
        return COST_MARGIN * sum(durations) / sum(costs) * shape_cost
    return MEAN_MARGIN * statistics.mean(durations)


def run_shapes(todo: Sequence[Shape], configs_of: Callable[[Shape], list[Config]], measurer: Compiler,
               work: Callable[[Shape, dict[Config, float | str]], None], *, started: float,
               max_minutes: float | None, lookahead: int, reporter: Reporter, now: Callable[[], float],
               first_shape_s: float, compile_s_per_config: float,
               cost: Callable[[Shape], float] | None = None) -> tuple[int, bool]:
    """The loop of the sweep and of the backfill over `todo` (ordered by compile group): before each
    shape, compile in one parallel batch what it and the next `lookahead` shapes of its group still
    need (`configs_of`), then `work(shape, compiled)`. With `max_minutes`, a shape is not started when
    the time used plus its estimate (`shape_estimate_s`: with `cost`, the seconds per unit of cost so far
    × this shape's cost; else the mean shape time so far; `first_shape_s` before any; plus the batch's
    compiles at the compile time per config so far) would pass the budget: with `cost`, the loop goes on to
    later shapes, which may be cheap enough to fit the time left (a call's budget is used, not cut at its
    first costly shape); without, it stops there. When only the lookahead's compiles are too many, the batch
    shrinks to the shape's own; and a batch's compile timeout is the budget's time left (a hung compile
    worker cannot outlast the run's budget).
    Returns (shapes finished, whether the budget left any of `todo` undone)."""
    compiled: dict[Hashable, dict[Config, float | str]] = {}
    durations: list[float] = []
    # Seconds per config over all batches: one small batch (its pool start-up spread over a few
    # configs) must not set the rate for the next group's thousands.
    compile_total_s, compile_total_n = 0.0, 0
    costs: list[float] = []  # `cost` of each finished shape, beside `durations`
    timeout_s = None
    finished, passed_over = 0, False
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
            left = timeout_s - shape_estimate_s(durations, costs, cost(shape) if cost else None, first_shape_s)
            if len(jobs) * compile_rate > left:  # the lookahead does not fit: this shape's configs only
                jobs = {c: s for c, s in jobs.items() if s == shape}
            if len(jobs) * compile_rate > left:
                if cost is None or not durations:  # every later shape's estimate is as large: stop
                    return finished, True
                passed_over = True  # a costlier shape than the time left holds; a cheaper later one may fit
                continue
        t0 = now()
        if jobs:
            reporter.phase(shape, f"compiling {len(jobs)} configs")
            have.update(measurer.compile([(s, c) for c, s in jobs.items()], timeout_s=timeout_s))
            compile_total_s, compile_total_n = compile_total_s + now() - t0, compile_total_n + len(jobs)
        t1 = now()
        work(shape, have)
        durations.append(now() - t1)
        if cost is not None and max_minutes is not None:  # only a budget needs the estimate
            costs.append(cost(shape))
        reporter.finished(shape, now() - t0)
        finished += 1
    return finished, passed_over


def _flag_space(result: ShapeRecords, space_configs: list[Config]) -> ShapeRecords:
    """Rows of configs outside `space_configs` marked `in_space=False`; counts in the meta."""
    inside = set(space_configs)
    rows = tuple(replace(r, in_space=r.config in inside) for r in result.trials)
    meta = {**result.meta, "legal_configs": sum(r.in_space for r in rows),
            "baseline_configs": sum(not r.in_space for r in rows)}
    return replace(result, trials=rows, meta=meta)


def sweep_shapes(kernel: str, shapes_path: str | Path, out: str | Path, profile: HardwareProfile, *,
                 shard: tuple[int, int] | None = None, gpus: Sequence[int] | None = None, sms: int | None = None,
                 max_minutes: float | None = None, workers: int | None = None,
                 settings: SweepSettings = SweepSettings(), reporter: Reporter | None = None) -> SweepSummary:
    """The list at `shapes_path` (read with the kernel's loader), or with `shard` = (I, N) its shard I
    of N (`shard_of`, costs by `sweep_cost_us`), swept into the dataset at `out` with `_sweep_part`:
    on this process's GPU, or with `gpus` split again over one worker process per listed GPU, each
    with cores / len(gpus) compile workers unless `workers` says. A worker that fails leaves the
    others to finish their parts; its error is then raised here (eval/sweeping/workers.py)."""
    shapes = KERNELS[kernel].load_list(shapes_path)
    check_sweep_dtypes(KERNELS[kernel], shapes)
    cost = functools.cache(functools.partial(sweep_cost_us, profile=profile, replay_us=1000.0 * settings.target_ms))
    listed = len(shapes)
    if shard is not None:
        shapes = shard_of(shapes, *shard, cost)
    part = functools.partial(_sweep_part, kernel, shapes_path=shapes_path, listed=listed, out=out, profile=profile,
                             sms=sms, max_minutes=max_minutes, settings=settings)
    if gpus is None:
        return part(shapes, reporter, workers=workers)
    check_compatible(out, dataset_identity(KERNELS[kernel], profile, sms))  # once, before any worker starts
    reporter = reporter or SilentReporter()
    unique = {shape_id(s) for s in shapes}
    reporter.start(len(unique), len(unique & finished_ids(out)))
    started = time.monotonic()
    workers = workers if workers is not None else max(1, usable_cpus() // len(gpus))
    try:
        by_gpu = run_on_gpus(functools.partial(part, workers=workers),
                             [shard_of(shapes, i, len(gpus), cost) for i in range(len(gpus))], gpus, reporter)
    finally:  # a worker that died after writing its last shape did not count it
        if (Path(out) / MANIFEST).is_file():
            refresh_manifest(out)
    parts = by_gpu.values()
    return SweepSummary(done=sum(p.done for p in parts), skipped=sum(p.skipped for p in parts),
                        remaining=sum(p.remaining for p in parts), stopped_early=any(p.stopped_early for p in parts),
                        seconds=time.monotonic() - started, by_gpu=by_gpu)


def _sweep_part(kernel: str, shapes: list[Shape], reporter: Reporter | None, *, shapes_path: str | Path, listed: int,
                out: str | Path, profile: HardwareProfile, sms: int | None, max_minutes: float | None,
                workers: int | None, settings: SweepSettings) -> SweepSummary:
    """`shapes` (of the `listed` read from `shapes_path`) swept on this process's GPU (CUDA device 0)
    with the kernel's measurer (`workers` compile processes), each shape's file naming the GPU.

    The compile workers start first and compile for the GPU's compute capability without torch or a
    CUDA context of their own (`compile_pool.gpu_pool`), while this process loads torch and its context: a
    worker process on a two-GPU machine began its first shape ~7 s after spawning and its pool's
    per-worker contexts took seconds more to tear down (docs/history.md: logs/x2_check-v7a)."""

    spec = KERNELS[kernel]
    with compile_pool.gpu_pool(spec.module, workers) as pool:
        hwprobe.require_cuda()
        manifest = {**describe_device(settings, sms, spec.baseline_label), "shapes_file": Path(shapes_path).name,
                    "shapes_sha256": file_digest(shapes_path), "shapes_listed": listed}
        # A sweep times the library's other routes beside its own choice (attention: each SDPA backend).
        with hwprobe.sm_partition(sms), kernel_measurer(kernel, profile, settings, pool=pool, all_baselines=True) as measurer:
            return run_sweep(shapes, out, measurer, profile, kernel=spec, manifest=manifest,
                             max_minutes=max_minutes, reporter=reporter, device=hwprobe.device_label(),
                             cost=functools.cache(functools.partial(sweep_cost_us, profile=profile,
                                                                    replay_us=1000.0 * settings.target_ms)))


def sweep_gemm(shapes_path: str | Path, out: str | Path, profile: HardwareProfile, **options) -> SweepSummary:
    """`rooftune sweep gemm`: `sweep_shapes` for the GEMM kernel, beside cuBLAS (an SM partition of each
    GPU with `sms`). Raises ShapeListError, NoGpuError, DatasetError, ContextQuarantined, CompileStalled."""
    return sweep_shapes("gemm", shapes_path, out, profile, **options)


def sweep_moe(shapes_path: str | Path, out: str | Path, profile: HardwareProfile, **options) -> SweepSummary:
    """`rooftune sweep moe`: as `sweep_gemm`, for the fused-MoE GEMM over a list read by `load_moe_shapes`, every
    legal config of MOE_SPACE timed beside torch's grouped GEMM of the same routed rows."""
    return sweep_shapes("moe", shapes_path, out, profile, **options)


def sweep_attention(shapes_path: str | Path, out: str | Path, profile: HardwareProfile, **options) -> SweepSummary:
    """`rooftune sweep attention`: as `sweep_gemm`, for the attention forward over a list read by
    `load_attention_shapes`, every legal config of ATTENTION_SPACE timed beside SDPA (key "sdpa")."""
    return sweep_shapes("attention", shapes_path, out, profile, **options)
