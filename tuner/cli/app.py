"""The `rooftune` command line: thin Typer commands that parse, call one library function, and print."""

from __future__ import annotations

import os
import sys

# The CLI's numerical work is elementwise over a few thousand configs or small dense solves (the
# search's Gaussian process is at most budget x budget): one BLAS thread does it fastest, and
# OpenBLAS's default thread pool spins against itself on a busy machine (12 ms per 20x20 solve seen).
# Set before NumPy loads; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import multiprocessing.util

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from rooftune import __version__
from rooftune.candidates import KERNELS, KernelSpec, legal_configs
from rooftune.hwprofiles import list_profiles, load_profile
from rooftune.tuner.cli import evaluate as cli_eval  # noqa: E402
from rooftune.tuner.cli import explain as cli_explain
from rooftune.tuner.cli import fit as cli_fit
from rooftune.tuner.cli import hwprobe as cli_hwprobe
from rooftune.tuner.cli import report as cli_report
from rooftune.tuner.cli import sweep as cli_sweep
from rooftune.tuner.cli import tune as cli_tune
from rooftune.tuner.cli import tune_model as cli_tune_model  # noqa: F401 (registers `tune model`)
from rooftune.tuner.cli import tune_moe as cli_tune_moe  # noqa: F401 (registers `tune moe`)
from rooftune.tuner.cli.args import (  # noqa: E402
    DEFAULT_GPU,
    GPU_HELP,
    cli_errors,
    family_command,
    load_gpu,
    parse_shape,
    warnings_as_lines,
)
from rooftune.tuner.cli.help import NAME_OR_PATH, plain_flags
from rooftune.tuner.cli.terminal import add_cells, narrow_note, plain_streams, width_table  # noqa: E402

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
        console.print(f"rooftune {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print rooftune's version and exit"),
) -> None:
    """Few-trial autotuning of Triton kernels from a roofline + occupancy model."""


# The profile table from PROFILES_WIDE_COLUMNS terminal columns on; below, without the GPU's full name.
PROFILES_WIDE_COLUMNS = 110


@app.command("hwprofiles")
def hwprofiles_cmd() -> None:
    """List the shipped hardware profiles."""

    figures = ("name", "SMs", "DRAM GB/s", "bf16 TFLOP/s", "L2 MiB", "smem/block KiB")
    table = width_table(console, "hardware profiles (--gpu NAME)", (*figures, "GPU (figures from)"), figures,
                        PROFILES_WIDE_COLUMNS, left=("name", "GPU (figures from)"), wrap=("GPU (figures from)",))
    for name in list_profiles():
        p = load_profile(name)
        add_cells(table, {"name": name, "SMs": str(p.sm_count), "DRAM GB/s": f"{p.dram_bw_gbps:.0f}",
                          "bf16 TFLOP/s": f"{p.bf16_tflops:.0f}", "L2 MiB": f"{p.l2_bytes / 2**20:.0f}",
                          "smem/block KiB": f"{p.smem_per_block_bytes / 1024:.0f}",
                          "GPU (figures from)": f"{p.name} ({p.meta.get('kind', '?')})"})
    console.print(table)
    narrow_note(console, PROFILES_WIDE_COLUMNS, "each GPU's name and where its figures come from")


space_app = typer.Typer(help="Print a published search space: its parameters, version and legal count for a shape.",
                        no_args_is_help=True)
_GPU = typer.Option(DEFAULT_GPU, "--gpu", metavar=NAME_OR_PATH,
                    help=f"the GPU whose limits decide legality: {GPU_HELP}")


def _space_command(spec: KernelSpec):
    """`rooftune space NAME` for a registered kernel family: --shape, --gpu and its parser's options."""
    command = family_command(spec, [("shape", str, typer.Option(..., "--shape", help=spec.shape_help)),
                                    ("gpu", str, _GPU)], [],
                             lambda shape, gpu, **options: _space(spec.name, shape, gpu, **options))
    command.__doc__ = (f"The {spec.label} space: its parameters, version hash, legal count for the shape and why "
                       "the rest are illegal.")
    return command


for _spec in KERNELS.values():
    space_app.command(_spec.name)(_space_command(_spec))


@cli_errors()
def _space(kernel: str, shape: str, gpu: str, **options: str) -> None:
    """Print the `kernel` space's grid, its legality rejections for the shape and the legal count."""

    space = KERNELS[kernel].space
    problem = parse_shape(kernel, shape, **options)
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


app.add_typer(space_app, name="space")
cli_report.register(app)
cli_explain.register(app)
cli_eval.register(app)
cli_fit.register(app)
cli_hwprobe.register(app)
cli_sweep.register(app)
cli_tune.register(app)
plain_flags(app)


def _run() -> None:
    """`main`'s body. A command that used the GPU ends without Python's teardown: the CUDA
    context, the compile workers and their queues are the OS's to reclaim, which it does faster (a
    live tune measured ~1.9 s outside its own phases with the teardown, ~0.8 s without). Output is
    flushed first; files are written and closed before a command returns; multiprocessing's
    finalizers still run, so the compile pool's semaphores are released (else its resource tracker
    warns of leaked semaphores)."""
    try:
        app()
    except SystemExit as done:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if done.code is not None and not isinstance(done.code, int):
                print(done.code, file=sys.stderr)

            multiprocessing.util._run_finalizers(0)  # no public API; what multiprocessing's own atexit runs first
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        sys.stdout.flush()  # a standard output that cannot take the rest fails here, not in Python's teardown
        raise


class _WatchedOutput:
    """Standard output, remembering the error of a write or flush that failed (rich's console writes through it)."""

    def __init__(self, stream):
        self._stream = stream
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self.failed = exc
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self.failed = exc
            raise

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main() -> None:
    """The `rooftune` program (`_run`). A standard output that cannot be written (a full disk, /dev/full, a closed
    pipe) ends the command with one line on standard error and exit 2, never a traceback from the console; one that
    cannot encode a character gets its plain spelling (terminal.py `plain_streams`); a Python warning is one
    `warning:` line (args.py `warnings_as_lines`)."""
    plain_streams()
    warnings_as_lines()
    watched = sys.stdout = _WatchedOutput(sys.stdout)
    try:
        _run()
    except OSError as exc:
        if watched.failed is not exc:
            raise
        sys.stdout = watched._stream
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is left in its buffer goes nowhere
        print(f"error: cannot write to standard output ({exc.strerror or exc})", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
