"""`rooftune sweep gemm|attention|moe`: time every legal config of the space for each shape (ground truth)."""

from __future__ import annotations

import functools

import typer
from rich.console import Console

from rooftune.candidates import KERNELS, load_implementation
from rooftune.candidates.families import check_sweep_dtypes
from rooftune.eval.sweeping import sweep
from rooftune.tuner.cli.args import (
    GPU_HELP,
    SMS_GROUPS_HELP,
    check_output,
    check_sms,
    cli_errors,
    fail,
    family_command,
    live_gpu,
    parse_counts,
    parse_shard,
)
from rooftune.tuner.cli.help import NAME_OR_PATH, PATH
from rooftune.tuner.cli.terminal import RichReporter, progress_bar

console = Console()
sweep_app = typer.Typer(help="Time every legal config of the space for each shape: a dataset's ground truth.",
                        no_args_is_help=True)
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
_SWEEP_SMS = typer.Option(None, "--sms", help="sweep inside a green context of this many SMs" + SMS_GROUPS_HELP)
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


def _plain_sweep_command(spec):
    """`rooftune sweep NAME` for a registered family with no backfill of its own: the sweep's options alone."""
    shapes = typer.Option(..., "--shapes", metavar=PATH, help=_SHAPES_HELP.format(
        "{" + ", ".join(spec.header_keys) + "}"))
    return family_command(
        spec, [("shapes", str, shapes), ("out", str, _SWEEP_OUT), ("gpu", str, _SWEEP_GPU), ("sms", int, _SWEEP_SMS),
               ("max_minutes", float, _MAX_MINUTES), ("workers", int, _WORKERS), ("shard", str, _SHARD),
               ("gpus", str, _GPUS)], [],
        lambda **o: _sweep(spec.name, o["shapes"], o["out"], o["gpu"], o["sms"], o["max_minutes"], o["workers"],
                           o["shard"], o["gpus"]), shape_options=False)


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
    profile = live_gpu(gpu, records=True)  # ground truth only from the profile's own GPU
    check_sms(sms, profile)
    check_output(out, "--out", folder=True)
    run = (load_implementation(KERNELS[kernel].backfill) if backfilling
           else functools.partial(sweep.sweep_shapes, kernel))
    split = ({"legal": True} if legal else {}) if backfilling else {"shard": shard_of, "gpus": gpu_list}
    with progress_bar(console) as progress:
        summary = run(shapes, out, profile, sms=sms, max_minutes=max_minutes, workers=workers,
                      reporter=RichReporter(progress), **split)
    if backfilling:
        console.print(str(summary))
        return
    for number, part in summary.by_gpu.items():
        console.print(f"gpu {number}: {part}")
    console.print(str(summary))


def register(app) -> None:
    app.add_typer(sweep_app, name="sweep")


for _spec in KERNELS.values():
    if _spec.backfill is None:  # gemm and attention, with backfills, have their commands above
        sweep_app.command(_spec.name, help=_SWEEP_HELP.format(_spec.baseline_label, ""),
                          short_help=f"The same for one {_spec.label} shape, beside {_spec.baseline_label}."
                          )(_plain_sweep_command(_spec))
