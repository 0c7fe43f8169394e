"""`rooftune tune moe`: tune a fused MoE layer's vLLM config table, every token count, and write it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from rooftune.candidates.config import config_label
from rooftune.candidates.moe_space import VLLM_TOKENS
from rooftune.tuner.cli.args import check_output, check_sms, cli_errors, fail, live_gpu, parse_counts
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
from rooftune.tuner.llm.moe_tables import read_table, table_file_name, write_table
from rooftune.tuner.llm.moe_tune import PAIR_TOP, moe_shapes, shard_intermediate, tune_moe_table

console = Console()

_MOE_COLUMNS = ("M", "config", "gate_up µs", "down µs", "µs", "torch µs", "torch / rooftune", "one config ×")
_MOE_NARROW = ("M", "config", "µs", "torch µs")


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
    gemm: str = typer.Option("both", "--gemm", help=f"'both': one config per M serves both GEMMs, as vLLM runs "
                             f"them (each GEMM tuned, then the {PAIR_TOP} fastest of each timed on both, the "
                             "least sum kept); 'gate_up' or 'down': that GEMM's own winners"),
    budget: int = BUDGET_OPTION, gpu: str | None = GPU_OPTION, sms: int = SMS_OPTION, cache: str = CACHE_OPTION,
    out: str = typer.Option(None, "--out", metavar=PATH, help="folder for the table, in vLLM's file name and "
                            "format (E=..,N=..,device_name=...json; --gemm down: SGLang's ..._down.json), merged "
                            "with a table already there"),
    residual: str = RESIDUAL_OPTION,
) -> None:
    """Tune a fused MoE layer's config table for each token count (at most --budget configs per GEMM, each tune
    kept in the tune cache, so a rerun resumes) and write it where vLLM (VLLM_TUNED_CONFIG_FOLDER) reads it.
    Prints each M's config, its time on each GEMM beside torch's grouped GEMM. Exit code 1: some token count's
    configs all failed (the rest is written); 3: as `tune gemm`."""
    tokens = parse_counts(batch, "--batch")
    shard = _checked_shard(experts, topk, hidden, intermediate, tp, tokens, budget, gemm)
    profile = live_gpu(gpu)
    check_sms(sms, profile)
    path = _table_path(out, experts, shard, profile, gemm)
    cache = cache_file(cache)
    residual_ranking = ranking("moe", profile, residual)
    with progress_bar(console, transient=True) as progress:
        tuned = tune_moe_table(experts, topk, hidden, intermediate, tokens, profile, budget, gemm=gemm, tp=tp,
                               cache=cache, sms=sms, reporter=RichReporter(progress), residual=residual_ranking)
    where = f"E={experts}, top-k {topk}, hidden {hidden}, N={shard} ({gemm}) on {tuned.profile}"
    _print_table(tuned, where + partition_label(sms, profile),
                 tuned.residual_note or chosen_note(residual, residual_ranking), gemm)
    _write_and_check(tuned, path, gemm)


def _checked_shard(experts: int, topk: int, hidden: int, intermediate: int, tp: int, tokens: list[int], budget: int,
                   gemm: str) -> int:
    """The shard's intermediate size (vLLM's N), every token count's shapes checked before any GPU work."""
    if budget < 1:
        fail(f"--budget must be at least 1, got {budget}")
    shard = shard_intermediate(intermediate, tp)
    for m in tokens:  # a size the kernel cannot take fails here, before any GPU work
        moe_shapes(experts, topk, hidden, shard, m, gemm)
    return shard


def _table_path(out: str | None, experts: int, shard: int, profile, gemm: str) -> Path | None:
    """Where --out's table goes (vLLM's file name; SGLang's ..._down.json for --gemm down), None without --out."""
    check_output(out, "--out", folder=True)
    path = Path(out) / table_file_name(experts, shard, profile.name, down=gemm == "down") if out else None
    if path is not None and path.exists():
        read_table(path)  # a file there that is no table is refused before any GPU work, never overwritten
    return path


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
        console.print("one config ×: the shared config's summed time ÷ each GEMM's own winner's, timed side by "
                      "side (1.000: one config wins both; below 1: a config from the other GEMM beat a GEMM's own winner)")


def _write_and_check(tuned, path: Path | None, gemm: str) -> None:
    """Write the table to `path`; then exit 2 where a tune was not cached, else 1 where a token count has no config."""
    if path is not None and tuned.table():
        write_table(path, tuned.table())
        console.print(f"wrote {path} ({len(tuned.table())} token counts" +
                      ("; vLLM serves both GEMMs with it)" if gemm == "gate_up" else ")"))
    skipped = {}  # reason -> the token counts it left without a config, so that no gap in the table is silent
    for e in tuned.entries:
        if e.skipped:
            skipped.setdefault(e.skipped, []).append(str(e.tokens))
    not_cached = {r.cache_error for e in tuned.entries for r in e.tunes.values() if r.cache_error}
    if not_cached:
        fail("some tunes were not stored in the cache: " + "; ".join(sorted(not_cached)))
    if skipped:
        missing = sum(len(ms) for ms in skipped.values())
        fail(f"no config for {missing} of {len(tuned.entries)} token counts (the table "
             f"{'written lacks' if path is not None and tuned.table() else 'lacks'} them; vLLM serves each from the "
             "nearest M it holds): " + "; ".join(f"M={', '.join(ms)}: {why}" for why, ms in skipped.items()), 1)
