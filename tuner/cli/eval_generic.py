"""`rooftune eval generic`: the generic model (× its residual) scored on a suite dataset's held-out kernels
(tuner/generic_fitting.py `evaluate_generic`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from rooftune.eval.datasets.suite import read_manifest
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.roofline.generic_residual import read_generic_residual, shipped_generic_residual
from rooftune.tuner.cli.args import GPU_HELP, cli_errors, fail, load_gpu
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.generic_fitting import SCORE_BUDGETS, evaluate_generic

_DATA = typer.Option(..., "--data", metavar=PATH, help="a suite dataset folder (eval/datasets/suite.py)")
_GPU = typer.Option(None, "--gpu", metavar=NAME_OR_PATH,
                    help=f"the GPU the data was recorded on: {GPU_HELP} (default: the profile its manifest names)")
_SPLIT = typer.Option("heldout", "--split", help="which kernels to score: 'heldout' (the targets') or 'train'")
_RESIDUAL = typer.Option("shipped", "--residual", metavar=NAME_OR_PATH,
                         help="'shipped' (the generic residual of --gpu under the data's Triton release, if any), "
                         "'none' (the model alone), or a generic residual JSON's path")


@cli_errors()
def eval_generic_command(data: Path = _DATA, gpu: str | None = _GPU, split: str = _SPLIT,
                         residual: str = _RESIDUAL) -> None:
    """Score the generic model's ranking on a suite dataset's held-out kernels: per budget (1, 5) the geometric
    mean over kernel × shape of the best recorded time over the best of the configs ranked first, the worst
    tenth's mean and the 10th percentile, and each kernel's geometric mean."""
    manifest = read_manifest(data)
    profile = load_gpu(gpu or manifest.get("profile") or fail(f"{data}: its manifest names no profile; give --gpu"))
    chosen = {"none": None, "shipped": "shipped"}.get(residual, residual)
    if chosen == "shipped":
        chosen = shipped_generic_residual(profile, manifest.get("triton") or installed_triton())
    elif chosen is not None:
        chosen = read_generic_residual(chosen)
    summary = evaluate_generic(data, profile, split, chosen)
    console = Console()
    console.print(f"{summary['calls']} calls of the {split} kernels of {data}, ranked by the generic model"
                  + (" × its residual" if chosen is not None else " alone"))
    for b in SCORE_BUDGETS:
        s = summary[f"budget_{b}"]
        console.print(f"  budget {b}: geometric mean {s['geomean']:.3f}, worst-decile mean "
                      f"{s['worst_decile_mean']:.3f}, p10 {s['p10']:.3f}")
    for kernel, score in summary["kernels"].items():
        console.print(f"  {kernel}: {score:.3f} at budget 1")
