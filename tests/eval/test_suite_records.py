"""The suite's dataset format (eval/datasets/suite.py): a shape's records and counts written and read back whole, the
folder's manifest (each kernel's split; another GPU, Triton or split refused), readers that open only the kernels
they name, the quarantine, and file names that are the registry's shape ids."""

import json

import numpy as np
import pytest

from rooftune.candidates import Config, Trial
from rooftune.candidates.kernel_counts import CompiledFacts, KernelCounts, TensorTraffic
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.format import DatasetError, compress_text, read_shape_text
from rooftune.eval.datasets.suite import (
    FORMAT,
    SuiteRecords,
    SuiteShape,
    finished,
    kernels_in,
    open_folder,
    quarantine,
    quarantined,
    read_kernel,
    read_manifest,
    read_shape,
    read_suite,
    records_to_dict,
    shape_path,
    write_shape,
)

FACTS = {"gpu": "NVIDIA H100 80GB HBM3", "profile": "h100_sxm", "gpu_profile": "NVIDIA H100 80GB HBM3 (SXM)",
         "triton": "3.6.0"}
COUNTS = KernelCounts(4096, CompiledFacts(4, 1, 40, 16), vector_ops=1e7, work_runs=((1.1, 2048), (0.9, 2048)),
                      tensors=(TensorTraffic("x", 1 << 25, 2.0 ** 25, 0.0, ((2, 1.0),)),))


def records(kernel: str = "softmax", m: int = 4096) -> SuiteRecords:
    trials = (Trial(Config.make(4, 1, ROWS_PER_PROGRAM=1), 21.5, compile_s=0.8, rounds=7, spread=0.01, screen_us=21.7,
                    retime_us=21.4, retime2_us=21.6, retime_rounds=15),
              Trial(Config.make(32, 2, ROWS_PER_PROGRAM=16), None, error="check: reference check failed: y"))
    shape = ShapeRecords(SuiteShape.of(kernel, {"M": m, "N": 4096}), trials, baselines_us={"torch": 30.2},
                         meta={"split": "heldout", "flops": 1.0e9, "repeatability": {"abs_median": 0.004}})
    return SuiteRecords(shape, (COUNTS, None))


def test_a_shape_is_written_and_read_back_whole_with_its_counts(tmp_path):
    rec = records()
    path = write_shape(tmp_path, rec)
    assert path == tmp_path / "softmax" / "M4096-N4096.json.xz" == shape_path(tmp_path, rec.shape)
    back = read_shape(path)
    assert back == rec and back.records.trials[0].retime_rounds == 15 and back.counts == (COUNTS, None)
    assert back.kernel == "softmax" and str(back.configs[0]) == "ROWS_PER_PROGRAM=1,num_warps=4,num_stages=1"
    np.testing.assert_array_equal(back.time_us, [21.5, np.nan])
    on_disk = json.loads(read_shape_text(path))
    assert on_disk["shape"] == {"M": 4096, "N": 4096} and on_disk["trials"][1]["time_us"] is None
    assert "screen_us" not in on_disk["trials"][1] and on_disk["trials"][1]["counts"] is None  # None left out, but
    assert on_disk["trials"][0]["counts"]["compiled"]["regs_per_thread"] == 40                  # counts kept as null
    with pytest.raises(ValueError, match="1 counts for 2 trials"):
        SuiteRecords(rec.records, (COUNTS,))


def test_finished_and_the_readers_list_every_shape_file_of_the_kernels_named(tmp_path):
    for kernel, m in (("softmax", 8192), ("argmax", 512), ("softmax", 4096)):
        write_shape(tmp_path, records(kernel, m))
    (tmp_path / "softmax" / ".M1-N1.json.xz.1234.tmp").write_text("{")  # a writer's temporary file is not a shape
    assert finished(tmp_path) == {("softmax", "M8192-N4096"), ("argmax", "M512-N4096"), ("softmax", "M4096-N4096")}
    assert [r.shape.id for r in read_kernel(tmp_path, "softmax")] == ["M4096-N4096", "M8192-N4096"]
    assert read_kernel(tmp_path, "rotary") == []  # nothing recorded yet
    assert [r.kernel for r in read_suite(tmp_path, ["argmax", "softmax"])] == ["argmax", "softmax", "softmax"]
    open_folder(tmp_path, FACTS, {"softmax": {"split": "heldout"}, "argmax": {"split": "heldout"}})
    assert len(read_suite(tmp_path)) == 3  # every kernel the manifest lists


def test_a_reader_never_opens_a_kernel_it_does_not_name(tmp_path):
    write_shape(tmp_path, records("rmsnorm_fwd"))
    (tmp_path / "softmax").mkdir()
    (tmp_path / "softmax" / "M1-N1.json.xz").write_bytes(b"a held-out kernel's file: reading it fails")
    assert [r.kernel for r in read_suite(tmp_path, ["rmsnorm_fwd"])] == ["rmsnorm_fwd"]
    with pytest.raises(DatasetError):
        read_kernel(tmp_path, "softmax")


def test_a_file_that_is_not_a_suite_record_is_refused(tmp_path):
    bad = tmp_path / "softmax" / "M1-N1.json.xz"
    bad.parent.mkdir()
    zero_time, bad_counts = records_to_dict(records()), records_to_dict(records())
    zero_time["trials"][0]["time_us"] = 0.0  # no kernel runs in no time
    bad_counts["trials"][0]["counts"] = {"programs": 1}
    for text in ("{", json.dumps({"format": 99}), json.dumps({"format": FORMAT, "kernel": "softmax"}),
                 json.dumps(zero_time), json.dumps(bad_counts), "[]"):
        bad.write_bytes(compress_text(text))
        with pytest.raises(DatasetError):
            read_shape(bad)
    bad.write_bytes(b"not xz")
    with pytest.raises(DatasetError, match="not a readable xz file"):
        read_shape(bad)


def test_the_manifest_holds_each_kernels_split_and_refuses_another_gpu_triton_or_split(tmp_path):
    manifest = open_folder(tmp_path, FACTS, {"softmax": {"split": "heldout", "kind": "memory"}})
    assert manifest["gpu"] == FACTS["gpu"] and read_manifest(tmp_path) == manifest
    again = open_folder(tmp_path, {**FACTS, "profile": "renamed"}, {"rmsnorm_fwd": {"split": "train"}})
    assert again["profile"] == FACTS["profile"]  # kept as written
    assert kernels_in(again, "train") == ["rmsnorm_fwd"] and kernels_in(again, "heldout") == ["softmax"]
    with pytest.raises(DatasetError, match="gpu 'NVIDIA H100 80GB HBM3'.*'NVIDIA H200'"):
        open_folder(tmp_path, {**FACTS, "gpu": "NVIDIA H200"}, {})
    with pytest.raises(DatasetError, match="triton"):
        open_folder(tmp_path, {**FACTS, "triton": "3.7.1"}, {})
    with pytest.raises(DatasetError, match="gpu_profile"):  # the same GPU swept under another profile's legality
        open_folder(tmp_path, {**FACTS, "gpu_profile": "h200-sm66"}, {})
    with pytest.raises(DatasetError, match="softmax is recorded as heldout"):
        open_folder(tmp_path, FACTS, {"softmax": {"split": "train"}})
    data = json.loads((tmp_path / "manifest.json").read_text())
    data["kernels"]["softmax"]["split"] = "maybe"
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(DatasetError, match="has no split"):
        read_manifest(tmp_path)
    with pytest.raises(DatasetError, match="not a suite dataset"):
        read_manifest(tmp_path / "nothing")


def test_quarantine_keeps_each_shapes_configs(tmp_path):
    shape = SuiteShape.of("grouped_gemm", {"G": 8, "M": 16, "N": 16, "K": 16})
    assert quarantined(tmp_path) == {}
    quarantine(tmp_path, shape, "BLOCK_M=64,num_warps=4,num_stages=3")
    quarantine(tmp_path, shape, "*")
    quarantine(tmp_path, shape, "*")
    assert quarantined(tmp_path) == {"grouped_gemm/G8-M16-N16-K16": ["*", "BLOCK_M=64,num_warps=4,num_stages=3"]}


def test_file_names_are_the_registrys_shape_ids():
    from rooftune.kernels.suite import SUITE, shape_id

    for k in SUITE.values():
        for s in k.shapes:
            shape = SuiteShape.of(k.name, s)
            assert shape.id == shape_id(s) and shape.dims == s and hash(shape)
