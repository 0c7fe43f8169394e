"""Inputs a fuzz pass found (issue 42), one test per cause: each exits 2 with one message naming the bad value and
the file, no traceback, nothing written or changed; no input blocks (a FIFO), and eval's largest budget is quick."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import cli_error, heldout_copy, rewrite_text
from typer.testing import CliRunner

from rooftune.eval.datasets.format import read_shape_text
from rooftune.tuner.cli.app import app

runner = CliRunner()
REPO = Path(__file__).parents[2]
SHIPPED_GEMM = REPO / "hwprofiles" / "residuals" / "triton-3.6" / "gemm-NVIDIA_H200.json"
AH_HEAD = ("m,k,n,mat1_dtype,mat2_dtype,mat1_stride_0,mat1_stride_1,mat2_stride_0,mat2_stride_1,mat1_iscontig,"
           "mat2_iscontig,using_tf32,choice,feedback")
AH_TRITON = "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4"


def _snapshot(root: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def _refused(tmp_path: Path, args: list[str], *words: str, env: dict | None = None) -> str:
    """Run `args`: exit 2, `error:` with every word, no traceback, no file under tmp_path written or changed."""
    before = _snapshot(tmp_path)
    text = cli_error(runner.invoke(app, args, env=env), *words)
    assert _snapshot(tmp_path) == before
    return text


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _binary(tmp_path: Path) -> Path:
    path = tmp_path / "some.bin"
    path.write_bytes(bytes(range(256)) * 4)
    return path


# --- inputs that are not regular text files --------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    lambda p: ["eval", "gemm", "--data", p, "--budget", "2"],
    lambda p: ["report", "gemm", "--data", p],
    lambda p: ["sweep", "gemm", "--shapes", p, "--out", "OUT"],
    lambda p: ["tune", "model", "--config", p, "--batch", "1"],
    lambda p: ["explain", "gemm", "--shape", "64x64x64", "--gpu", p],
    lambda p: ["explain", "gemm", "--shape", "64x64x64", "--residual", p],
])
def test_a_fifo_input_is_refused_without_opening_it(tmp_path, command):
    """A FIFO blocked eval, tune model and sweep forever, and read as 'no such profile/residual file' elsewhere."""
    fifo = str(_fifo(tmp_path))
    args = [str(tmp_path / "out") if a == "OUT" else a for a in command(fifo)]
    _refused(tmp_path, args, fifo, "is a pipe (FIFO)")


@pytest.mark.parametrize("command", [
    lambda p, d: ["explain", "gemm", "--shape", "64x64x64", "--gpu", p],
    lambda p, d: ["sweep", "gemm", "--shapes", p, "--out", str(d / "out")],
    lambda p, d: ["tune", "model", "--config", p, "--batch", "1"],
])
def test_a_binary_file_where_json_is_expected(tmp_path, command):
    binary = str(_binary(tmp_path))
    _refused(tmp_path, command(binary, tmp_path), binary, "not a text file", "byte 0x80")


def test_a_binary_dataset_manifest(tmp_path):
    root = heldout_copy(tmp_path)
    (root / "manifest.json").write_bytes(bytes(range(256)))
    _refused(tmp_path, ["eval", "gemm", "--data", str(root), "--budget", "2"], "manifest.json", "not a text file")


def test_sweep_shapes_that_is_a_folder(tmp_path):
    (tmp_path / "shapes").mkdir()
    _refused(tmp_path, ["sweep", "gemm", "--shapes", str(tmp_path / "shapes"), "--out", str(tmp_path / "out")],
             str(tmp_path / "shapes"), "is a folder")


# --- datasets whose fields have the wrong JSON type -------------------------------------------------------------

@pytest.mark.parametrize("field, value", [("device", "x"), ("device", [1]), ("gpu_profile", [1]), ("kernel", 3)])
def test_a_manifest_field_of_the_wrong_type(tmp_path, field, value):
    root = heldout_copy(tmp_path)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest[field] = value
    (root / "manifest.json").write_text(json.dumps(manifest))
    _refused(tmp_path, ["eval", "gemm", "--data", str(root), "--budget", "2"], "manifest.json", f"'{field}' must be",
             repr(value))


@pytest.mark.parametrize("field, value", [("baselines_us", [1]), ("meta", [1]), ("meta", None), ("shape", [1])])
def test_a_shape_header_field_of_the_wrong_type(tmp_path, field, value):
    root = heldout_copy(tmp_path)
    victim = next((root / "shapes").iterdir())
    head, _, body = read_shape_text(victim).partition("\n")
    header = json.loads(head[len("# rooftune-shape "):])
    header[field] = value
    rewrite_text(victim, f"# rooftune-shape {json.dumps(header)}\n{body}")
    _refused(tmp_path, ["report", "gemm", "--data", str(root)], victim.name, f"'{field}' must be a JSON object",
             repr(value))


# --- AutoHeuristic logs -----------------------------------------------------------------------------------------

def _ah(tmp_path: Path, rows: list[str], dtype: str = "torch.bfloat16") -> Path:
    path = tmp_path / "mm.txt"
    lead = f"256,512,256,{dtype},{dtype},512,1,256,1,True,True,not_float_32,"
    lines = [row[1:] if row.startswith("!") else lead + row for row in rows]
    path.write_text(json.dumps({"shared_memory": 232448, "device_capa": [9, 0], "name": "mm"}) + "\n" + AH_HEAD
                    + "\n" + "\n".join(lines) + "\n")
    return path


def test_an_autoheuristic_short_row(tmp_path):
    log = _ah(tmp_path, ["extern_mm,0.01", "!256,512,256,torch.bfloat16"])
    _refused(tmp_path, ["eval", "gemm", "--data", str(log), "--budget", "2", "--gpu", "h200"], "mm.txt", "line 4",
             "4 cells where the header has 14 columns")


def test_an_int8_autoheuristic_log(tmp_path):
    log = _ah(tmp_path, [f"{AH_TRITON},0.01"], dtype="torch.int8")
    text = _refused(tmp_path, ["eval", "gemm", "--data", str(log), "--budget", "2", "--gpu", "h200"], "mm.txt",
                    "mat1_dtype 'torch.int8'")
    assert "column" not in text


@pytest.mark.parametrize("rows, why", [
    (["extern_mm,0.01"], "records no config of the space"),
    ([f"{AH_TRITON},inf"], "every one of its 1 recorded configs of the space failed"),
    (["type=something_else,0.01"], "records no config of the space"),
])
def test_eval_with_nothing_to_score(tmp_path, rows, why):
    """Only extern_mm rows, only inf times, only unknown choices: exit 0 with '0 shapes' and every cell 'none'."""
    log = _ah(tmp_path, rows)
    _refused(tmp_path, ["eval", "gemm", "--data", str(log), "--budget", "2", "--gpu", "h200"], "mm.txt",
             "nothing to score", why)


def test_eval_on_a_gpu_where_no_recorded_config_is_legal(tmp_path):
    root = heldout_copy(tmp_path)
    _refused(tmp_path, ["eval", "gemm", "--data", str(root), "--budget", "2", "--gpu", "a100_sxm4_80gb"], str(root),
             "nothing to score on NVIDIA A100", "is legal on NVIDIA A100")


# --- profiles and residuals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("field, text", [("bf16_tflops", "Infinity"), ("dram_bw_gbps", "NaN"),
                                         ("sm_clock_mhz", "-Infinity")])
def test_a_profile_with_a_value_that_is_not_finite(tmp_path, field, text):
    data = json.loads((REPO / "hwprofiles" / "h200.json").read_text())
    data[field] = "@"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data).replace('"@"', text))
    _refused(tmp_path, ["explain", "gemm", "--shape", "64x64x64", "--gpu", str(path)], "p.json", field,
             "must be positive and finite")


@pytest.mark.parametrize("change, words", [
    (lambda d: d["coefficients"].update(stages=float("nan")), ("stages = nan", "not a finite number")),
    (lambda d: d["coefficients"].update(stages=1e308), ("stages = 1e+308", "past")),
    (lambda d: d["coefficients"].pop("stages"), ("missing 1 (stages)",)),
    (lambda d: d["strategy"].update(first_round=-3), ("first_round = -3",)),
])
def test_a_damaged_residual_for_explain_and_eval(tmp_path, change, words):
    data = json.loads(SHIPPED_GEMM.read_text())
    change(data)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    _refused(tmp_path, ["explain", "gemm", "--shape", "4096x4096x4096", "--residual", str(path)], "r.json", *words)
    root = heldout_copy(tmp_path)
    _refused(tmp_path, ["eval", "gemm", "--data", str(root), "--budget", "2", "--residual", str(path)], "r.json", *words)


def test_explain_moe_in_fp32():
    result = runner.invoke(app, ["explain", "moe", "--shape", "128x8x2048x768x64", "--dtype", "fp32"])
    assert result.exit_code == 0 and result.exception is None, result.output


# --- outputs ----------------------------------------------------------------------------------------------------

def test_an_output_that_is_one_of_the_inputs(tmp_path):
    root = heldout_copy(tmp_path)
    shape_file = next((root / "shapes").iterdir())
    _refused(tmp_path, ["eval", "gemm", "--data", str(root), "--budget", "2", "--json", str(root / "manifest.json")],
             "--json", "manifest.json", f"is inside {root}")
    _refused(tmp_path, ["report", "gemm", "--data", str(root), "--markdown", str(shape_file)], "--markdown",
             shape_file.name, "an input of this command")


def _residual_copy(tmp_path: Path) -> Path:
    """The shipped GEMM residual and its neighbour table (its companion, which `read_residual` reads) in tmp_path."""
    path = tmp_path / "r.json"
    path.write_bytes(SHIPPED_GEMM.read_bytes())
    (tmp_path / "neighbours-r.json").write_bytes(SHIPPED_GEMM.with_name(f"neighbours-{SHIPPED_GEMM.name}").read_bytes())
    return path


def test_no_output_is_an_input_companions_included(tmp_path):
    """Issue 57: `eval --json` onto the residual's neighbour table, `fit --route --out DATA/manifest.json`, `fit
    --check --out` onto the --gpu profile or the residual's table: each was written over what the command read."""
    residual, data = _residual_copy(tmp_path), _training(tmp_path)
    table = tmp_path / "neighbours-r.json"
    profile = tmp_path / "h200.json"
    profile.write_bytes((REPO / "hwprofiles" / "h200.json").read_bytes())
    _refused(tmp_path, ["eval", "gemm", "--data", str(data), "--budget", "2", "--residual", str(residual),
                        "--json", str(table)], "--json", "neighbours-r.json", "an input of this command")
    _refused(tmp_path, ["fit", "gemm", "--data", str(data), "--route", "--out", str(data / "manifest.json")],
             "--out", "manifest.json", f"is inside {data}")
    for out in (profile, table):
        _refused(tmp_path, ["fit", "gemm", "--data", str(data), "--gpu", str(profile), "--check", str(residual),
                            "--out", str(out)], "--out", out.name, "an input of this command")


@pytest.mark.parametrize("outputs, words", [
    (["--json", "X", "--markdown", "X"], ("--markdown", "also the path of --json")),
    (["--markdown", "X", "--plot", "X"], ("--plot", "also the path of --markdown")),
])
def test_two_outputs_of_one_command_never_share_a_path(tmp_path, outputs, words):
    """`report --json X --markdown X` said "wrote" twice and kept the Markdown alone."""
    root = heldout_copy(tmp_path)
    args = [str(tmp_path / "x.png") if a == "X" else a for a in outputs]
    _refused(tmp_path, ["report", "gemm", "--data", str(root), *args], "x.png", *words)
    _refused(tmp_path, ["eval", "gemm", "--data", str(root), "--budget", "2", "--json", str(tmp_path / "x.png"),
                        "--plot", str(tmp_path / "x.png")], "--plot", "also the path of --json")


def _training(tmp_path: Path) -> Path:
    root = heldout_copy(tmp_path, shapes=2, name="train")
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["shapes_file"] = "shapes_train.json"
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_fit_without_out_leaves_the_shipped_residual_alone(tmp_path):
    """`fit gemm --data <a few shapes>` replaced the shipped gemm-NVIDIA_H200.json without a word."""
    shipped = SHIPPED_GEMM.read_bytes()
    _refused(tmp_path, ["fit", "gemm", "--data", str(_training(tmp_path))], "give --out FILE", "--out shipped",
             "gemm-NVIDIA_H200.json")
    assert SHIPPED_GEMM.read_bytes() == shipped


def test_fit_refuses_another_kernels_residual_and_its_own_input(tmp_path):
    data = _training(tmp_path)
    _refused(tmp_path, ["fit", "gemm", "--data", str(data), "--out", str(tmp_path / "attention-NVIDIA_H200.json")],
             "attention-NVIDIA_H200.json", "a residual of attention, not gemm")
    _refused(tmp_path, ["fit", "gemm", "--data", str(data), "--out", str(data / "manifest.json")], "manifest.json",
             "an input of this command")


def test_fit_on_one_shape(tmp_path):
    root = heldout_copy(tmp_path, shapes=1, name="one")
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["shapes_file"] = "shapes_train.json"
    (root / "manifest.json").write_text(json.dumps(manifest))
    _refused(tmp_path, ["fit", "gemm", "--data", str(root), "--out", str(tmp_path / "r.json")], str(root),
             "at least 2 shapes")


def test_a_gemm_shape_list_keeps_its_dtype_and_the_sweep_refuses_fp32(tmp_path):
    from rooftune.candidates.shapes import load_shapes

    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([{"m": 64, "n": 64, "k": 64, "dtype": "fp32"}]))
    assert load_shapes(shapes)[0].dtype == "fp32"
    _refused(tmp_path, ["sweep", "gemm", "--shapes", str(shapes), "--out", str(tmp_path / "d")], "fp32", "TF32",
             "64x64x64")


@pytest.mark.parametrize("cache", [None, "/proc/rooftune-test/tune.json", "FILE/d/tune.json", "NEW/dir/tune.json"])
def test_tune_with_an_unusable_cache_creates_nothing(tmp_path, cache):
    """Without a GPU, ROOFTUNE_CACHE under /proc or under a file was a mkdir traceback, and the default cache's
    folder (~/.cache/rooftune) or a new one was made before the no-GPU check. Now the cache path's error or the
    no-GPU one comes first, and no folder is made."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "CUDA_VISIBLE_DEVICES": "", "ROOFTUNE_PROFILE": "h200",
           "ROOFTUNE_CACHE": cache and cache.replace("FILE", str(blocker)).replace("NEW", str(tmp_path / "new"))}
    text = _refused(tmp_path, ["tune", "gemm", "--shape", "64x64x64"], env=env)
    assert "no CUDA GPU" in text or f"{blocker} is not a folder" in text, text
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "new").exists()
    assert not Path("/proc/rooftune-test").exists()


def test_tune_moe_names_every_token_count_left_without_a_config(tmp_path, synthetic_gpu, live_from):
    """A token count with no config (here: its configs all fail) would leave a gap in vLLM's table, which serves
    it from the nearest M held: the command says which token counts, why, exits 1 and writes no table."""
    from rooftune.candidates import MOE_SPACE, legal_configs
    from rooftune.hwprofiles import load_profile

    profile = load_profile("h200")
    live_from(synthetic_gpu(profile, 50.0, failing=lambda shape: legal_configs(MOE_SPACE, shape, profile).configs
                            if shape.tokens in (16, 64) else ()), baseline_us=50.0)
    result = runner.invoke(app, ["tune", "moe", "--experts", "8", "--topk", "2", "--hidden", "1024", "--intermediate",
                                 "512", "--batch", "1,16,64", "--budget", "4", "--gpu", "h200", "--gemm", "gate_up",
                                 "--cache", "none", "--out", str(tmp_path)])
    text = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "error: no table written: no config for" in text
    assert "M=16: gate_up: all 4 measured configs failed" in text and "M=64: gate_up: all 4" in text
    assert not list(tmp_path.glob("E=8*.json"))


def _cli(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "rooftune.tuner.cli.app", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=120)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_standard_output_that_cannot_be_written():
    with open("/dev/full", "w") as full:
        result = _cli("explain", "gemm", "--shape", "64x64x64", stdout=full)
    assert result.returncode == 2
    # the error is the one line that ends it (a Triton release without a shipped residual adds its note before)
    assert result.stderr.strip().splitlines()[-1] == "error: cannot write to standard output (No space left on device)"
    assert "Traceback" not in result.stderr and result.stderr.count("error:") == 1


def test_eval_at_a_budget_past_the_space_is_quick(tmp_path):
    """`eval --budget 1000000000` on 3 shapes: capped at the space's size, yet past 300 s in the GP's rounds."""
    root = heldout_copy(tmp_path, shapes=2)
    start = time.perf_counter()
    result = runner.invoke(app, ["eval", "gemm", "--data", str(root), "--budget", "1000000000", "--methods",
                                 "rooftune", "--json", str(tmp_path / "e.json")])
    assert result.exit_code == 0, result.output
    assert time.perf_counter() - start < 60
    summary = json.loads((tmp_path / "e.json").read_text())
    assert summary["methods"]["rooftune"]["mean"] == pytest.approx(1.0, abs=0.02)
