"""`rooftune fit generic`: the generic model's residual, fitted across the training kernels of a suite dataset
(tuner/generic_fitting.py)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from rooftune.eval.datasets.suite import read_manifest
from rooftune.roofline.generic_residual import shipped_generic_path, write_generic_residual
from rooftune.tuner.cli.args import GPU_HELP, check_output, cli_errors, fail, load_gpu
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.fitting import SHIPPED
from rooftune.tuner.generic_fitting import SCORE_BUDGETS, fit_generic, gains

_DATA = typer.Option(..., "--data", metavar=PATH, help="a suite dataset folder (eval/datasets/suite.py): every config "
                     "of each kernel timed at its shapes, with its counts")
_GPU = typer.Option(None, "--gpu", metavar=NAME_OR_PATH,
                    help=f"the GPU the data was recorded on: {GPU_HELP} (default: the profile its manifest names)")
_OUT = typer.Option(..., "--out", metavar=PATH, help="where to write the residual JSON, or 'shipped' (the generic "
                    "residual of --gpu under the data's Triton release, which rooftune.autotune and explain use)")
_KERNELS = typer.Option(None, "--kernels", help="comma-separated training kernels to fit on (default: all of them; "
                        "a held-out kernel is refused)")


@cli_errors()
def fit_generic_command(data: Path = _DATA, out: Path = _OUT, gpu: str | None = _GPU,
                        kernels: str | None = _KERNELS) -> None:
    """Fit the generic model's residual (a ridge correction over its breakdown's terms) on the training kernels of
    a suite dataset, with a leave-one-kernel-out check of what it gains over the model alone. Refuses held-out
    kernels."""
    manifest = read_manifest(data)
    profile = load_gpu(gpu or manifest.get("profile") or fail(f"{data}: its manifest names no profile; give --gpu"))
    if str(out) == SHIPPED and not manifest.get("triton"):
        fail(f"{data}: its manifest records no Triton version, so the residual's release is not known; give --out FILE")
    target = shipped_generic_path(profile, manifest["triton"]) if str(out) == SHIPPED else out
    if str(out) == SHIPPED:
        target.parent.mkdir(parents=True, exist_ok=True)  # the first residual of a release makes its folder
    check_output(str(target), "--out", inputs=(data,))
    residual = fit_generic(data, profile, kernels.split(",") if kernels else None)
    console = Console()
    console.print(f"{residual.fit['calls']} calls of {len(residual.fit['kernels'])} training kernels from {data}")
    for b in SCORE_BUDGETS:
        model, cv = residual.fit["model_alone"][f"budget_{b}"], residual.fit["cross_validated"][f"budget_{b}"]
        console.print(f"  budget {b}: leave-one-kernel-out geometric mean {cv['geomean']:.3f}, worst-decile mean "
                      f"{cv['worst_decile_mean']:.3f} (the model alone: {model['geomean']:.3f}, worst-decile "
                      f"mean {model['worst_decile_mean']:.3f})")
    if str(out) == SHIPPED and not gains(residual):
        fail("not shipped: on kernels it was not fitted on, the residual ranks below the model alone at budget 1 "
             "(above); rooftune.autotune keeps the model alone. Give --out FILE to keep it anyway", code=1)
    write_generic_residual(residual, target)
    console.print(f"wrote {target}")
