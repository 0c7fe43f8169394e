"""Backfills: what a sweep did not record, timed later for the shapes it finished.

The extras backfill: the Triton tutorial's configs outside the space, timed for shapes swept before them.

Datasets swept before the sweep timed those configs (candidates/tutorial.py) lack their in_space=0
rows; `backfill_extras` adds them to finished shapes: the extras timed interleaved with the shape's
recorded final configs in two final passes, and put on the dataset's scale by the median ratio
recorded / new time over those finals. The loop, the time budget and the quarantine are the
sweep's (eval/sweeping/sweep.py: `run_shapes`); the GPU side is `KernelMeasurer.measure_extras` (kernels/harness/measure.py).

The legal backfill: configs a profile corrected since the sweep makes legal (a GEMM dataset swept under the
legality of its profile as first probed), timed the same way and added as in-space rows (`legal=True`), so the
dataset's space is the corrected profile's; configs it no longer makes legal keep their rows.

The routes backfill: the SDPA backends that attention sweeps built but did not time (they were left out
of the final passes), timed beside SDPA's own choice and put on the dataset's scale through its recorded
time (`backfill_routes`; the GPU side is `KernelMeasurer.measure_extras` given no configs).
"""

from __future__ import annotations

import datetime
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from rooftune.candidates import GEMM_SPACE, Config, GemmShape, legal_configs
from rooftune.candidates.tutorial import gemm_baseline_extras
from rooftune.candidates.shapes import load_attention_shapes, load_shapes
from rooftune.eval.datasets.format import (
    DatasetError,
    ShapeRecords,
    Trial,
    is_slim_text,
    open_dataset,
    read_manifest,
    read_shape,
    read_shape_text,
    shape_files,
    shape_id,
    shape_text,
    write_manifest,
    write_shape,
)
from rooftune.eval.sweeping.quarantine import QUARANTINED, quarantining, read_quarantine
from rooftune.eval.sweeping.sweep import Compiler, Reporter, SilentReporter, order_by_group, run_shapes
from rooftune.hwprofiles import HardwareProfile, hwprobe
from rooftune.kernels.harness.benches import SDPA_ROUTES
from rooftune.kernels.harness.measure import (
    ROUTE_UNTIMED,
    RetimePasses,
    SweepSettings,
    attention_measurer,
    describe_device,
    gemm_measurer,
    repeatability,
)


class ExtrasMeasurer(Compiler, Protocol):
    """What the backfill needs from a device: compiles, and two final passes timing a shape's extras
    interleaved with its recorded final configs."""

    def measure_extras(self, shape: GemmShape, extras: list[Config], finals: list[Config],
                       compiled: dict[Config, float | str]) -> RetimePasses: ...


@dataclass(frozen=True)
class BackfillSummary:
    done: int            # shapes given their extras in this run
    already: int         # shapes that carry them (swept with them, or backfilled before)
    not_needed: int      # shapes whose space holds every tutorial config as the same kernel
    failed: int          # shapes left unchanged: none of their final configs could be re-timed
    remaining: int       # shapes left for a later run
    stopped_early: bool  # the time budget ended the run
    seconds: float
    # How its line names a shape that had nothing to time, and what a failed shape was left without; a
    # routes backfill counts no shapes that need none.
    already_label: str = "already with extras"
    failed_label: str = "no final config re-timed"
    counts_not_needed: bool = True

    def __str__(self) -> str:
        budget = " (time budget reached)" if self.stopped_early else ""
        needing = f", needing none {self.not_needed}" if self.counts_not_needed else ""
        return (f"backfilled {self.done}, {self.already_label} {self.already}{needing}, failed ({self.failed_label}) "
                f"{self.failed}, left {self.remaining}{budget}; {self.seconds:.0f} s")


def _check_reencodes(path: Path, result: ShapeRecords) -> None:
    """A DatasetError where `result`, the records read from the shape file `path`, does not encode to the file's own
    text, in its own form (full or slim): a rewrite must leave every recorded value as it is. The rewrite itself is
    a full file (a slim one's old rows then have empty screening cells)."""
    text = read_shape_text(path)
    if shape_text(result, slim=is_slim_text(text)) != text:
        raise DatasetError(f"{path}: does not re-encode to its own text; not rewriting it")


def backfilled_shape(result: ShapeRecords, extras: list[Config], passes: RetimePasses,
                     compiled: dict[Config, float | str], date: str, legal: bool = False) -> ShapeRecords | None:
    """`result` with `extras` appended as in_space=0 rows (`legal`: in_space=1 rows, configs of the space), on
    the dataset's scale; None when none of its final configs (rows with `retime_us`) has times in both passes.

    Each candidate's new time is the median over both passes' rounds (as a sweep's final config).
    scale = median over the re-timed final configs of recorded `time_us` / new time; an extra's
    `time_us` = its new time × scale, `screen_us` its new time unscaled, `rounds` and `spread` over
    both passes. The meta's `extras_backfilled` (`legal_backfilled`) records the date, the scale, how well that one scale
    maps the finals' new times onto their recorded ones (`vs_recorded`: `repeatability` of recorded
    vs scaled new times) and the two new passes' agreement with each other (`passes`)."""
    new_us = {k: statistics.median([*passes.first_us[k], *passes.second_us[k]]) for k in passes.first_us
              if passes.first_us[k] and passes.second_us.get(k) and k not in passes.errors}
    recorded = {r.config: r.time_us for r in result.trials if r.retime_us is not None and r.time_us}
    finals = [c for c in recorded if c in new_us]
    if not finals:
        return None
    scale = statistics.median(recorded[c] / new_us[c] for c in finals)
    rows = []
    for c in extras:
        times = (*passes.first_us.get(c, ()), *passes.second_us.get(c, ()))
        error = passes.errors.get(c) or (None if c in new_us else "backfill: no time in both passes")
        ok = error is None
        rows.append(Trial(
            config=c, time_us=new_us[c] * scale if ok else None, error=error,
            compile_s=compiled[c] if isinstance(compiled.get(c), float) else None,
            rounds=len(times) if ok else 0, spread=(max(times) - min(times)) / new_us[c] if ok else None,
            screen_us=new_us[c] if ok else None, in_space=legal))
    timed = [k for k in new_us if k != "cublas"]
    record = {
        "date": date, "scale": scale, "finals": len(finals), "extras": len(extras),
        "vs_recorded": repeatability({c: recorded[c] for c in finals}, {c: new_us[c] * scale for c in finals}),
        "passes": repeatability({k: statistics.median(passes.first_us[k]) for k in timed},
                                {k: statistics.median(passes.second_us[k]) for k in timed}),
        **passes.meta,
    }
    if "cublas" in new_us and result.baselines_us.get("cublas"):
        record["cublas_scale"] = result.baselines_us["cublas"] / new_us["cublas"]
    if legal:
        meta = {**result.meta, "legal_configs": result.meta.get("legal_configs", 0) + len(extras),
                "legal_backfilled": record}
    else:
        meta = {**result.meta, "baseline_configs": len(extras), "extras_backfilled": record}
    return replace(result, trials=result.trials + tuple(rows), meta=meta)


def legal_backfill_configs(result: ShapeRecords, profile: HardwareProfile) -> tuple[list[Config], list[Config]]:
    """What the legal backfill times for one finished GEMM shape: the configs of the space `profile` makes legal
    that it has no row for, and its recorded final configs (rows with `retime_us`), beside which they are timed."""
    recorded = {r.config for r in result.trials}
    missing = [c for c in legal_configs(GEMM_SPACE, result.shape, profile).configs if c not in recorded]
    return missing, [r.config for r in result.trials if r.retime_us is not None]


def legal_backfill_plan(root: str | Path, profile: HardwareProfile,
                        shapes: Sequence[GemmShape] | None = None) -> dict[GemmShape, list[Config]]:
    """Per finished shape of the dataset at `root` (those in `shapes`, or all) that the legal backfill has yet to
    give rows to, the configs it compiles (`legal_backfill_configs`: the missing ones, then the finals): what
    `scripts/prebuild_legal_backfill.py` builds ahead on a CPU."""
    read_manifest(root)  # a dataset must exist
    wanted = None if shapes is None else {shape_id(s) for s in shapes}
    plan = {}
    for path in shape_files(root):
        result = read_shape(path)
        if (wanted is not None and shape_id(result.shape) not in wanted) or "legal_backfilled" in result.meta:
            continue
        missing, finals = legal_backfill_configs(result, profile)
        if missing:
            plan[result.shape] = missing + finals
    return plan


def _extras_plan(root: str | Path, profile: HardwareProfile, shapes: Sequence[GemmShape] | None, legal: bool
                 ) -> tuple[dict[str, tuple[Path, ShapeRecords, list[Config], list[Config]]], int, int]:
    """`backfill_extras`'s work: shape id -> (its file, its records, the configs to add, its final configs) for
    the finished shapes (those in `shapes`, or all) that lack them; and how many were backfilled before and how
    many need nothing."""
    wanted = None if shapes is None else {shape_id(s) for s in shapes}
    todo: dict[str, tuple[Path, ShapeRecords, list[Config], list[Config]]] = {}
    already = not_needed = 0
    for path in shape_files(root):
        result = read_shape(path)
        if wanted is not None and shape_id(result.shape) not in wanted:
            continue
        if legal and "legal_backfilled" in result.meta or not legal and (
                any(not r.in_space for r in result.trials) or "extras_backfilled" in result.meta):
            already += 1
            continue
        if legal:
            extras, finals = legal_backfill_configs(result, profile)
        else:
            extras = gemm_baseline_extras(result.shape, [r.config for r in result.trials if r.in_space])
            finals = [r.config for r in result.trials if r.retime_us is not None]
        if not extras:
            not_needed += 1
            continue
        todo[shape_id(result.shape)] = (path, result, extras, finals)
    return todo, already, not_needed


def _record_run(root: str | Path, key: str, manifest: dict | None, shapes: int) -> None:
    """Append this run (`manifest`, e.g. the device's versions, and the shapes it backfilled) to the manifest's
    `key` list."""
    manifest_now = read_manifest(root)
    runs = [*manifest_now.get(key, []), {**(manifest or {}), "shapes": shapes}]
    write_manifest(root, {**manifest_now, key: runs})


def backfill_extras(root: str | Path, profile: HardwareProfile, measurer: ExtrasMeasurer, *,
                    shapes: Sequence[GemmShape] | None = None, sms: int | None = None,
                    manifest: dict | None = None, max_minutes: float | None = None, lookahead: int = 8,
                    reporter: Reporter | None = None, now: Callable[[], float] = time.monotonic,
                    date: str | None = None, first_shape_s: float = 15.0,
                    compile_s_per_config: float = 0.05, legal: bool = False) -> BackfillSummary:
    """Give the finished shapes of the dataset at `root` (those in `shapes`, or all) that were swept
    before the sweep timed the tutorial's configs outside the space their `gemm_baseline_extras`; with
    `legal`, instead the configs of the space `profile` makes legal that they have no row for (in-space rows;
    the manifest's list is `legal_backfill`, a shape's meta `legal_backfilled`; `already`: shapes backfilled
    before, `not_needed`: shapes with a row for every legal config).

    Per shape: the extras and its recorded final configs are compiled (in parallel, grouped as the
    sweep does), checked, and timed interleaved in two independent final passes
    (`ExtrasMeasurer.measure_extras`); the extras are appended as in_space=0 rows on the dataset's
    scale (`backfilled_shape`) and the file is rewritten atomically, its existing rows unchanged.
    Resumable: a shape with in_space=0 rows is skipped. `max_minutes`: see `run_shapes`. Each run
    that backfilled a shape appends to the manifest's `extras_backfill` list `manifest` (e.g. the
    device's versions) and its shape count. Quarantined configs (eval/sweeping/quarantine.py) are not run: an
    extra's row carries the error, a final config is left out of the scale.
    Raises DatasetError for a folder that is not a dataset of this space, profile, partition and Triton release;
    ContextQuarantined when a config kills the CUDA context (it is quarantined first)."""
    started = now()
    reporter = reporter or SilentReporter()
    date = date or datetime.date.today().isoformat()
    read_manifest(root)  # a dataset must exist; open_dataset then only checks it (and the Triton release, rows
    # of another compiler's timing being no rows of this dataset)
    open_dataset(root, {"kernel": "gemm", "space_version": GEMM_SPACE.version, "gpu_profile": profile.name,
                        "sms": sms, "device": (manifest or {}).get("device")})
    todo, already, not_needed = _extras_plan(root, profile, shapes, legal)
    quarantined = read_quarantine(root)
    order = order_by_group([result.shape for _, result, _, _ in todo.values()], measurer.group_key)
    reporter.start(len(todo) + already + not_needed, already + not_needed)
    failed = 0

    def work(shape, compiled):
        nonlocal failed
        entry = todo[shape_id(shape)]  # (file, records, configs to add, final configs)
        reporter.phase(shape, f"timing {len(entry[2])} extras beside {len(entry[3])} final configs")
        failed += not _backfill_shape(root, measurer, entry, quarantined.get(shape_id(shape), {}), compiled, date,
                                      legal)

    configs_of = {sid: [c for c in extras + finals if c not in quarantined.get(sid, {})]
                  for sid, (_, _, extras, finals) in todo.items()}
    finished, stopped = run_shapes(order, lambda s: configs_of[shape_id(s)], measurer, quarantining(root, work),
                                   started=started, max_minutes=max_minutes, lookahead=lookahead,
                                   reporter=reporter, now=now, first_shape_s=first_shape_s,
                                   compile_s_per_config=compile_s_per_config)
    if finished > failed:
        _record_run(root, "legal_backfill" if legal else "extras_backfill", manifest, finished - failed)
    return BackfillSummary(done=finished - failed, already=already, not_needed=not_needed, failed=failed,
                           remaining=len(order) - finished, stopped_early=stopped, seconds=now() - started,
                           already_label="already backfilled" if legal else "already with extras")


def _backfill_shape(root: str | Path, measurer: ExtrasMeasurer, entry: tuple, skip, compiled, date: str,
                    legal: bool) -> bool:
    """Time one shape's `entry` (its file, records, configs to add and final configs; those in `skip`,
    quarantined, not run) and rewrite its file with the new rows; False where its final passes failed."""
    path, result, extras, finals = entry
    _check_reencodes(path, result)
    passes = measurer.measure_extras(result.shape, [c for c in extras if c not in skip],
                                     [c for c in finals if c not in skip], compiled)
    passes = replace(passes, errors={**passes.errors, **{c: QUARANTINED for c in extras if c in skip}})
    new = backfilled_shape(result, extras, passes, compiled, date, legal)
    if new is not None:
        write_shape(root, new)
    return new is not None


def backfill_gemm(shapes_path: str | Path, out: str | Path, profile: HardwareProfile, *, sms: int | None = None,
                  max_minutes: float | None = None, workers: int | None = None,
                  settings: SweepSettings = SweepSettings(), reporter: Reporter | None = None,
                  legal: bool = False) -> BackfillSummary:
    """`rooftune sweep gemm --backfill-extras`: time the missing tutorial configs of the shapes of the
    list already finished in the dataset at `out`, on this GPU (`backfill_extras`); `--backfill-legal`
    (`legal`): the configs `profile` makes legal that those shapes have no row for. Raises ShapeListError,
    NoGpuError, DatasetError, ContextQuarantined, CompileStalled."""

    shapes = load_shapes(shapes_path)
    hwprobe.require_cuda()
    run = {**describe_device(settings, sms), "shapes_file": Path(shapes_path).name,
           "method": f"each shape's {'newly legal configs' if legal else 'extras'} timed interleaved with its "
                     "recorded final configs and cuBLAS in two independent final passes; time = median over both "
                     "passes x scale, scale = median recorded / new time over the final configs (shape meta: "
                     f"{'legal_backfilled' if legal else 'extras_backfilled'})"}
    with hwprobe.sm_partition(sms), gemm_measurer(profile, settings, workers=workers) as measurer:
        return backfill_extras(out, profile, measurer, shapes=shapes, sms=sms, manifest=run,
                               max_minutes=max_minutes, reporter=reporter, legal=legal)


# --- The routes backfill: SDPA backends timed beside the recorded baseline -------------------------------

def untimed_routes(result: ShapeRecords, routes: Sequence[str]) -> list[str]:
    """Those of `routes` this shape's sweep recorded no time for and no reason why it could not run:
    no entry at all (sweeps before `baseline_errors` was recorded), or `ROUTE_UNTIMED`."""
    errors = result.meta.get("baseline_errors", {})
    return sorted(k for k in routes if k not in result.baselines_us and errors.get(k, ROUTE_UNTIMED) == ROUTE_UNTIMED)


def routes_backfilled_shape(result: ShapeRecords, base: str, passes: RetimePasses, date: str) -> ShapeRecords | None:
    """`result` with each route timed in `passes` and missing from its baselines added, on the dataset's
    scale; None when the baseline `base` has no time in both passes (or none recorded).

    A route's new time is the median over both passes' rounds; scale = the recorded baseline time / its
    new time; the route's recorded time = new × scale. Recorded baselines and every row stay as they
    are. `baseline_errors` keeps only the routes still without a time, each with the backfill's reason
    where it has one. The meta's `routes_backfilled` records the date, the scale, the routes added and
    the two passes' agreement over the timed routes (`passes`)."""
    new_us = {k: statistics.median([*passes.first_us[k], *passes.second_us[k]]) for k in passes.first_us
              if passes.first_us[k] and passes.second_us.get(k)}
    recorded = result.baselines_us.get(base)
    if not recorded or base not in new_us:
        return None
    scale = recorded / new_us[base]
    added = {k: t * scale for k, t in new_us.items() if k != base and k not in result.baselines_us}
    baselines = {**result.baselines_us, **added}
    why_now = {**passes.meta.get("baseline_errors", {}), **passes.errors}
    before = result.meta.get("baseline_errors", {})
    still = {k: why_now.get(k, before.get(k, ROUTE_UNTIMED)) for k in sorted({*before, *why_now})
             if k not in baselines and k != base}
    timed = sorted(new_us)
    record = {"date": date, "scale": scale, "added": sorted(added), **{k: v for k, v in passes.meta.items()
                                                                      if k != "baseline_errors"}}
    if len(timed) > 1:
        record["passes"] = repeatability({k: statistics.median(passes.first_us[k]) for k in timed},
                                         {k: statistics.median(passes.second_us[k]) for k in timed})
    meta = {k: v for k, v in result.meta.items() if k != "baseline_errors"}
    meta.update({"baseline_errors": still} if still else {})
    meta["routes_backfilled"] = record
    return replace(result, baselines_us=baselines, meta=meta)


class RoutesMeasurer(Protocol):
    """The baseline's key, and the extras backfill's measurement, given no configs: the baseline and
    its routes in two final passes."""

    baseline: str

    def measure_extras(self, shape, extras: list[Config], finals: list[Config],
                       compiled: dict[Config, float | str]) -> RetimePasses: ...


def backfill_routes(root: str | Path, measurer: RoutesMeasurer, routes: Sequence[str], *,
                    shapes: Sequence | None = None,
                    manifest: dict | None = None, max_minutes: float | None = None,
                    reporter: Reporter | None = None, now: Callable[[], float] = time.monotonic,
                    date: str | None = None) -> BackfillSummary:
    """Time the `routes` that the finished shapes of the dataset at `root` (those in `shapes`, or all) were
    swept without (`untimed_routes`) beside the recorded baseline, and add them on the dataset's scale
    (`routes_backfilled_shape`); each file is rewritten atomically, its recorded bytes otherwise as they
    were. Resumable: a shape with `routes_backfilled` in its meta, or with nothing untimed, is skipped.
    `max_minutes`: no shape is started once the next one (estimated as the slowest so far) would end
    past it. A run that backfilled a shape appends `manifest` and its count to the manifest's
    `routes_backfill` list. Raises DatasetError for a folder that is not a dataset."""
    started = now()
    reporter = reporter or SilentReporter()
    date = date or datetime.date.today().isoformat()
    read_manifest(root)
    wanted = None if shapes is None else {shape_id(s) for s in shapes}
    todo, already = [], 0
    for path in shape_files(root):
        result = read_shape(path)
        if wanted is not None and shape_id(result.shape) not in wanted:
            continue
        if "routes_backfilled" in result.meta or not untimed_routes(result, routes):
            already += 1
        else:
            todo.append((path, result))
    reporter.start(len(todo) + already, already)
    done = failed = 0
    slowest, stopped = 0.0, False
    for path, result in todo:
        if max_minutes is not None and now() - started + slowest > 60 * max_minutes:
            stopped = True
            break
        t0 = now()
        _check_reencodes(path, result)
        reporter.phase(result.shape, f"timing {', '.join(untimed_routes(result, routes))} beside {measurer.baseline}")
        passes = measurer.measure_extras(result.shape, [], [], {})
        new = routes_backfilled_shape(result, measurer.baseline, passes, date)
        if new is None:
            failed += 1
        else:
            write_shape(root, new)
            done += 1
        slowest = max(slowest, now() - t0)
        reporter.finished(result.shape, now() - t0)
    if done:
        _record_run(root, "routes_backfill", manifest, done)
    return BackfillSummary(done=done, already=already, not_needed=0, failed=failed,
                           remaining=len(todo) - done - failed, stopped_early=stopped, seconds=now() - started,
                           already_label="with nothing to time", failed_label="SDPA not re-timed",
                           counts_not_needed=False)


def backfill_attention_routes(shapes_path: str | Path, out: str | Path, profile: HardwareProfile, *,
                              sms: int | None = None, max_minutes: float | None = None, workers: int | None = None,
                              settings: SweepSettings = SweepSettings(),
                              reporter: Reporter | None = None) -> BackfillSummary:
    """`rooftune sweep attention --backfill-routes`: time the SDPA backends that the finished shapes of
    the list in the dataset at `out` were swept without, on this GPU (`backfill_routes`). `workers` is
    accepted for the sweep's signature; nothing is compiled. Raises ShapeListError, NoGpuError, DatasetError."""

    shapes = load_attention_shapes(shapes_path)
    hwprobe.require_cuda()
    run = {**describe_device(settings, sms, baseline="SDPA"), "shapes_file": Path(shapes_path).name,
           "method": "each SDPA backend swept without a time timed interleaved with SDPA's own choice in two "
                     "independent final passes; time = median over both passes x scale, scale = recorded / "
                     "new SDPA time (shape meta: routes_backfilled)"}
    with hwprobe.sm_partition(sms), attention_measurer(profile, settings, workers=1) as measurer:
        return backfill_routes(out, measurer, SDPA_ROUTES, shapes=shapes, manifest=run, max_minutes=max_minutes,
                               reporter=reporter)
