"""Dataset readers on small inline fixtures, and the format sniffing of load_records."""

import gzip
import json
from pathlib import Path

import pytest

from rooftune.candidates import AttentionShape, Config, GemmShape
from rooftune.eval.datasets.readers import (
    DatasetFormatError,
    load_records,
    read_autoheuristic_mm,
    read_probe_attention,
    read_probe_gemm,
)

PROBE = """M,N,K,BM,BN,BK,stages,warps,GM,us,err
128,4096,4096,cublas,,,,,,18.392,
128,4096,4096,16,32,32,2,4,1,85.207,
128,4096,4096,256,256,128,5,8,8,,OutOfResources
1,8192,8192,64,64,64,3,4,8,40.5,
"""

AH_META = {"shared_memory": 232448, "device_capa": [9, 0], "name": "mm"}
AH_HEADER = ("m,k,n,mat1_dtype,mat2_dtype,mat1_stride_0,mat1_stride_1,mat2_stride_0,mat2_stride_1,"
             "mat1_iscontig,mat2_iscontig,using_tf32,choice,feedback")
AH_ROWS = [
    "64,256,128,torch.float16,torch.float16,256,1,128,1,True,True,not_float_32,extern_mm,0.010",
    "64,256,128,torch.float16,torch.float16,256,1,128,1,True,True,not_float_32,"
    "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4,0.020",
    "64,256,128,torch.float16,torch.float16,256,1,128,1,True,True,not_float_32,"
    "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4,0.030",
    "64,256,128,torch.float16,torch.float16,256,1,128,1,True,True,not_float_32,"
    "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4,0.100",
    "64,256,128,torch.float16,torch.float16,256,1,128,1,True,True,not_float_32,"
    "type=triton_BLOCK-M=32_BLOCK-K=32_BLOCK-N=32_numstages=2_numwarps=2,inf",
    "32,64,16,torch.float32,torch.float32,64,1,1,64,True,False,True,"
    "type=triton_BLOCK-M=16_BLOCK-K=16_BLOCK-N=32_numstages=3_numwarps=2,0.005",
]


def write_probe(tmp_path, gz=True):
    path = tmp_path / ("gemm_probe.csv.gz" if gz else "gemm_probe.csv")
    (gzip.open if gz else open)(path, "wt").write(PROBE)
    return path


def write_ah(tmp_path):
    path = tmp_path / "h100_mm.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(AH_META) + "\n" + AH_HEADER + "\n" + "\n".join(AH_ROWS) + "\n")
    return path


def test_probe_reader(tmp_path):
    records = {str(r.shape): r for r in read_probe_gemm(write_probe(tmp_path))}
    r = records["128x4096x4096"]
    assert r.baselines_us == {"cublas": 18.392}
    assert len(r.trials) == 2
    ok = [t for t in r.trials if t.ok][0]
    assert ok.config == Config.make(4, 2, BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, SPLIT_K=1)
    assert ok.time_us == pytest.approx(85.207)
    failed = [t for t in r.trials if not t.ok][0]
    assert failed.error == "OutOfResources" and failed.config["GROUP_M"] == 8
    assert records["1x8192x8192"].shape == GemmShape(1, 8192, 8192, layout="kn", dtype="bf16")


def test_autoheuristic_reader(tmp_path):
    records = read_autoheuristic_mm(write_ah(tmp_path))
    by_shape = {(r.shape.m, r.shape.n, r.shape.k): r for r in records}
    r = by_shape[(64, 128, 256)]
    assert r.shape.dtype == "fp16" and r.shape.layout == "kn"
    assert r.baselines_us == {"extern_mm": pytest.approx(10.0)}
    ok = [t for t in r.trials if t.ok]
    assert len(ok) == 1 and ok[0].time_us == pytest.approx(30.0)  # median of 20, 30, 100 µs
    assert ok[0].config == Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, SPLIT_K=1)
    assert sum(not t.ok for t in r.trials) == 1  # inf feedback
    tf32 = by_shape[(32, 16, 64)]
    assert tf32.shape.dtype == "tf32" and tf32.shape.layout == "nk"


def test_autoheuristic_reader_a_layout_from_strides(tmp_path):
    # mat1 [M, K] with strides (1, M) is A stored [K, M]; it is a separate input from the row-major
    # A of the same shape. A single row (M = 1) has no orientation, whatever its strides say.
    choice = "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4"
    rows = AH_ROWS + [
        f"64,256,128,torch.float16,torch.float16,1,64,128,1,False,True,not_float_32,{choice},0.040",
        f"1,256,128,torch.float32,torch.float32,1,1,128,1,True,True,True,{choice},0.001",
    ]
    path = tmp_path / "h100_mm.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(AH_META) + "\n" + AH_HEADER + "\n" + "\n".join(rows) + "\n")
    records = read_autoheuristic_mm(path)
    same_dims = {r.shape.a_layout: r for r in records if (r.shape.m, r.shape.n, r.shape.k) == (64, 128, 256)}
    assert set(same_dims) == {"mk", "km"}
    assert same_dims["km"].shape == GemmShape(64, 128, 256, layout="kn", dtype="fp16", a_layout="km")
    assert same_dims["km"].meta["a_transposed"] and not same_dims["mk"].meta["a_transposed"]
    assert [t.time_us for t in same_dims["km"].trials] == [pytest.approx(40.0)]
    row = next(r for r in records if r.shape.m == 1)
    assert row.shape.a_layout == "mk" and row.shape.dtype == "tf32"


def test_load_records_recognises_formats(tmp_path):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    write_probe(probe_dir)
    assert len(load_records(probe_dir)) == 2
    assert len(load_records(probe_dir / "gemm_probe.csv.gz")) == 2
    assert len(load_records(write_ah(tmp_path))) == 2
    plain = write_probe(tmp_path, gz=False)
    assert len(load_records(plain)) == 2
    junk = tmp_path / "junk.csv"
    junk.write_text("a,b\n1,2\n")
    with pytest.raises(DatasetFormatError):
        load_records(junk)
    with pytest.raises(DatasetFormatError):
        load_records(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DatasetFormatError):
        load_records(empty)


def test_load_records_dispatches_manifest_folders(tmp_path, monkeypatch):
    from rooftune.eval.datasets import readers

    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "manifest.json").write_text("{}")
    monkeypatch.setattr(readers, "read_dataset", lambda path: ["records of " + str(path)])
    assert load_records(folder) == ["records of " + str(folder)]


def test_real_probe_if_present(shared_dir):
    records = load_records(shared_dir / "datasets" / "h200-probe")
    assert len(records) == 27
    assert all("cublas" in r.baselines_us for r in records)
    assert sum(not t.ok for r in records for t in r.trials) == 459


ATTENTION_PROBE = """B,H,S,D,BM,BN,stages,warps,rev,us,err
2,4,1024,64,sdpa_flash,,,,,30.5,
2,4,1024,64,sdpa_cudnn,,,,,20.25,
2,4,1024,64,64,64,3,4,0,40.0,
2,4,1024,64,64,64,3,4,1,38.0,
2,4,1024,64,256,128,5,8,1,,OutOfResources
1,8,512,128,128,64,2,8,0,12.0,
"""


def write_attention_probe(folder):
    path = folder / "attention_probe.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(ATTENTION_PROBE)
    return path


def test_attention_probe_reader(tmp_path):
    records = {r.shape: r for r in read_probe_attention(write_attention_probe(tmp_path))}
    r = records[AttentionShape(2, 4, 1024, 64, causal=True, dtype="bf16")]
    assert r.baselines_us == {"sdpa_flash": 30.5, "sdpa_cudnn": 20.25}
    assert len(r.trials) == 3 and r.best_candidate_us == 38.0
    reverse = [t for t in r.trials if t.ok and t.config["ORDER"] == 1][0]
    assert reverse.config == Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, ORDER=1)
    assert [t.error for t in r.trials if not t.ok] == ["OutOfResources"]
    assert r.candidate_configs() == [t.config for t in r.trials]


def test_load_records_finds_the_attention_probe(tmp_path):
    path = write_attention_probe(tmp_path)
    write_probe(tmp_path)
    assert {type(r.shape) for r in load_records(path)} == {AttentionShape}  # sniffed from the header
    assert {type(r.shape) for r in load_records(tmp_path, kernel="attention")} == {AttentionShape}
    assert {type(r.shape) for r in load_records(tmp_path)} == {GemmShape}
    only_gemm = tmp_path / "gemm_only"
    only_gemm.mkdir()
    write_probe(only_gemm)
    with pytest.raises(DatasetFormatError, match="attention_probe"):
        load_records(only_gemm, kernel="attention")


def test_recorded_device_from_each_format(tmp_path):
    from rooftune.eval.datasets.readers import recorded_device

    assert recorded_device(write_ah(tmp_path)) == {"compute_capability": (9, 0), "smem_per_block_bytes": 232448}
    assert recorded_device(write_probe(tmp_path)) is None  # the probe CSV names no GPU
    (tmp_path / "ds").mkdir()
    committed = Path(__file__).parents[2] / "datasets" / "h200" / "gemm" / "heldout" / "manifest.json"
    manifest = {**json.loads(committed.read_text()), "gpu_profile": "NVIDIA A100-SXM4-80GB"}
    (tmp_path / "ds" / "manifest.json").write_text(json.dumps(manifest))
    assert recorded_device(tmp_path / "ds") == {"name": "NVIDIA A100-SXM4-80GB"}
    damaged = tmp_path / "bad_mm.txt"
    damaged.write_text('{"shared_memory": 1}\n' + AH_HEADER + "\n")  # no device_capa
    assert recorded_device(damaged) is None and recorded_device(tmp_path / "missing.txt.gz") is None
