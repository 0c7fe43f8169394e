"""`rooftune.explain_kernel` and `rooftune explain kernel SCRIPT --call NAME` on a user kernel: the configs ranked as
rooftune.autotune ranks them, each one's breakdown, the best one's loops and rules, a config that was not read."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import triton
import triton.language as tl
from typer.testing import CliRunner

import rooftune
from rooftune.tuner.cli.app import app

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")
CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=2) for b in (64, 256, 100) for w in (1, 4)]

SCRIPT = textwrap.dedent('''
    import os
    import torch
    import triton
    import triton.language as tl

    import rooftune

    if os.environ.get("MARKER"):  # every process that imports this program says so
        with open(os.environ["MARKER"], "a") as marker:
            marker.write(f"{os.getpid()}\\n")

    @rooftune.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=4) for b in (64, 128, 256, 512)],
                       key=["n"], budget=2)
    @triton.jit
    def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    def example():
        x = torch.zeros(1 << 20)
        return scale, {"x_ptr": x, "y_ptr": torch.empty_like(x), "n": x.numel()}, \\
            lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)

    def broken():
        return "not a call"

    if __name__ == "__main__":
        print(rooftune.explain_kernel(*example(), profile="h100_sxm"))
''')


@triton.jit
def row_sum(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + tl.program_id(0) * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@pytest.fixture(autouse=True)
def in_process(monkeypatch, tmp_path):
    monkeypatch.setenv("ROOFTUNE_COMPILE_WORKERS", "0")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))  # not the knob: setting it outlives the test


def test_the_ranking_its_breakdown_and_the_configs_not_read():
    x = torch.zeros(64, 1000)
    explanation = rooftune.explain_kernel(row_sum, {"x_ptr": x, "y_ptr": torch.zeros(64), "n_cols": 1000}, (64,),
                                          configs=CONFIGS, profile="h100_sxm")
    rows = explanation.rows()
    assert [r["config"] for r in rows[-2:]] == ["BLOCK=100 w1 s2", "BLOCK=100 w4 s2"]  # not read: last, in order
    assert all(r["µs"] == "not read" for r in rows[-2:]) and all(float(r["µs"]) > 0 for r in rows[:-2])
    assert [float(r["µs"]) for r in rows[:4]] == sorted(float(r["µs"]) for r in rows[:4])
    text = str(explanation)
    assert "row_sum on NVIDIA H100 80GB HBM3 (SXM): 6 configs" in text
    assert "for loop 0: 0 .. n_cols step" in text and "rule: 1 masked load/store op(s)" in text
    assert "not read: BLOCK=100 w1 s2: lowering:" in text


def test_the_command_explains_a_scripts_call(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(SCRIPT)
    result = CliRunner().invoke(app, ["explain", "kernel", str(script), "--call", "example", "--gpu", "h100_sxm",
                                      "--top", "3"])
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())  # rich wraps the title on a narrow terminal
    assert "scale on NVIDIA H100 80GB HBM3 (SXM): 4 configs as rooftune ranks them" in words
    assert "best predicted: BLOCK=" in words and "grid (" in words
    for call, words in [("missing", "defines no function 'missing'"), ("broken", "must return (kernel, args dict")]:
        result = CliRunner().invoke(app, ["explain", "kernel", str(script), "--call", call])
        assert result.exit_code == 2 and words in " ".join(result.output.split()), result.output


@pytest.mark.slow
def test_compile_workers_never_import_the_users_program(tmp_path):
    """The script runs as a program (no TRITON_INTERPRET: Triton jit kernels), its configs compiled by two spawned
    workers; the marker file shows the program was imported by its own process alone."""
    script, marker = tmp_path / "user.py", tmp_path / "imported"
    script.write_text(SCRIPT)
    env = {**os.environ, "MARKER": str(marker), "ROOFTUNE_COMPILE_WORKERS": "2",
           "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "scale on NVIDIA H100" in done.stdout and "not read" not in done.stdout
    assert marker.read_text().split() == [marker.read_text().split()[0]]
