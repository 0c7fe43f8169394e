"""Turning command-line strings into shapes and profiles, with errors a user can act on."""

from __future__ import annotations

from typing import NoReturn

import typer


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a clear error on stderr and exit with `code` (2: bad input), for every CLI command."""
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code=code)


def parse_shape(kernel: str, text: str, layout: str = "kn", dtype: str = "bf16"):
    """GemmShape for 'gemm' (MxNxK), AttentionShape for 'attention' (BxHxSxD); exits on bad input."""
    from rooftune.candidates import ShapeError, parse_attention_shape, parse_gemm_shape

    try:
        if kernel == "gemm":
            return parse_gemm_shape(text, layout=layout, dtype=dtype)
        if kernel == "attention":
            return parse_attention_shape(text, dtype=dtype)
    except ShapeError as exc:
        fail(str(exc))
    fail(f"unknown kernel {kernel!r}; expected gemm or attention")


def load_gpu(name_or_path: str):
    """A shipped profile by name or a profile JSON by path; exits with the validation error."""
    from rooftune.hwprofiles import ProfileError, load_profile

    try:
        return load_profile(name_or_path)
    except ProfileError as exc:
        fail(str(exc))
