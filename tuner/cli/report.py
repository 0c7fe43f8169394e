"""`rooftune report gemm|attention|moe`: a swept dataset's best config vs the library baseline per shape."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer
from rich.console import Console

from rooftune.candidates import KERNELS
from rooftune.eval.datasets.format import read_manifest
from rooftune.eval.scoring.reports import (
    markdown_table,
    pooled_repeatability,
    read_results,
    report_kind,
    row_class,
    shape_rows,
)
from rooftune.outputs import json_text, write_all, write_atomic
from rooftune.tuner.cli.args import (
    DAMAGED_HELP,
    PLOT_EXTRA,
    check_outputs,
    cli_errors,
    fail,
    family_command,
    register_missing,
)
from rooftune.tuner.cli.help import PATH
from rooftune.tuner.cli.plots import check_plot, report_scatter
from rooftune.tuner.cli.terminal import add_cells, narrow_note, width_table

report_app = typer.Typer(help="Report a swept dataset: best config vs the library baseline per shape.",
                         no_args_is_help=True)

# The per-shape table from REPORT_WIDE_COLUMNS terminal columns on; below, without the shape list's
# source and the final passes' repeatability (the summary still gives it, pooled).
REPORT_WIDE_COLUMNS = 120

_DATA_HELP = "a dataset folder written by `rooftune sweep {}`; " + DAMAGED_HELP
_JSON = typer.Option(None, "--json", metavar=PATH, help="also write the summary and rows as JSON to this file")
_MARKDOWN = typer.Option(None, "--markdown", metavar=PATH,
                         help="also write the per-shape table as Markdown to this file")
_ROWS = typer.Option(True, "--rows/--no-rows", help="print one row per shape (--no-rows: the summary only)")
_PLOT = typer.Option(None, "--plot", metavar=PATH,
                     help="also draw baseline time ÷ best time against the problem's FLOPs by "
                     f"shape class, to this image ({PLOT_EXTRA})")


@report_app.command("gemm", short_help="A GEMM dataset: best config vs cuBLAS per shape.")
def report_gemm(
    data: Path = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format("gemm")),
    json_out: Path = _JSON, markdown: Path = _MARKDOWN, rows: bool = _ROWS, plot: Path = _PLOT,
) -> None:
    """Report a swept GEMM dataset: per shape the space's best config vs cuBLAS, the configs that
    failed, the repeatability of the final passes; then the geometric means (all shapes, LLM layers,
    decode and prefill, random shapes)."""
    _report("gemm", data, json_out, markdown, rows, plot)


@report_app.command("attention", short_help="An attention dataset: best config vs SDPA per shape.")
def report_attention(
    data: Path = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format("attention")),
    json_out: Path = _JSON, markdown: Path = _MARKDOWN, rows: bool = _ROWS, plot: Path = _PLOT,
) -> None:
    """Report a swept causal-attention dataset: per shape the space's best config vs SDPA (its own
    choice of backend), the configs that failed, the repeatability of the final passes; then the
    geometric means by head_dim and seq band."""
    _report("attention", data, json_out, markdown, rows, plot)


@report_app.command("moe", short_help="A fused-MoE dataset: best config vs torch's grouped GEMM per shape.")
def report_moe(
    data: Path = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format("moe")),
    json_out: Path = _JSON, markdown: Path = _MARKDOWN, rows: bool = _ROWS, plot: Path = _PLOT,
) -> None:
    """Report a swept fused-MoE dataset: per shape (one GEMM of one layer at one token count) the space's best
    config vs torch's grouped GEMM doing the same work (`torch._grouped_mm` with the gather, routing weight and
    scatter; the grouped GEMM alone beside it), the configs that failed, the repeatability of the final passes;
    then the geometric means by GEMM, by decode- or prefill-sized token count and by layer."""
    _report("moe", data, json_out, markdown, rows, plot)


def _report_command(spec):
    """`rooftune report NAME` for a registered family without a command of its own."""
    data = typer.Option(..., "--data", metavar=PATH, help=_DATA_HELP.format(spec.name))
    command = family_command(
        spec, [("data", Path, data), ("json_out", Path, _JSON), ("markdown", Path, _MARKDOWN), ("rows", bool, _ROWS),
               ("plot", Path, _PLOT)], [],
        lambda **o: _report(spec.name, o["data"], o["json_out"], o["markdown"], o["rows"], o["plot"]),
        shape_options=False)
    command.__doc__ = f"A {spec.label} dataset: the best config against {spec.baseline_label} per shape."
    return command


register_missing(report_app, _report_command, lambda spec: f"A {spec.label} dataset against {spec.baseline_label}.")


@cli_errors()
def _report(kernel: str, data: Path, json_out: Path | None, markdown: Path | None, rows: bool,
            plot: Path | None) -> None:
    """Read the dataset once, print the per-shape table and the summary, write what was asked for."""
    kind, label = report_kind(kernel), KERNELS[kernel].baseline_label
    check_outputs([(json_out, "--json"), (markdown, "--markdown"), (plot, "--plot")], inputs=(data,))
    check_plot(plot, inputs=(data,))
    if (recorded := read_manifest(data).get("kernel", "gemm")) != kernel:
        fail(f"{data} holds {recorded} measurements, not {kernel}")
    results = read_results(data)
    per_shape = shape_rows(data, results, kernel)
    totals = {**kind.summary(per_shape), "repeatability": pooled_repeatability(data, results)}
    console = Console()
    if rows:
        _print_rows(console, f"{data}: best config of the space vs {label} ({kind.baseline_call})", label, per_shape)
    rep = totals["repeatability"]
    console.print(kind.line(totals))
    if rep.get("shapes"):
        console.print(
            f"repeatability of the two final passes over {rep['configs']} configs: |Δ ratio to fastest| median "
            f"{rep['ratio_median']:.2%}, p90 {rep['ratio_p90']:.2%}; |Δ time| median {rep['abs_median']:.2%}, "
            f"p90 {rep['abs_p90']:.2%}; fastest within 1% in both passes: {rep['fastest_within_1pct_both']:.0%} of shapes")
    drawn = [(res.shape.flops, r) for res, r in zip(results, per_shape) if r.vs_baseline]  # rows follow results
    writes = [
        (markdown, lambda: write_atomic(markdown, markdown_table(per_shape, totals,
                                                                 f"`rooftune report {kernel} --data {data}`", kernel))),
        (json_out, lambda: write_atomic(json_out, json_text(
            {"summary": totals, "rows": [dataclasses.asdict(r) for r in per_shape]}))),
        (plot, lambda: report_scatter(
            [f for f, _ in drawn], [r.vs_baseline for _, r in drawn], [row_class(r, kernel) for _, r in drawn], plot,
            baseline_label=label, faint=[not r.aligned for _, r in drawn],
            title=f"{data}: {len(drawn)} shapes\nbest config of the space vs {label} ({kind.baseline_call})"))]
    write_all([(path, write) for path, write in writes if path is not None],
              done=lambda path: console.print(f"wrote {path}"))


def _print_rows(console: Console, title: str, label: str, per_shape: list) -> None:
    """Each shape's best config against the library, its errors and the repeatability of its final passes."""
    base, ratio = f"{label} µs", f"{label}/best"
    full = ("shape", "source", "legal", "errors", "best µs", base, ratio, "Δratio med", "Δratio p90")
    narrow = ("shape", "legal", "errors", "best µs", base, ratio)
    table = width_table(console, title, full, narrow, REPORT_WIDE_COLUMNS, left=("shape", "source"),
                        wrap=("shape", "source"))
    for r in per_shape:
        add_cells(table, {
            "shape": r.shape, "source": r.source, "legal": str(r.legal), "errors": str(r.errors),
            "best µs": f"{r.best_us:.2f}" if r.best_us else "-",
            base: f"{r.baseline_us:.2f}" if r.baseline_us else "-", ratio: f"{r.vs_baseline:.3f}" if r.vs_baseline else "-",
            "Δratio med": f"{r.ratio_median:.2%}" if r.ratio_median is not None else "-",
            "Δratio p90": f"{r.ratio_p90:.2%}" if r.ratio_p90 is not None else "-"})
    console.print(table)
    narrow_note(console, REPORT_WIDE_COLUMNS, "each shape's source and the repeatability of its final passes")


def register(app) -> None:
    app.add_typer(report_app, name="report")
