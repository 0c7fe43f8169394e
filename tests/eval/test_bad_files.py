"""Damaged or foreign dataset files: one DatasetError / DatasetFormatError naming the file, never a raw one."""

import gzip
import json
import shutil
from pathlib import Path

import pytest

from rooftune.eval.dataset import DatasetError, read_dataset, read_manifest, read_shape
from rooftune.eval.readers import DatasetFormatError, load_records, recorded_gpu

HELDOUT = Path(__file__).parents[2] / "datasets" / "h200" / "gemm" / "heldout"
HEADER = '# rooftune-shape {"shape": {"m": 64, "n": 64, "k": 64, "layout": "kn", "dtype": "bf16"}, ' \
         '"baselines_us": {}, "meta": {}}'


@pytest.mark.parametrize("body, message", [
    ("BLOCK_M,time_us\n64,1.0\n", "no 'num_warps' column"),
    ("BLOCK_M,num_warps,num_stages,time_us,error\nx,4,3,1.0,\n", "malformed shape file"),
])
def test_shape_file_with_bad_columns_or_values(tmp_path, body, message):
    path = tmp_path / "s.csv.gz"
    path.write_bytes(gzip.compress(f"{HEADER}\n{body}".encode()))
    with pytest.raises(DatasetError, match=message) as error:
        read_shape(path)
    assert "s.csv.gz" in str(error.value)


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
