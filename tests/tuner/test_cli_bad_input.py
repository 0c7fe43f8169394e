"""Bad input as a new user gives it: each is one clear error naming the field, exit 2, no traceback."""

import gzip
import json
import warnings
from pathlib import Path

import pytest
from fakes import cli_error, heldout_copy, rewrite_text
from typer.testing import CliRunner

from rooftune.candidates import ATTENTION_SPACE, GEMM_SPACE
from rooftune.eval.datasets.format import DatasetWarning, read_shape_text
from rooftune.eval.datasets.readers import load_records
from rooftune.tuner.cli.app import app

runner = CliRunner()


def _config(space, **override) -> str:
    """A config string of `space`: each parameter's first grid value unless overridden."""
    return ",".join(f"{name}={override.get(name, values[0])}" for name, values in space.grid)


def _bad_input(args: list[str], *fields: str) -> str:
    return cli_error(runner.invoke(app, args), *fields)


@pytest.mark.parametrize("kernel, override, field", [
    ("gemm", {"BLOCK_M": -128}, "BLOCK_M=-128"),
    ("gemm", {"BLOCK_M": 0}, "BLOCK_M=0"),
    ("gemm", {"BLOCK_M": 100}, "BLOCK_M=100"),
    ("gemm", {"num_warps": 3}, "num_warps=3"),
    ("gemm", {"num_stages": 0}, "num_stages=0"),
    ("attention", {"ORDER": 9}, "ORDER=9"),
    ("attention", {"BLOCK_M": -64}, "BLOCK_M=-64"),
])
def test_explain_config_outside_the_grid(kernel, override, field):
    space = {"gemm": GEMM_SPACE, "attention": ATTENTION_SPACE}[kernel]
    shape = {"gemm": "4096x4096x4096", "attention": "2x32x4096x128"}[kernel]
    name = next(iter(override))
    allowed = ", ".join(map(str, dict(space.grid)[name]))
    _bad_input(["explain", kernel, "--shape", shape, "--config", _config(space, **override)], field, allowed)


@pytest.mark.parametrize("override, field", [({"num_warps": 3}, "num_warps=3"), ({"BLOCK_M": -128}, "BLOCK_M=-128"),
                                             ({"SPLIT_K": 0}, "SPLIT_K=0")])
def test_a_bad_value_is_named_before_a_missing_parameter(override, field):
    """A config written without BLOCK_N2 (as the README wrote it before space 7) with one bad value was
    reported as "missing parameter(s) BLOCK_N2": the bad value comes first."""
    config = ",".join(f"{k}={v}" for k, v in {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1,
                                                "TMA": 1, "PERSISTENT": 1, "FIXUP": 0, "num_warps": 8, "num_stages": 4,
                                                **override}.items())
    text = _bad_input(["explain", "gemm", "--shape", "4096x4096x4096", "--config", config], field,
                      "is not in the gemm space")
    assert "missing" not in text and "BLOCK_N2" not in text


def test_explain_config_in_the_grid_but_illegal_is_still_explained():
    config = _config(GEMM_SPACE, BLOCK_M=256, BLOCK_N=256, BLOCK_K=256, num_stages=5)
    result = runner.invoke(app, ["explain", "gemm", "--shape", "64x64x64", "--config", config])
    assert result.exit_code == 0, result.output
    assert "illegal:" in " ".join(result.output.split())


@pytest.mark.parametrize("kernel, shape, field", [
    ("gemm", "99999999999x99999999999x99999999999", "m = 99999999999"),
    ("gemm", "99999999999x2x2", "m = 99999999999"),
    ("gemm", "64x64x8388608", "k = 8388608"),
    ("gemm", "2147483391x272x64", "output tiles"),
    ("attention", "1x1x99999999999x64", "seq = 99999999999"),
    ("attention", "65536x1024x4096x64", "batch · heads · seq/64"),
])
def test_shape_over_the_size_limit(kernel, shape, field):
    _bad_input(["explain", kernel, "--shape", shape], field, "limit")


def test_damaged_shape_file_in_a_dataset_folder(tmp_path):
    root = heldout_copy(tmp_path, 2)
    victim = sorted((root / "shapes").iterdir())[0]
    victim.write_bytes(victim.read_bytes()[:300])
    for args in (["eval", "gemm", "--data", str(root), "--budget", "5"], ["report", "gemm", "--data", str(root)]):
        _bad_input(args, victim.name, f"not a readable {'gzip' if victim.name.endswith('.gz') else 'xz'} file")


def test_shape_file_with_wrong_columns(tmp_path):
    root = heldout_copy(tmp_path, 2)
    victim = sorted((root / "shapes").iterdir())[0]
    header, _, rest = read_shape_text(victim).partition("\n")
    rewrite_text(victim, f"{header}\nBLOCK_M,time_us\n64,1.0\n")
    _bad_input(["report", "gemm", "--data", str(root)], victim.name, "num_warps")


@pytest.mark.parametrize("content", [b"\x00\x01 not gzip", b"M,N,K\n1,2,3\n"])
def test_single_file_that_is_not_a_dataset(tmp_path, content):
    data = tmp_path / "data.csv.gz"
    data.write_bytes(content)
    _bad_input(["eval", "gemm", "--data", str(data), "--budget", "5"], "data.csv.gz")
    _bad_input(["report", "gemm", "--data", str(data)], "data.csv.gz")


def test_probe_with_a_bad_value_names_the_file(tmp_path):
    data = tmp_path / "gemm_probe.csv.gz"
    data.write_bytes(gzip.compress(b"M,N,K,BM,BN,BK,stages,warps,GM,us,err\n64,64,x,64,64,32,3,4,1,9.0,\n"))
    _bad_input(["eval", "gemm", "--data", str(data), "--budget", "5"], "gemm_probe.csv.gz", "'x'")


def _output_options(tmp_path: Path) -> list[tuple[list[str], str]]:
    """(a command before its output option, the option) for every command that writes a file."""
    root = heldout_copy(tmp_path, shapes=1)
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([{"m": 64, "n": 64, "k": 64}]))
    return [(["eval", "gemm", "--data", str(root), "--budget", "2"], "--json"),
            (["report", "gemm", "--data", str(root)], "--json"),
            (["report", "gemm", "--data", str(root)], "--markdown"),
            (["tune", "gemm", "--shape", "64x64x64"], "--json"),
            (["tune", "gemm", "--shape", "64x64x64"], "--cache"),
            (["hwprobe"], "--out")]


def test_output_path_that_is_a_folder_or_cannot_be_made(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for args, option in _output_options(tmp_path):
        _bad_input([*args, option, str(tmp_path)], option, "is a folder")
        _bad_input([*args, option, str(blocker / "x.json")], option, "is not a folder")
        _bad_input([*args, option, str(tmp_path / "missing" / "x.json")], option, "does not exist")


def test_sweep_out_that_is_a_file(tmp_path):
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([{"m": 64, "n": 64, "k": 64}]))
    _bad_input(["sweep", "gemm", "--shapes", str(shapes), "--out", str(shapes)], "--out", "not a folder")
    _bad_input(["sweep", "gemm", "--shapes", str(shapes), "--out", str(shapes / "d")], "--out", "not a folder")


@pytest.mark.parametrize("args, field", [
    (["tune", "gemm", "--shape", "512x512x512", "--sms", "0"], "--sms must be between 1 and 132"),
    (["tune", "gemm", "--shape", "512x512x512", "--sms", "133"], "got 133"),
    (["tune", "gemm", "--shape", "512x512x512", "--budget", "0"], "--budget"),
    (["hwprobe", "--sms", "0"], "--sms must be at least 1"),
])
def test_tune_and_probe_options_are_checked_before_the_gpu(args, field):
    _bad_input(args, field)


def test_sweep_refuses_dtypes_the_kernel_would_run_as_tf32(tmp_path):
    """The kernels' dots leave the input precision at Triton's default (TF32): an fp32 shape would be timed as
    TF32 under the fp32 name, so the sweep refuses it before the GPU, naming it, and bf16 and fp16 pass."""
    from rooftune.candidates.families import KERNELS, check_sweep_dtypes
    from rooftune.candidates.shapes import AttentionShape, ShapeError
    from rooftune.eval.sweeping.sweep import sweep_shapes
    from rooftune.hwprofiles import load_profile

    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([{"batch": 1, "heads": 2, "seq": 128, "head_dim": 64},
                                  {"batch": 1, "heads": 2, "seq": 256, "head_dim": 64, "dtype": "fp32"}]))
    text = _bad_input(["sweep", "attention", "--shapes", str(shapes), "--out", str(tmp_path / "d")],
                      "fp32", "TF32", "1x2x256x64")
    assert "1 of the list's shapes is fp32" in text
    assert not (tmp_path / "d").exists()
    check_sweep_dtypes(KERNELS["attention"], [AttentionShape(1, 2, 128, 64, dtype=d) for d in ("bf16", "fp16")])
    with pytest.raises(ShapeError, match="2 of the list's shapes are tf32"):
        check_sweep_dtypes(KERNELS["attention"], [AttentionShape(1, 2, 128, 64, dtype="tf32")] * 2)
    with pytest.raises(ShapeError, match="TF32"):  # the library's sweep too, before any GPU work
        sweep_shapes("attention", shapes, tmp_path / "d", load_profile("h200"))
    assert not (tmp_path / "d").exists()


def test_sweep_sms_is_checked_against_the_profile(tmp_path):
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps([{"m": 64, "n": 64, "k": 64}]))
    _bad_input(["sweep", "gemm", "--shapes", str(shapes), "--out", str(tmp_path / "d"), "--sms", "0"], "--sms")
    assert not (tmp_path / "d").exists()


def test_profile_with_a_string_capability_and_a_folder(tmp_path):
    data = json.loads((Path(__file__).parents[2] / "hwprofiles" / "h200.json").read_text())
    data["compute_capability"] = "9.0"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    _bad_input(["space", "gemm", "--shape", "64x64x64", "--gpu", str(path)], "compute_capability",
               "[major, minor] integers", "'9.0'")
    _bad_input(["space", "gemm", "--shape", "64x64x64", "--gpu", str(tmp_path)], "is a folder")


def test_eval_warns_when_the_profile_is_not_the_data_gpu(tmp_path):
    root = heldout_copy(tmp_path, shapes=1)
    result = runner.invoke(app, ["eval", "gemm", "--data", str(root), "--budget", "2", "--gpu", "b200"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "warning:" in text and "NVIDIA B200" in text and "recorded on NVIDIA H200" in text
    same = runner.invoke(app, ["eval", "gemm", "--data", str(root), "--budget", "2", "--gpu", "h200"])
    assert same.exit_code == 0 and "warning:" not in same.output


def test_a_library_value_error_is_not_bad_input(monkeypatch):
    from rooftune import roofline

    def broken(*args, **kwargs):
        raise ValueError("a bug in the model")

    monkeypatch.setattr(roofline, "predict", broken)
    result = runner.invoke(app, ["explain", "gemm", "--shape", "64x64x64"])
    assert result.exit_code == 1 and isinstance(result.exception, ValueError)
    assert "error:" not in result.output


def _ah_log(tmp_path: Path, capability: list[int], smem: int) -> Path:
    """A tiny AutoHeuristic mm log whose metadata line names its GPU's capability and shared memory."""
    head = "m,k,n,mat1_dtype,mat2_dtype,mat1_stride_0,mat1_stride_1,mat2_stride_0,mat2_stride_1,mat1_iscontig," \
           "mat2_iscontig,using_tf32,choice,feedback"
    row = "256,512,256,torch.bfloat16,torch.bfloat16,512,1,256,1,True,True,not_float_32,"
    rows = [row + "extern_mm,0.010", row + "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4,0.020",
            row + "type=triton_BLOCK-M=128_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4,0.030"]
    path = tmp_path / f"sm{capability[0]}{capability[1]}_mm.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"shared_memory": smem, "device_capa": capability, "name": "mm"}) + "\n" + head + "\n"
                + "\n".join(rows) + "\n")
    return path


def test_eval_without_gpu_scores_on_the_profile_the_data_name(tmp_path):
    a100 = _ah_log(tmp_path, [8, 0], 166912)
    result = runner.invoke(app, ["eval", "gemm", "--data", str(a100), "--budget", "2"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "on NVIDIA A100-SXM4-80GB" in text and "recorded on" not in text
    # an H100 and an H200 look alike in such a log: the default among them, said so
    hopper = runner.invoke(app, ["eval", "gemm", "--data", str(_ah_log(tmp_path, [9, 0], 232448)), "--budget", "2"])
    text = " ".join(hopper.output.split())
    assert hopper.exit_code == 0 and "the profiles h100_sxm, h200 all fit; using h200" in text and "on NVIDIA H200" in text
    # an explicit --gpu the data contradict is used, with a warning
    forced = runner.invoke(app, ["eval", "gemm", "--data", str(a100), "--budget", "2", "--gpu", "h200"])
    text = " ".join(forced.output.split())
    assert forced.exit_code == 0 and "recorded on a GPU of compute capability 8.0 with 166912 bytes" in text
    unknown = runner.invoke(app, ["eval", "gemm", "--data", str(_ah_log(tmp_path, [12, 0], 101376)), "--budget", "2"])
    text = " ".join(unknown.output.split())
    assert unknown.exit_code == 0 and "no shipped profile fits" in text and "using h200" in text


def test_fit_without_gpu_refuses_a_gpu_no_profile_fits(tmp_path):
    """A fit writes the residual as the profile's: a default the data contradict would overwrite the wrong one."""
    root = heldout_copy(tmp_path, shapes=1)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["gpu_profile"], manifest["shapes_file"] = "RTX 9090", "shapes_train.json"
    (root / "manifest.json").write_text(json.dumps(manifest))
    _bad_input(["fit", "gemm", "--data", str(root), "--out", str(tmp_path / "r.json")],
               "no shipped profile fits", "RTX 9090", "pass --gpu")
    assert not (tmp_path / "r.json").exists()


def _set_value(path: Path, row: int, column: str, value: str) -> None:
    """Set `column` of data row `row` (from 1) of a shape file."""
    header, _, body = read_shape_text(path).partition("\n")
    lines = body.split("\n")
    index = lines[0].split(",").index(column)
    cells = lines[row].split(",")
    cells[index] = value
    lines[row] = ",".join(cells)
    rewrite_text(path, f"{header}\n{chr(10).join(lines)}")


@pytest.mark.parametrize("value", ["-5", "0", "nan", "inf"])
def test_a_dataset_time_that_is_not_finite_and_positive_is_refused_naming_file_and_row(tmp_path, value):
    """A negative time ended eval, report and fit in a math domain error; NaN gave a silent nan mean and a fit
    on fewer shapes. Every command refuses the damaged file, naming it, the row and the column."""
    root = heldout_copy(tmp_path, shapes=2)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["shapes_file"] = "shapes_train.json"  # fit reads training data only
    (root / "manifest.json").write_text(json.dumps(manifest))
    victim = sorted((root / "shapes").iterdir())[1]
    _set_value(victim, 3, "time_us", value)
    for args in (["eval", "gemm", "--data", str(root), "--budget", "5"], ["report", "gemm", "--data", str(root)],
                 ["fit", "gemm", "--data", str(root), "--out", str(tmp_path / "r.json")]):
        _bad_input(args, victim.name, "row 3 (line 5): time_us", "finite, positive")
    assert not (tmp_path / "r.json").exists()


def test_report_says_none_for_a_group_without_shapes(tmp_path):
    root = heldout_copy(tmp_path, shapes=1)  # no shape list beside it: no decode, prefill or random shapes
    result = runner.invoke(app, ["report", "gemm", "--data", str(root), "--no-rows",
                                 "--json", str(tmp_path / "r.json")])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "decode none (0)" in text and "random none (0)" in text and "nan" not in text
    summary = json.loads((tmp_path / "r.json").read_text())["summary"]  # strict JSON: null, never NaN
    assert summary["vs_cublas_geomean_random"] is None and summary["random_shapes"] == 0


def test_eval_caps_a_budget_larger_than_the_space_and_says_so(tmp_path):
    """`eval --budget 100000` on 5 shapes ran 509 s with no word: a budget past the largest space measures
    nothing more, so it is replayed at the space's size, with a warning."""
    root = heldout_copy(tmp_path, shapes=2)
    largest = max(len(r.candidate_configs()) for r in load_records(root))
    result = runner.invoke(app, ["eval", "gemm", "--data", str(root), "--budget", "100000", "--methods", "model",
                                 "--json", str(tmp_path / "e.json")])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert f"--budget 100000 is more than any shape here has configs (at most {largest}): replaying at {largest}" \
        in text
    assert json.loads((tmp_path / "e.json").read_text())["budget"] == largest


def test_a_row_outside_the_space_is_left_out_of_eval_and_report_with_a_warning(tmp_path):
    """A row of BLOCK_M=17 at 0.5 µs was served as the space's best: eval's scores collapsed to ~0.01 and report
    called it 401x cuBLAS. Now it is left out, with one warning naming the file and the row."""
    root = heldout_copy(tmp_path, shapes=1)
    victim = next((root / "shapes").iterdir())
    header, _, body = read_shape_text(victim).partition("\n")
    lines = body.rstrip("\n").split("\n")
    columns, cells = lines[0].split(","), lines[1].split(",")
    cells[columns.index("BLOCK_M")], cells[columns.index("time_us")] = "17", "0.5"
    cells[columns.index("in_space")] = "1"
    rewrite_text(victim, "\n".join([header, *lines, ",".join(cells)]) + "\n")
    for args in (["eval", "gemm", "--data", str(root), "--budget", "3", "--methods", "model", "--json",
                  str(tmp_path / "e.json")],
                 ["report", "gemm", "--data", str(root), "--json", str(tmp_path / "r.json")]):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        (warned,) = [str(w.message) for w in said if w.category is DatasetWarning]
        assert victim.name in warned and "BLOCK_M=17 is not in the gemm space" in warned
    assert json.loads((tmp_path / "e.json").read_text())["methods"]["model"]["mean"] > 0.5
    (row,) = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert row["best_us"] > 1.0


@pytest.mark.parametrize("value", ["1e-308", "0.01"])
def test_a_dataset_time_under_any_kernels_is_refused(tmp_path, value):
    """time_us=1e-308 was accepted: eval's worst tenth read 0.000."""
    root = heldout_copy(tmp_path, shapes=1)
    victim = next((root / "shapes").iterdir())
    _set_value(victim, 2, "time_us", value)
    for args in (["eval", "gemm", "--data", str(root), "--budget", "2", "--methods", "model"],
                 ["report", "gemm", "--data", str(root)]):
        _bad_input(args, victim.name, "row 2 (line 4): time_us", "at least 0.1 µs")


def test_a_profile_on_which_no_config_is_legal_exits_2_from_every_command(tmp_path, synthetic, counting, live_from):
    """An SM of 64 threads holds no block of the spaces (4 warps and up): `tune` raised a plain ValueError."""
    from rooftune.candidates import parse_gemm_shape
    from rooftune.hwprofiles import load_profile

    profile = json.loads((Path(__file__).parents[2] / "hwprofiles" / "h200.json").read_text())
    path = tmp_path / "t64.json"
    path.write_text(json.dumps({**profile, "max_threads_per_sm": 64}))
    shape = parse_gemm_shape("512x512x512")
    live_from(counting(synthetic(shape, load_profile("h200"))))
    for args in (["explain", "gemm", "--shape", "512x512x512", "--gpu", str(path)],
                 ["tune", "gemm", "--shape", "512x512x512", "--gpu", str(path), "--cache", "none"]):
        _bad_input(args, "no legal gemm config for 512x512x512")
