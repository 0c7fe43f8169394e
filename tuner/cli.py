"""The `rooftune` command line: thin Typer commands that parse, call one library function, and print."""

from __future__ import annotations

import os

# The CLI's numerical work is elementwise over a few thousand configs or small dense solves (the
# search's Gaussian process is at most budget x budget): one BLAS thread does it fastest, and
# OpenBLAS's default thread pool spins against itself on a busy machine (12 ms per 20x20 solve seen).
# Set before NumPy loads; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from rooftune.tuner import cli_eval, cli_explain, cli_fit, cli_gpu  # noqa: E402
from rooftune.tuner.args import PLOT_EXTRA, cli_errors, fail  # noqa: E402

app = typer.Typer(
    name="rooftune",
    help="Few-trial autotuning of Triton kernels from a roofline + occupancy model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()


def _version(value: bool) -> None:
    if value:
        from rooftune import __version__

        console.print(f"rooftune {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print rooftune's version and exit"),
) -> None:
    """Few-trial autotuning of Triton kernels from a roofline + occupancy model."""


@app.command("hwprofiles")
def hwprofiles_cmd() -> None:
    """List the shipped hardware profiles."""
    from rooftune.hwprofiles import list_profiles, load_profile

    table = Table(title="hardware profiles (--gpu NAME)")
    table.add_column("name", no_wrap=True)
    for col in ("SMs", "DRAM GB/s", "bf16 TFLOP/s", "L2 MiB", "smem/block KiB"):
        table.add_column(col, justify="right")
    table.add_column("GPU (figures from)")
    for name in list_profiles():
        p = load_profile(name)
        table.add_row(name, str(p.sm_count), f"{p.dram_bw_gbps:.0f}", f"{p.bf16_tflops:.0f}",
                      f"{p.l2_bytes / 2**20:.0f}", f"{p.smem_per_block_bytes / 1024:.0f}",
                      f"{p.name} ({p.meta.get('kind', '?')})")
    console.print(table)


@app.command("space")
@cli_errors()
def space_cmd(
    kernel: str = typer.Argument(..., help="gemm or attention"),
    shape: str = typer.Option(..., "--shape", help="MxNxK for gemm, BxHxSxD for attention"),
    gpu: str = typer.Option("h200", "--gpu", help="profile name or path to a profile JSON"),
    layout: str = typer.Option("kn", "--layout", help="gemm: B stored [K,N] ('kn') or [N,K] ('nk')"),
) -> None:
    """Print a published search space: its parameters, version and legal count for a shape."""
    from rooftune.candidates import SPACES, legal_configs
    from rooftune.tuner.args import load_gpu, parse_shape

    if kernel not in SPACES:
        fail(f"unknown kernel {kernel!r}; expected one of {', '.join(SPACES)}")
    space = SPACES[kernel]
    problem = parse_shape(kernel, shape, layout)
    profile = load_gpu(gpu)
    legal = legal_configs(space, problem, profile)
    table = Table(title=f"{space.version}  ({kernel} {problem} on {profile.name})")
    table.add_column("parameter")
    table.add_column("values")
    for name, values in space.grid:
        table.add_row(name, " ".join(str(v) for v in values))
    console.print(table)
    rejected = Table(title="rejected by legality (a config may fail several rules)")
    rejected.add_column("rule")
    rejected.add_column("configs", justify="right")
    for reason, count in legal.rejected.items():
        rejected.add_row(reason, str(count))
    console.print(rejected)
    console.print(f"legal configs: [bold]{len(legal)}[/] of {legal.total}")


@app.command("report")
@cli_errors()
def report_cmd(
    kernel: str = typer.Argument(..., help="gemm or attention"),
    data: str = typer.Option(..., "--data", help="a dataset folder written by `rooftune sweep`"),
    json_out: str = typer.Option(None, "--json", help="also write the summary and rows as JSON"),
    markdown: str = typer.Option(None, "--markdown", help="also write the per-shape table as Markdown"),
    rows: bool = typer.Option(True, "--rows/--no-rows", help="print one row per shape"),
    plot: str = typer.Option(None, "--plot", help="also draw baseline time ÷ best time against the problem's FLOPs "
                             f"by shape class, to this image ({PLOT_EXTRA})"),
) -> None:
    """Report a swept dataset: best config vs the library baseline per shape (GEMM: cuBLAS; attention:
    SDPA), errors, repeatability of the final passes."""
    import dataclasses
    import json
    from pathlib import Path

    from rooftune.candidates import KERNELS
    from rooftune.eval.dataset import read_manifest
    from rooftune.eval.reports import (REPORT_KINDS, markdown_table, pooled_repeatability, read_results, row_class,
                                       shape_rows)
    from rooftune.tuner.args import check_output
    from rooftune.tuner.plots import check_plot

    if kernel not in REPORT_KINDS:
        fail(f"reports exist for {' and '.join(REPORT_KINDS)} datasets, got {kernel!r}")
    kind, label = REPORT_KINDS[kernel], KERNELS[kernel].baseline_label
    check_output(json_out, "--json")
    check_output(markdown, "--markdown")
    check_plot(plot)
    if not (Path(data) / "manifest.json").is_file():
        fail(f"{data}: not a rooftune dataset folder (no manifest.json)")
    if (recorded := read_manifest(data).get("kernel", "gemm")) != kernel:
        fail(f"{data} holds {recorded} measurements, not {kernel}")
    results = read_results(data)
    per_shape = shape_rows(data, results, kernel)
    totals = {**kind.summary(per_shape), "repeatability": pooled_repeatability(data, results)}
    if rows:
        table = Table(title=f"{data}: best config of the space vs {label} ({kind.baseline_call})")
        for col in ("shape", "source", "legal", "errors", "best µs", f"{label} µs", f"{label}/best", "Δratio med",
                    "Δratio p90"):
            table.add_column(col, justify="left" if col in ("shape", "source") else "right")
        for r in per_shape:
            table.add_row(r.shape, r.source, str(r.legal), str(r.errors), f"{r.best_us:.2f}" if r.best_us else "-",
                          f"{r.baseline_us:.2f}" if r.baseline_us else "-",
                          f"{r.vs_baseline:.3f}" if r.vs_baseline else "-",
                          f"{r.ratio_median:.2%}" if r.ratio_median is not None else "-",
                          f"{r.ratio_p90:.2%}" if r.ratio_p90 is not None else "-")
        console.print(table)
    rep = totals["repeatability"]
    console.print(kind.line(totals))
    if rep.get("shapes"):
        console.print(
            f"repeatability of the two final passes over {rep['configs']} configs: |Δ ratio to fastest| median "
            f"{rep['ratio_median']:.2%}, p90 {rep['ratio_p90']:.2%}; |Δ time| median {rep['abs_median']:.2%}, "
            f"p90 {rep['abs_p90']:.2%}; fastest within 1% in both passes: {rep['fastest_within_1pct_both']:.0%} of shapes")
    if markdown:
        Path(markdown).write_text(markdown_table(per_shape, totals, f"`rooftune report {kernel} --data {data}`", kernel))
    if json_out:
        Path(json_out).write_text(json.dumps(
            {"summary": totals, "rows": [dataclasses.asdict(r) for r in per_shape]}, indent=2) + "\n")
    if plot:
        from rooftune.tuner.plots import report_scatter

        drawn = [(res.shape.flops, r) for res, r in zip(results, per_shape) if r.vs_baseline]  # rows follow results
        report_scatter([f for f, _ in drawn], [r.vs_baseline for _, r in drawn],
                       [row_class(r, kernel) for _, r in drawn], plot, baseline_label=label,
                       faint=[not r.aligned for _, r in drawn],
                       title=f"{data}: {len(drawn)} shapes\nbest config of the space vs {label} ({kind.baseline_call})")
        console.print(f"wrote {plot}")


cli_explain.register(app)
cli_eval.register(app)
cli_fit.register(app)
cli_gpu.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
