"""The `rooftune` command line: thin Typer commands that parse, call one library function, and print."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from rooftune.tuner import cli_gpu, cli_model

app = typer.Typer(
    name="rooftune",
    help="Few-trial autotuning of Triton kernels from a roofline + occupancy model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()


def fail(message: str) -> None:
    """Print a clear error and exit non-zero."""
    Console(stderr=True).print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code=2)


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


cli_model.register(app)
cli_gpu.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
