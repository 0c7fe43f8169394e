"""The dataset format: round trip, atomic writes, deterministic bytes, resume compatibility, format 1's gzip files."""

import csv
import gzip
import json
import lzma
import os

import pytest

from rooftune.candidates import Config, GemmShape
from rooftune.eval.datasets.format import (
    FORMAT,
    DatasetError,
    DatasetWarning,
    ShapeRecords,
    Trial,
    compress_text,
    encode_shape,
    finished_ids,
    is_slim_text,
    layout_release,
    open_dataset,
    read_dataset,
    read_manifest,
    read_shape,
    read_shape_text,
    shape_files,
    shape_id,
    shape_path,
    shape_text,
    slim_records,
    to_records,
    write_shape,
)
from rooftune.outputs import write_atomic


def _config(bm, warps=4):
    return Config.make(warps, 3, BLOCK_M=bm, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, SPLIT_K=1)


def sample_result(shape=GemmShape(77, 4096, 4096, layout="nk")) -> ShapeRecords:
    rows = (
        Trial(_config(64), 12.346, None, 1.2, 7, 0.012, screen_us=12.2, retime_us=12.4,
                     retime2_us=12.35, retime_rounds=15),
        Trial(_config(128), 20.5, None, 1.5, 3, 0.03),
        Trial(_config(256, 8), None, "compile: OutOfResources: shared memory, 300000 > 232448"),
        Trial(_config(16), None, "check: relative error 0.5 > 0.01", 0.9, 0),
        Trial(Config.make(2, 5, BLOCK_M=64, BLOCK_N=32, BLOCK_K=32, GROUP_M=8, SPLIT_K=1), 30.25, None,
                     0.8, 7, 0.01, screen_us=30.0, in_space=False),  # a tutorial config outside the space
    )
    return ShapeRecords(shape, rows, {"cublas": 11.9}, {"repeatability": {"abs_median": 0.004}, "errors": 2})


def test_round_trip(tmp_path):
    result = sample_result()
    path = write_shape(tmp_path, result)
    assert path.name == "77x4096x4096-nk-bf16.csv.xz" and path.read_bytes().startswith(b"\xfd7zXZ\x00")  # xz
    assert lzma.decompress(path.read_bytes()).decode() == shape_text(result) == read_shape_text(path)
    back = read_shape(path)
    assert back.shape == result.shape and back.baselines_us == result.baselines_us
    assert back.meta == result.meta
    assert back.trials == result.trials  # values within the file's digits round-trip exactly


def test_read_dataset_gives_shape_records(tmp_path):
    open_dataset(tmp_path, {"kernel": "gemm", "space_version": "v", "gpu_profile": "H200", "sms": None})
    write_shape(tmp_path, sample_result())
    write_shape(tmp_path, sample_result(GemmShape(1, 64, 64)))
    records = read_dataset(tmp_path)
    assert [str(r.shape) for r in records] == ["1x64x64", "77x4096x4096 (nk, bf16)"]
    rec = records[1]
    assert rec.best_us == 12.346 and rec.baselines_us == {"cublas": 11.9}
    assert [t.ok for t in rec.trials] == [True, True, False, False, True]
    assert rec.candidate_configs() == [r.config for r in sample_result().trials[:4]]
    assert rec.trials[2].error.startswith("compile:") and rec.trials[3].compile_s == 0.9
    assert rec.meta["retime_us"] == {_config(64): 12.4}
    assert rec.lookup()[_config(128)].time_us == 20.5


def test_times_are_written_to_5_significant_digits_compile_seconds_and_spread_to_2(tmp_path):
    row = Trial(_config(64), 123.456789, None, 1.23456, 7, 0.0123456, screen_us=98.7654321, retime_us=0.123456)
    back = read_shape(write_shape(tmp_path, ShapeRecords(GemmShape(1, 64, 64), (row,)))).trials[0]
    assert (back.time_us, back.screen_us, back.retime_us) == (123.46, 98.765, 0.12346)
    assert (back.compile_s, back.spread) == (1.2, 0.012)


def test_files_without_the_in_space_column_read_as_all_in_space(tmp_path):
    # A file of the format before `in_space` existed: the same text less that column. Its rows all claim the space:
    # the tutorial's (num_warps=2, outside the grid) is left out, with a warning, as any row outside the space is.
    path = write_shape(tmp_path, sample_result())
    lines = read_shape_text(path).splitlines()
    old = [lines[0]] + [line.rsplit(",", 1)[0] for line in lines[1:]]
    assert old[1].endswith("retime_rounds")
    path.write_bytes(compress_text("\n".join(old) + "\n"))
    with pytest.warns(DatasetWarning, match=r"1 of 5 rows left out.*row 5 \(line 7\): num_warps=2"):
        back = read_shape(path)
    assert all(r.in_space for r in back.trials)
    assert [r.config for r in back.trials] == [r.config for r in sample_result().trials[:4]]
    assert back.trials[0] == sample_result().trials[0]
    rec = to_records(back)
    assert rec.candidates is None and len(rec.candidate_configs()) == 4


def test_bytes_are_deterministic(tmp_path):
    """The same results give the same bytes (clean git diffs): two writes, and a file read and encoded again."""
    assert encode_shape(sample_result()) == encode_shape(sample_result())
    first, second = write_shape(tmp_path / "a", sample_result()), write_shape(tmp_path / "b", sample_result())
    assert first.read_bytes() == second.read_bytes() == encode_shape(read_shape(first))
    assert compress_text(read_shape_text(first)) == first.read_bytes()


def test_a_slim_file_round_trips_without_the_screening_columns(tmp_path):
    """A slim file (the committed form) has no compile_s, rounds, spread or screen_us column; it reads as the full
    records with those None / 0 and every other value the same, and encodes back to its own bytes."""
    full = sample_result()
    path = tmp_path / "shapes" / "77x4096x4096-nk-bf16.csv.xz"
    write_atomic(path, compress_text(shape_text(full, slim=True)))
    text = read_shape_text(path)
    assert text.splitlines()[1].endswith(",num_warps,num_stages,time_us,error,retime_us,retime2_us,retime_rounds,"
                                         "in_space")
    assert is_slim_text(text) and not is_slim_text(shape_text(full))
    back = read_shape(path)
    assert back == slim_records(full) != full
    assert [(t.compile_s, t.rounds, t.spread, t.screen_us) for t in back.trials] == [(None, 0, None, None)] * 5
    for kept in ("config", "time_us", "error", "retime_us", "retime2_us", "retime_rounds", "in_space"):
        assert [getattr(t, kept) for t in back.trials] == [getattr(t, kept) for t in full.trials]
    assert shape_text(back, slim=True) == text and slim_records(back) == back
    assert to_records(back).meta["retime_us"] == to_records(full).meta["retime_us"]


def test_a_full_file_still_reads_with_its_screening_columns(tmp_path):
    path = write_shape(tmp_path, sample_result())  # what a sweep writes: full
    assert not is_slim_text(read_shape_text(path))
    back = read_shape(path)
    assert back == sample_result() and back.trials[0].screen_us == 12.2 and back.trials[0].rounds == 7


@pytest.mark.parametrize("dropped", [("screen_us",), ("compile_s", "rounds", "spread")])
def test_a_file_with_some_screening_columns_and_not_the_others_is_refused(tmp_path, dropped):
    rows = list(csv.reader(shape_text(sample_result()).splitlines()[1:]))
    keep = [i for i, name in enumerate(rows[0]) if name not in dropped]
    body = "".join(",".join(row[i] for i in keep) + "\n" for row in rows)
    path = tmp_path / "s.csv.xz"
    path.write_bytes(compress_text(shape_text(sample_result()).splitlines()[0] + "\n" + body))
    with pytest.raises(DatasetError, match=f"s.csv.xz: has the columns .* but not {', '.join(dropped)}: .* "
                                           "\\(full\\) or none \\(slim\\)"):
        read_shape(path)


def _as_gzip(path):
    """Format 1's file of the same shape: `<id>.csv.gz`, gzip of the same text (no time stamp, as format 1 wrote)."""
    old = path.with_name(path.name.replace(".csv.xz", ".csv.gz"))
    old.write_bytes(gzip.compress(read_shape_text(path).encode(), mtime=0))
    return old


def test_format_1_gzip_files_still_read(tmp_path):
    """A folder format 1 wrote (its manifest `rooftune-dataset-1`, `<id>.csv.gz` files) reads as it did; a shape
    written into it is .csv.xz, and the manifest is upgraded first, so that format 1's readers refuse the folder."""
    card = {"kernel": "gemm", "space_version": "v", "gpu_profile": "H200", "sms": None}
    open_dataset(tmp_path, card)
    xz = write_shape(tmp_path, sample_result())
    old = _as_gzip(xz)
    xz.unlink()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "format": "rooftune-dataset-1"}))
    assert read_shape(old) == sample_result() and finished_ids(tmp_path) == {"77x4096x4096-nk-bf16"}
    assert [r.shape for r in read_dataset(tmp_path)] == [sample_result().shape]
    assert read_manifest(tmp_path)["format"] == "rooftune-dataset-1" and open_dataset(tmp_path, card)
    write_shape(tmp_path, sample_result(GemmShape(1, 64, 64)))
    assert read_manifest(tmp_path)["format"] == FORMAT == "rooftune-dataset-3"
    assert [p.name for p in shape_files(tmp_path)] == ["1x64x64-kn-bf16.csv.xz", "77x4096x4096-nk-bf16.csv.gz"]
    assert shape_path(tmp_path, "77x4096x4096-nk-bf16") == old and len(read_dataset(tmp_path)) == 2
    write_shape(tmp_path, sample_result())  # a rewrite (a backfill's) replaces the gzip file
    assert [p.name for p in shape_files(tmp_path)] == ["1x64x64-kn-bf16.csv.xz", "77x4096x4096-nk-bf16.csv.xz"]
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "format": "rooftune-dataset-4"}))
    with pytest.raises(DatasetError, match="format 'rooftune-dataset-4', expected one of rooftune-dataset-1, "):
        read_dataset(tmp_path)


def test_a_shape_with_both_a_gzip_and_an_xz_file_is_refused_naming_both(tmp_path):
    open_dataset(tmp_path, {"kernel": "gemm", "space_version": "v", "gpu_profile": "H200", "sms": None})
    xz = write_shape(tmp_path, sample_result())
    write_shape(tmp_path, sample_result(GemmShape(1, 64, 64)))
    gz = _as_gzip(xz)
    for read in (read_dataset, finished_ids, shape_files):
        with pytest.raises(DatasetError, match="shape 77x4096x4096-nk-bf16 has two files") as error:
            read(tmp_path)
        assert str(xz) in str(error.value) and str(gz) in str(error.value)
    gz.unlink()
    assert shape_path(tmp_path, "77x4096x4096-nk-bf16") == xz and len(read_dataset(tmp_path)) == 2
    with pytest.raises(DatasetError, match="no file of shape 2x64x64-kn-bf16"):
        shape_path(tmp_path, "2x64x64-kn-bf16")


def test_atomic_write_leaves_old_file_or_nothing(tmp_path, monkeypatch):
    target = tmp_path / "shapes" / "x.csv.xz"
    write_atomic(target, b"old")

    def crash(src, dst):
        raise KeyboardInterrupt  # killed between writing the temp file and renaming it

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in target.parent.iterdir()] == ["x.csv.xz"]  # temp file removed
    assert finished_ids(tmp_path) == {"x"}


def test_partial_temp_files_are_not_finished_shapes(tmp_path):
    (tmp_path / "shapes").mkdir()
    (tmp_path / "shapes" / ".1x2x3-kn-bf16.csv.xz.abc.tmp").write_bytes(b"partial")
    (tmp_path / "shapes" / ".1x2x4-kn-bf16.csv.gz.abc.tmp").write_bytes(b"partial")
    assert finished_ids(tmp_path) == set()


def test_resume_into_a_different_dataset_is_refused(tmp_path):
    card = {"kernel": "gemm", "space_version": "gemm-aaa", "gpu_profile": "H200", "sms": None}
    open_dataset(tmp_path, card)
    assert open_dataset(tmp_path, {**card, "device": {"driver": "x"}})["space_version"] == "gemm-aaa"
    with pytest.raises(DatasetError, match="space_version"):
        open_dataset(tmp_path, {**card, "space_version": "gemm-bbb"})


def test_one_dataset_holds_one_triton_release(tmp_path):
    """A sweep resumed under another Triton release into the same folder would label a second compiler's times
    with the first's: refused, naming both; a patch release (same code generator) resumes."""
    card = {"kernel": "gemm", "space_version": "gemm-aaa", "gpu_profile": "H200", "sms": None,
            "device": {"triton": "3.9.0"}}
    open_dataset(tmp_path, card)
    assert open_dataset(tmp_path, {**card, "device": {"triton": "3.9.1"}})["device"]["triton"] == "3.9.0"
    with pytest.raises(DatasetError, match=r"Triton release: 3.9 there, 3.7 now"):
        open_dataset(tmp_path, {**card, "device": {"triton": "3.7.1"}})


def test_a_folder_of_shapes_from_two_releases_is_refused(tmp_path):
    open_dataset(tmp_path, {"kernel": "gemm", "space_version": "v", "gpu_profile": "H200", "sms": None,
                            "device": {"triton": "3.9.0"}})
    write_shape(tmp_path, sample_result())
    first = sample_result(GemmShape(1, 64, 64))
    write_shape(tmp_path, ShapeRecords(first.shape, first.trials, first.baselines_us, {**first.meta, "triton": "3.9.1"}))
    assert [r.meta["triton"] for r in read_dataset(tmp_path)] == ["3.9.1", "3.9.0"]  # a shape's own version first
    write_shape(tmp_path, ShapeRecords(first.shape, first.trials, first.baselines_us, {**first.meta, "triton": "3.7.1"}))
    with pytest.raises(DatasetError, match=r"more than one Triton release: 3.7 \(1x64x64-kn-bf16, ...\), 3.9"):
        read_dataset(tmp_path)


def test_a_release_folder_takes_only_that_releases_measurements(tmp_path):
    """datasets/h200/releases/triton-3.9/gemm/train: a sweep whose Triton is another release (a packed one that
    did not load) is refused before it writes, and a manifest there of another release is refused when read."""
    card = {"kernel": "gemm", "space_version": "v", "gpu_profile": "H200", "sms": None}
    root = tmp_path / "releases" / "triton-3.9" / "gemm" / "train"
    assert layout_release(root) == "3.9" and layout_release(tmp_path / "gemm" / "train") is None
    with pytest.raises(DatasetError, match="in the folder of Triton 3.9, and its measurements are of Triton 3.6"):
        open_dataset(root, {**card, "device": {"triton": "3.6.0"}})
    with pytest.raises(DatasetError, match="of no recorded Triton version"):
        open_dataset(root, card)
    open_dataset(root, {**card, "device": {"triton": "3.9.0"}})
    write_shape(root, sample_result())
    assert read_dataset(root)[0].meta["triton"] == "3.9.0"
    moved = tmp_path / "releases" / "triton-3.7" / "gemm" / "train"
    moved.parent.mkdir(parents=True)
    root.rename(moved)
    with pytest.raises(DatasetError, match="in the folder of Triton 3.7, and its measurements are of Triton 3.9"):
        read_dataset(moved)


def test_unreadable_files_raise_dataset_errors(tmp_path):
    with pytest.raises(DatasetError, match="manifest.json"):
        read_dataset(tmp_path)
    for name, kind in (("bad.csv.gz", "gzip"), ("bad.csv.xz", "xz")):
        (tmp_path / name).write_bytes(b"not compressed")
        with pytest.raises(DatasetError, match=f"bad.csv.{kind[0]}z: not a readable {kind} file"):
            read_shape(tmp_path / name)
    truncated = tmp_path / "truncated.csv.xz"
    truncated.write_bytes(encode_shape(sample_result())[:-20])
    with pytest.raises(DatasetError, match="truncated.csv.xz: not a readable xz file"):
        read_shape(truncated)
    assert shape_id(GemmShape(1, 2, 3)) == "1x2x3-kn-bf16"


def test_attention_shapes_round_trip_with_their_own_ids(tmp_path):
    from rooftune.candidates import AttentionShape

    def cfg(bm, order):
        return Config.make(4, 2, BLOCK_M=bm, BLOCK_N=32, ORDER=order)

    causal, full = AttentionShape(4, 32, 4096, 128), AttentionShape(1, 2, 100, 32, causal=False, dtype="fp16")
    assert shape_id(causal) == "4x32x4096x128-causal-bf16" and shape_id(full) == "1x2x100x32-full-fp16"
    assert shape_id(AttentionShape(1, 2, 3, 16)) != shape_id(GemmShape(1, 2, 3))  # never a GEMM id
    open_dataset(tmp_path, {"kernel": "attention", "space_version": "v", "gpu_profile": "H200", "sms": None})
    for shape in (causal, full):
        result = ShapeRecords(shape, (Trial(cfg(64, 1), 41.5, None, 1.5, 7, 0.01, screen_us=41.0,
                                                  retime_us=41.6, retime2_us=41.4, retime_rounds=15),
                                     Trial(cfg(128, 3), None, "compile: OutOfResources")),
                             {"sdpa": 40.25}, {"sdpa_first_us": 40.5})
        path = write_shape(tmp_path, result)
        assert path.name == f"{shape_id(shape)}.csv.xz"
        back = read_shape(path)
        assert back == result and type(back.shape) is AttentionShape
        assert encode_shape(back) == path.read_bytes()
    records = {r.shape: r for r in read_dataset(tmp_path)}
    assert set(records) == {causal, full} and records[full].aliases == {}
    assert records[causal].best_us == 41.5 and records[causal].baselines_us == {"sdpa": 40.25}


def test_attention_ids_keep_the_four_number_form_and_name_kv_heads():
    from rooftune.candidates import AttentionShape
    from rooftune.candidates import header_shape as _header_shape, shape_header as _shape_header
    from rooftune.eval.datasets.format import shape_id

    plain, gqa = AttentionShape(4, 32, 4096, 128), AttentionShape(1, 32, 8192, 128, kv_heads=8)
    assert shape_id(plain) == "4x32x4096x128-causal-bf16" and "kv_heads" not in _shape_header(plain)
    assert shape_id(gqa) == "1x32x8192x128x8-causal-bf16"
    assert _header_shape(_shape_header(gqa)) == gqa and _header_shape(_shape_header(plain)) == plain


def test_atomic_write_gives_a_plain_files_permissions(tmp_path):
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    write_atomic(tmp_path / "atomic", b"x")
    assert (tmp_path / "atomic").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def test_a_resumed_sweep_records_its_list_and_never_mixes_held_out_with_training(tmp_path):
    """A folder resumed from another list records it (`swept_lists`); a held-out list into a training folder,
    or the reverse, is refused before anything is written, so a fit can never read held-out shapes by way of a
    folder first swept from a training list."""
    from rooftune.eval.datasets.format import open_dataset, read_manifest, swept_lists
    identity = {"format": "rooftune-dataset-1", "kernel": "moe-fp8", "space_version": "v", "gpu_profile": "g",
                "sms": None}
    train, heldout = tmp_path / "train", tmp_path / "heldout"
    open_dataset(train, {**identity, "shapes_file": "shapes_train_half.json"})
    open_dataset(train, {**identity, "shapes_file": "shapes_train.json"})
    open_dataset(train, {**identity, "shapes_file": "shapes_train.json"})
    assert swept_lists(read_manifest(train)) == ["shapes_train_half.json", "shapes_train.json"]
    before = (train / "manifest.json").read_bytes()
    with pytest.raises(DatasetError, match="mix"):
        open_dataset(train, {**identity, "shapes_file": "shapes_heldout.json"})
    assert (train / "manifest.json").read_bytes() == before
    open_dataset(heldout, {**identity, "shapes_file": "shapes_heldout_block.json"})
    open_dataset(heldout, {**identity, "shapes_file": "shapes_heldout.json"})
    with pytest.raises(DatasetError, match="mix"):
        open_dataset(heldout, {**identity, "shapes_file": "shapes_train.json"})
