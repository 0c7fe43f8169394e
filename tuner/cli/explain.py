"""`rooftune explain FAMILY` for every registered kernel family (and `explain kernel` for any Triton kernel:
tuner/cli/explain_kernel.py): the configs as rooftune ranks them and why."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from rooftune import roofline
from rooftune.candidates import (
    KERNELS,
    SPACES,
    check_in_grid,
    config_legality,
    kernel_of,
    legal_configs,
    no_legal_config,
)
from rooftune.candidates.config import config_label
from rooftune.environment import env_flag
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.roofline.occupancy import LIMITERS
from rooftune.tuner.cli.args import (
    DEFAULT_GPU,
    DTYPE_HELP,
    GPU_HELP,
    PLOT_EXTRA,
    RESIDUAL_HELP,
    cli_errors,
    fail,
    family_command,
    load_gpu,
    parse_shape,
    read_files,
    residual_option,
    warn,
)
from rooftune.tuner.cli.explain_kernel import explain_kernel_command
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.cli.plots import check_plot, explain_scatter
from rooftune.tuner.cli.terminal import add_cells, narrow_note, width_table
from rooftune.tuner.explanation import complete_config, config_terms, plot_points, rank_configs
from rooftune.tuner.pytorch.ops import KERNEL_ONLY_ENV
from rooftune.tuner.routing import route_choice, untuned_choice
from rooftune.tuner.search.strategies import zero_trial_pick

# The explain table's columns: all of them from WIDE_COLUMNS terminal columns on, else the ranking.
FULL_COLUMNS = ("#", "config", "µs", "model µs", "resid ×", "bound", "dominant", "CTA/SM", "occ", "waves",
                "wave eff", "pad eff", "wgmma")
NARROW_COLUMNS = ("#", "config", "µs", "resid ×", "dominant", "CTA/SM")
WIDE_COLUMNS = 150

explain_app = typer.Typer(help="Show the model's top configs for a shape and why.", no_args_is_help=True)

_EXPLAIN_PLOT_HELP = ("also draw predicted vs recorded time over the shape's space, with the configs a 20-config "
                      "search measures there, the zero-trial pick and the best marked, to this image ("
                      + PLOT_EXTRA + "); needs --data")
_EXPLAIN_DATA_HELP = "with --plot: a recorded dataset (folder or file, as `rooftune eval` reads) holding this shape"




@cli_errors()
def _explain(kernel: str, shape_text: str, gpu: str, top: int, config_text: str | None,
             residual_choice: str = "shipped", plot: Path | None = None, data: Path | None = None,
             **options: str) -> None:
    space = SPACES[kernel]
    shape = parse_shape(kernel, shape_text, **options)
    profile = load_gpu(gpu)
    _check_plot_options(plot, data, read_files(data, gpu=gpu, residual=residual_choice))
    legal = legal_configs(space, shape, profile)
    named = _named_config(space, legal.configs, config_text)
    configs = list(legal.configs) + ([named] if named is not None and named not in legal.configs else [])
    if not configs:
        raise no_legal_config(kernel, shape, profile)
    residual = residual_option(kernel, profile, residual_choice, space.version, installed_triton())
    ranking = rank_configs(shape, configs, len(legal), profile, residual)
    console = Console()
    _print_ranking(console, f"{kernel} {shape} on {profile.name}: top {top} of {len(legal)} legal configs", shape,
                   ranking, top, residual)
    _print_pick(console, shape, list(legal.configs), ranking, profile, residual)
    console.print(untuned_line(kernel, shape, list(legal.configs), profile, residual))
    if named is not None:
        _print_named(console, space, shape, named, ranking, profile, residual)
    if plot is not None:
        points = plot_points(shape, profile, residual, data)
        predicted = "model × residual" if residual is not None else "model alone"
        explain_scatter(points.predicted_us, points.times_us, plot, tried=points.tried, zero_trial=points.zero_trial,
                        best=points.best, winner=points.winner, predicted_label=f"predicted µs ({predicted})",
                        title=f"{shape} on {profile.name}: {len(points.times_us)} recorded configs\n"
                              + "score (best time ÷ pick's time): " + ", ".join(points.scores))
        console.print(f"wrote {plot}")


def _print_pick(console: Console, shape, legal: list, ranking, profile, residual) -> None:
    """The neighbours that vote (where the residual has a table), and the zero-trial pick where it is not the
    ranking's first (a pick correction, or a vote weighed apart in the pick)."""
    if residual is None:
        return
    table = residual.neighbours
    if table is not None:
        near = ", ".join(str(n.shape) for n in table.nearest_to(shape, profile))
        console.print(f"neighbour vote (where the model × residual missed on the {table.settings.k} nearest training "
                      f"shapes; weight {table.settings.w_search:g} in the search, {table.settings.w_pick:g} in the "
                      f"zero-trial pick): {near}")
    pick = zero_trial_pick(shape, legal, profile, residual) if residual.pick or table is not None else None
    if pick is not None and pick != ranking.configs[ranking.order[0]]:
        console.print(f"zero-trial pick (what `tune` runs first, by the residual's pick correction and the vote): "
                      f"{config_label(pick)}, rank {ranking.order.index(ranking.configs.index(pick)) + 1} here")


def _check_plot_options(plot: Path | None, data: Path | None, inputs: list) -> None:
    """--plot needs --data; --data alone is ignored, with a warning; the plot's path (none of the command's
    `inputs`) and extra are checked."""
    if plot is not None and data is None:
        fail("--plot needs --data: a recorded dataset holding this shape, whose measured times it draws")
    if data is not None and plot is None:
        warn("--data is read only with --plot; ignoring it")
    check_plot(plot, inputs=inputs)


def _named_config(space, legal: list, text: str | None):
    """--config completed from the shape's legal configs (saying what was filled in), in the grid; None without."""
    if text is None:
        return None
    named, filled = complete_config(space, legal, text)
    if filled:
        warn("filled in from the shape's legal configs: " + ", ".join(f"{k}={v}" for k, v in filled.items()))
    check_in_grid(space, named)  # the model is defined on the grid only; illegal-but-in-grid is explained
    return named


def _print_ranking(console: Console, what: str, shape, ranking, top: int, residual) -> None:
    """The top configs with their breakdown (the ranking alone on a narrow terminal), then the best one's terms."""
    bd, factor, corrected, configs = ranking.bd, ranking.factor, ranking.corrected_us, ranking.configs
    model = roofline.cost_model(shape)
    under = f" under Triton {', '.join(residual.tritons)}" if residual and residual.tritons else ""
    fitted = f"model × residual fitted on {residual.fit.get('data')}{under}" if residual else "model alone (no residual)"
    # The full breakdown needs ~150 columns; a narrower terminal gets the ranking and what drives it.
    table = width_table(console, f"{what}; {fitted}", FULL_COLUMNS, NARROW_COLUMNS, WIDE_COLUMNS,
                        left=("config", "bound", "dominant", "CTA/SM"), wrap=("bound", "dominant", "CTA/SM"))
    for rank, i in enumerate(ranking.order[:top], start=1):
        add_cells(table, {
            "#": str(rank), "config": config_label(configs[i]), "µs": f"{corrected[i]:.2f}",
            "model µs": f"{bd.time_us[i]:.2f}", "resid ×": f"{factor[i]:.3f}", "bound": str(bd.bound[i]),
            "dominant": model.terms[int(bd.dominant[i])],
            "CTA/SM": f"{bd.ctas_per_sm[i]} {LIMITERS[int(bd.occupancy_limiter[i])]}",
            "occ": f"{bd.occupancy[i]:.0%}", "waves": f"{bd.waves[i]:.2f}", "wave eff": f"{bd.wave_efficiency[i]:.2f}",
            "pad eff": f"{bd.padding_efficiency[i]:.2f}", "wgmma": "yes" if bd.uses_wgmma[i] else "no"})
    console.print(table)
    narrow_note(console, WIDE_COLUMNS, "the whole breakdown: bound, occupancy, waves, padding, wgmma")
    best = ranking.order[0]
    console.print(f"best predicted: {corrected[best]:.2f} µs = {bd.flops[best] / corrected[best] / 1e6:.1f} TFLOP/s "
                  f"(model alone {bd.time_us[best]:.2f} µs: compute {bd.compute_us[best]:.2f} µs, memory {bd.memory_us[best]:.2f} µs, "
                  f"latency {bd.latency_us[best]:.2f} µs, DRAM {bd.dram_bytes[best] / 1e6:.1f} MB)")
    if model.note is not None:
        console.print(model.note(shape, bd, best))


def _print_named(console: Console, space, shape, named, ranking, profile, residual) -> None:
    """The --config's rank, why it is illegal where it is, and its terms."""
    rank = ranking.order.index(ranking.configs.index(named)) + 1
    reasons = config_legality(space, shape, named, profile)
    detail = Table(title=f"named config: rank {rank} of {len(ranking.configs)}"
                   + (f" (illegal: {'; '.join(reasons)})" if reasons else ""))
    detail.add_column("term")
    detail.add_column("value", justify="right")
    for term, value in config_terms(ranking, shape, named, profile, residual):
        detail.add_row(term, _fmt(value))
    console.print(detail)


def untuned_line(kernel: str, shape, configs: list, profile, residual) -> str:
    """What an untuned op (`rooftune.matmul`/`.attention`, nothing tuned) runs for `shape`, and why."""
    if KERNELS[kernel].ops is None:
        return "untuned op: none (fused MoE runs through vLLM's tables: `rooftune tune moe`)"
    route, why = route_choice(kernel_of(shape), profile, residual, installed_triton())
    kernel_only = env_flag(KERNEL_ONLY_ENV)
    choice = untuned_choice(shape, configs, profile, residual, route, kernel_only, why)
    return f"untuned op runs {choice.why}" + ("" if choice.library else f" ({config_label(choice.pick)})")


def _fmt(value) -> str:
    try:
        return f"{float(value):.4g}" if not isinstance(value, (str, bool)) and str(value) not in ("True", "False") else str(value)
    except (TypeError, ValueError):
        return str(value)


_GPU = typer.Option(DEFAULT_GPU, "--gpu", metavar=NAME_OR_PATH, help=f"the GPU to rank for: {GPU_HELP}")
_TOP = typer.Option(5, "--top", min=1, help="how many predicted-best configs to show")
_CONFIG_HELP = "also explain this config (NAME=VALUE pairs, the space's published values), e.g. '{}'"
_DTYPE = typer.Option("bf16", "--dtype", help=DTYPE_HELP)
_RESIDUAL = typer.Option("shipped", "--residual", metavar=NAME_OR_PATH, help=RESIDUAL_HELP)
_PLOT = typer.Option(None, "--plot", metavar=PATH, help=_EXPLAIN_PLOT_HELP)
_DATA = typer.Option(None, "--data", metavar=PATH, help=_EXPLAIN_DATA_HELP)


def _explain_command(spec):
    """`rooftune explain NAME` for a registered kernel family: --shape, --gpu, --top, --config, its parser's
    options, --residual and the plot's."""
    name, values = spec.space.grid[0]
    config = typer.Option(None, "--config", help=_CONFIG_HELP.format(f"{name}={values[-1]},..."))
    command = family_command(
        spec, [("shape", str, typer.Option(..., "--shape", help=spec.shape_help)), ("gpu", str, _GPU),
               ("top", int, _TOP), ("config", str, config)],
        [("residual", str, _RESIDUAL), ("plot", Path, _PLOT), ("data", Path, _DATA)],
        lambda shape, gpu, top, config, residual, plot, data, **options: _explain(
            spec.name, shape, gpu, top, config, residual, plot, data, **options))
    command.__doc__ = (f"Top {spec.label} configs as rooftune ranks them (model × residual, where one is fitted) with "
                       "the model's breakdown and the residual's factor; with --config, that config's terms and the "
                       "residual's largest contributions; with --plot and --data, predicted vs recorded time over the "
                       "shape's space.")
    return command


for _spec in KERNELS.values():
    explain_app.command(_spec.name, short_help=f"The top {_spec.label} configs as rooftune ranks them, and why."
                        )(_explain_command(_spec))
explain_app.command("kernel", short_help="Any Triton kernel's configs on one call, as rooftune.autotune ranks them."
                    )(explain_kernel_command)


def register(app) -> None:
    app.add_typer(explain_app, name="explain")
