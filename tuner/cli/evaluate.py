"""Replay commands of the CLI: `rooftune eval gemm|attention|moe`, every method through `tune` on recorded data."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from rooftune.candidates import KERNELS, kernel_of, load_implementation, parse_config
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.reports import figure
from rooftune.outputs import json_text, write_all, write_atomic
from rooftune.tuner.cli.args import (
    DAMAGED_HELP,
    GPU_HELP,
    PLOT_EXTRA,
    RESIDUAL_HELP,
    check_outputs,
    cli_errors,
    data_profile,
    fail,
    family_command,
    read_files,
    register_missing,
    residual_option,
    warn,
)
from rooftune.tuner.cli.eval_generic import eval_generic_command
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.cli.plots import check_plot, eval_cdf
from rooftune.tuner.evaluation import budget_cap, check_scorable, evaluate, offered_as_live, op_versus_library
from rooftune.tuner.llm.moe_eval import TABLE_METHODS, layer_summary
from rooftune.tuner.llm.moe_tables import shipped_tables
from rooftune.tuner.routing import route_choice
from rooftune.tuner.search.methods import unavailable_methods
from rooftune.tuner.search.transfer import TransferError, best_table, check_covers, transfer
from rooftune.tuner.search.vllm import vllm_table

eval_app = typer.Typer(help="Replay strategies against recorded timings.", no_args_is_help=True)


@cli_errors()
def _eval(kernel: str, data: Path, budget: int, gpu: str | None, json_out: Path | None, residual_choice: str = "shipped",
          only: str | None = None, plot: Path | None = None, transfer_from: Path | None = None) -> None:
    """Replay the `kernel`'s eval methods on the dataset at `data` and print (and write) the summary
    (and, with `plot`, each method's CDF of per-shape scores); with `transfer_from`, also `transfer`: that
    dataset's best config per shape (another GPU's table) measured here."""
    profile = data_profile(gpu, data)
    inputs = read_files(data, transfer_from, gpu=gpu, residual=residual_choice)
    check_outputs([(json_out, "--json"), (plot, "--plot")], inputs)
    check_plot(plot, inputs=inputs)
    records = _replayable(kernel, data, profile)
    residual = residual_option(kernel, profile, residual_choice, records[0].meta.get("space_version"),
                               records[0].meta.get("triton"))
    methods = _methods(kernel, _all_methods(kernel, records, residual, transfer_from), profile, only, records)
    _warn_in_sample(data, residual, budget)
    budget = _capped(records, budget)
    summary = evaluate(records, budget, profile, methods)
    scores = summary.pop("scores")  # per shape and run: for the picture, not the JSON
    summary["residual"] = None if residual is None else {"profile": residual.profile, "fit": residual.fit.get("data")}
    if summary["left_out"]:
        warn(f"{summary['left_out']} of {len(records)} shapes left out: no config of their space ran successfully")
    console = Console()
    _print_summary(console, f"{data} on {profile.name}: {summary['n_shapes']} shapes, budget {budget}", summary)
    summary.update(_family_figures(console, kernel, records, profile, residual, scores, methods, budget))
    runs = {m: f" ({s['runs']} runs pooled)" if s["runs"] > 1 else "" for m, s in summary["methods"].items()}
    writes = [(json_out, lambda: write_atomic(json_out, json_text(summary))),
              (plot, lambda: eval_cdf(scores, plot, title=f"{data} on {profile.name}: {summary['n_shapes']} shapes, "
                                                          f"budget {budget}",
                                      labels={m: f"{figure(s['mean'])} / {figure(s['worst_decile_mean'])}{runs[m]}"
                                              for m, s in summary["methods"].items()}))]
    write_all([(path, write) for path, write in writes if path is not None],
              done=lambda path: console.print(f"wrote {path}"))


def _family_figures(console: Console, kernel: str, records, profile, residual, scores: dict, methods: dict,
                    budget: int) -> dict:
    """The figures beside the config scores that a family's registration asks for, printed: vLLM's table coverage
    where its methods ran, the op against the library where the family has PyTorch ops, the tables scored by the
    layer where an engine runs one entry for several shapes."""
    spec, out = KERNELS[kernel], {}
    if "vllm-shipped" in methods:
        out["vllm_tables"] = _vllm_coverage(console, records, profile)
    if spec.ops is not None:
        out["versus_library"] = _versus_library(console, kernel, records, profile, residual, scores, budget)
    if spec.layers is not None:
        out["layers"] = _layer_scores(spec, records, profile, budget, residual, methods, console)
    return out


def _replayable(kernel: str, data: Path, profile) -> list:
    """The dataset's records of `kernel`, cut to what `rooftune tune` would offer on `profile` (saying what that
    leaves out); an error where nothing is left to score."""
    spec = KERNELS[kernel]
    records = [r for r in load_records(data, kernel=kernel) if kernel_of(r.shape) is spec]
    if not records:
        fail(f"{data}: no {spec.label} shapes recorded")
    offer = offered_as_live(records, spec.space, profile)
    check_scorable(offer, str(data), profile)
    if offer.not_legal:
        warn(f"{offer.not_legal} recorded configs of {offer.shapes_cut} shapes are not legal on {profile.name}: "
             "replay leaves them out, as `rooftune tune` there would")
    return offer.records


def _all_methods(kernel: str, records: list, residual, transfer_from: Path | None) -> dict:
    """The family's eval methods over `records` (a residual's static list for `static`), and `transfer` from
    `transfer_from`'s best configs where given (an error where they do not cover these shapes)."""
    static = [parse_config(c) for c in residual.fit.get("static_list", [])] if residual else None
    methods = load_implementation(KERNELS[kernel].eval_methods)(records, residual=residual, static=static)
    if transfer_from is not None:
        table = best_table(load_records(transfer_from, kernel=kernel))
        try:
            check_covers(table, records, str(transfer_from))
        except TransferError as exc:
            fail(str(exc))
        methods["transfer"] = transfer(table)
    return methods


def _warn_in_sample(data: Path, residual, budget: int) -> None:
    """Warn where `data` is the residual's training data, with its cross-validated figures at `budget`."""
    if residual is not None and Path(str(residual.fit.get("data", ""))).resolve() == Path(data).resolve():
        cv = residual.fit.get("cv", {}).get(str(budget))
        warn(f"{data} is the residual's training data: the rooftune row is in-sample"
             + (f"; cross-validated at {budget}: mean {cv['mean']:.3f}, p10 {cv['p10']:.3f}, worst-decile mean "
                f"{cv['worst_decile_mean']:.3f}" if cv else ""))


def _capped(records: list, budget: int) -> int:
    """`budget`, or (with a warning) the most configs any shape here has where that is fewer."""
    cap = budget_cap(records)
    if cap is not None and budget > cap:
        warn(f"--budget {budget} is more than any shape here has configs (at most {cap}): replaying at {cap}, "
             "which measures the same")
        return cap
    return budget


def _print_summary(console: Console, what: str, summary: dict) -> None:
    """Each method's mean, p10 and worst-decile mean, then the model's Spearman."""
    table = Table(title=f"{what} (score = best recorded / pick)")
    for col in ("method", "mean", "p10", "worst-decile mean"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for method, s in summary["methods"].items():
        table.add_row(method, figure(s["mean"]), figure(s["p10"]), figure(s["worst_decile_mean"]))
    console.print(table)
    console.print(f"model Spearman (predicted vs recorded time, mean over shapes): {figure(summary['spearman'])}")


def _vllm_coverage(console: Console, records: list, profile) -> dict:
    """Print and return for how many shapes vLLM ships a table for the GPU."""
    tables = shipped_tables()
    covered = sum(vllm_table(r.shape, profile, tables) is not None for r in records)
    console.print(f"vllm-shipped: vLLM's {profile.name} table for {covered} of {len(records)} shapes (at the "
                  "nearest M), its default rule for the rest, as vLLM runs them; each vLLM method measures one "
                  "config whatever the budget")
    return {"shapes": covered, "of": len(records)}


def _methods(kernel: str, methods: dict, profile, only: str | None, records: list) -> dict:
    """The methods to replay: those that can run here (a baseline that cannot, e.g. nvMatmulHeuristics on a GPU it
    does not know, or vLLM's on an FP8 layer it ships no table for, left out with a note where its package is
    installed), cut to --methods where given (a name that cannot run here, or is unknown, is an error saying why)."""
    unavailable = unavailable_methods(KERNELS[kernel], profile, records)
    methods = {m: s for m, s in methods.items() if m not in unavailable}
    if not only:
        for m, missing in unavailable.items():
            if missing.installed:
                warn(f"{m} left out: {missing.why}")
        return methods
    wanted = [m.strip() for m in only.split(",") if m.strip()]
    for m in wanted:
        if m in unavailable:
            fail(f"--methods {m}: {unavailable[m].why}")
    unknown = [m for m in wanted if m not in methods]
    if unknown:
        fail(f"--methods: {', '.join(unknown)} not available here; choose from {', '.join(methods)}")
    return {m: methods[m] for m in wanted}


def _versus_library(console: Console, kernel: str, records, profile, residual, scores, budget: int) -> dict:
    """Print and return the op-vs-library figure of the untuned and (with the rooftune method replayed) tuned op."""
    spec = KERNELS[kernel]
    route, why = route_choice(spec, profile, residual, records[0].meta.get("triton"), records[0].meta.get("space_version"))
    scored = [r for r in records if r.best_candidate_us is not None]
    tuned = scores["rooftune"][0] if "rooftune" in scores else None
    figures = op_versus_library(scored, profile, residual, route, tuned)
    console.print(f"{spec.baseline_label} ÷ rooftune's op (above 1: the op is faster; untuned: {why}):")
    for path, f in figures.items():
        label = {"untuned": "untuned", "pick": "zero-trial pick always"}.get(path, f"tuned within {budget}")
        console.print(f"  {label:>22}: geometric mean {figure(f['geomean'])}, p10 {figure(f['p10'])}, min "
                      f"{figure(f['min'])}, {f['below']} of {f['n']} below 0.97")
    return figures


def _layer_scores(spec, records, profile, budget: int, residual, methods: dict, console: Console) -> dict:
    """The tables' layer scores (tuner/llm/moe_eval.py) for the table methods among `methods`, printed."""
    wanted = [m for m in TABLE_METHODS if m in methods or (m == "rooftune-split" and "rooftune" in methods)]
    scores = load_implementation(spec.layers)(records, profile, budget, residual, wanted)
    summary = layer_summary(scores, records)
    table = Table(title="the layer as an engine runs it (both GEMMs per M): best single config's summed time ÷ the "
                        "entry's, mean / worst entry (÷ the best pair sharing BLOCK_SIZE_M in brackets)")
    table.add_column("layer", justify="left")
    table.add_column("split gain", justify="right")
    for m in wanted:
        table.add_column(m, justify="right")
    for label, layer in summary["layers"].items():
        table.add_row(label, figure(layer["split_gain"]), *(
            f"{figure(s['mean'])} / {figure(s['worst'])} ({figure(s['split_mean'])})"
            for s in (summary["methods"][m][label] for m in wanted)))
    console.print(table)
    if "split_vs_single" in summary:
        g = summary["split_vs_single"]
        console.print(f"rooftune-split: the best single config's layer time ÷ the split tables', geometric mean over "
                      f"the {g['layers']} layers where separate configs gain: {figure(g['geomean'])}")
    return summary


_DATA_HELP = "recorded timings: a rooftune dataset folder (`rooftune sweep {}`) or file, or {}; " + DAMAGED_HELP
_BUDGET = typer.Option(..., "--budget", min=1, help="configs each method may measure per shape (more than the "
                       "largest space here has is replayed at that size, with a warning)")
_GPU = typer.Option(None, "--gpu", metavar=NAME_OR_PATH,
                    help=f"the GPU the data was recorded on: {GPU_HELP} (default: the shipped "
                    "profile that fits what the data say about their GPU, else h200)", show_default=False)
_JSON = typer.Option(None, "--json", metavar=PATH, help="also write the summary as JSON to this file")
_RESIDUAL = typer.Option("shipped", "--residual", metavar=NAME_OR_PATH, help=RESIDUAL_HELP)
_METHODS = typer.Option(None, "--methods", help="comma-separated subset of the methods to replay (default: all "
                        "that apply)")
_TRANSFER = typer.Option(None, "--transfer-from", metavar=PATH,
                         help="also score `transfer`: each shape's best config recorded in this dataset of the same "
                         "shapes on another GPU (that GPU's exhaustive table, copied here), one config a shape")
_PLOT = typer.Option(None, "--plot", metavar=PATH,
                     help=f"also draw each method's CDF of per-shape scores to this image "
                     f"({PLOT_EXTRA})")


@eval_app.command("gemm", short_help="Score each method on recorded GEMM timings.")
def eval_gemm(
    data: Path = typer.Option(..., "--data", metavar=PATH,
                              help=_DATA_HELP.format("gemm", "the H200 probe or an AutoHeuristic log")),
    budget: int = _BUDGET, gpu: str | None = _GPU, json_out: Path = _JSON, residual: str = _RESIDUAL,
    methods: str = _METHODS, plot: Path = _PLOT, transfer_from: Path = _TRANSFER,
) -> None:
    """Replay each method through `tune` (the code `rooftune tune` runs) with the dataset's recorded
    measurer: rooftune (model + residual + search: the product), model (model order), static (a list
    learned on train), random (10 independent runs, each summarized, summaries averaged), tutorial."""
    _eval("gemm", data, budget, gpu, json_out, residual, methods, plot, transfer_from)


@eval_app.command("attention", short_help="The same on recorded causal-attention timings.")
def eval_attention(
    data: Path = typer.Option(..., "--data", metavar=PATH,
                              help=_DATA_HELP.format("attention", "the H200 attention probe "
                                                                    "(folder or its CSV)")),
    budget: int = _BUDGET, gpu: str | None = _GPU, json_out: Path = _JSON, residual: str = _RESIDUAL,
    methods: str = _METHODS, plot: Path = _PLOT, transfer_from: Path = _TRANSFER,
) -> None:
    """Score strategies against recorded attention timings: rooftune (model + residual, where one
    applies, + search), model order, random, static (the list learned on train with the residual;
    without one, the tutorial-style list)."""
    _eval("attention", data, budget, gpu, json_out, residual, methods, plot, transfer_from)


@eval_app.command("moe", short_help="The same on recorded fused-MoE timings, beside vLLM's tables.")
def eval_moe(
    data: Path = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format("moe", "its file")),
    budget: int = _BUDGET, gpu: str | None = _GPU, json_out: Path = _JSON, residual: str = _RESIDUAL,
    methods: str = _METHODS, plot: Path = _PLOT, transfer_from: Path = _TRANSFER,
) -> None:
    """Score strategies against recorded fused-MoE timings (one GEMM of a layer at one token count a shape):
    rooftune (model + search; a residual once one is fitted), model order, static (the list learned on train,
    with a fitted residual), random, and vLLM's own choices: vllm-shipped (its table for the GPU, looked up at the
    nearest M as vLLM does, else its default rule) and vllm-default (its rule for a missing table)."""
    _eval("moe", data, budget, gpu, json_out, residual, methods, plot, transfer_from)


def _eval_command(spec):
    """`rooftune eval NAME` for a registered family without a command of its own (its methods from the registry)."""
    data = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format(spec.name, "its file"))
    command = family_command(
        spec, [("data", Path, data), ("budget", int, _BUDGET), ("gpu", str, _GPU), ("json_out", Path, _JSON),
               ("residual", str, _RESIDUAL), ("methods", str, _METHODS), ("plot", Path, _PLOT),
               ("transfer_from", Path, _TRANSFER)], [],
        lambda **o: _eval(spec.name, o["data"], o["budget"], o["gpu"], o["json_out"], o["residual"], o["methods"],
                          o["plot"], o["transfer_from"]), shape_options=False)
    command.__doc__ = f"Score the {spec.label} family's eval methods on its recorded timings, through `tune`."
    return command


register_missing(eval_app, _eval_command, lambda spec: f"The same on recorded {spec.label} timings.")
eval_app.command("generic", short_help="The generic model on a suite dataset's held-out kernels."
                 )(eval_generic_command)


def register(app) -> None:
    app.add_typer(eval_app, name="eval")
