"""Damaged or foreign dataset files: one DatasetError / DatasetFormatError naming the file, never a raw one."""

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from rooftune.eval.datasets.format import DatasetError, DatasetWarning, read_dataset, read_manifest, read_shape
from rooftune.eval.datasets.readers import (
    DatasetFormatError,
    load_records,
    read_probe_attention,
    read_probe_gemm,
    recorded_gpu,
)

HELDOUT = Path(__file__).parents[2] / "datasets" / "h200" / "gemm" / "heldout"
HEADER = '# rooftune-shape {"shape": {"m": 64, "n": 64, "k": 64, "layout": "kn", "dtype": "bf16"}, ' \
         '"baselines_us": {}, "meta": {}}'


@pytest.mark.parametrize("body, message", [
    ("BLOCK_M,time_us\n64,1.0\n", "no 'num_warps' column"),
    ("BLOCK_M,num_warps,num_stages,time_us,error\nx,4,3,1.0,\n", r"row 1 \(line 3\): invalid literal"),
])
def test_shape_file_with_bad_columns_or_values(tmp_path, body, message):
    path = tmp_path / "s.csv.gz"
    path.write_bytes(gzip.compress(f"{HEADER}\n{body}".encode()))
    with pytest.raises(DatasetError, match=message) as error:
        read_shape(path)
    assert "s.csv.gz" in str(error.value)


COLUMNS = "BLOCK_M,num_warps,num_stages,time_us,error,compile_s,rounds,spread,screen_us,retime_us,retime2_us," \
          "retime_rounds,in_space"
GOOD_ROW = "64,4,3,10.0,,1.5,7,0.01,9.5,10.0,10.1,15,1"


@pytest.mark.parametrize("column, value", [
    ("time_us", "-5"), ("time_us", "0"), ("time_us", "nan"), ("time_us", "inf"), ("time_us", "-inf"),
    ("screen_us", "nan"), ("retime_us", "-1"), ("retime2_us", "0"), ("compile_s", "-0.5"), ("spread", "inf"),
])
def test_shape_file_times_must_be_finite_and_positive(tmp_path, column, value):
    row = GOOD_ROW.split(",")
    row[COLUMNS.split(",").index(column)] = value
    path = tmp_path / "s.csv.gz"
    path.write_bytes(gzip.compress(f"{HEADER}\n{COLUMNS}\n{GOOD_ROW}\n{','.join(row)}\n".encode()))
    with pytest.raises(DatasetError, match=rf"s\.csv\.gz: row 2 \(line 4\): {column} = ") as error:
        read_shape(path)
    assert "finite" in str(error.value) and "damaged" in str(error.value)


@pytest.mark.parametrize("value", ["NaN", "-3.0", "0", '"fast"'])
def test_shape_file_baselines_must_be_finite_and_positive(tmp_path, value):
    path = tmp_path / "s.csv.gz"
    header = HEADER.replace('"baselines_us": {}', f'"baselines_us": {{"cublas": {value}}}')
    path.write_bytes(gzip.compress(f"{header}\n{COLUMNS}\n{GOOD_ROW}\n".encode()))
    with pytest.raises(DatasetError, match="s.csv.gz: header line: baseline cublas = .* finite, positive"):
        read_shape(path)


@pytest.mark.parametrize("line", ["64,64,64,64,64,32,3,4,1,nan,", "64,64,64,64,64,32,3,4,1,-2,",
                                  "64,64,64,cublas,,,,,,0,"])
def test_probe_times_must_be_finite_and_positive(tmp_path, line):
    path = tmp_path / "gemm_probe.csv.gz"
    path.write_bytes(gzip.compress(f"M,N,K,BM,BN,BK,stages,warps,GM,us,err\n64,64,64,64,64,32,3,4,1,9.0,\n"
                                   f"{line}\n".encode()))
    with pytest.raises(DatasetFormatError, match=r"gemm_probe\.csv\.gz: line 3: us = .* finite, positive"):
        load_records(path)


def test_autoheuristic_feedback_must_be_finite_and_positive_or_inf(tmp_path):
    header = ("m,k,n,mat1_dtype,using_tf32,mat1_stride_0,mat1_stride_1,mat2_stride_0,mat2_stride_1,choice,feedback")
    row = "64,64,64,torch.bfloat16,False,64,1,64,1,type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4,"
    meta = json.dumps({"device_capa": [9, 0], "shared_memory": 232448})
    path = tmp_path / "mm.txt"
    path.write_text(f"{meta}\n{header}\n{row}inf\n{row}0.01\n")
    assert load_records(path)[0].trials  # inf: a failed choice, kept as such
    path.write_text(f"{meta}\n{header}\n{row}0.01\n{row}nan\n")
    with pytest.raises(DatasetFormatError, match=r"mm\.txt: line 4: feedback = nan"):
        load_records(path)


def test_shape_file_with_a_bad_shape_header(tmp_path):
    path = tmp_path / "s.csv.gz"
    path.write_bytes(gzip.compress(HEADER.replace('"m": 64', '"m": 0').encode() + b"\ntime_us\n"))
    with pytest.raises(DatasetError, match="m must be >= 1"):
        read_shape(path)


def test_manifest_that_is_not_an_object(tmp_path):
    (tmp_path / "manifest.json").write_text("[]")
    with pytest.raises(DatasetError, match="expected a JSON object"):
        read_manifest(tmp_path)


@pytest.mark.parametrize("content", [b"\x1f\x8b\x08\x00 truncated", b"\x00\x01 not gzip at all"])
def test_damaged_single_file(tmp_path, content):
    path = tmp_path / "probe.csv.gz"
    path.write_bytes(content)
    with pytest.raises(DatasetFormatError, match="probe.csv.gz"):
        load_records(path)


def test_probe_with_a_missing_column(tmp_path):
    path = tmp_path / "gemm_probe.csv.gz"
    path.write_bytes(gzip.compress(b"M,N,K,BM,BN,BK,stages,warps,us,err\n64,64,64,64,64,32,3,4,9.0,\n"))
    with pytest.raises(DatasetFormatError, match="no 'GM' column"):
        load_records(path)


def test_truncated_shape_file_in_a_folder(tmp_path):
    root = tmp_path / "ds"
    (root / "shapes").mkdir(parents=True)
    shutil.copy(HELDOUT / "manifest.json", root)
    first = sorted((HELDOUT / "shapes").iterdir())[0]
    (root / "shapes" / first.name).write_bytes(first.read_bytes()[:200])
    with pytest.raises(DatasetError, match=first.name):
        read_dataset(root)


def test_recorded_gpu(tmp_path):
    assert recorded_gpu(HELDOUT) == json.loads((HELDOUT / "manifest.json").read_text())["gpu_profile"]
    assert recorded_gpu(tmp_path) is None and recorded_gpu(tmp_path / "probe.csv.gz") is None


# --- issue 57: rows outside the space, times under any kernel's, probe rows cut short --------------------------

GEMM_COLUMNS = ("BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,SPLIT_K,TMA,PERSISTENT,FIXUP,BLOCK_N2,num_warps,num_stages,"
                "time_us,error,retime_us,retime2_us,retime_rounds,in_space")
GEMM_ROW = "64,64,64,1,1,1,0,0,0,4,3,{time},,,,,{in_space}"


def _gemm_file(tmp_path, *rows: str) -> Path:
    path = tmp_path / "s.csv.gz"
    path.write_bytes(gzip.compress((f"{HEADER}\n{GEMM_COLUMNS}\n" + "\n".join(rows) + "\n").encode()))
    return path


@pytest.mark.parametrize("row, words", [
    ("17,64,64,1,1,1,0,0,0,4,3,0.5,,,,,1", "BLOCK_M=17 is not in the gemm space"),
    ("64,64,64,1,1,1,0,0,0,2,3,0.5,,,,,1", "num_warps=2"),
    ("64,64,64,3,1,1,0,0,0,4,3,0.5,,,,,1", "GROUP_M=3"),
])
def test_a_row_outside_the_space_is_left_out_with_one_warning(tmp_path, row, words):
    """BLOCK_M=17 at 0.5 µs was read as the space's best: eval scores near 0.01, report 401x cuBLAS."""
    baseline = "64,64,32,8,1,1,0,0,0,4,3,12.0,,,,,0"  # a baseline's row: outside the space, by its in_space
    path = _gemm_file(tmp_path, GEMM_ROW.format(time=10.0, in_space=1), row, baseline)
    with pytest.warns(DatasetWarning) as caught:
        records = read_shape(path)
    assert len(caught) == 1
    assert re.search(rf"s\.csv\.gz: 1 of 3 rows left out.*row 2 \(line 4\): {re.escape(words)}", str(caught[0].message))
    assert [t.time_us for t in records.trials] == [10.0, 12.0] and records.best_candidate_us == 10.0


def test_a_baseline_row_with_a_parameter_the_space_lacks_is_left_out(tmp_path):
    path = tmp_path / "s.csv.gz"
    path.write_bytes(gzip.compress(f"{HEADER}\nBLOCK_Q,num_warps,num_stages,time_us,error,retime_us,retime2_us,"
                                   "retime_rounds,in_space\n64,4,3,1.0,,,,,0\n".encode()))
    with pytest.warns(DatasetWarning, match="BLOCK_Q is not a parameter of the gemm space"):
        assert read_shape(path).trials == ()


@pytest.mark.parametrize("time", ["1e-308", "5e-324", "0.0999", "1e-3"])
def test_a_time_under_any_kernels_is_refused(tmp_path, time):
    """time_us=1e-308 was accepted: the worst tenth read 0.000."""
    path = _gemm_file(tmp_path, GEMM_ROW.format(time=10.0, in_space=1), GEMM_ROW.format(time=time, in_space=1))
    with pytest.raises(DatasetError, match=r"s\.csv\.gz: row 2 \(line 4\): time_us = .* at least 0\.1 µs"):
        read_shape(path)


@pytest.mark.parametrize("kind, head, line", [
    ("gemm", "M,N,K,BM,BN,BK,stages,warps,GM,us,err", "64,64"),
    ("gemm", "M,N,K,BM,BN,BK,stages,warps,GM,us,err", "64,64,64,64,64,32,3,4,1,9.0,,extra"),
    ("attention", "B,H,S,D,BM,BN,stages,warps,rev,us,err", "64,64"),
    ("attention", "B,H,S,D,BM,BN,stages,warps,rev,us,err", "1"),
])
def test_a_probe_row_cut_short_is_named(tmp_path, kind, head, line):
    """`64,64` in a probe CSV raised TypeError from read_probe_gemm / read_probe_attention."""
    path = tmp_path / f"{kind}_probe.csv"
    path.write_text(f"{head}\n{line}\n")
    reader = read_probe_gemm if kind == "gemm" else read_probe_attention
    for read in (reader, load_records):
        with pytest.raises(DatasetFormatError, match=rf"{kind}_probe\.csv: line 2: \d+ cells where the header has 11"):
            read(path)


@pytest.mark.parametrize("row, words", [
    ("64,64,64,1,1,1,0,0,0,4,3,11.0,,,,,1", "its config BLOCK_M=64,"),  # the first row's config again
    ("64,64,64,1,1,1,0,0,0,8,3,11.0,,,,,1,5", "18 cells where the header has 17 columns"),
    ("64,64,64,1,1,1,0,0,0,8,3,11.0", "12 cells where the header has 17 columns"),
])
def test_a_repeated_or_run_on_row_is_refused(tmp_path, row, words):
    """A row with an extra cell (the first row's copy with ",1") was read, the cell dropped, the config twice."""
    path = _gemm_file(tmp_path, GEMM_ROW.format(time=10.0, in_space=1), row)
    with pytest.raises(DatasetError, match=rf"s\.csv\.gz: row 2 \(line 4\): {re.escape(words)}"):
        read_shape(path)


def test_a_shape_of_another_kernel_than_the_manifest_names_is_refused(tmp_path):
    """`eval gemm` scored a folder whose manifest said attention."""
    root = tmp_path / "ds"
    shutil.copytree(HELDOUT, root, ignore=lambda folder, names: [n for n in names if n.endswith(".xz")][1:])
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "kernel": "attention"}))
    with pytest.raises(DatasetError, match=r"holds a gemm shape .* says its measurements are of attention"):
        read_dataset(root)
