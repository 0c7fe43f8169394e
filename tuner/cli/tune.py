"""`rooftune tune gemm|attention`: tune one shape live on this GPU; the options and helpers every `tune` command
shares (`tune model` and `tune moe` are in tune_model.py and tune_moe.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from rooftune.candidates import KERNELS, kernel_spec
from rooftune.candidates.config import config_label
from rooftune.hwprofiles import hwprobe
from rooftune.outputs import json_text, write_all, write_atomic
from rooftune.tuner.cache import CACHE_ENV, cache_path, result_to_dict
from rooftune.tuner.cli.args import (
    GPU_HELP,
    LAYOUT_HELP,
    SMS_GROUPS_HELP,
    check_output,
    check_sms,
    cli_errors,
    fail,
    live_gpu,
    parse_shape,
    read_files,
    residual_option,
)
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.cli.terminal import add_cells, width_table
from rooftune.tuner.live_tune import tune_shape
from rooftune.tuner.pytorch.ops import library_faster

console = Console()
tune_app = typer.Typer(help="Tune a shape live on this GPU: at most --budget configs compiled, checked and timed.",
                       no_args_is_help=True)


def ranking(kernel: str, profile, choice: str):
    """--residual of a live tune: "shipped" as is (`tune` resolves it and says why), else `residual_option`'s."""
    return "shipped" if choice == "shipped" else residual_option(kernel, profile, choice, None)


def chosen_note(choice: str, residual) -> str:
    """The line naming what ranked, where --residual chose it."""
    return f"the residual {choice}" if residual is not None else "the model alone (--residual none)"


_TUNE_HELP = """Tune live: the corrected model's best first, then rounds chosen by the search (at most --budget
    configs, each compiled in parallel, checked against the reference and timed beside the library
    baseline); the fastest few are re-timed side by side to name the winner. Prints every trial, the
    winner and the time each phase took. Exit code 1: every measured config failed; 3: a config killed
    the CUDA context or the compile workers hung."""
RESIDUAL_OPTION = typer.Option("shipped", "--residual", metavar=NAME_OR_PATH, help=(
    "'shipped' (the residual fitted for --gpu's GPU, where it applies to this space and Triton), 'none' (the "
    "model alone), or a residual JSON of this kernel (e.g. one `rooftune fit --out FILE` wrote for a new GPU)"))
BUDGET_OPTION = typer.Option(20, "--budget", help="at most this many configs are compiled and timed")
GPU_OPTION = typer.Option(None, "--gpu", metavar=NAME_OR_PATH, show_default=False,
                          help=f"this GPU, for legality and the model: {GPU_HELP} (default: "
                          "$ROOFTUNE_PROFILE, else the shipped profile of the GPU the driver names)")
SMS_OPTION = typer.Option(None, "--sms", help="tune inside a green context of this many SMs" + SMS_GROUPS_HELP)
CACHE_OPTION = typer.Option(None, "--cache", metavar=PATH,
                            help="JSON cache file: a hit is returned without the GPU (default: the "
                            "per-user cache that rooftune's PyTorch ops read, $ROOFTUNE_CACHE or "
                            "~/.cache/rooftune/tune.json); 'none' to tune without one")
_JSON = typer.Option(None, "--json", metavar=PATH, help="also write the result as JSON to this file")


def cache_file(cache: str | None) -> str | None:
    """--cache: by default the per-user cache ($ROOFTUNE_CACHE, else under ~/.cache; its folder made by the first
    write, after a tune, so a command that fails first, e.g. without a GPU, creates nothing); 'none': no cache."""
    if cache is None:
        cache = str(cache_path())
        check_output(Path(cache).parent, f"the tune cache {cache} (${CACHE_ENV}): its folder", folder=True)
        if not Path(cache).exists():
            return cache
    cache = None if cache == "none" else cache
    check_output(cache, "--cache")
    return cache


def _tune(kernel: str, problem, budget: int, gpu: str | None, sms: int | None, cache: str | None, json_out: str | None,
          residual_choice: str = "shipped") -> None:
    """Check the options, tune, print the trials, the winner against the baseline and the phases."""
    profile = live_gpu(gpu)
    if budget < 1:
        fail(f"--budget must be at least 1, got {budget}")
    check_sms(sms, profile)  # before the GPU: --sms 0 would divide by zero in the model
    cache = cache_file(cache)
    check_output(json_out, "--json", inputs=read_files(cache, gpu=gpu, residual=residual_choice))
    residual = ranking(kernel, profile, residual_choice)
    with console.status(f"tuning {problem}: up to {budget} configs compiled, checked and timed"):
        result = tune_shape(problem, profile, budget, cache=cache, sms=sms, residual=residual)
    if residual_choice != "shipped" and not result.cached:
        result = replace(result, residual_note=chosen_note(residual_choice, residual))
    _print_trials(kernel, problem, result, f"{result.profile}{partition_label(sms, profile)}")
    _print_winner(kernel, result)
    document = {**result_to_dict(result), "cached": result.cached, "tflops": result.tflops}
    write_all([(json_out, lambda: write_atomic(json_out, json_text(document)))] if json_out else [],
              done=lambda path: console.print(f"wrote {path}"))
    if result.cache_error:
        fail(f"the result was not stored in the cache: {result.cache_error}")


def _print_trials(kernel: str, problem, result, where: str) -> None:
    """The table of a tune's trials in the order measured, the winner marked."""
    cached = " (from the cache)" if result.cached else ""
    title = f"{kernel} {problem} on {where}: {len(result.trials)} configs tried{cached}"
    table = width_table(console, title, ("#", "config", "predicted µs", "measured µs"), left=("config",),
                        wrap=("measured µs",))  # an error wraps there
    for i, t in enumerate(result.trials, start=1):
        win = t.config == result.winner
        add_cells(table, {"#": f"{i}{' *' if win else ''}", "config": config_label(t.config),
                          "predicted µs": f"{t.predicted_us:.2f}" if t.predicted_us is not None else "-",
                          "measured µs": f"{t.time_us:.2f}" if t.ok else f"[red]{escape(t.error[:60])}[/]"},
                  style="bold green" if win else None)
    console.print(table)


def _print_winner(kernel: str, result) -> None:
    """The winner against the library, which one the PyTorch ops run, what ranked and the phases' times."""
    label = kernel_spec(kernel).baseline_label
    baseline = (f"{label} {result.baseline_us:.2f} µs, {label}/winner {result.baseline_us / result.time_us:.3f}"
                if result.baseline_us else f"{label} not timed")
    phases = ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in (result.phases_s or {}).items())
    console.print(f"winner (*): {result.winner}  {result.time_us:.2f} µs = {result.tflops:.1f} TFLOP/s "
                  f"(confirmed side by side with the runners-up); {baseline}")
    if library_faster(result):
        console.print(f"{label} is faster for this shape: rooftune's PyTorch ops (rooftune.{KERNELS[kernel].ops}) run "
                      f"{label} for it; ROOFTUNE_KERNEL_ONLY=1 keeps rooftune's kernel")
    if result.residual_note:
        console.print(f"ranked by {result.residual_note}; compiled by Triton {result.triton}")
    if phases and not result.cached:
        console.print(f"time: {phases}")


def partition_label(sms: int | None, profile) -> str:
    """', inside 72 SMs (--sms 66)': the SMs a green context asked for `sms` runs on, as the model counted them."""
    if sms is None:
        return ""
    return f", inside {hwprobe.granted_sms(sms, profile.compute_capability)} SMs (--sms {sms})"


@tune_app.command("gemm", help=_TUNE_HELP, short_help="Tune one GEMM shape live, beside cuBLAS.")
@cli_errors()
def tune_gemm_cmd(
    shape: str = typer.Option(..., "--shape", help=KERNELS["gemm"].shape_help),
    layout: str = typer.Option("kn", "--layout", help=LAYOUT_HELP),
    budget: int = BUDGET_OPTION, gpu: str | None = GPU_OPTION, sms: int = SMS_OPTION, cache: str = CACHE_OPTION,
    json_out: str = _JSON, residual: str = RESIDUAL_OPTION,
) -> None:
    _tune("gemm", parse_shape("gemm", shape, layout), budget, gpu, sms, cache, json_out, residual)


@tune_app.command("attention", help=_TUNE_HELP,
                  short_help="Tune one causal-attention shape live, beside SDPA.")
@cli_errors()
def tune_attention_cmd(
    shape: str = typer.Option(..., "--shape", help=KERNELS["attention"].shape_help),
    budget: int = BUDGET_OPTION, gpu: str | None = GPU_OPTION, sms: int = SMS_OPTION, cache: str = CACHE_OPTION,
    json_out: str = _JSON, residual: str = RESIDUAL_OPTION,
) -> None:
    _tune("attention", parse_shape("attention", shape), budget, gpu, sms, cache, json_out, residual)


def register(app) -> None:
    app.add_typer(tune_app, name="tune")
