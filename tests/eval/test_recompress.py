"""The converter of format 1's gzip shape files to xz: the same text, verified before the gzip file goes; idempotent;
resumable after a kill at any point; a shape with two files of different text refused. Its `--slim`: full files
rewritten without the screening columns, every kept value verified, idempotent and resumable."""

import json

import pytest
from fakes import as_format_1

from rooftune.candidates import Config, GemmShape, Trial
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets import format as dataset_format
from rooftune.eval.datasets import recompress
from rooftune.eval.datasets.format import (
    DatasetError,
    compress_text,
    is_slim_text,
    open_dataset,
    read_dataset,
    read_manifest,
    read_shape_text,
    slim_records,
    write_shape,
)
from rooftune.eval.datasets.recompress import main, recompress_file, recompress_folder

SHAPES = [GemmShape(1, 64, 64), GemmShape(77, 4096, 4096, "nk"), GemmShape(128, 768, 768)]


def _format_1_dataset(root):
    """A dataset folder as format 1 wrote it: three shapes, gzip; returns shape id -> text."""
    open_dataset(root, {"kernel": "gemm", "space_version": "v", "gpu_profile": "H200", "sms": None})
    for i, shape in enumerate(SHAPES):
        configs = [Config.make(w, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, SPLIT_K=1) for w in (4, 8)]
        write_shape(root, ShapeRecords(shape, (Trial(configs[0], 10.5 + i, None, 0.3, 7, 0.01, 10.25),
                                               Trial(configs[1], None, "compile: x")),
                                       {"cublas": 9.75}, {"repeatability": {"abs_median": 0.004}}))
    return as_format_1(root)


def _files(root):
    return {p.name: p.read_bytes() for p in (root / "shapes").iterdir()}


def test_a_folder_converts_to_xz_files_of_the_same_text_and_a_second_run_changes_nothing(tmp_path, capsys):
    texts = _format_1_dataset(tmp_path)
    before = read_dataset(tmp_path)
    assert main([str(tmp_path)]) == 0
    assert "3 shapes .csv.gz -> .csv.xz" in capsys.readouterr().out
    after = _files(tmp_path)
    assert sorted(after) == sorted(f"{sid}.csv.xz" for sid in texts)
    assert {name[: -len(".csv.xz")]: read_shape_text(tmp_path / "shapes" / name) for name in after} == texts
    assert read_dataset(tmp_path) == before and read_manifest(tmp_path)["format"] == "rooftune-dataset-3"
    assert all(after[f"{sid}.csv.xz"] == compress_text(text) for sid, text in texts.items())  # as write_shape writes
    manifest = (tmp_path / "manifest.json").read_bytes()
    result = recompress_folder(tmp_path)
    assert (result.converted, result.already) == (0, 3)
    assert _files(tmp_path) == after and (tmp_path / "manifest.json").read_bytes() == manifest


def test_a_run_killed_between_writing_and_removing_is_finished_by_the_next(tmp_path, monkeypatch):
    texts = _format_1_dataset(tmp_path)
    real_unlink, calls = type(tmp_path).unlink, []

    def killed_at_the_second(path, missing_ok=False):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed after the second .csv.xz was written, before its .csv.gz went
        real_unlink(path, missing_ok)

    monkeypatch.setattr(type(tmp_path), "unlink", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        recompress_folder(tmp_path)
    monkeypatch.undo()
    names = sorted(_files(tmp_path))
    assert [n.rsplit(".", 1)[1] for n in names] == ["xz", "gz", "xz", "gz"]  # one done, one with both, one to do
    with pytest.raises(DatasetError, match="has two files"):
        read_dataset(tmp_path)  # refused until the converter finishes
    result = recompress_folder(tmp_path)
    assert (result.converted, result.already) == (2, 1)  # the one with both is kept, its .csv.gz removed
    assert {n[: -len(".csv.xz")]: read_shape_text(tmp_path / "shapes" / n) for n in _files(tmp_path)} == texts


def test_two_files_of_different_text_for_one_shape_are_refused_and_kept(tmp_path):
    _format_1_dataset(tmp_path)
    gz = sorted((tmp_path / "shapes").iterdir())[0]
    xz = gz.with_name(gz.name.replace(".csv.gz", ".csv.xz"))
    xz.write_bytes(compress_text(read_shape_text(gz).replace("10.25", "10.26")))
    assert read_shape_text(xz) != read_shape_text(gz)
    for convert in (lambda: recompress_file(gz), lambda: recompress_folder(tmp_path)):
        with pytest.raises(DatasetError, match="has two files of different text") as error:
            convert()
        assert str(gz) in str(error.value) and str(xz) in str(error.value) and gz.exists() and xz.exists()


def test_a_file_that_does_not_decode_to_the_same_text_is_removed_and_the_gzip_kept(tmp_path, monkeypatch):
    _format_1_dataset(tmp_path)
    before = _files(tmp_path)
    monkeypatch.setattr(recompress, "compress_text", lambda text: dataset_format.compress_text(text[:-1]))
    with pytest.raises(DatasetError, match="does not decode to the text of"):
        recompress_folder(tmp_path)
    assert _files(tmp_path) == before  # nothing lost, nothing left beside it


def test_a_folder_that_is_not_a_dataset_exits_2_naming_it(tmp_path, capsys):
    (tmp_path / "shapes").mkdir()
    assert main([str(tmp_path)]) == 2
    assert f"error: {tmp_path}: no manifest.json" in capsys.readouterr().err
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "rooftune-dataset-9"}))
    assert main([str(tmp_path)]) == 2 and "rooftune-dataset-9" in capsys.readouterr().err


def _full_dataset(root):
    """A dataset folder as a sweep writes it: full shape files, one xz and two of format 1's gzip (the text of each
    shape's file, by id)."""
    texts = _format_1_dataset(root)
    recompress_file(root / "shapes" / f"{sorted(texts)[0]}.csv.gz")
    return texts


def test_slim_rewrites_every_shape_file_with_the_same_kept_values_and_a_second_run_changes_nothing(tmp_path, capsys):
    texts = _full_dataset(tmp_path)
    before = read_dataset(tmp_path)
    assert not any(is_slim_text(text) for text in texts.values())
    assert main(["--slim", str(tmp_path)]) == 0
    assert "2 shapes .csv.gz -> .csv.xz" in (out := capsys.readouterr().out) and "3 made slim" in out
    after = _files(tmp_path)
    assert sorted(after) == sorted(f"{sid}.csv.xz" for sid in texts)
    assert all(is_slim_text(read_shape_text(tmp_path / "shapes" / name)) for name in after)
    assert read_dataset(tmp_path) == [slim_records(r) for r in before]
    assert read_manifest(tmp_path)["format"] == "rooftune-dataset-3"
    manifest = (tmp_path / "manifest.json").read_bytes()
    result = recompress_folder(tmp_path, slim=True)
    assert (result.converted, result.slimmed, result.already_slim) == (0, 0, 3)
    assert _files(tmp_path) == after and (tmp_path / "manifest.json").read_bytes() == manifest
    assert main(["--slim", str(tmp_path)]) == 0 and "none to make slim (3 already slim)" in capsys.readouterr().out


def test_a_slim_run_killed_midway_is_finished_by_the_next(tmp_path, monkeypatch):
    _full_dataset(tmp_path)
    recompress_folder(tmp_path)
    before = read_dataset(tmp_path)
    real, calls = recompress.write_atomic, []

    def killed_at_the_second(path, data):
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(path, data)

    monkeypatch.setattr(recompress, "write_atomic", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        recompress_folder(tmp_path, slim=True)
    monkeypatch.undo()
    slim = [is_slim_text(read_shape_text(tmp_path / "shapes" / n)) for n in sorted(_files(tmp_path))]
    assert slim == [True, False, False] and len(_files(tmp_path)) == 3
    assert read_dataset(tmp_path)[1:] == before[1:]  # a folder of both kinds reads
    result = recompress_folder(tmp_path, slim=True)
    assert (result.slimmed, result.already_slim) == (2, 1)
    assert read_dataset(tmp_path) == [slim_records(r) for r in before]


def test_a_slim_form_that_does_not_read_the_same_is_refused_and_the_file_kept(tmp_path, monkeypatch):
    _full_dataset(tmp_path)
    recompress_folder(tmp_path)
    before = _files(tmp_path)
    # each shape's first config, 4 warps and 3 stages, its time 10.5 + i made 90.5 + i
    monkeypatch.setattr(recompress, "shape_text",
                        lambda result, slim: dataset_format.shape_text(result, slim).replace(",4,3,1", ",4,3,9"))
    with pytest.raises(DatasetError, match="its slim form does not read as the same records; left as it was"):
        recompress_folder(tmp_path, slim=True)
    assert _files(tmp_path) == before
