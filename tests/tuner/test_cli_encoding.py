"""The CLI on a terminal that cannot show its symbols (LANG=C, PYTHONIOENCODING=ascii): the plain spelling of µ, ×
and the others, never a UnicodeEncodeError traceback (issue 57); a warning there is one `warning:` line."""

import os
import subprocess
import sys

import pytest

from fakes import HELDOUT
from rooftune.tuner.cli.terminal import PLAIN_ERRORS

ASCII = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"}


def _run(*args: str, env=ASCII) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rooftune.tuner.cli.app", *args], capture_output=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("args", [
    ["explain", "gemm", "--shape", "1024x1024x1024"],
    ["explain", "attention", "--shape", "1x8x1024x64", "--top", "3"],
    ["report", "gemm", "--data", str(HELDOUT)],
    ["explain", "gemm", "--shape", "64x64", "--gpu", "h200"],  # an error message, on standard error
])
def test_an_ascii_terminal_gets_plain_text(args):
    run = _run(*args)
    out = (run.stdout + run.stderr).decode("ascii")  # every byte ASCII
    assert "Traceback" not in out and "UnicodeEncodeError" not in out, out
    assert run.returncode == (2 if args[-1] == "h200" else 0), out
    if args[0] == "explain" and run.returncode == 0:
        assert " us " in out and "x" in out  # µs and × spelled plainly


def test_the_plain_spelling():
    assert "4096×4096 µs ≥ 2 — Σ ✓".encode("ascii", PLAIN_ERRORS) == b"4096x4096 us >= 2 -- sum  \\u2713"
