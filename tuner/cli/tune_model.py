"""`rooftune tune model`: tune every GEMM and attention shape of a model's forward pass, print each layer's time."""

from __future__ import annotations

import typer
from rich.console import Console

from rooftune.outputs import OutputError, write_all
from rooftune.tuner.cli.args import check_output, check_sms, cli_errors, fail, live_gpu, parse_counts
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.cli.terminal import RichReporter, add_cells, progress_bar, width_table
from rooftune.tuner.cli.tune import (
    BUDGET_OPTION,
    CACHE_OPTION,
    GPU_OPTION,
    SMS_OPTION,
    cache_file,
    partition_label,
    tune_app,
)
from rooftune.tuner.llm.shapes import load_model_config, model_shapes
from rooftune.tuner.llm.tables import model_outputs, shape_label
from rooftune.tuner.llm.tune import NO_LEGAL_CONFIG, ModelTune, tune_model

console = Console()


@tune_app.command("model", short_help="Tune every GEMM and attention shape of a model's forward pass.")
@cli_errors()
def tune_model_cmd(
    config: str = typer.Option(..., "--config", metavar=NAME_OR_PATH,
                               help="a Hugging Face style config.json (or the folder holding "
                               "it), or a shipped name: llama-3-8b, qwen2.5-7b"),
    batch: str = typer.Option("1,8,64,512,2048", "--batch", help="tokens per forward pass (the GEMMs' M), "
                              "comma-separated"),
    seq: int = typer.Option(2048, "--seq", help="prefill sequence length: the attention of M tokens is one "
                            "sequence of M when M <= seq, else M/seq sequences of seq"),
    budget: int = BUDGET_OPTION, gpu: str | None = GPU_OPTION, sms: int = SMS_OPTION, cache: str = CACHE_OPTION,
    out: str = typer.Option(None, "--out", metavar=PATH, help="folder for the vLLM-style GEMM tables "
                            "(N=..,K=..,device_name=...json) and the report (<model>.report.json, .md)"),
) -> None:
    """Tune every GEMM and causal attention shape of a model's prefill forward pass, for each token
    count (shapes already in the cache are not measured again), and print each layer's time and the
    forward pass's total (Σ time × runs) with rooftune's kernels and with torch's (cuBLAS, SDPA).
    Exit code 1: some shape's measured configs all failed (the rest is written); 3: as `tune gemm`."""
    model, tokens = load_model_config(config), parse_counts(batch, "--batch")
    if seq < 1 or budget < 1:
        fail(f"--seq and --budget must be at least 1, got {seq} and {budget}")
    model_shapes(model, tokens, seq)  # a shape the kernels cannot take fails here, before any GPU work
    profile = live_gpu(gpu)
    check_sms(sms, profile)
    check_output(out, "--out", folder=True)
    cache = cache_file(cache)
    with progress_bar(console, transient=True) as progress:
        tuned = tune_model(model, tokens, profile, budget, seq=seq, cache=cache, sms=sms,
                           reporter=RichReporter(progress))
    _print_forward(tuned, f"{model.name} on {tuned.profile}{partition_label(sms, profile)}")
    _write_and_check(tuned, out)


def _print_forward(tuned: ModelTune, where: str) -> None:
    """Each token count's layers (µs per call, rooftune's and torch's) and its forward pass (Σ time × runs)."""
    title = f"{where}: µs per call, forward = Σ time × runs ({tuned.tuned} shapes tuned, {tuned.cached} from the cache)"
    table = width_table(console, title, ("tokens", "layer", "shape", "runs", "rooftune", "torch", "ratio"),
                        left=("layer", "shape"), wrap=("layer", "shape"))
    for f in tuned.forward_times():
        for lt in (lt for lt in tuned.layers if lt.layer.tokens == f.tokens):
            r, why = lt.result, "no config" if lt.skipped == NO_LEGAL_CONFIG else "failed"
            add_cells(table, {"tokens": str(f.tokens), "layer": lt.layer.layer, "shape": shape_label(lt.layer.shape),
                              "runs": str(lt.layer.count), "rooftune": f"{r.time_us:,.1f}" if r else f"[red]{why}[/]",
                              "torch": f"{r.baseline_us:,.1f}" if r and r.baseline_us else "-",
                              "ratio": f"{r.baseline_us / r.time_us:.3f}" if r and r.baseline_us else "-"})
        add_cells(table, {"tokens": str(f.tokens), "layer": "forward" + ("*" if f.skipped else ""), "shape": "",
                          "runs": "", "rooftune": f"{f.rooftune_us:,.1f}",
                          "torch": f"{f.torch_us:,.1f}" if f.torch_us else "-",
                          "ratio": f"{f.speedup:.3f}" if f.speedup else "-"}, style="bold", end_section=True)
    console.print(table)
    console.print("ratio: torch / rooftune (above 1: rooftune faster)")
    if any(f.skipped for f in tuned.forward_times()):
        console.print(f"forward*: without the layers marked 'no config' ({NO_LEGAL_CONFIG}: attention of "
                      "fewer tokens than the smallest query tile) or 'failed'")


def _write_and_check(tuned: ModelTune, out: str | None) -> None:
    """Write the tables and the report to `out`; then exit 2 naming what could not be written or cached, else 1
    naming the layers whose configs all failed."""
    unwritten = []  # what could not be written, said once everything else was
    if out:
        try:
            written = write_all(model_outputs(tuned, out))
            console.print(f"wrote {len(written) - 2} GEMM tables and the report to {out}")
        except OutputError as exc:
            unwritten.append(str(exc))
    not_cached = tuned.not_cached()
    if not_cached:
        unwritten.append(f"the tunes of {len(not_cached)} shapes were not stored in the cache: "
                         + "; ".join(sorted(set(not_cached.values()))))
    if unwritten:
        fail(" and ".join(unwritten))
    failed = [f"{lt.layer.layer} {shape_label(lt.layer.shape)}: {lt.skipped}" for lt in tuned.failed()]
    if failed:
        fail("tuning failed for " + "; ".join(dict.fromkeys(failed)), 1)
