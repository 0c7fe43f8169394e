"""The cluster recipe (scripts/cluster/, docs/datasets.md "Sweeping"): a Slurm array and Ray tasks give each GPU
its shard of one list into one folder; the shards' sweeps (a fake device) fill the folder with every shape once,
and `rooftune eval` reads it."""

import json
import os
import subprocess
from pathlib import Path

from script_module import load_script
from typer.testing import CliRunner

from rooftune.candidates import shape_id
from rooftune.candidates.shapes import load_shapes
from rooftune.eval.datasets.format import finished_ids, read_manifest
from rooftune.eval.sweeping import sweep
from rooftune.tuner.cli.app import app

REPO = Path(__file__).resolve().parents[2]
SLURM = REPO / "scripts" / "cluster" / "slurm_sweep.sh"
runner = CliRunner()


def _ray_script():
    return load_script("scripts/cluster/ray_sweep.py")


def _shard_args(command: list[str]) -> str:
    return command[command.index("--shard") + 1]


def test_the_slurm_array_gives_each_task_its_shard_of_one_folder(tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    log = tmp_path / "calls.txt"
    (fake_bin / "rooftune").write_text(f'#!/bin/bash\necho "$@" >> {log}\n')
    (fake_bin / "rooftune").chmod(0o755)
    for task in range(3):
        env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "SLURM_ARRAY_TASK_ID": str(task),
               "SLURM_ARRAY_TASK_COUNT": "3"}
        subprocess.run(["bash", str(SLURM), "gemm", "shapes.json", "/shared/d", "h200"], env=env, check=True)
    calls = [line.split() for line in log.read_text().splitlines()]
    assert [_shard_args(c) for c in calls] == ["0/3", "1/3", "2/3"]
    assert {tuple(c[c.index("--out"):c.index("--out") + 2]) for c in calls} == {("--out", "/shared/d")}
    outside = subprocess.run(["bash", str(SLURM), "gemm", "s.json", "d", "h200"], capture_output=True, text=True,
                             env={k: v for k, v in os.environ.items() if not k.startswith("SLURM_")})
    assert outside.returncode != 0 and "Slurm array task" in outside.stderr


def test_the_ray_driver_runs_one_command_per_shard_and_reports_failures(capsys):
    ray_sweep = _ray_script()
    commands = ray_sweep.shard_commands("gemm", "s.json", "/shared/d", "h200", 4, 60.0)
    assert [_shard_args(c) for c in commands] == ["0/4", "1/4", "2/4", "3/4"]
    argv = ["gemm", "s.json", "/shared/d", "h200", "--shards", "3", "--address", "head:6379", "--retries", "1"]
    asked = []
    assert ray_sweep.main(argv, runner=lambda cs, address, retries: asked.append((address, retries)) or [0, 3, 0]) == 3
    assert asked == [("head:6379", 1)] and "shard 1/3 exited 3" in capsys.readouterr().out
    assert ray_sweep.main(argv, runner=lambda cs, address, retries: [0, "The worker died", -9]) == ray_sweep.LOST
    out = capsys.readouterr().out
    assert "shard 1/3 lost its Ray worker (The worker died; 2 tries): run again" in out
    assert "shard 2/3 was killed by signal 9" in out


def test_two_shards_into_one_folder_hold_every_shape_once_and_eval_reads_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "_sweep_part", load_script("tests/scripts/fake_rooftune.py").sweep_part)
    listed = json.loads((REPO / "datasets" / "h200" / "gemm" / "shapes_heldout.json").read_text())
    small = [e for e in listed if e["m"] * e["n"] * e["k"] < 2**27][:6]
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(small))
    out = tmp_path / "d"
    for index in range(2):  # what the recipe's two tasks run, one after the other here
        command = _ray_script().shard_commands("gemm", str(shapes), str(out), "h200", 2, 5.0)[index]
        result = runner.invoke(app, command[1:])
        assert result.exit_code == 0, result.output
    assert finished_ids(out) == {shape_id(s) for s in load_shapes(shapes)}
    assert read_manifest(out)["shapes_done"] == len(small)
    result = runner.invoke(app, ["eval", "gemm", "--data", str(out), "--budget", "5", "--gpu", "h200",
                                 "--methods", "rooftune,model"])
    assert result.exit_code == 0, result.output
    assert f"{len(small)} shapes" in " ".join(result.output.split())
