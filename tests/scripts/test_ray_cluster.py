"""The Ray recipe (scripts/cluster/ray_sweep.py) on a real local Ray cluster of two logical GPUs on the CPU: each
task's `rooftune sweep --shard` runs on the fake device (tests/scripts/fake_rooftune.py), two shards into one
folder. A Ray worker killed mid-shard: its shard is lost (with --retries 0) and the recipe run again resumes
it, or Ray reruns it and the rerun resumes; either way every shape lands in the folder once, measured once,
and `rooftune eval` reads the folder. Skipped where Ray is not installed (the test extra installs it)."""

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from script_module import load_script
from typer.testing import CliRunner

from rooftune.candidates import shape_id
from rooftune.candidates.shapes import load_shapes
from rooftune.eval.datasets.format import finished_ids, read_manifest
from rooftune.tuner.cli.app import app

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a Ray cluster starts: ~25 s (test_cluster_recipe.py runs the recipe in-process)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray cluster with two logical GPUs, whose tasks find the fake `rooftune` first on their PATH:
    its address and the folder of the fake's log and kill order."""
    state = tmp_path_factory.mktemp("ray")
    fake_bin = state / "bin"
    fake_bin.mkdir()
    command = fake_bin / "rooftune"  # exec: the fake sweep's parent is the Ray worker, as the real one's is
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests/scripts/fake_rooftune.py"}" "$@"\n')
    command.chmod(0o755)
    env = {"PATH": f"{fake_bin}:{os.environ['PATH']}", "ROOFTUNE_FAKE_LOG": str(state / "measured.log"),
           "ROOFTUNE_FAKE_KILL": str(state / "kill")}
    with pytest.MonkeyPatch.context() as patch:
        # Ray 2.60 kills a dead worker's process group itself; before, and with this off, it does not: the
        # recipe must take the worker's sweep down on its own.
        patch.setenv("RAY_process_group_cleanup_enabled", "0")
        ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": env})
    try:
        yield ray.get_runtime_context().gcs_address, state
    finally:
        ray.shutdown()


def _recipe(cluster, shapes, out, *options) -> int:
    address, _ = cluster
    argv = ["gemm", str(shapes), str(out), "h200", "--shards", "2", "--minutes", "5", "--address", address, *options]
    return load_script("scripts/cluster/ray_sweep.py").main(argv)


def _shapes(tmp_path) -> tuple[Path, set[str]]:
    listed = json.loads((REPO / "datasets" / "h200" / "gemm" / "shapes_heldout.json").read_text())
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([e for e in listed if e["m"] * e["n"] * e["k"] < 2**27][:6]))
    return shapes, {shape_id(s) for s in load_shapes(shapes)}


def _kill_shard_1(cluster) -> Path:
    """Order the fake to kill the Ray worker of shard 1/2 at its second shape; the file its killer's PID goes to."""
    _, state = cluster
    for name in ("measured.log", "kill.taken"):
        (state / name).unlink(missing_ok=True)
    (state / "kill").write_text("1/2")
    return state / "kill.taken"


def _measured(cluster) -> list[str]:
    return [line.split()[0] for line in (cluster[1] / "measured.log").read_text().splitlines()]


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` has ended (reaped, or a zombie) within `within_s`; if not, it is killed here."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    return False


def _holds_every_shape_once(cluster, out, ids):
    assert finished_ids(out) == ids and len(list((out / "shapes").iterdir())) == len(ids)
    measured = _measured(cluster)
    assert sorted(measured) == sorted(ids), "a shape measured twice (not resumed) or never"
    manifest = read_manifest(out)
    assert manifest["shapes_done"] == len(ids)
    assert set(manifest["shape_devices"].values()) <= {"gpu 0: fake", "gpu 1: fake"}  # one GPU per task


def test_a_shard_whose_worker_died_is_named_and_the_recipe_run_again_resumes_it(cluster, tmp_path, capsys):
    shapes, ids = _shapes(tmp_path)
    out = tmp_path / "d"
    killer = _kill_shard_1(cluster)
    assert _recipe(cluster, shapes, out, "--retries", "0") == 1
    printed = capsys.readouterr().out
    assert "shard 1/2 lost its Ray worker" in printed and "shard 0/2" not in printed
    assert killer.is_file() and _gone(int(killer.read_text())), "the dead worker's sweep measures on"
    assert len(finished_ids(out)) == 4  # shard 0's three shapes and the first of shard 1's

    assert _recipe(cluster, shapes, out) == 0
    _holds_every_shape_once(cluster, out, ids)
    result = CliRunner().invoke(app, ["eval", "gemm", "--data", str(out), "--budget", "5", "--gpu", "h200",
                                      "--methods", "rooftune,model"])
    assert result.exit_code == 0, result.output
    assert f"{len(ids)} shapes" in " ".join(result.output.split())


def test_ray_reruns_a_shard_whose_worker_died_and_the_rerun_resumes(cluster, tmp_path):
    shapes, ids = _shapes(tmp_path)
    out = tmp_path / "d"
    killer = _kill_shard_1(cluster)
    assert _recipe(cluster, shapes, out, "--retries", "1") == 0
    assert killer.is_file() and _gone(int(killer.read_text()))
    _holds_every_shape_once(cluster, out, ids)
