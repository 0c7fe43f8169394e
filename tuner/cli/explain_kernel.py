"""`rooftune explain kernel SCRIPT --call NAME`: any Triton kernel's configs on one call, as rooftune.autotune ranks
them, and why (tuner/kernel_explanation.py)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from rooftune.roofline.generic_residual import read_generic_residual
from rooftune.tuner.cli.args import DEFAULT_GPU, GPU_HELP, cli_errors, load_gpu
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.cli.terminal import add_cells, narrow_note, width_table
from rooftune.tuner.kernel_explanation import COLUMNS, explain_script

NARROW_COLUMNS = ("#", "config", "µs", "dominant", "CTA/SM", "waves")
WIDE_COLUMNS = 160

_SCRIPT = typer.Argument(..., metavar=PATH, help="a Python script defining the kernel and a function that returns "
                         "its call: (kernel, args dict, grid) or (kernel, args dict, grid, configs)")
_CALL = typer.Option(..., "--call", help="the script's function that returns the call (it is called with no arguments)")
_GPU = typer.Option(DEFAULT_GPU, "--gpu", metavar=NAME_OR_PATH, help=f"the GPU to rank for: {GPU_HELP}")
_TOP = typer.Option(10, "--top", min=1, help="how many configs to show")
_RESIDUAL = typer.Option("shipped", "--residual", metavar=NAME_OR_PATH,
                         help="'shipped' (the generic residual fitted for --gpu, if any), 'none' (the model alone), "
                         "or a generic residual JSON's path")


@cli_errors()
def explain_kernel_command(script: Path = _SCRIPT, call: str = _CALL, gpu: str = _GPU, top: int = _TOP,
                           residual: str = _RESIDUAL) -> None:
    """Any Triton kernel's configs ranked as rooftune.autotune ranks them, read from each config's compiled binary
    and IR on the call the script's function returns, with the predicted breakdown, the best config's loops and
    terms, and the rules its counts applied."""
    chosen = {"shipped": "shipped", "none": None}.get(residual)
    explanation = explain_script(script, call, load_gpu(gpu),
                                 chosen if residual in ("shipped", "none") else read_generic_residual(residual))
    console = Console()
    table = width_table(console, f"{explanation.name} on {explanation.profile}: {len(explanation.configs)} configs "
                        "as rooftune ranks them", COLUMNS, NARROW_COLUMNS, WIDE_COLUMNS,
                        left=("config", "bound", "dominant", "CTA/SM"), wrap=("config", "CTA/SM"))
    for row in explanation.rows(top):
        add_cells(table, row)
    console.print(table)
    narrow_note(console, WIDE_COLUMNS, "the whole breakdown: bound, occupancy, registers, shared memory, DRAM")
    for line in explanation.details():
        console.print(line, markup=False)
