"""The ground truth of the generic model: every config of every kernel of a kernel suite timed at each of its shapes
on this GPU, beside what the model reads of each config, written as a suite dataset (eval/datasets/suite.py).
Orchestration only: the counts come from kernels/introspect, the times from the timing harness's interleaved
CUDA-graph rounds (kernels/harness/timing.py `time_candidates`), the results' check from the suite's own reference.

A suite is a mapping name -> kernel with, as rooftune.kernels.suite's `SuiteKernel` has them: `fn`, `configs`,
`shapes`, `make_args(shape, device)`, `grid(args, meta)`, `launch(args, config)`, `reference(args)` (expected
outputs by name), `outputs`, `tolerance` (largest ‖out − ref‖ / ‖ref‖ by output dtype) and `kind`; its split maps each
name to 'train' or 'heldout'. A kernel is written once all its shapes are measured; a re-run skips the kernels
already written (resume).

    python -m rooftune.eval.sweeping.suite --out datasets/h100/suite --gpu h100_sxm [--kernels a,b]
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path

from rooftune.eval.datasets.suite import (
    SuiteDatasetError,
    SuiteRow,
    read_kernel_rows,
    read_suite_manifest,
    write_kernel_rows,
    write_suite_manifest,
)
from rooftune.hwprofiles import load_profile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.kernels.harness.context import error_text
from rooftune.kernels.harness.offline import arch_of
from rooftune.kernels.introspect.analyze import ConfigAnalysis, analysis_pool, analyze

# launchers (config index -> launch(i)) -> config index -> µs per launch, or the error
Timer = Callable[[dict], dict]


def time_call(launchers: dict) -> dict:
    """Each launcher's median µs per launch over interleaved CUDA-graph rounds, or its error text."""
    from rooftune.kernels.harness.timing import time_candidates

    timed = time_candidates(launchers)
    return {k: t.time_us if t.error is None else t.error for k, t in timed.items()}


def check_outputs(kernel, args: dict, config) -> str | None:
    """None where one launch of `config` on `args` matches the suite's reference within its tolerance, else why."""
    import torch

    want = kernel.reference(args)
    kernel.launch(args, config)
    for name in kernel.outputs:
        got, ref = args[name].double(), want[name].double()
        bound = kernel.tolerance.get(str(args[name].dtype).removeprefix("torch."), 0.0)
        error = float((got - ref).norm() / ref.norm().clamp_min(torch.finfo(torch.float64).tiny))
        if not error <= bound:
            return f"wrong result: {name} off by {error:.3g} (relative), over {bound:g}"
    return None


def _config_dict(config) -> dict:
    return {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}


def measure_shape(kernel, shape: dict, device: str, timer: Timer, pool, arch: int) -> list[SuiteRow]:
    """One shape: every config's counts (compiled in `pool`), its check and its time."""
    args = kernel.make_args(shape, device)
    configs = list(kernel.configs)
    analyses = analyze(kernel.fn, configs, args, lambda meta: kernel.grid(args, meta), arch=arch, pool=pool)
    errors: dict[int, str] = {}
    for i, config in enumerate(configs):
        try:
            problem = check_outputs(kernel, args, config)
        except Exception as exc:  # a config that cannot run is data
            problem = error_text(exc)
        if problem is not None:
            errors[i] = problem
    timed = timer({i: (lambda _, c=c: kernel.launch(args, c)) for i, c in enumerate(configs) if i not in errors})
    rows = []
    for i, (config, analysis) in enumerate(zip(configs, analyses)):
        result = errors.get(i, timed.get(i, "not timed"))
        counts = analysis.counts if isinstance(analysis, ConfigAnalysis) else None
        rows.append(SuiteRow(dict(shape), _config_dict(config), result if isinstance(result, float) else None,
                             None if isinstance(result, float) else str(result), counts))
    return rows


def sweep_suite(suite: Mapping, split: Mapping[str, str], out, profile_name: str, *, kernels=None,
                device: str = "cuda", timer: Timer = time_call, pool=None, log=print) -> list[str]:
    """Measure the kernels of `suite` (all, or `kernels`) not yet in the dataset `out` (module docstring); returns
    the kernels measured."""
    out = Path(out)
    try:
        manifest = read_suite_manifest(out)
    except SuiteDatasetError:
        if (out / "manifest.json").exists():
            raise
        manifest = {"profile": profile_name, "triton": installed_triton(), "kernels": {}}
    arch = arch_of(load_profile(profile_name).compute_capability)
    done = []
    for name in sorted(kernels or suite):
        if name in manifest["kernels"] and read_kernel_rows(out, name):
            continue
        kernel = suite[name]
        rows = [row for shape in kernel.shapes for row in measure_shape(kernel, shape, device, timer, pool, arch)]
        write_kernel_rows(out, name, rows)
        manifest["kernels"][name] = {"split": split[name], "kind": getattr(kernel, "kind", None),
                                     "shapes": len(kernel.shapes), "configs": len(kernel.configs)}
        write_suite_manifest(out, manifest)
        log(f"{name}: {len(rows)} rows, {sum(r.time_us is not None for r in rows)} timed")
        done.append(name)
    return done


def main(argv=None) -> None:
    """The command line of the module docstring (the suite is rooftune.kernels.suite's SUITE and split)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--gpu", required=True, help="the profile of this GPU (a shipped name)")
    parser.add_argument("--kernels", default=None, help="comma-separated names (default: the whole suite)")
    options = parser.parse_args(argv)
    suite = importlib.import_module("rooftune.kernels.suite")
    pool = analysis_pool()
    try:
        sweep_suite(suite.SUITE, suite.suite_split(), options.out, options.gpu,
                    kernels=options.kernels.split(",") if options.kernels else None, pool=pool)
    finally:
        pool.close()


if __name__ == "__main__":
    main()
