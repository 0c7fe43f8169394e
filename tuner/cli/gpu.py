"""GPU commands of the CLI: `hwprobe`, `sweep` and `tune` (thin: parse, call one library function, print)."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rooftune.candidates import KERNELS, kernel_spec, load_implementation
from rooftune.candidates.config import config_label
from rooftune.candidates.families import check_sweep_dtypes
from rooftune.candidates.moe_space import VLLM_TOKENS
from rooftune.eval.sweeping import sweep
from rooftune.hwprofiles import hwprobe, profile_to_dict, save_profile
from rooftune.outputs import OutputError, json_text, write_all, write_atomic
from rooftune.tuner.cache import CACHE_ENV, cache_path, result_to_dict
from rooftune.tuner.cli.args import (
    GPU_HELP,
    LAYOUT_HELP,
    check_output,
    check_sms,
    cli_errors,
    fail,
    live_gpu,
    parse_counts,
    parse_shape,
    parse_shard,
    residual_option,
    warn,
)
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.cli.terminal import add_cells, width_table
from rooftune.tuner.live_tune import tune_shape
from rooftune.tuner.llm.moe_tables import LAYOUTS, check_layout, read_table
from rooftune.tuner.llm.moe_tune import moe_shapes, planned_tables, shard_intermediate, tune_moe_table, write_tables
from rooftune.tuner.llm.shapes import load_model_config, model_shapes
from rooftune.tuner.llm.tables import model_outputs, shape_label
from rooftune.tuner.llm.tune import NO_LEGAL_CONFIG, tune_model
from rooftune.tuner.pytorch.ops import library_faster

console = Console()
# What --sms gets (hwprobe.granted_sms): the driver gives a green context whole groups of SMs.
_SMS_GROUPS = (f" (rounded up to whole groups of {hwprobe.SM_GROUP_FROM_9_0} SMs from compute capability 9.0, of "
               f"{hwprobe.SM_GROUP_BEFORE_9_0} before: 66 gives {hwprobe.granted_sms(66, (9, 0))})")
tune_app = typer.Typer(help="Tune a shape live on this GPU: at most --budget configs compiled, checked and timed.",
                       no_args_is_help=True)
sweep_app = typer.Typer(help="Time every legal config of the space for each shape: a dataset's ground truth.",
                        no_args_is_help=True)


class RichReporter:
    """A sweep's progress as a rich progress bar: shapes done of listed, the current shape's phase."""

    def __init__(self, progress: Progress):
        self.progress, self.task = progress, None

    def start(self, total: int, done: int) -> None:
        self.task = self.progress.add_task("sweep", total=total, completed=done)

    def phase(self, shape, text: str) -> None:
        self.progress.update(self.task, description=f"{shape}: {text}")

    def finished(self, shape, seconds: float) -> None:
        self.progress.advance(self.task)
        self.progress.console.print(f"{shape}  {seconds:.1f} s")


def _ranking(kernel: str, profile, choice: str):
    """--residual of a live tune: "shipped" as is (`tune` resolves it and says why), else `residual_option`'s."""
    return "shipped" if choice == "shipped" else residual_option(kernel, profile, choice, None)


def _chosen_note(choice: str, residual) -> str:
    """The line naming what ranked, where --residual chose it."""
    return f"the residual {choice}" if residual is not None else "the model alone (--residual none)"


@cli_errors()
def hwprobe_cmd(
    out: str = typer.Option(None, "--out", metavar=PATH, help="write the profile JSON here (default: print it)"),
    name: str = typer.Option(None, "--name", help="profile name (default: the GPU's name)"),
    sms: int = typer.Option(None, "--sms", help="profile a green context of this many SMs" + _SMS_GROUPS),
) -> None:
    """Measure this machine's GPU and write a hardware profile."""
    check_sms(sms)
    check_output(out, "--out")
    profile = hwprobe.probe(name=name, sms=sms, log=lambda line: console.print(line))
    if out:
        try:
            save_profile(profile, out)
        except OutputError:  # the probe's figures are not lost: printed, then the error (exit 2)
            console.print_json(json.dumps(profile_to_dict(profile)))
            raise
        console.print(f"wrote {out}")
    else:
        console.print_json(json.dumps(profile_to_dict(profile)))


_SWEEP_HELP = """Time every legal config of the published space for each shape, beside {}; resumable.{}
    Several GPUs: --gpus 0,1 runs one worker process per GPU, each on its share of the list, all
    into the one --out folder. Several machines: --shard I/N on machine I of N (same list, --gpu and
    rooftune version on each) sweeps shard I; with --gpus too, the shard is split over the GPUs.
    Shards are of about equal estimated cost, fixed by the set of shapes (not their order).
    Exit code 3: a config killed the CUDA context (it is quarantined: run again to continue) or the
    compile workers hung. Exit code 4: the CUDA context died under no single config (the baseline, or
    an interleaved round): nothing is quarantined and a rerun would repeat it. With --gpus, a failed
    worker's code (1 if it died without an error), after the others have finished."""
_SHAPES_HELP = "a JSON list of {} objects"
_SWEEP_OUT = typer.Option(..., "--out", metavar=PATH, help="dataset folder (created, or resumed)")
_SWEEP_GPU = typer.Option(None, "--gpu", metavar=NAME_OR_PATH,
                          help=f"this GPU, for legality: {GPU_HELP} (default: $ROOFTUNE_PROFILE, "
                          "else the shipped profile of the GPU the driver names)", show_default=False)
_SWEEP_SMS = typer.Option(None, "--sms", help="sweep inside a green context of this many SMs" + _SMS_GROUPS)
_MAX_MINUTES = typer.Option(None, "--max-minutes", help="start no shape that would end later")
_WORKERS = typer.Option(None, "--workers", help="compile processes per GPU (default: the CPU cores, shared "
                        "among --gpus)")
_SHARD = typer.Option(None, "--shard", help="I/N: sweep only shard I (0 .. N-1) of N, e.g. 0/2 on one machine "
                      "and 1/2 on another")
_GPUS = typer.Option(None, "--gpus", help="comma-separated GPU numbers (as CUDA numbers them, e.g. 0,1): one "
                     "worker per GPU, each sweeping its share")


@sweep_app.command("gemm", help=_SWEEP_HELP.format("cuBLAS and the Triton tutorial's configs", """ With
    --backfill-extras, add the tutorial's configs outside the space to finished shapes swept without them
    (timed beside their final configs, on the dataset's scale); resumable too. With --backfill-legal, the same
    for the configs the profile (--gpu) makes legal that finished shapes have no row for: after a profile is
    corrected (an SM count, say), the dataset's space becomes the corrected profile's."""),
                   short_help="Time every legal GEMM config of each shape, beside cuBLAS.")
def sweep_gemm_cmd(
    shapes: str = typer.Option(..., "--shapes", metavar=PATH, help=_SHAPES_HELP.format("{m, n, k[, layout]}")),
    out: str = _SWEEP_OUT, gpu: str | None = _SWEEP_GPU, sms: int = _SWEEP_SMS, max_minutes: float = _MAX_MINUTES,
    workers: int = _WORKERS, shard: str = _SHARD, gpus: str = _GPUS,
    backfill_extras: bool = typer.Option(
        False, "--backfill-extras",
        help="instead of sweeping: time the tutorial configs outside the space that finished shapes lack "
             "(one GPU; not with --shard or --gpus)"),
    backfill_legal: bool = typer.Option(
        False, "--backfill-legal",
        help="instead of sweeping: time the configs the profile makes legal that finished shapes have no row "
             "for (one GPU; not with --shard or --gpus)"),
) -> None:
    if backfill_extras and backfill_legal:
        fail("--backfill-extras and --backfill-legal are separate runs: give one")
    flag = "--backfill-legal" if backfill_legal else "--backfill-extras" if backfill_extras else None
    _sweep("gemm", shapes, out, gpu, sms, max_minutes, workers, shard, gpus, flag, legal=backfill_legal)


@sweep_app.command("attention", help=_SWEEP_HELP.format("PyTorch's SDPA and each of its backends", """ With
    --backfill-routes, time the SDPA backends that finished shapes were swept without (beside SDPA's own
    choice, on the dataset's scale); resumable too."""),
                   short_help="The same for the causal attention forward, beside SDPA.")
def sweep_attention_cmd(
    shapes: str = typer.Option(..., "--shapes", metavar=PATH, help=_SHAPES_HELP.format(
        "{batch, heads, seq, head_dim[, kv_heads, causal, dtype]}")),
    out: str = _SWEEP_OUT, gpu: str | None = _SWEEP_GPU, sms: int = _SWEEP_SMS, max_minutes: float = _MAX_MINUTES,
    workers: int = _WORKERS, shard: str = _SHARD, gpus: str = _GPUS,
    backfill_routes: bool = typer.Option(
        False, "--backfill-routes",
        help="instead of sweeping: time the SDPA backends that finished shapes have no time for (one GPU; "
             "not with --shard or --gpus)"),
) -> None:
    _sweep("attention", shapes, out, gpu, sms, max_minutes, workers, shard, gpus,
           "--backfill-routes" if backfill_routes else None)


@sweep_app.command("moe", help=_SWEEP_HELP.format("torch's grouped GEMM over the same routed rows", ""),
                   short_help="The same for a fused-MoE GEMM (gate_up or down), beside torch's grouped GEMM.")
def sweep_moe_cmd(
    shapes: str = typer.Option(..., "--shapes", metavar=PATH, help=_SHAPES_HELP.format(
        "{experts, topk, hidden, intermediate, tokens, gemm[, dtype, seed]}")),
    out: str = _SWEEP_OUT, gpu: str | None = _SWEEP_GPU, sms: int = _SWEEP_SMS, max_minutes: float = _MAX_MINUTES,
    workers: int = _WORKERS, shard: str = _SHARD, gpus: str = _GPUS,
) -> None:
    _sweep("moe", shapes, out, gpu, sms, max_minutes, workers, shard, gpus)


@sweep_app.command("moe-fp8", help=_SWEEP_HELP.format("torch's grouped GEMM on the dequantized bf16 weights", ""),
                   short_help="The same for an FP8 fused-MoE GEMM (w8a8 or block scales), quantization included.")
def sweep_moe_fp8_cmd(
    shapes: str = typer.Option(..., "--shapes", metavar=PATH, help=_SHAPES_HELP.format(
        "{experts, topk, hidden, intermediate, tokens, gemm, quant[, seed]}")),
    out: str = _SWEEP_OUT, gpu: str | None = _SWEEP_GPU, sms: int = _SWEEP_SMS, max_minutes: float = _MAX_MINUTES,
    workers: int = _WORKERS, shard: str = _SHARD, gpus: str = _GPUS,
) -> None:
    _sweep("moe-fp8", shapes, out, gpu, sms, max_minutes, workers, shard, gpus)


@cli_errors()
def _sweep(kernel: str, shapes: str, out: str, gpu: str | None, sms: int | None, max_minutes: float | None,
           workers: int | None, shard: str | None, gpus: str | None, backfilling: str | None = None,
           legal: bool = False) -> None:
    """Check the options (a bad shape list before any GPU work), sweep, or with `backfilling` (the flag given)
    run the kernel's backfill (its registry entry's `backfill`: gemm the extras, or with `legal` the newly
    legal configs; attention the routes), print the summary."""
    check_sweep_dtypes(KERNELS[kernel], KERNELS[kernel].load_list(shapes))  # a bad list fails before the GPU
    shard_of, gpu_list = parse_shard(shard), None if gpus is None else parse_counts(gpus, "--gpus", least=0)
    if backfilling and (shard_of or gpu_list):
        fail(f"{backfilling} runs on one GPU: drop --shard and --gpus")
    profile = live_gpu(gpu)
    check_sms(sms, profile)
    check_output(out, "--out", folder=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    run = (load_implementation(KERNELS[kernel].backfill) if backfilling
           else functools.partial(sweep.sweep_shapes, kernel))
    split = ({"legal": True} if legal else {}) if backfilling else {"shard": shard_of, "gpus": gpu_list}
    with Progress(*columns, console=console) as progress:
        summary = run(shapes, out, profile, sms=sms, max_minutes=max_minutes, workers=workers,
                      reporter=RichReporter(progress), **split)
    if backfilling:
        console.print(str(summary))
        return
    for number, part in summary.by_gpu.items():
        console.print(f"gpu {number}: {part}")
    console.print(str(summary))


_TUNE_HELP = """Tune live: the corrected model's best first, then rounds chosen by the search (at most --budget
    configs, each compiled in parallel, checked against the reference and timed beside the library
    baseline); the fastest few are re-timed side by side to name the winner. Prints every trial, the
    winner and the time each phase took. Exit code 1: every measured config failed; 3: a config killed
    the CUDA context or the compile workers hung."""
_TUNE_RESIDUAL = typer.Option("shipped", "--residual", metavar=NAME_OR_PATH, help=(
    "'shipped' (the residual fitted for --gpu's GPU, where it applies to this space and Triton), 'none' (the "
    "model alone), or a residual JSON of this kernel (e.g. one `rooftune fit --out FILE` wrote for a new GPU)"))
_BUDGET = typer.Option(20, "--budget", help="at most this many configs are compiled and timed")
_GPU = typer.Option(None, "--gpu", metavar=NAME_OR_PATH,
                    help=f"this GPU, for legality and the model: {GPU_HELP} (default: "
                    "$ROOFTUNE_PROFILE, else the shipped profile of the GPU the driver names)", show_default=False)
_SMS = typer.Option(None, "--sms", help="tune inside a green context of this many SMs" + _SMS_GROUPS)
_CACHE = typer.Option(None, "--cache", metavar=PATH,
                      help="JSON cache file: a hit is returned without the GPU (default: the "
                      "per-user cache that rooftune's PyTorch ops read, $ROOFTUNE_CACHE or "
                      "~/.cache/rooftune/tune.json); 'none' to tune without one")
_JSON = typer.Option(None, "--json", metavar=PATH, help="also write the result as JSON to this file")


def _cache_file(cache: str | None) -> str | None:
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
    check_output(json_out, "--json", inputs=(gpu, residual_choice, cache))
    cache = _cache_file(cache)
    label = kernel_spec(kernel).baseline_label
    residual = _ranking(kernel, profile, residual_choice)
    with console.status(f"tuning {problem}: up to {budget} configs compiled, checked and timed"):
        result = tune_shape(problem, profile, budget, cache=cache, sms=sms, residual=residual)
    if residual_choice != "shipped" and not result.cached:
        result = replace(result, residual_note=_chosen_note(residual_choice, residual))
    cached = " (from the cache)" if result.cached else ""
    where = f"{result.profile}{_partition_label(sms, profile)}"
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
    document = {**result_to_dict(result), "cached": result.cached, "tflops": result.tflops}
    write_all([(json_out, lambda: write_atomic(json_out, json_text(document)))] if json_out else [],
              done=lambda path: console.print(f"wrote {path}"))
    if result.cache_error:
        fail(f"the result was not stored in the cache: {result.cache_error}")




def _partition_label(sms: int | None, profile) -> str:
    """', inside 72 SMs (--sms 66)': the SMs a green context asked for `sms` runs on, as the model counted them."""
    if sms is None:
        return ""
    return f", inside {hwprobe.granted_sms(sms, profile.compute_capability)} SMs (--sms {sms})"


@tune_app.command("gemm", help=_TUNE_HELP, short_help="Tune one GEMM shape live, beside cuBLAS.")
@cli_errors()
def tune_gemm_cmd(
    shape: str = typer.Option(..., "--shape", help=KERNELS["gemm"].shape_help),
    layout: str = typer.Option("kn", "--layout", help=LAYOUT_HELP),
    budget: int = _BUDGET, gpu: str | None = _GPU, sms: int = _SMS, cache: str = _CACHE, json_out: str = _JSON,
    residual: str = _TUNE_RESIDUAL,
) -> None:
    _tune("gemm", parse_shape("gemm", shape, layout), budget, gpu, sms, cache, json_out, residual)


@tune_app.command("attention", help=_TUNE_HELP,
                  short_help="Tune one causal-attention shape live, beside SDPA.")
@cli_errors()
def tune_attention_cmd(
    shape: str = typer.Option(..., "--shape", help=KERNELS["attention"].shape_help),
    budget: int = _BUDGET, gpu: str | None = _GPU, sms: int = _SMS, cache: str = _CACHE, json_out: str = _JSON,
    residual: str = _TUNE_RESIDUAL,
) -> None:
    _tune("attention", parse_shape("attention", shape), budget, gpu, sms, cache, json_out, residual)


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
    budget: int = _BUDGET, gpu: str | None = _GPU, sms: int = _SMS, cache: str = _CACHE,
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
    cache = _cache_file(cache)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        tuned = tune_model(model, tokens, profile, budget, seq=seq, cache=cache, sms=sms,
                           reporter=RichReporter(progress))
    title = (f"{model.name} on {tuned.profile}{_partition_label(sms, profile)}: µs per call, forward = Σ time × "
             f"runs ({tuned.tuned} shapes tuned, {tuned.cached} from the cache)")
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
    unwritten = []  # what could not be written, said once everything else was
    if out:
        try:
            written = write_all(model_outputs(tuned, out))
            console.print(f"wrote {len(written) - 2} GEMM tables and the report to {out}")
        except OutputError as exc:
            unwritten.append(str(exc))
    not_cached = {lt.layer.shape: lt.result.cache_error for lt in tuned.layers if lt.result and lt.result.cache_error}
    if not_cached:
        unwritten.append(f"the tunes of {len(not_cached)} shapes were not stored in the cache: "
                         + "; ".join(sorted(set(not_cached.values()))))
    if unwritten:
        fail(" and ".join(unwritten))
    failed = [f"{lt.layer.layer} {shape_label(lt.layer.shape)}: {lt.skipped}" for lt in tuned.layers
              if lt.skipped and lt.skipped != NO_LEGAL_CONFIG]
    if failed:
        fail("tuning failed for " + "; ".join(dict.fromkeys(failed)), 1)


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
    gemm: str = typer.Option("both", "--gemm", help="'both': one config per M serves both GEMMs, as vLLM runs "
                             "them (searched by their summed time, --budget configs timed on both); 'split': an up "
                             "table and a `_down` table sharing BLOCK_SIZE_M per M, as SGLang runs them; 'gate_up': "
                             "that GEMM's own winners; 'down': a `_down` table under the BLOCK_SIZE_M of the up table "
                             "already in --out"),
    budget: int = _BUDGET, gpu: str | None = _GPU, sms: int = _SMS, cache: str = _CACHE,
    out: str = typer.Option(None, "--out", metavar=PATH, help="folder for the tables, in vLLM's file name and "
                            "format (E=..,N=..,device_name=...json; the down table: ..._down.json), merged "
                            "with a table already there"),
    layout: str = typer.Option("vllm", "--layout", help=f"where in --out: {' or '.join(LAYOUTS)} (vllm: --out "
                               "itself, VLLM_TUNED_CONFIG_FOLDER; sglang: configs/triton_X_Y_Z/ for the installed "
                               "Triton, SGLANG_MOE_CONFIG_DIR)"),
    residual: str = _TUNE_RESIDUAL,
) -> None:
    """Tune a fused MoE layer's config table for each token count (at most --budget configs per GEMM, each tune
    kept in the tune cache, so a rerun resumes) and write it where vLLM (VLLM_TUNED_CONFIG_FOLDER) reads it.
    Prints each M's config, its time on each GEMM beside torch's grouped GEMM. Exit code 1: some token count's
    configs all failed (the rest is written); 3: as `tune gemm`."""
    tokens = parse_counts(batch, "--batch")
    if budget < 1:
        fail(f"--budget must be at least 1, got {budget}")
    shard = shard_intermediate(intermediate, tp)
    for m in tokens:  # a size the kernel cannot take fails here, before any GPU work
        moe_shapes(experts, topk, hidden, shard, m, gemm)
    profile = live_gpu(gpu)
    check_sms(sms, profile)
    check_output(out, "--out", folder=True)
    check_layout(layout)
    paths = planned_tables(out, experts, shard, profile.name, gemm, layout, hwprobe.installed_triton()) if out else {}
    up_table = read_table(paths["up"]) if gemm == "down" and out and paths["up"].exists() else None
    cache = _cache_file(cache)
    ranking = _ranking("moe", profile, residual)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        tuned = tune_moe_table(experts, topk, hidden, intermediate, tokens, profile, budget, gemm=gemm, tp=tp,
                               cache=cache, sms=sms, reporter=RichReporter(progress), residual=ranking,
                               up_table=up_table)
    title = (f"E={experts}, top-k {topk}, hidden {hidden}, N={shard} ({gemm}) on {tuned.profile}"
             f"{_partition_label(sms, profile)}: {tuned.tuned} GEMM tunes measured, {tuned.cached} from the cache")
    table = width_table(console, title, _MOE_COLUMNS, _MOE_NARROW, 120, left=("config",), wrap=("config",))
    for e in tuned.entries:
        base = e.baseline_us
        add_cells(table, {"M": str(e.tokens), "config": config_label(e.config) if e.config else f"[red]{e.skipped}[/]",
                          **{f"{g} µs": f"{e.times_us[g]:,.1f}" if g in e.times_us else "-" for g in ("gate_up", "down")},
                          "µs": f"{e.time_us:,.1f}" if e.config else "-", "torch µs": f"{base:,.1f}" if base else "-",
                          "torch / rooftune": f"{base / e.time_us:.3f}" if base and e.config else "-",
                          "one config ×": f"{e.pair_cost:.3f}" if e.pair_cost else "-"})
    console.print(table)
    console.print(f"ranked by {tuned.residual_note or _chosen_note(residual, ranking)}")
    if gemm == "both":
        console.print("one config ×: the shared config's summed time ÷ the sum of each GEMM's fastest config among "
                      "those the search timed (1.000: one config was fastest on both)")
    for e in tuned.entries:
        if e.note:
            warn(f"M={e.tokens}: {e.note}")
    if paths and not tuned.missing:
        for path in write_tables(tuned, paths, layout, hwprobe.installed_triton()):
            console.print(f"wrote {path}")
    skipped = [f"M={e.tokens}: {e.skipped}" for e in tuned.entries if e.skipped]
    not_cached = {r.cache_error for e in tuned.entries for r in e.tunes.values() if r.cache_error}
    if not_cached:
        fail("some tunes were not stored in the cache: " + "; ".join(sorted(not_cached)))
    if skipped:
        fail(("no table written: " if paths else "") + "no config for " + "; ".join(skipped), 1)


def register(app) -> None:
    app.command("hwprobe")(hwprobe_cmd)
    app.add_typer(sweep_app, name="sweep")
    app.add_typer(tune_app, name="tune")
