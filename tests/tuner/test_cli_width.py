"""The command line at 80 columns: every table fits without cutting a number, every option has help
text, and the README's command table lists every option."""

import json
import re
import shutil
from pathlib import Path

import pytest
import typer.main
from fakes import HELDOUT, heldout_copy
from typer.testing import CliRunner

from rooftune.candidates import AttentionShape, Config, kernel_of, legal_configs
from rooftune.eval.datasets.format import ShapeRecords, Trial, write_manifest, write_shape
from rooftune.hwprofiles import load_profile
from rooftune.tuner.cli.app import app

REPO = Path(__file__).parents[2]
PROFILE = load_profile("h200")
runner = CliRunner()


def run(args: list[str], columns: int = 80, code: int = 0) -> str:
    """The command's output at `columns`, after checking it fits: no line wider, no cell cut to '…' (an
    error on stderr is one line, for the terminal to wrap)."""
    result = runner.invoke(app, args, env={"COLUMNS": str(columns)})
    assert result.exit_code == code, result.output
    wide = [line for line in result.stdout.splitlines() if len(line) > columns]
    assert not wide, "\n".join(wide)
    assert "…" not in result.stdout, result.stdout
    return result.stdout


@pytest.fixture
def gemm_dataset(tmp_path) -> Path:
    """The committed held-out shapes with the longest names (and so the widest rows), with their list."""
    shutil.copy(HELDOUT.parent / "shapes_heldout.json", tmp_path / "shapes_heldout.json")
    return heldout_copy(tmp_path, 4, "heldout", order=lambda p: -len(p.name))


@pytest.fixture
def attention_dataset(tmp_path) -> Path:
    """Two attention shapes, one slow enough for five-digit times, one with a long source label."""
    root = tmp_path / "attention"
    (tmp_path / "shapes.json").write_text(json.dumps([
        {"batch": 16, "heads": 64, "seq": 32768, "head_dim": 128, "kv_heads": 8, "source": "llama3-70b long prefill"},
        {"batch": 31, "heads": 16, "kv_heads": 2, "seq": 64, "head_dim": 64, "source": "random gqa8"}]))
    write_manifest(root, {"kernel": "attention", "shapes_file": "shapes.json"})
    configs = [Config.make(4, 2, BLOCK_M=bm, BLOCK_N=64, ORDER=1, TMA=1) for bm in (64, 128)]
    write_shape(root, ShapeRecords(AttentionShape(16, 64, 32768, 128, kv_heads=8), (
        Trial(configs[0], 123456.78, retime_us=123456.78, retime2_us=123500.0),
        Trial(configs[1], None, error="check: bad")), {"sdpa": 98765.43}))
    write_shape(root, ShapeRecords(AttentionShape(31, 16, 64, 64, kv_heads=2), (
        Trial(configs[0], 9.0),), {"sdpa": 18.0}))
    return root


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("kernel", ["gemm", "attention"])
def test_report_fits_and_shows_every_number(kernel, columns, gemm_dataset, attention_dataset, tmp_path):
    data = {"gemm": gemm_dataset, "attention": attention_dataset}[kernel]
    summary = tmp_path / "report.json"
    text = run(["report", kernel, "--data", str(data), "--json", str(summary)], columns)
    for row in json.loads(summary.read_text())["rows"]:
        for us in (row["best_us"], row["baseline_us"]):
            assert f"{us:.2f}" in text
        assert f"{row['vs_baseline']:.3f}" in text
        if row["ratio_p90"] is not None:  # the final passes' repeatability: from 120 columns on
            line = next(line for line in text.splitlines() if f"{row['best_us']:.2f}" in line)
            assert (f"{row['ratio_p90']:.2%}" in line) == (columns >= 120)


def test_eval_fits(gemm_dataset, tmp_path):
    summary = tmp_path / "eval.json"
    text = run(["eval", "gemm", "--data", str(gemm_dataset), "--budget", "5", "--gpu", "h200",
                "--methods", "rooftune,model", "--json", str(summary)])
    for method, scores in json.loads(summary.read_text())["methods"].items():
        assert re.search(rf"{method}\W+{scores['mean']:.3f}\W+{scores['p10']:.3f}", text), text


@pytest.mark.parametrize("args", [
    ["hwprofiles"],
    ["space", "gemm", "--shape", "4096x4096x4096"],
    ["space", "attention", "--shape", "4x32x4096x128x8"],
    ["explain", "gemm", "--shape", "4096x4096x4096", "--config",
     "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,SPLIT_K=1,TMA=1,PERSISTENT=0,FIXUP=0,num_warps=8,num_stages=3"],
    ["explain", "attention", "--shape", "4x32x4096x128x8", "--top", "10"],
    ["explain", "moe", "--shape", "128x8x2048x768x4096", "--gemm", "down", "--config",
     "BLOCK_SIZE_M=128,BLOCK_SIZE_N=256,BLOCK_SIZE_K=64,GROUP_SIZE_M=16,num_warps=8,num_stages=4"],
])
def test_model_commands_fit(args):
    run(args)


@pytest.fixture
def fake_gpu(synthetic_gpu, live_from):
    """Every shape 'measured' as tests/tuner/conftest.py's synthetic records, every third config failing its
    check; the library baseline at a fixed time."""
    return live_from(synthetic_gpu(PROFILE, 1234.5, failing=lambda shape: legal_configs(
        kernel_of(shape).space, shape, PROFILE).configs[::3]), baseline_us=1234.5)


@pytest.mark.parametrize("kernel, shape", [("gemm", "512x512x512"), ("attention", "1x8x512x64")])
def test_tune_fits_with_failed_configs(kernel, shape, fake_gpu, tmp_path):
    out = tmp_path / "tuned.json"
    text = run(["tune", kernel, "--shape", shape, "--budget", "6", "--cache", "none", "--json", str(out)])
    trials = json.loads(out.read_text())["trials"]
    assert any(t["error"] for t in trials)
    for trial in trials:
        assert (f"{trial['time_us']:.2f}" if trial["time_us"] is not None else trial["error"]) in text


def test_tune_model_fits_with_a_failed_layer(fake_gpu):
    # budget 1: the picks for qkv, attention and down at 1 token fail (exit 1, the rest printed)
    text = run(["tune", "model", "--config", "llama-3-8b", "--batch", "1,2048", "--budget", "1", "--cache", "none"],
               code=1)
    assert "failed" in text and "forward*" in text


def _commands(command=None, path=()):
    """(path, command) for the root command and every command below it."""
    command = command or typer.main.get_command(app)
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _options(command):
    return [p for p in command.params if not p.hidden and "--help" not in p.opts]


def test_every_command_and_option_has_help():
    missing = [f"rooftune {' '.join(path)}: {'/'.join(p.opts)}" for path, command in _commands()
               for p in _options(command) if not (p.help or "").strip()]
    missing += [f"rooftune {' '.join(path)}" for path, command in _commands() if not (command.help or "").strip()]
    assert not missing, missing


def test_help_fits_80_columns():
    for path, _ in _commands():
        run([*path, "--help"])


def test_the_readme_lists_every_option():
    """Each command's rows in the README's table of commands (a row starts with `rooftune COMMAND`)
    name each of its options."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("\n## Commands\n"):]
    section = section[:section.index("\n## ", 1)]
    missing = []
    for path, command in _commands():
        if not _options(command):
            continue
        prefix = f"| `rooftune {' '.join(path)}".rstrip()
        rows = " ".join(line for line in section.splitlines() if re.match(re.escape(prefix) + r"[ `]", line))
        missing += [f"rooftune {' '.join(path)} {p.opts[0]}" for p in _options(command)
                    if not any(re.search(re.escape(o) + r"\b", rows) for o in p.opts + p.secondary_opts)]
    assert not missing, missing
