"""`rooftune tune moe`: tune a fused MoE layer's vLLM config table (bf16, or FP8 with --dtype fp8_w8a8), every token
count, and write it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from rooftune.candidates.config import config_label
from rooftune.candidates.families import layer_family
from rooftune.candidates.moe_space import VLLM_TOKENS
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.tuner.cli.args import check_output, check_sms, cli_errors, fail, live_gpu, parse_counts, warn
from rooftune.tuner.cli.help import PATH
from rooftune.tuner.cli.terminal import RichReporter, add_cells, progress_bar, width_table
from rooftune.tuner.cli.tune import (
    BUDGET_OPTION,
    CACHE_OPTION,
    GPU_OPTION,
    RESIDUAL_OPTION,
    SMS_OPTION,
    cache_file,
    chosen_note,
    partition_label,
    ranking,
    tune_app,
)
from rooftune.tuner.llm.moe_tables import LAYOUTS, check_layout, read_table
from rooftune.tuner.llm.moe_tune import moe_shapes, planned_tables, shard_intermediate, tune_moe_table, write_tables

console = Console()

_MOE_COLUMNS = ("M", "config", "gate_up µs", "down µs", "µs", "torch µs", "torch / rooftune", "one config ×")
_MOE_NARROW = ("M", "config", "µs", "torch µs")
_GEMM_HELP = ("'both': one config per M serves both GEMMs, as vLLM runs them (searched by their summed time, --budget "
              "configs timed on both); 'split': an up table and a `_down` table sharing BLOCK_SIZE_M per M, as SGLang "
              "runs them; 'gate_up': that GEMM's own winners; 'down': a `_down` table under the BLOCK_SIZE_M of the up "
              "table already in --out")
_DTYPE_HELP = ("the experts' weights: bf16 (default; fp16 alike), or fp8_w8a8 (FP8 e4m3 weights and activations, "
               "vLLM's `dtype=fp8_w8a8` tables: per-tensor scales, or --block-shape 128,128)")
_BLOCK_HELP = ("the FP8 weights' scale block N,K, as the checkpoint's quantization config gives it (weight_block_size): "
               "128,128 (DeepSeek-V3, Qwen3 FP8), tuned as vLLM's `block_shape=[128,128]` tables; implies fp8_w8a8")
_LAYOUT_HELP = (f"where in --out: {' or '.join(LAYOUTS)} (vllm: --out itself, VLLM_TUNED_CONFIG_FOLDER; sglang: "
                "configs/triton_X_Y_Z/ for the installed Triton, SGLANG_MOE_CONFIG_DIR)")


@tune_app.command("moe", short_help="Tune a fused MoE layer's vLLM config table, every token count.")
@cli_errors()
def tune_moe_cmd(
    experts: int = typer.Option(..., "--experts", help="experts of the MoE layer (E)"),
    topk: int = typer.Option(..., "--topk", help="experts each token is routed to"),
    hidden: int = typer.Option(..., "--hidden", help="the model's hidden size"),
    intermediate: int = typer.Option(..., "--intermediate", help="the experts' intermediate size (the whole "
                                     "layer's; --tp splits it)"),
    tp: int = typer.Option(1, "--tp", help="tensor-parallel shards: each GEMM holds intermediate / tp (vLLM's N)"),
    batch: str = typer.Option(",".join(map(str, VLLM_TOKENS)), "--batch",
                              help="token counts (vLLM's M), comma-separated (default: vLLM's tuner's 18, "
                              "1,2,4,...,3072,4096)", show_default=False),
    gemm: str = typer.Option("both", "--gemm", help=_GEMM_HELP),
    dtype: str = typer.Option(None, "--dtype", help=_DTYPE_HELP, show_default=False),
    block_shape: str = typer.Option(None, "--block-shape", metavar="N,K", help=_BLOCK_HELP),
    budget: int = BUDGET_OPTION, gpu: str | None = GPU_OPTION, sms: int = SMS_OPTION, cache: str = CACHE_OPTION,
    out: str = typer.Option(None, "--out", metavar=PATH, help="folder for the tables, in vLLM's file name and "
                            "format (E=..,N=..,device_name=...json; FP8 with ,dtype=fp8_w8a8 and "
                            ",block_shape=[128,128] before .json; the down table: ..._down.json), merged with a "
                            "table already there"),
    layout: str = typer.Option("vllm", "--layout", help=_LAYOUT_HELP),
    residual: str = RESIDUAL_OPTION,
) -> None:
    """Tune a fused MoE layer's config table for each token count (at most --budget configs per GEMM, each tune
    kept in the tune cache, so a rerun resumes) and write it where vLLM (VLLM_TUNED_CONFIG_FOLDER) reads it.
    Prints each M's config, its time on each GEMM beside torch's grouped GEMM. Exit code 1: some token count
    has no config (no table is written); 3: as `tune gemm`."""
    tokens, block = parse_counts(batch, "--batch"), _block_shape(block_shape)
    spec, table_dtype = layer_family(dtype, block)
    shard = _checked_shard(experts, topk, hidden, intermediate, tp, tokens, budget, gemm, table_dtype)
    profile = live_gpu(gpu)
    check_sms(sms, profile)
    paths, up_table = _table_paths(out, experts, shard, profile, gemm, layout, table_dtype)
    cache, residual_ranking = cache_file(cache), ranking(spec.name, profile, residual)
    with progress_bar(console, transient=True) as progress:
        tuned = tune_moe_table(experts, topk, hidden, intermediate, tokens, profile, budget, gemm=gemm, tp=tp,
                               cache=cache, sms=sms, reporter=RichReporter(progress), residual=residual_ranking,
                               up_table=up_table, dtype=table_dtype.dtype, block_shape=block)
    where = _layer_label(tuned)
    _print_table(tuned, where + partition_label(sms, profile),
                 tuned.residual_note or chosen_note(residual, residual_ranking), gemm)
    _write_and_check(tuned, paths, layout)


def _block_shape(text: str | None) -> tuple[int, int] | None:
    """--block-shape 'N,K' -> (N, K); None when not given; exits on anything but two positive integers."""
    if text is None:
        return None
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        fail(f"--block-shape must be two positive integers N,K (the weights' scale block, vLLM's block_shape: "
             f"128,128), got {text!r}")
    return int(parts[0]), int(parts[1])


def _layer_label(tuned) -> str:
    """'E=8, top-k 2, hidden 1024, N=512, fp8_w8a8 (both) on NVIDIA H200' (no dtype for bf16)."""
    weights = "" if tuned.table_dtype.label == "bf16" else f", {tuned.table_dtype.label}"
    return (f"E={tuned.experts}, top-k {tuned.topk}, hidden {tuned.hidden}, N={tuned.intermediate}{weights} "
            f"({tuned.gemm}) on "
            f"{tuned.profile}")


def _checked_shard(experts: int, topk: int, hidden: int, intermediate: int, tp: int, tokens: list[int], budget: int,
                   gemm: str, table_dtype) -> int:
    """The shard's intermediate size (vLLM's N), every token count's shapes checked before any GPU work."""
    if budget < 1:
        fail(f"--budget must be at least 1, got {budget}")
    shard = shard_intermediate(intermediate, tp)
    for m in tokens:  # a size the kernel cannot take fails here, before any GPU work
        moe_shapes(experts, topk, hidden, shard, m, gemm, table_dtype.dtype, table_dtype.block_shape)
    return shard


def _table_paths(out: str | None, experts: int, shard: int, profile, gemm: str, layout: str, table_dtype
                 ) -> tuple[dict[str, Path], dict | None]:
    """The tables --out gets in `layout` (tuner/llm/moe_tune.py planned_tables; {} without --out), checked before
    any GPU work (a file there that is no table is refused, never overwritten), and with --gemm down the up table
    already there, whose BLOCK_SIZE_M the down table keeps."""
    check_output(out, "--out", folder=True)
    check_layout(layout)
    paths = (planned_tables(out, experts, shard, profile.name, gemm, layout, installed_triton(), table_dtype) if out
             else {})
    up = read_table(paths["up"]) if gemm == "down" and paths and paths["up"].exists() else None
    return paths, up


def _print_table(tuned, where: str, ranked_by: str, gemm: str) -> None:
    """Each M's config, its time on each GEMM beside torch's grouped GEMM and what sharing one config costs."""
    title = f"{where}: {tuned.tuned} GEMM tunes measured, {tuned.cached} from the cache"
    table = width_table(console, title, _MOE_COLUMNS, _MOE_NARROW, 120, left=("config",), wrap=("config",))
    for e in tuned.entries:
        base = e.baseline_us
        add_cells(table, {"M": str(e.tokens), "config": config_label(e.config) if e.config else f"[red]{e.skipped}[/]",
                          **{f"{g} µs": f"{e.times_us[g]:,.1f}" if g in e.times_us else "-" for g in ("gate_up", "down")},
                          "µs": f"{e.time_us:,.1f}" if e.config else "-", "torch µs": f"{base:,.1f}" if base else "-",
                          "torch / rooftune": f"{base / e.time_us:.3f}" if base and e.config else "-",
                          "one config ×": f"{e.pair_cost:.3f}" if e.pair_cost else "-"})
    console.print(table)
    console.print(f"ranked by {ranked_by}")
    if gemm == "both":
        console.print("one config ×: the shared config's summed time ÷ the sum of each GEMM's fastest config among "
                      "those the search timed (1.000: one config was fastest on both)")


def _write_and_check(tuned, paths: dict[str, Path], layout: str) -> None:
    """Write the tables (only where every token count has a config); then exit 2 where a tune was not cached, else 1
    where a token count has none."""
    for e in tuned.entries:
        if e.note:
            warn(f"M={e.tokens}: {e.note}")
    if paths and not tuned.missing:
        for path in write_tables(tuned, paths, layout, installed_triton()):
            console.print(f"wrote {path}")
    skipped = [f"M={e.tokens}: {e.skipped}" for e in tuned.entries if e.skipped]
    not_cached = {r.cache_error for e in tuned.entries for r in e.tunes.values() if r.cache_error}
    if not_cached:
        fail("some tunes were not stored in the cache: " + "; ".join(sorted(not_cached)))
    if skipped:
        fail(("no table written: " if paths else "") + "no config for " + "; ".join(skipped), 1)
