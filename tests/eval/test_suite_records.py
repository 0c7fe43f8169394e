"""The suite's dataset format (eval/datasets/suite.py): a shape's records written and read back whole, the folder's
manifest refusing another GPU or Triton, the quarantine, and file names that are the registry's shape ids."""

import json

import pytest

from rooftune.candidates import Config, Trial
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.suite import (
    SuiteDataError,
    SuiteShape,
    finished,
    open_folder,
    quarantine,
    quarantined,
    read_shape,
    read_suite,
    shape_path,
    write_shape,
)

FACTS = {"gpu": "NVIDIA H100 80GB HBM3", "profile": "NVIDIA H100 80GB HBM3 (SXM)", "triton": "3.6.0"}


def records(kernel: str = "softmax", m: int = 4096) -> ShapeRecords:
    trials = (Trial(Config.make(4, 1, ROWS_PER_PROGRAM=1), 21.5, compile_s=0.8, rounds=7, spread=0.01, screen_us=21.7,
                    retime_us=21.4, retime2_us=21.6, retime_rounds=15),
              Trial(Config.make(32, 2, ROWS_PER_PROGRAM=16), None, error="check: reference check failed: y"))
    return ShapeRecords(SuiteShape.of(kernel, {"M": m, "N": 4096}), trials, baselines_us={"torch": 30.2},
                        meta={"split": "heldout", "flops": 1.0e9, "repeatability": {"abs_median": 0.004}})


def test_a_shape_is_written_and_read_back_whole(tmp_path):
    rec = records()
    path = write_shape(tmp_path, rec)
    assert path == tmp_path / "softmax" / "M4096-N4096.json" == shape_path(tmp_path, rec.shape)
    back = read_shape(path)
    assert back == rec and back.trials[0].retime_rounds == 15 and back.trials[1].error.startswith("check:")
    on_disk = json.loads(path.read_text())
    assert on_disk["shape"] == {"M": 4096, "N": 4096} and on_disk["trials"][1]["time_us"] is None
    assert "screen_us" not in on_disk["trials"][1]  # None left out
    assert on_disk["trials"][0]["config"] == "ROWS_PER_PROGRAM=1,num_warps=4,num_stages=1"


def test_finished_and_read_suite_list_every_shape_file(tmp_path):
    for kernel, m in (("softmax", 8192), ("argmax", 512), ("softmax", 4096)):
        write_shape(tmp_path, records(kernel, m))
    (tmp_path / "softmax" / ".M1-N1.json.tmp").write_text("{")  # a writer's temporary file is not a shape
    assert finished(tmp_path) == {("softmax", "M8192-N4096"), ("argmax", "M512-N4096"), ("softmax", "M4096-N4096")}
    assert [r.shape.id for r in read_suite(tmp_path, "softmax")] == ["M4096-N4096", "M8192-N4096"]
    assert [r.shape.kernel for r in read_suite(tmp_path)] == ["argmax", "softmax", "softmax"]


def test_a_file_that_is_not_a_suite_record_is_refused(tmp_path):
    bad = tmp_path / "softmax" / "M1-N1.json"
    bad.parent.mkdir()
    for text in ("{", json.dumps({"format": 99}), json.dumps({"format": 1, "kernel": "softmax"})):
        bad.write_text(text)
        with pytest.raises(SuiteDataError):
            read_shape(bad)


def test_the_manifest_is_written_once_and_refuses_another_gpu_or_triton(tmp_path):
    assert open_folder(tmp_path, FACTS)["gpu"] == FACTS["gpu"]
    assert open_folder(tmp_path, {**FACTS, "profile": "renamed"})["profile"] == FACTS["profile"]  # kept as written
    with pytest.raises(SuiteDataError, match="gpu 'NVIDIA H100 80GB HBM3'.*'NVIDIA H200'"):
        open_folder(tmp_path, {**FACTS, "gpu": "NVIDIA H200"})
    with pytest.raises(SuiteDataError, match="triton"):
        open_folder(tmp_path, {**FACTS, "triton": "3.7.1"})


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
