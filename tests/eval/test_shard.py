"""Sharding a sweep across machines and GPUs, on the CPU: the split (each shape in exactly one shard,
whatever the list's order; shards even in count and estimated cost), and several writers into one
dataset folder (worker processes with a fake measurer): nothing lost or duplicated, the manifest
consistent, failures passed on."""

import functools
import importlib
import json
import random
from pathlib import Path

import pytest

from rooftune.candidates import GemmShape
from rooftune.candidates.shapes import load_shapes
from rooftune.eval.sweeping import sweep
from rooftune.eval.datasets.format import (
    DatasetError,
    finished_ids,
    read_manifest,
    read_shape,
    shape_files,
    shape_id,
    write_manifest,
)
from rooftune.eval.sweeping.workers import RemoteTraceback, WorkerError, run_on_gpus, visible_devices
from rooftune.eval.sweeping.quarantine import ContextQuarantined
from rooftune.eval.sweeping.shard import shard_numbers, shard_of, sweep_cost_us
from rooftune.hwprofiles import load_profile
from rooftune.hwprofiles.hwprobe import NoGpuError

PROFILE = load_profile("h200")
HELDOUT = Path(__file__).resolve().parents[2] / "datasets/h200/gemm/shapes_heldout.json"
LIST = load_shapes(HELDOUT)
cost = functools.cache(functools.partial(sweep_cost_us, profile=PROFILE, replay_us=500.0))


def _ids(shapes):
    return {shape_id(s) for s in shapes}


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_every_shape_is_in_exactly_one_shard_whatever_the_order(count):
    parts = [shard_of(LIST, i, count, cost) for i in range(count)]
    ids = [shape_id(s) for part in parts for s in part]
    assert len(ids) == len(set(ids)) and set(ids) == _ids(LIST)
    reordered = random.Random(count).sample(LIST, len(LIST)) + LIST[:5]  # another order, some twice
    assert [_ids(shard_of(reordered, i, count, cost)) for i in range(count)] == [_ids(p) for p in parts]


@pytest.mark.parametrize("count", [2, 3, 4])
def test_shards_are_even_in_count_and_estimated_cost(count):
    parts = [shard_of(LIST, i, count, cost) for i in range(count)]
    sizes = [len(p) for p in parts]
    costs = [sum(map(cost, p)) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert max(costs) / min(costs) < 1.05
    costliest = sorted(_unique(LIST), key=cost, reverse=True)[:count]  # the long shapes spread out
    assert {shard_numbers(LIST, count, cost)[shape_id(s)] for s in costliest} == set(range(count))


def _unique(shapes):
    return list({shape_id(s): s for s in shapes}.values())


def test_equal_costs_are_split_by_shape_id_in_a_snake():
    shapes = [GemmShape(m, 64, 64) for m in (5, 1, 4, 2, 3)]
    numbers = shard_numbers(shapes, 2, lambda s: 1.0)
    by_id = sorted(numbers)
    assert [numbers[sid] for sid in by_id] == [0, 1, 1, 0, 0]


def test_the_cost_estimate_grows_with_the_work():
    assert sweep_cost_us(GemmShape(8192, 8192, 8192), PROFILE, 500.0) > sweep_cost_us(GemmShape(16, 64, 64), PROFILE, 500.0)


def test_a_shard_that_does_not_exist_is_refused():
    for index, count in ((2, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError):
            shard_of(LIST, index, count, cost)


def test_sweep_shapes_sweeps_only_its_shard(tmp_path, monkeypatch):
    seen = {}

    def fake_part(kernel, shapes, reporter, **kwargs):
        seen.update(kernel=kernel, ids=_ids(shapes), **kwargs)
        return sweep.SweepSummary(done=len(shapes), skipped=0, remaining=0, stopped_early=False, seconds=1.0)

    monkeypatch.setattr(sweep, "_sweep_part", fake_part)
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"m": s.m, "n": s.n, "k": s.k, "layout": s.layout} for s in LIST[:30]]))
    summary = sweep.sweep_gemm(path, tmp_path / "d", PROFILE, shard=(1, 3), max_minutes=5.0)
    assert summary.done == 10 and seen["kernel"] == "gemm" and seen["listed"] == 30
    assert seen["ids"] == _ids(shard_of(LIST[:30], 1, 3, cost)) and seen["max_minutes"] == 5.0


def test_sweep_on_gpus_checks_the_folder_and_the_gpus_before_any_worker(tmp_path, monkeypatch):
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"m": 16, "n": 64, "k": 64}]))
    write_manifest(tmp_path / "d", {"kernel": "attention"})
    with pytest.raises(DatasetError, match="different dataset"):
        sweep.sweep_gemm(path, tmp_path / "d", PROFILE, gpus=[0, 1])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(NoGpuError, match="GPU 1, but this machine shows GPUs 0-0"):
        sweep.sweep_gemm(path, tmp_path / "e", PROFILE, gpus=[0, 1])
    assert not (tmp_path / "e").exists()


def test_gpu_numbers_map_onto_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,7")
    assert visible_devices([1, 0]) == ["7", "4"]
    with pytest.raises(NoGpuError, match="GPU 2, but this machine shows GPUs 0-1"):
        visible_devices([0, 2])
    with pytest.raises(NoGpuError, match="twice"):
        visible_devices([1, 1])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(NoGpuError, match="shows no GPU"):
        visible_devices([0])


class Recorder:
    def __init__(self):
        self.events = []

    def start(self, total, done):
        self.events.append(("start", total, done))

    def phase(self, shape, text):
        self.events.append(("phase", shape, text))

    def finished(self, shape, seconds):
        self.events.append(("finished", shape, seconds))


@pytest.fixture
def fakes(monkeypatch):
    """tests/eval/sweep_fakes.py, importable by name in spawned workers; two GPUs, CUDA numbers 4 and 7."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,7")
    return importlib.import_module("sweep_fakes")


def test_two_gpu_workers_share_one_folder_losing_and_duplicating_nothing(tmp_path, fakes):
    shapes = [GemmShape(m, 256, 512, layout) for m in (1, 16, 64, 128) for layout in ("kn", "nk")]
    parts = [shard_of(shapes, i, 2, cost) for i in range(2)]
    recorder = Recorder()
    by_gpu = run_on_gpus(functools.partial(fakes.sweep_part, tmp_path), parts, [0, 1], recorder)
    assert [by_gpu[g].done for g in (0, 1)] == [len(p) for p in parts] == [4, 4]
    assert finished_ids(tmp_path) == _ids(shapes) and len(shape_files(tmp_path)) == len(shapes)
    assert not [p for p in (tmp_path / "shapes").iterdir() if not p.name.endswith(".csv.xz")]  # no temp files
    manifest = read_manifest(tmp_path)  # the last worker to finish counted every file
    expected = {**{shape_id(s): "gpu 4: fake" for s in parts[0]}, **{shape_id(s): "gpu 7: fake" for s in parts[1]}}
    assert manifest["shape_devices"] == expected and manifest["shapes_done"] == 8 and manifest["noise"]["shapes"] == 8
    assert {shape_id(read_shape(p).shape): read_shape(p).meta["device"] for p in shape_files(tmp_path)} == expected
    finished = [e[1] for e in recorder.events if e[0] == "finished"]
    assert sorted(finished) == sorted(f"gpu {g}: {s}" for g, part in enumerate(parts) for s in part)
    again = run_on_gpus(functools.partial(fakes.sweep_part, tmp_path), parts[::-1], [0, 1], recorder)
    assert [again[g].done for g in (0, 1)] == [0, 0] and read_manifest(tmp_path) == manifest  # resumed: all there


def test_the_manifest_lock_loses_no_update(tmp_path, fakes):
    write_manifest(tmp_path, {"kernel": "gemm"})
    assert run_on_gpus(functools.partial(fakes.count_up, tmp_path, 100), [[], []], [0, 1], Recorder()) == {0: 100, 1: 100}
    assert read_manifest(tmp_path)["count"] == 200


def test_each_worker_sees_only_its_gpu_and_reports_through_the_parent(fakes):
    a, b = GemmShape(1, 64, 64), GemmShape(2, 64, 64)
    recorder = Recorder()
    assert run_on_gpus(fakes.echo, [[a], [b]], [1, 0], recorder) == {1: ("7", [str(a)]), 0: ("4", [str(b)])}
    assert ("phase", f"gpu 1: {a}", "working") in recorder.events and ("finished", f"gpu 0: {b}", 1.5) in recorder.events


def test_a_failed_worker_fails_the_run_once_the_others_have_finished(fakes):
    with pytest.raises(ContextQuarantined) as info:
        run_on_gpus(functools.partial(fakes.fail_on, "7"), [[], []], [0, 1], Recorder())
    assert str(info.value) == "gpu 1: config X killed the CUDA context on 7\ngpu 0: finished its part (ok)"
    assert isinstance(info.value.__cause__, RemoteTraceback) and "fail_on" in str(info.value.__cause__)


def test_a_worker_that_dies_is_a_worker_error(fakes):
    with pytest.raises(WorkerError, match="exit code 9"):
        run_on_gpus(fakes.die, [[]], [0], Recorder(), poll_s=0.1)
