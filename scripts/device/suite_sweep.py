"""Ground truth of the kernel suite (issue 58, docs/suite.md) on one GPU: every config of every suite kernel at each
of its shapes, compiled in parallel in the compile pool's workers, checked against the reference (a wrong output is
an error row, never a time), then timed as the sweep times (kernels/harness/timing.py: CUDA graphs of back-to-back
launches over input sets rotated past L2, interleaved shuffled rounds, medians; a screening pass over every config,
two final passes over the fastest ten) beside the eager torch op. Each (kernel, shape) is written whole as soon as it
is measured (eval/datasets/suite.py), so a later call skips it and goes on; `--seconds` stops before a shape that
would not finish in time. It refuses a GPU other than the profile's, and a folder holding another GPU's or another
Triton's data. The last lines are a table of the shapes measured.

    python3 -m pip install -q --no-deps --no-build-isolation -e .
    python3 scripts/device/suite_sweep.py --gpu h100_sxm --out datasets/h100/suite --seconds 500 \\
        [--kernels rmsnorm_fwd,softmax] [--split train|heldout] [--autotune 3]
    tar czf "$OUT/suite.tgz" datasets/h100/suite

`--autotune N` also times, on N kernels of at least 25 configs (first shape each), the first call of
`@triton.autotune` over the whole list against one over 5 configs (compile and benchmark, cold cache), into
`<out>/autotune.json`. `--plan` prints what a call would measure and exits (no GPU needed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from rooftune.candidates.records import ShapeRecords, Trial
from rooftune.eval.datasets.suite import (
    SuiteDataError,
    SuiteShape,
    finished,
    open_folder,
    quarantine,
    quarantined,
    write_shape,
)
from rooftune.hwprofiles.profile import load_profile
from rooftune.kernels.harness.context import ContextLost
from rooftune.kernels.harness.measure import SweepSettings, repeatability
from rooftune.outputs import json_text, write_atomic

BASELINE = "torch"
FIRST_SHAPE_S = 120.0  # a kernel's first shape, before any is measured: its whole list compiled, then timed
AUTOTUNE_MIN_CONFIGS = 25  # the wall-time target holds for lists this long
AUTOTUNE_BUDGET = 5
# A list's compiles time out after this (KernelMeasurer's rule, more room: attention backward compiles for seconds)
COMPILE_BASE_S, COMPILE_PER_CONFIG_S = 120.0, 5.0


def gpu_matches(profile_name: str, gpu_name: str, profile_gpu: str | None = None) -> bool:
    """tuner/cli/args.py `check_this_gpu`'s rule: the profile's name starts with the driver's name for the GPU (or
    its meta names the GPU: a partition's profile)."""
    return profile_name.startswith(gpu_name.strip()) or profile_gpu == gpu_name.strip()


def plan(kernels: Mapping[str, Iterable[Mapping[str, int]]], split: Mapping[str, str], parts: Iterable[str],
         only: Iterable[str] | None, done: set[tuple[str, str]]) -> list[SuiteShape]:
    """The shapes still to measure: each kernel of `parts` (and of `only`, if given) in the registry's order, its
    shapes in order (one kernel's shapes together: they share its binaries), those already in the folder left out."""
    wanted = set(parts)
    chosen = [n for n in kernels if split[n] in wanted and (only is None or n in only)]
    shapes = [SuiteShape.of(n, s) for n in chosen for s in kernels[n]]
    return [s for s in shapes if (s.kernel, s.id) not in done]


def sweep(jobs: list[SuiteShape], measure: Callable[[SuiteShape], ShapeRecords], folder: Path, seconds: float,
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
        records = measure(shape)
        write_shape(folder, records)
        took = clock() - began
        if shape.kernel not in longest:
            first_shapes.append(took)
        longest[shape.kernel] = max(took, longest.get(shape.kernel, 0.0))
        rows.append({**summary(records), "seconds": round(took, 1)})
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


def trials_of(kernel, errors: Mapping[int, str], compiled: Mapping[int, object], first: Mapping, pass_a: Mapping,
              pass_b: Mapping, pooled: Mapping, scale: float) -> tuple[Trial, ...]:
    """One Trial per config of the list, in order: its time (pooled, else its screening median scaled) or its error."""
    from rooftune.kernels.suite.record import config_of

    rows = []
    for i, config in enumerate(kernel.configs):
        t, a, b = first.get(i), pass_a.get(i), pass_b.get(i)
        err = errors.get(i) or (t.error if t is not None else "not timed")
        compile_s = compiled.get(i) if isinstance(compiled.get(i), float) else None
        if err:
            rows.append(Trial(config_of(config), None, error=err[:300], compile_s=compile_s))
            continue
        rows.append(Trial(config_of(config), pooled.get(i, t.median_us * scale), compile_s=compile_s,
                          rounds=t.rounds, spread=t.spread, screen_us=t.median_us,
                          retime_us=a.median_us if a else None, retime2_us=b.median_us if b else None,
                          retime_rounds=a.rounds if a else None))
    return tuple(rows)


def check_all(kernel, args: dict, compiled: Mapping[int, object], skipped: Iterable[str],
              device: str = "cuda") -> dict[int, str]:
    """Errors of the configs that did not compile, fail the reference check on `args` (fresh inputs, not the timed
    ones), or are quarantined. Raises ContextLost naming the index of the config whose check killed the context."""
    from rooftune.kernels.harness.context import context_error
    from rooftune.kernels.suite.check import check_config
    from rooftune.kernels.suite.record import config_of

    expected = kernel.reference(args)
    errors = {}
    for i, config in enumerate(kernel.configs):
        if str(config_of(config)) in skipped or "*" in skipped:
            errors[i] = "quarantined: an earlier run's CUDA context died here"
        elif isinstance(compiled.get(i), str):
            errors[i] = f"compile: {compiled[i]}"
        elif problem := check_config(kernel, args, expected, config):
            if context_error(device):
                raise ContextLost(i, problem)
            errors[i] = f"check: {problem}"
    return errors


def measure_shape(kernel, shape: SuiteShape, profile, pool, settings: SweepSettings, skipped: Iterable[str],
                  facts: Mapping, device: str = "cuda") -> ShapeRecords:
    """One shape of one kernel measured whole (the module docstring), as `ShapeRecords`; `pool` compiles
    ((kernel name, signature), config index) jobs (kernels/suite/signatures.py)."""
    import torch

    from rooftune.kernels.harness.timing import input_sets_needed, time_candidates
    from rooftune.kernels.suite.signatures import signature

    s, t0 = settings, time.perf_counter()
    checked = kernel.make_args(shape.dims, device, seed=1)
    job = (kernel.name, signature(checked))
    timeout_s = COMPILE_BASE_S + COMPILE_PER_CONFIG_S * len(kernel.configs) / max(1, pool.workers)
    compiled = pool.compile([(job, i) for i in range(len(kernel.configs))], timeout_s=timeout_s)
    t_compile = time.perf_counter() - t0
    errors = check_all(kernel, checked, compiled, skipped, device)
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
    trials = trials_of(kernel, errors, compiled, first, pass_a, pass_b, pooled, scale)
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
    return ShapeRecords(shape=shape, trials=trials, baselines_us={k: pooled[k] for k in bases if k in pooled},
                        meta=meta)


def culprit_text(kernel, culprit) -> str:
    """What quarantine records for a ContextLost's culprit: the config's text form (a config's index), else '*'
    (a fault in an interleaved round, or the baseline: the whole shape is skipped next time)."""
    from rooftune.kernels.suite.record import config_of

    return str(config_of(kernel.configs[culprit])) if isinstance(culprit, int) else "*"


@contextmanager
def cold_cache():
    """Triton's on-disk cache in a fresh folder for the block: a first call compiles everything it launches."""
    before = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="suite-autotune-") as folder:
        os.environ["TRITON_CACHE_DIR"] = folder
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("TRITON_CACHE_DIR", None)
            else:
                os.environ["TRITON_CACHE_DIR"] = before


def autotune_first_call_s(kernel, shape: Mapping[str, int], configs) -> float:
    """Wall seconds of the first call of `@triton.autotune(configs)` on a fresh copy of the kernel (its in-memory
    cache empty) with a cold disk cache: every config compiled and benchmarked, then the winner launched."""
    import torch
    import triton

    args = kernel.make_args(shape, "cuda")
    with cold_cache():
        tuned = triton.autotune(list(configs), key=list(kernel.key), reset_to_zero=list(kernel.reset) or None)(
            triton.jit(kernel.fn.fn))
        torch.cuda.synchronize()
        start = time.perf_counter()
        tuned[lambda meta: kernel.grid(args, meta)](**args)
        torch.cuda.synchronize()
        return time.perf_counter() - start


def autotune_check(kernels: list, folder: Path, count: int) -> list[dict]:
    """The first call of @triton.autotune over each long list against one over AUTOTUNE_BUDGET of its configs (the
    list's first: a stand-in for the drop-in's pick, whose compile and benchmark cost is what is compared)."""
    rows = []
    for kernel in [k for k in kernels if len(k.configs) >= AUTOTUNE_MIN_CONFIGS][:count]:
        whole = autotune_first_call_s(kernel, kernel.shapes[0], kernel.configs)
        budget = autotune_first_call_s(kernel, kernel.shapes[0], kernel.configs[:AUTOTUNE_BUDGET])
        rows.append({"kernel": kernel.name, "shape": SuiteShape.of(kernel.name, kernel.shapes[0]).id,
                     "configs": len(kernel.configs), "whole_list_s": round(whole, 2),
                     f"budget{AUTOTUNE_BUDGET}_s": round(budget, 2), "ratio": round(whole / budget, 2)})
        print(f"autotune {kernel.name}: {len(kernel.configs)} configs {whole:.1f} s, {AUTOTUNE_BUDGET} configs "
              f"{budget:.1f} s ({whole / budget:.1f}x)")
    path = folder / "autotune.json"
    old = json.loads(path.read_text()) if path.exists() else []
    write_atomic(path, json_text([r for r in old if r["kernel"] not in {n["kernel"] for n in rows}] + rows))
    return rows


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="h100_sxm", help="the hardware profile of this GPU (name or JSON path)")
    p.add_argument("--out", type=Path, default=Path("datasets/h100/suite"), help="the dataset folder")
    p.add_argument("--seconds", type=float, default=500.0, help="stop before a shape that would not finish in time")
    p.add_argument("--kernels", help="comma-separated kernel names (default: all of the split)")
    p.add_argument("--split", choices=("train", "heldout", "all"), default="all")
    p.add_argument("--workers", type=int, default=None, help="compile workers (default: every usable core)")
    p.add_argument("--autotune", type=int, default=0, metavar="N", help="time @triton.autotune on N long lists")
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


def run(args: argparse.Namespace, suite: Mapping, split: Mapping[str, str], jobs: list[SuiteShape]) -> int:
    """The GPU part of `main`: the checks of GPU and folder, the compile pool, the sweep and the table."""
    import torch
    import triton

    from rooftune.hwprofiles.hwprobe import software_versions
    from rooftune.kernels.harness.compile_pool import CompilePool
    from rooftune.kernels.suite import signatures

    profile = load_profile(args.gpu)
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU"
    if not gpu_matches(profile.name, name, profile.meta.get("gpu")):
        print(f"--gpu {args.gpu} is {profile.name}, this GPU is {name}: nothing measured", file=sys.stderr)
        return 3
    facts = {"gpu": name, "profile": profile.name, "triton": triton.__version__, "torch": torch.__version__,
             "dtype": "bf16", "timing": asdict(SweepSettings()), "versions": software_versions()}
    try:
        open_folder(args.out, {k: facts[k] for k in ("gpu", "profile", "triton", "torch", "dtype", "timing")})
    except SuiteDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    print(f"{len(jobs)} shapes to measure on {name} into {args.out}, {args.seconds:.0f} s")
    skipped = quarantined(args.out)
    settings = SweepSettings()
    with CompilePool(signatures.warmup, workers=args.workers) as pool:
        def measure(shape: SuiteShape) -> ShapeRecords:
            kernel = suite[shape.kernel]
            try:
                skip, here = skipped.get(f"{shape.kernel}/{shape.id}", []), {**facts, "split": split[shape.kernel]}
                return measure_shape(kernel, shape, profile, pool, settings, skip, here)
            except ContextLost as exc:
                quarantine(args.out, shape, culprit_text(kernel, exc.culprit))
                raise
        try:
            rows = sweep(jobs, measure, args.out, args.seconds)
        except ContextLost as exc:
            print(f"{exc}; quarantined in {args.out}/quarantine.json: rerun to go on without it", file=sys.stderr)
            return 3
    if args.autotune:
        autotune_check([suite[n] for n in dict.fromkeys(s.kernel for s in jobs)] or list(suite.values()), args.out,
                       args.autotune)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
