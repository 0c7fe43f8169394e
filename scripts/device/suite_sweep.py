"""Ground truth of the kernel suite (issue 58, docs/suite.md) on one GPU: every config of every suite kernel at each
of its shapes read as the generic model reads it (kernels/introspect: lowered here, compiled in parallel in the compile
pool's workers, which leave each binary where its launch looks; its `KernelCounts` from the binary and the IR), checked
against the reference (a wrong output is an error row, never a time), then timed as the sweep times
(kernels/harness/timing.py: CUDA graphs of back-to-back launches over input sets rotated past L2, interleaved shuffled
rounds, medians; a screening pass over every config, two final passes over the fastest ten) beside the eager torch op.
Each (kernel, shape) is written whole, times and counts together, as soon as it is measured (eval/datasets/suite.py),
so a later call skips it and goes on; `--seconds` stops before a shape that would not finish in time. It refuses a
GPU other than the profile's, and a folder holding another GPU's or another Triton's data. The last lines are a
table of the shapes measured.

    python3 -m pip install -q --no-deps --no-build-isolation -e .
    python3 scripts/device/suite_sweep.py --gpu h100_sxm --out datasets/h100/suite --seconds 500 \\
        [--kernels rmsnorm_fwd,softmax] [--split train|heldout]
    tar czf "$OUT/suite.tgz" datasets/h100/suite

`--plan` prints what a call would measure and exits (no GPU needed).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path

from rooftune.candidates.records import ShapeRecords, Trial
from rooftune.eval.datasets.format import DatasetError
from rooftune.eval.datasets.suite import (
    SuiteRecords,
    SuiteShape,
    finished,
    open_folder,
    quarantine,
    quarantined,
    write_shape,
)
from rooftune.hwprofiles.profile import is_profile_of, load_profile
from rooftune.kernels.harness.context import ContextLost
from rooftune.kernels.harness.measure import SweepSettings, repeatability

BASELINE = "torch"
FIRST_SHAPE_S = 120.0  # a kernel's first shape, before any is measured: its whole list compiled, then timed
# A list's compiles time out after this (KernelMeasurer's rule, more room: attention backward compiles for seconds)
COMPILE_BASE_S, COMPILE_PER_CONFIG_S = 120.0, 5.0


def plan(kernels: Mapping[str, Iterable[Mapping[str, int]]], split: Mapping[str, str], parts: Iterable[str],
         only: Iterable[str] | None, done: set[tuple[str, str]]) -> list[SuiteShape]:
    """The shapes still to measure: each kernel of `parts` (and of `only`, if given) in the registry's order, its
    shapes in order (one kernel's shapes together: they share its binaries), those already in the folder left out."""
    wanted = set(parts)
    chosen = [n for n in kernels if split[n] in wanted and (only is None or n in only)]
    shapes = [SuiteShape.of(n, s) for n in chosen for s in kernels[n]]
    return [s for s in shapes if (s.kernel, s.id) not in done]


def sweep(jobs: list[SuiteShape], measure: Callable[[SuiteShape], SuiteRecords], folder: Path, seconds: float,
          clock: Callable[[], float] = time.monotonic, log: Callable[[str], None] = print) -> list[dict]:
    """Measure and write each shape of `jobs` in turn while time is left: a shape starts only where the seconds left
    cover the longest shape of its kernel so far (its first: the longest first shape of any kernel, else
    FIRST_SHAPE_S). One row per shape for the table: measured, or why not."""
    start = clock()
    longest: dict[str, float] = {}
    first_shapes: list[float] = []
    rows = []
    for shape in jobs:
        left = seconds - (clock() - start)
        need = longest.get(shape.kernel, max(first_shapes, default=FIRST_SHAPE_S))
        if left < need:
            rows.append({"kernel": shape.kernel, "shape": shape.id, "status": f"not started: {left:.0f} s left, "
                         f"~{need:.0f} s needed"})
            continue
        began = clock()
        measured = measure(shape)
        write_shape(folder, measured)
        took = clock() - began
        if shape.kernel not in longest:
            first_shapes.append(took)
        longest[shape.kernel] = max(took, longest.get(shape.kernel, 0.0))
        rows.append({**summary(measured.records), "seconds": round(took, 1)})
        log(f"{shape.kernel} {shape.id}: {rows[-1]['status']} ({took:.0f} s)")
    return rows


def summary(records: ShapeRecords) -> dict:
    """A shape's line of the table: configs timed, errors, the best config and its time, the baseline's."""
    ok = [t for t in records.trials if t.ok]
    best = min(ok, key=lambda t: t.time_us) if ok else None
    base = records.baselines_us.get(BASELINE)
    return {"kernel": records.shape.kernel, "shape": records.shape.id, "status": f"{len(ok)}/{len(records.trials)} ok",
            "best_us": best.time_us if best else None, "best": str(best.config) if best else None,
            "torch_us": base, "torch_over_best": base / best.time_us if best and base else None}


def table(rows: list[dict]) -> str:
    """The rows as a fixed-width table (the call's last lines)."""
    lines = [f"{'kernel':<20} {'shape':<34} {'status':<14} {'best µs':>10} {'torch µs':>10} {'torch/best':>10}"]
    for r in rows:
        nums = [f"{r[k]:>10.2f}" if r.get(k) is not None else f"{'-':>10}" for k in ("best_us", "torch_us",
                                                                                    "torch_over_best")]
        lines.append(f"{r['kernel']:<20} {r['shape']:<34} {r['status'][:14]:<14} {' '.join(nums)}")
        if r["status"].startswith("not started"):
            lines[-1] = f"{r['kernel']:<20} {r['shape']:<34} {r['status']}"
    return "\n".join(lines)


def pooled_times(first: Mapping, pass_a: Mapping, pass_b: Mapping, keys: list) -> tuple[dict, float]:
    """KernelMeasurer's pooling (kernels/harness/measure.py): each key of the final passes at the median of both
    passes' rounds; the screening times of the rest scaled by the finals' median ratio to their screening."""
    pooled = {k: statistics.median([*pass_a[k].times_us, *pass_b[k].times_us]) for k in keys
              if pass_a[k].median_us is not None and pass_b[k].median_us is not None}
    ratios = [pooled[k] / first[k].median_us for k in pooled if k != BASELINE]
    return pooled, statistics.median(ratios or [1.0])


def trials_of(kernel, errors: Mapping[int, str], analyses: list, first: Mapping, pass_a: Mapping, pass_b: Mapping,
              pooled: Mapping, scale: float) -> tuple[Trial, ...]:
    """One Trial per config of the list, in order: its time (pooled, else its screening median scaled) or its error;
    `compile_s` its lowering and its share of the list's compile (kernels/introspect/analyze.py `ConfigAnalysis`)."""
    from rooftune.kernels.suite.record import config_of

    rows = []
    for i, (config, analysis) in enumerate(zip(kernel.configs, analyses)):
        t, a, b = first.get(i), pass_a.get(i), pass_b.get(i)
        err = errors.get(i) or (t.error if t is not None else "not timed")
        compile_s = getattr(analysis, "seconds", None)
        if err:
            rows.append(Trial(config_of(config), None, error=err[:300], compile_s=compile_s))
            continue
        rows.append(Trial(config_of(config), pooled.get(i, t.median_us * scale), compile_s=compile_s,
                          rounds=t.rounds, spread=t.spread, screen_us=t.median_us,
                          retime_us=a.median_us if a else None, retime2_us=b.median_us if b else None,
                          retime_rounds=a.rounds if a else None))
    return tuple(rows)


def check_all(kernel, args: dict, analyses: list, skipped: Iterable[str], device: str = "cuda") -> dict[int, str]:
    """Errors of the configs that did not compile, fail the reference check on `args` (fresh inputs, not the timed
    ones), or are quarantined. Raises ContextLost naming the index of the config whose check killed the context."""
    from rooftune.kernels.harness.context import context_error
    from rooftune.kernels.suite.check import check_config
    from rooftune.kernels.suite.record import config_of

    expected = kernel.reference(args)
    errors = {}
    for i, (config, analysis) in enumerate(zip(kernel.configs, analyses)):
        if str(config_of(config)) in skipped or "*" in skipped:
            errors[i] = "quarantined: an earlier run's CUDA context died here"
        elif getattr(analysis, "stage", None) == "compile":
            errors[i] = f"compile: {analysis.error}"
        elif problem := check_config(kernel, args, expected, config):
            if context_error(device):
                raise ContextLost(i, problem)
            errors[i] = f"check: {problem}"
    return errors


def analyze_list(kernel, args: dict, profile, pool) -> list:
    """Each config of the list read on the call `args` (kernels/introspect/analyze.py: lowered here, compiled in
    `pool` for the profile's GPU, the binary left where the config's launch looks): a `ConfigAnalysis` with its
    counts, or an `AnalysisError`; a config that cannot be read is still checked and timed, unless it did not
    compile."""
    from rooftune.kernels.harness.offline import arch_of
    from rooftune.kernels.introspect.analyze import analyze

    timeout_s = COMPILE_BASE_S + COMPILE_PER_CONFIG_S * len(kernel.configs) / max(1, pool.workers)
    return analyze(kernel.fn, kernel.configs, args, lambda meta: kernel.grid(args, meta),
                   arch=arch_of(profile), pool=pool, timeout_s=timeout_s)


def measure_shape(kernel, shape: SuiteShape, profile, pool, settings: SweepSettings, skipped: Iterable[str],
                  facts: Mapping, device: str = "cuda") -> SuiteRecords:
    """One shape of one kernel measured whole (the module docstring): its `ShapeRecords` and each config's counts;
    `pool` compiles lowered configs (kernels/introspect/analyze.py `analysis_pool`)."""
    import torch

    from rooftune.kernels.harness.timing import input_sets_needed, time_candidates

    s, t0 = settings, time.perf_counter()
    checked = kernel.make_args(shape.dims, device, seed=1)
    analyses = analyze_list(kernel, checked, profile, pool)
    t_compile = time.perf_counter() - t0
    errors = check_all(kernel, checked, analyses, skipped, device)
    del checked
    torch.cuda.empty_cache()
    t_check = time.perf_counter() - t0 - t_compile
    sets = input_sets_needed(int(kernel.bytes(shape.dims)), profile.l2_bytes)
    inputs = [kernel.make_args(shape.dims, device, seed=100 + j) for j in range(sets)]
    launchers = {i: (lambda j, c=c: kernel.launch(inputs[j % sets], c))
                 for i, c in enumerate(kernel.configs) if i not in errors}
    if kernel.baseline is not None:
        launchers[BASELINE] = lambda j: kernel.baseline(inputs[j % sets])
    bases = [BASELINE] if kernel.baseline is not None else []
    first = time_candidates(launchers, rounds=s.rounds, prune_ratio=s.prune_ratio, mid_ratio=s.mid_ratio,
                            mid_rounds=s.mid_rounds, target_ms=s.target_ms, baseline_keys=bases, seed=s.seed + 2)
    ok = sorted((k for k, t in first.items() if k not in bases and t.median_us is not None),
                key=lambda k: first[k].median_us)
    top = ok[:s.retime_top] + [b for b in bases if first[b].median_us is not None]
    final = dict(rounds=s.retime_rounds, prune_ratio=float("inf"), mid_ratio=None, target_ms=s.retime_target_ms)
    pass_a, pass_b = (time_candidates({k: launchers[k] for k in top}, seed=s.seed + salt, **final) for salt in (3, 4))
    pooled, scale = pooled_times(first, pass_a, pass_b, top)
    trials = trials_of(kernel, errors, analyses, first, pass_a, pass_b, pooled, scale)
    clocks = [v for p in (first, pass_a, pass_b) for t in p.values() for v in (t.clock_mhz_min, t.clock_mhz_max) if v]
    meta = {**facts, "flops": kernel.flops(shape.dims), "bytes": kernel.bytes(shape.dims), "input_sets": sets,
            "compile_s": round(t_compile, 2), "check_s": round(t_check, 2),
            "time_s": round(time.perf_counter() - t0 - t_compile - t_check, 2), "screen_scale": scale,
            "clock_mhz_min": min(clocks, default=None), "clock_mhz_max": max(clocks, default=None),
            "repeatability": repeatability({k: pass_a[k].median_us for k in top if k not in bases},
                                           {k: pass_b[k].median_us for k in top if k not in bases})}
    if bases and BASELINE not in pooled:
        meta["baseline_error"] = first[BASELINE].error or "no time in both final passes"
    launchers.clear()  # the graphs' tensors and the input sets go before the next shape allocates its own
    inputs.clear()
    torch.cuda.empty_cache()
    records = ShapeRecords(shape=shape, trials=trials, baselines_us={k: pooled[k] for k in bases if k in pooled},
                           meta=meta)
    return SuiteRecords(records, tuple(getattr(a, "counts", None) for a in analyses))


def culprit_text(kernel, culprit) -> str:
    """What quarantine records for a ContextLost's culprit: the config's text form (a config's index), else '*'
    (a fault in an interleaved round, or the baseline: the whole shape is skipped next time)."""
    from rooftune.kernels.suite.record import config_of

    return str(config_of(kernel.configs[culprit])) if isinstance(culprit, int) else "*"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="h100_sxm", help="the hardware profile of this GPU (a shipped name)")
    p.add_argument("--out", type=Path, default=Path("datasets/h100/suite"), help="the dataset folder")
    p.add_argument("--seconds", type=float, default=500.0, help="stop before a shape that would not finish in time")
    p.add_argument("--kernels", help="comma-separated kernel names (default: all of the split)")
    p.add_argument("--split", choices=("train", "heldout", "all"), default="all")
    p.add_argument("--workers", type=int, default=None, help="compile workers (default: every usable core)")
    p.add_argument("--plan", action="store_true", help="print the shapes a call would measure, then exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from rooftune.kernels.suite import SUITE, suite_split

    split = suite_split()
    only = None if not args.kernels else set(args.kernels.split(","))
    if only and only - set(SUITE):
        print(f"unknown kernels: {sorted(only - set(SUITE))}; the suite's: {sorted(SUITE)}", file=sys.stderr)
        return 2
    parts = ("train", "heldout") if args.split == "all" else (args.split,)
    jobs = plan({n: k.shapes for n, k in SUITE.items()}, split, parts, only, finished(args.out))
    if args.plan:
        print("\n".join(f"{s.kernel} {s.id} ({split[s.kernel]}, {len(SUITE[s.kernel].configs)} configs)" for s in jobs))
        return 0
    return run(args, SUITE, split, jobs)


def kernel_entries(suite: Mapping, split: Mapping[str, str], jobs: list[SuiteShape]) -> dict[str, dict]:
    """The manifest's entry of each kernel of `jobs`: its split (what a fit reads before any of its files), its
    kind, and how many shapes and configs the suite gives it."""
    names = dict.fromkeys(s.kernel for s in jobs)
    return {n: {"split": split[n], "kind": suite[n].kind, "shapes": len(suite[n].shapes),
                "configs": len(suite[n].configs)} for n in names}


def run(args: argparse.Namespace, suite: Mapping, split: Mapping[str, str], jobs: list[SuiteShape]) -> int:
    """The GPU part of `main`: the checks of GPU and folder, the compile pool, the sweep and the table."""
    import torch
    import triton

    from rooftune.hwprofiles.hwprobe import software_versions
    from rooftune.kernels.introspect.analyze import analysis_pool

    profile = load_profile(args.gpu)
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU"
    if not is_profile_of(profile, name):
        print(f"--gpu {args.gpu} is {profile.name}, this GPU is {name}: nothing measured", file=sys.stderr)
        return 3
    facts = {"gpu": name, "profile": args.gpu, "gpu_profile": profile.name, "triton": triton.__version__,
             "torch": torch.__version__, "dtype": "bf16", "timing": asdict(SweepSettings())}
    try:
        open_folder(args.out, facts, kernel_entries(suite, split, jobs))
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    print(f"{len(jobs)} shapes to measure on {name} into {args.out}, {args.seconds:.0f} s")
    skipped = quarantined(args.out)
    settings = SweepSettings()
    here = {**facts, "versions": software_versions()}
    with analysis_pool(args.workers) as pool:
        def measure(shape: SuiteShape) -> SuiteRecords:
            kernel = suite[shape.kernel]
            try:
                skip, meta = skipped.get(f"{shape.kernel}/{shape.id}", []), {**here, "split": split[shape.kernel]}
                return measure_shape(kernel, shape, profile, pool, settings, skip, meta)
            except ContextLost as exc:
                quarantine(args.out, shape, culprit_text(kernel, exc.culprit))
                raise
        try:
            rows = sweep(jobs, measure, args.out, args.seconds)
        except ContextLost as exc:
            print(f"{exc}; quarantined in {args.out}/quarantine.json: rerun to go on without it", file=sys.stderr)
            return 3
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
