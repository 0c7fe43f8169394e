"""The device scripts' shell logic on the CPU, with `rooftune` and pip faked on PATH: which lists a partition call
sweeps, with which profile and partition, and what it packs for the next call."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _fakes(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "rooftune.log"
    (bin_ / "rooftune").write_text(f'#!/bin/bash\necho "$@" >> {log}\n')
    (bin_ / "python3").write_text(f'#!/bin/bash\n[ "$1 $2" = "-m pip" ] && exit 0\nexec {sys.executable} "$@"\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "OUT": str(out)}, log, out


def test_a_partition_call_sweeps_only_unfinished_lists_inside_the_partition(tmp_path):
    env, log, out = _fakes(tmp_path)
    run = subprocess.run(["bash", "scripts/device/partition.sh", "300"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "sweep gemm train: all 24 shapes there" in run.stdout and "attention heldout: all 50" in run.stdout
    calls = log.read_text().splitlines()
    # the profile is committed, so no probe; the one unfinished list is swept on 66 SMs with the partition's profile
    assert len(calls) == 1 and calls[0].startswith("sweep gemm --shapes datasets/h200-sm66/gemm/shapes_heldout.json")
    assert "--out datasets/h200-sm66/gemm/heldout --gpu hwprofiles/h200-sm66.json --sms 66" in calls[0]
    assert (out / "gemm_heldout.tgz").is_file() and (out / "gemm_train.tgz").is_file()


def test_sweep_sh_on_the_whole_chip_names_no_partition(tmp_path):
    env, log, out = _fakes(tmp_path)
    shapes = ROOT / "datasets" / "h200" / "moe" / "shapes_train.json"
    assert shapes.is_file()
    run = subprocess.run(["bash", "scripts/device/sweep.sh", "moe", "train", "100", str(tmp_path / "root")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    call = log.read_text().strip()
    assert call.startswith(f"sweep moe --shapes datasets/h200/moe/shapes_train.json --out {tmp_path}/root/moe/train "
                           "--gpu h200 --max-minutes") and "--sms" not in call
