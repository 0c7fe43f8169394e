"""GPU commands of the CLI: `hwprobe` and `sweep` (thin: parse, call one library function, print)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rooftune.tuner.args import fail

console = Console()


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


def hwprobe_cmd(
    out: str = typer.Option(None, "--out", help="write the profile JSON here (default: print it)"),
    name: str = typer.Option(None, "--name", help="profile name (default: the GPU's name)"),
    sms: int = typer.Option(None, "--sms", help="profile a green context of this many SMs"),
) -> None:
    """Measure this machine's GPU and write a hardware profile."""
    import json

    from rooftune.hwprofiles import profile_to_dict, save_profile
    from rooftune.hwprofiles.hwprobe import NoGpuError, probe

    try:
        profile = probe(name=name, sms=sms, log=lambda line: console.print(line))
    except (NoGpuError, ValueError) as exc:
        fail(str(exc))
    if out:
        save_profile(profile, out)
        console.print(f"wrote {out}")
    else:
        console.print_json(json.dumps(profile_to_dict(profile)))


def sweep_cmd(
    kernel: str = typer.Argument(..., help="gemm or attention"),
    shapes: str = typer.Option(..., "--shapes", help="JSON list of {m, n, k[, layout]} objects (gemm) or "
                                                     "{batch, heads, seq, head_dim[, causal, dtype]} (attention)"),
    out: str = typer.Option(..., "--out", help="dataset folder (created, or resumed)"),
    gpu: str = typer.Option("h200", "--gpu", help="profile (name or JSON path) for legality"),
    sms: int = typer.Option(None, "--sms", help="sweep inside a green context of this many SMs"),
    max_minutes: float = typer.Option(None, "--max-minutes", help="start no shape that would end later"),
    workers: int = typer.Option(None, "--workers", help="compile processes (default: all CPU cores)"),
    backfill_extras: bool = typer.Option(
        False, "--backfill-extras",
        help="gemm only, instead of sweeping: time the tutorial configs outside the space that finished "
             "shapes lack"),
) -> None:
    """Time every legal config of the published space for each shape, beside the library baseline
    (gemm: cuBLAS; attention: PyTorch's SDPA); resumable. With
    --backfill-extras, add the Triton tutorial's configs outside the space to finished shapes swept
    without them (timed beside their final configs, on the dataset's scale); resumable too.
    Exit code 3: a config killed the CUDA context (it is quarantined: run again to continue) or the
    compile workers hung."""
    from rooftune.eval.backfill import backfill_gemm
    from rooftune.eval.dataset import DatasetError
    from rooftune.eval.quarantine import ContextQuarantined
    from rooftune.candidates.shapes import ShapeListError, load_attention_shapes, load_shapes
    from rooftune.eval import sweep
    from rooftune.hwprofiles.hwprobe import NoGpuError
    from rooftune.kernels.compile import CompileStalled
    from rooftune.tuner.args import load_gpu

    loaders = {"gemm": load_shapes, "attention": load_attention_shapes}
    if kernel not in loaders:
        fail(f"unknown or unsupported kernel {kernel!r}; `sweep` supports {', '.join(loaders)}")
    if backfill_extras and kernel != "gemm":
        fail("--backfill-extras is for gemm only (attention has no configs outside its space to add)")
    try:
        loaders[kernel](shapes)  # a bad list fails here, before any GPU work
    except ShapeListError as exc:
        fail(str(exc))
    profile = load_gpu(gpu)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    run = backfill_gemm if backfill_extras else {"gemm": sweep.sweep_gemm, "attention": sweep.sweep_attention}[kernel]
    try:
        with Progress(*columns, console=console) as progress:
            summary = run(shapes, out, profile, sms=sms, max_minutes=max_minutes, workers=workers,
                          reporter=RichReporter(progress))
    except (NoGpuError, DatasetError, ValueError) as exc:
        fail(str(exc))
    except (ContextQuarantined, CompileStalled) as exc:
        fail(str(exc), code=3)
    budget = " (time budget reached)" if summary.stopped_early else ""
    if backfill_extras:
        console.print(f"backfilled {summary.done}, already with extras {summary.already}, needing none "
                      f"{summary.not_needed}, failed (no final config re-timed) {summary.failed}, "
                      f"left {summary.remaining}{budget}; {summary.seconds:.0f} s")
    else:
        console.print(f"done {summary.done}, already there {summary.skipped}, left {summary.remaining}{budget}; "
                      f"{summary.seconds:.0f} s")


def register(app) -> None:
    app.command("hwprobe")(hwprobe_cmd)
    app.command("sweep")(sweep_cmd)
