"""The device scripts' shell logic on the CPU, with `rooftune`, pip and the prebuild faked on PATH: which lists a
partition call or a Triton release's call sweeps, with which profile, partition or Triton, which prebuilt archives it
unpacks, and what it packs for the next call; and the CPU side's prebuild of a release list (its checks and its
build's command line)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _fakes(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "rooftune.log"
    (bin_ / "rooftune").write_text(f'#!/bin/bash\necho "$@" >> {log}\n')
    # the machine's GPU (release.sh sweeps only on an H200); FAKE_GPU names another
    (bin_ / "nvidia-smi").write_text('#!/bin/bash\necho "${FAKE_GPU:-NVIDIA H200}"\n')
    (bin_ / "python3").write_text(f'#!/bin/bash\n[ "$1 $2" = "-m pip" ] && exit 0\n'
                                  f'[ "$1 $2" = "-m rooftune.kernels.harness.prebuild" ] && '
                                  f'{{ echo "$3 $4" >> {tmp_path / "unpack.log"}; echo "unpacked $4"; exit 0; }}\n'
                                  f'exec {sys.executable} "$@"\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "tmp").mkdir()  # the machine's /tmp: the unpacked archives' marks
    return ({**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "OUT": str(out), "TMPDIR": str(tmp_path / "tmp")},
            log, out)


def _finished(done: Path, shapes_list: Path, kernel: str) -> int:
    """Every shape of `shapes_list` written as finished in the shapes folder `done` (empty files: the scripts count
    names), in either format: xz, or format 1's gzip; returns how many."""
    from rooftune.candidates import KERNELS, shape_id

    ids = sorted({shape_id(s) for s in KERNELS[kernel].load_list(shapes_list)})
    done.mkdir(parents=True)
    for i, sid in enumerate(ids):
        (done / f"{sid}.csv.{'xz' if i % 2 else 'gz'}").write_bytes(b"")
    return len(ids)


def _partition_tree(tmp_path) -> Path:
    """A checkout's worth of what partition.sh reads: the scripts, the partition's lists, GEMM train swept."""
    import shutil

    tree = tmp_path / "tree"
    (tree / "scripts" / "device").mkdir(parents=True)
    for name in ("partition.sh", "sweep.sh"):
        shutil.copy(ROOT / "scripts" / "device" / name, tree / "scripts" / "device" / name)
    for kernel in ("gemm", "attention"):
        (tree / "datasets" / "h200-sm66" / kernel).mkdir(parents=True)
        for split in ("train", "heldout"):
            shutil.copy(ROOT / "datasets" / "h200-sm66" / kernel / f"shapes_{split}.json",
                        tree / "datasets" / "h200-sm66" / kernel / f"shapes_{split}.json")
    done = tree / "datasets" / "h200-sm66" / "gemm" / "train" / "shapes"
    assert _finished(done, tree / "datasets" / "h200-sm66" / "gemm" / "shapes_train.json", "gemm") == 24
    (done / ".s0.csv.xz.k2j1.tmp").write_bytes(b"")  # a temp file is not a finished shape
    return tree


def test_a_partition_call_probes_once_then_sweeps_the_unfinished_lists_inside_the_partition(tmp_path):
    env, log, out = _fakes(tmp_path)
    tree = _partition_tree(tmp_path)
    run = subprocess.run(["bash", "scripts/device/partition.sh", "300"], cwd=tree, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "sweep gemm train: all 24 shapes there" in run.stdout
    calls = log.read_text().splitlines()
    assert calls[0] == "hwprobe --sms 66 --name h200-sm66 --out hwprofiles/h200-sm66.json"
    swept = [c.split(" --shapes ")[1].split()[0] for c in calls[1:]]
    assert swept == [f"datasets/h200-sm66/{k}/shapes_{s}.json"
                     for k, s in (("attention", "train"), ("attention", "heldout"), ("gemm", "heldout"))]
    assert all("--gpu hwprofiles/h200-sm66.json --sms 66" in c for c in calls[1:])
    assert (out / "gemm_train.tgz").is_file()  # a finished list is packed too: the next call's commit has it


def test_sweep_sh_on_the_whole_chip_names_no_partition(tmp_path):
    env, log, out = _fakes(tmp_path)
    shapes = ROOT / "datasets" / "h200" / "moe" / "shapes_train.json"
    assert shapes.is_file()
    run = subprocess.run(["bash", "scripts/device/sweep.sh", "moe", "train", "100", str(tmp_path / "root")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    call = log.read_text().strip()
    assert call.startswith(f"sweep moe --shapes datasets/h200/moe/shapes_train.json --out {tmp_path}/root/moe/train "
                           "--gpu h200 --max-minutes") and "--sms" not in call and "--gpus" not in call


def test_sweep_sh_spreads_over_the_gpus_named(tmp_path):
    env, log, out = _fakes(tmp_path)
    run = subprocess.run(["bash", "scripts/device/sweep.sh", "moe", "train", "100", str(tmp_path / "root")], cwd=ROOT,
                         env={**env, "GPUS": "0,1"}, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "--gpu h200 --gpus 0,1 --max-minutes" in log.read_text()


def test_sweep_sh_backfills_a_finished_list_when_asked(tmp_path):
    env, log, out = _fakes(tmp_path)
    tree = _partition_tree(tmp_path)  # GEMM train: all 24 shapes there
    run = subprocess.run(["bash", "scripts/device/sweep.sh", "gemm", "train", "100", "datasets/h200-sm66"], cwd=tree,
                         env={**env, "BACKFILL": "legal", "GPU": "h200-sm66", "SMS": "66"}, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    call = log.read_text().strip()
    assert call.startswith("sweep gemm --shapes datasets/h200-sm66/gemm/shapes_train.json "
                           "--out datasets/h200-sm66/gemm/train --gpu h200-sm66 --sms 66 --backfill-legal --max-minutes")
    assert (out / "gemm_train.tgz").is_file()


def test_slim_triton_pack_drops_only_what_compiling_never_loads(tmp_path):
    """The pack rewritten in place without the profiler's CUPTI libraries, the disassemblers and FileCheck; the rest
    (the library, the compiler's Python, ptxas's neighbours that stay) unchanged."""
    import tarfile

    src = tmp_path / "src"
    keep = ["triton/_C/libtriton.so", "triton/backends/nvidia/compiler.py", "triton/backends/nvidia/include/cuda.h",
            "triton-3.9.0.dist-info/METADATA"]
    drop = ["triton/backends/nvidia/lib/cupti-blackwell/libcupti.so", "triton/backends/nvidia/lib/cupti/libcupti.so",
            "triton/backends/nvidia/bin/nvdisasm", "triton/backends/nvidia/bin/cuobjdump", "triton/FileCheck"]
    for name in keep + drop:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(name)
    pack = tmp_path / "triton.tar.xz"
    with tarfile.open(pack, "w:xz") as tar:
        for top in ("triton", "triton-3.9.0.dist-info"):
            tar.add(src / top, arcname=top)
    run = subprocess.run(["bash", str(ROOT / "scripts" / "device" / "slim-triton-pack.sh"), str(pack)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with tarfile.open(pack) as tar:
        files = {m.name for m in tar.getmembers() if m.isfile()}
    assert files == set(keep)


def _release_tree(tmp_path, version: str | None) -> Path:
    """A checkout's worth of what release.sh reads: the scripts, the release lists, and a packed "Triton" (a
    package that only says its version) in .triton39/, as the call carries it; GEMM train already swept whole."""
    import lzma
    import shutil
    import tarfile

    tree = tmp_path / "tree"
    (tree / "scripts" / "device").mkdir(parents=True)
    for name in ("release.sh", "under_release.sh", "sweep.sh"):
        shutil.copy(ROOT / "scripts" / "device" / name, tree / "scripts" / "device" / name)
    shutil.copytree(ROOT / "datasets" / "h200" / "releases", tree / "datasets" / "h200" / "releases",
                    ignore=shutil.ignore_patterns("triton-*"))
    listed = len(json.loads((tree / "datasets/h200/releases/gemm/shapes_train.json").read_text()))
    done = tree / "datasets/h200/releases/triton-3.9/gemm/train/shapes"
    assert _finished(done, tree / "datasets/h200/releases/gemm/shapes_train.json", "gemm") == listed
    if version is not None:
        package = tmp_path / "pack" / "triton"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f'__version__ = "{version}"\n')
        (tree / ".triton39").mkdir()
        with lzma.open(tree / ".triton39" / "triton.tar.xz", "wb") as xz, tarfile.open(fileobj=xz, mode="w") as tar:
            tar.add(package, arcname="triton")
    return tree


def test_a_release_call_sweeps_the_shared_lists_into_the_releases_folder_under_the_packed_triton(tmp_path):
    env, log, out = _fakes(tmp_path)
    tree = _release_tree(tmp_path, "3.9.0")
    run = subprocess.run(["bash", "scripts/device/release.sh", "3.9", "500"], cwd=tree,
                         env={**env, "TRITON_UNPACK": str(tmp_path / "tri")}, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Triton 3.9.0" in run.stdout and "sweep gemm train: all 60 shapes there" in run.stdout
    calls = log.read_text().splitlines()
    assert [(c.split(" --shapes ")[1].split()[0], c.split(" --out ")[1].split()[0]) for c in calls] == [
        (f"datasets/h200/releases/{k}/shapes_{s}.json", f"datasets/h200/releases/triton-3.9/{k}/{s}")
        for k, s in (("moe", "train"), ("gemm", "heldout"), ("moe", "heldout"))]
    assert (out / "gemm_train.tgz").is_file()


PTXAS_VERSION = ("ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 13.0, V13.0.88\n"
                 "Build cuda_13.0.r13.0/compiler.36424714_0")


def _fake_ptxas(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "ptxas").write_text(f"#!/bin/bash\nprintf '{PTXAS_VERSION}\\n'\n")
    (folder / "ptxas").chmod(0o755)
    return folder / "ptxas"


def test_a_release_call_unpacks_each_prebuilt_archive_once_per_machine(tmp_path):
    """PREBUILT names several archives: each is unpacked before the first sweep and not again on a warm machine
    (in the call's other lists' sweeps or the next call) unless it changed; a missing one is said and skipped. The
    call says the ptxas it compiles with, which a prebuild must match."""
    env, log, out = _fakes(tmp_path)
    tree = _release_tree(tmp_path, "3.9.0")
    (tree / ".tcache").mkdir()
    for name in ("r39_gemm_train", "r39_moe_train"):
        (tree / ".tcache" / f"{name}.tar.xz").write_bytes(b"binaries")
    cuda = _fake_ptxas(tmp_path / "cuda" / "bin").parent
    env = {**env, "TRITON_UNPACK": str(tmp_path / "tri"), "CUDA_BIN": str(cuda),
           "PREBUILT": ".tcache/r39_gemm_train.tar.xz .tcache/missing.tar.xz .tcache/r39_moe_train.tar.xz"}
    unpacks = tmp_path / "unpack.log"

    def call():
        run = subprocess.run(["bash", "scripts/device/release.sh", "3.9", "500"], cwd=tree, env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stdout

    first = call()
    assert (f"ptxas {cuda}/ptxas: Cuda compilation tools, release 13.0, V13.0.88; "
            "Build cuda_13.0.r13.0/compiler.36424714_0") in first
    assert "no prebuild archive .tcache/missing.tar.xz: its binaries compile here" in first
    assert first.index("unpacked .tcache/r39_moe_train.tar.xz") < first.index("sweep gemm train: all 60 shapes there")
    assert unpacks.read_text().splitlines() == ["unpack .tcache/r39_gemm_train.tar.xz",
                                                "unpack .tcache/r39_moe_train.tar.xz"]
    call()  # a warm machine: both there already
    assert len(unpacks.read_text().splitlines()) == 2
    (tree / ".tcache" / "r39_moe_train.tar.xz").write_bytes(b"rebuilt binaries")
    call()
    assert unpacks.read_text().splitlines()[2:] == ["unpack .tcache/r39_moe_train.tar.xz"]


@pytest.mark.parametrize("version", ["3.6.0", None])
def test_a_release_call_sweeps_nothing_without_that_releases_triton(tmp_path, version):
    env, log, out = _fakes(tmp_path)
    tree = _release_tree(tmp_path, version)
    run = subprocess.run(["bash", "scripts/device/release.sh", "3.9", "500"], cwd=tree,
                         env={**env, "TRITON_UNPACK": str(tmp_path / "tri")}, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and not log.exists()
    assert ("Triton 3.6.0 imported, not 3.9: nothing run" if version else "no .triton39/triton.tar.xz") in run.stdout


@pytest.mark.parametrize("version", ["3.9.0", "3.6.0"])
def test_under_release_runs_a_command_under_the_packed_triton_or_nothing(tmp_path, version):
    env, log, out = _fakes(tmp_path)
    tree = _release_tree(tmp_path, version)
    run = subprocess.run(["bash", "scripts/device/under_release.sh", "3.9", "python3", "-c",
                          "import os, triton; print('ran under', triton.__version__, os.environ['TRITON_DEFAULT_FP_FUSION'])"],
                         cwd=tree, env={**env, "TRITON_UNPACK": str(tmp_path / "tri")}, capture_output=True, text=True,
                         timeout=120)
    if version == "3.9.0":
        assert run.returncode == 0 and "ran under 3.9.0 1" in run.stdout, run.stdout + run.stderr
    else:
        assert run.returncode == 2 and "ran under" not in run.stdout and "imported, not 3.9: nothing run" in run.stdout


def test_a_release_call_sweeps_nothing_on_a_gpu_other_than_the_h200(tmp_path):
    """The lists and folders are the H200's: a call that lands on an H100 files nothing there."""
    env, log, out = _fakes(tmp_path)
    tree = _release_tree(tmp_path, "3.9.0")
    run = subprocess.run(["bash", "scripts/device/release.sh", "3.9", "500"], cwd=tree,
                         env={**env, "TRITON_UNPACK": str(tmp_path / "tri"), "FAKE_GPU": "NVIDIA H100 80GB HBM3"},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 3 and not log.exists() and not list(out.iterdir())
    assert "GPU NVIDIA H100 80GB HBM3, not an H200: nothing swept" in run.stdout


def test_sweep_sh_with_lists_never_falls_back_to_the_full_list(tmp_path):
    env, log, out = _fakes(tmp_path)
    run = subprocess.run(["bash", "scripts/device/sweep.sh", "attention", "train", "100", str(tmp_path / "root")],
                         cwd=ROOT, env={**env, "LISTS": "datasets/h200/releases"}, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "no list datasets/h200/releases/attention/shapes_train.json" in run.stdout
    assert not log.exists()


def test_sweep_sh_into_a_folder_of_other_lists_counts_only_its_own_list(tmp_path):
    """INTO= sweeps a list into a folder that may hold other lists' shapes: as many finished shapes of another list
    as this one has is not "all there", and the moe-fp8 kernel's folder is moe_fp8."""
    import shutil

    env, log, out = _fakes(tmp_path)
    tree = tmp_path / "tree"
    (tree / "scripts" / "device").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "device" / "sweep.sh", tree / "scripts" / "device" / "sweep.sh")
    lists = tree / "datasets" / "h200" / "moe_fp8"
    lists.mkdir(parents=True)
    entries = json.loads((ROOT / "datasets/h200/moe_fp8/shapes_train.json").read_text())
    (lists / "shapes_part.json").write_text(json.dumps(entries[:3]))
    (lists / "shapes_other.json").write_text(json.dumps(entries[3:7]))
    _finished(lists / "train" / "shapes", lists / "shapes_other.json", "moe-fp8")
    run = subprocess.run(["bash", "scripts/device/sweep.sh", "moe-fp8", "part", "100"], cwd=tree,
                         env={**env, "INTO": "train"}, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "all 3 shapes there" not in run.stdout and "0 of 3 shapes done" in run.stdout
    assert log.read_text().startswith("sweep moe-fp8 --shapes datasets/h200/moe_fp8/shapes_part.json "
                                      "--out datasets/h200/moe_fp8/train ")
    assert (out / "moe_fp8_train.tgz").is_file()


def _prebuild_tree(tmp_path, version: str | None = "3.9.0", own_rooftune: bool = True) -> tuple[Path, dict, Path]:
    """What scripts/prebuild_release.sh reads: the release lists and the packed "Triton" (_release_tree), and, where
    `own_rooftune`, a rooftune package of this checkout's layout (rooftune/kernels a link to kernels/); with a Python
    that fakes `prebuild build` (its arguments, environment and archive) and a fake ptxas."""
    tree = _release_tree(tmp_path, version)
    (tree / "scripts" / "prebuild_release.sh").write_text((ROOT / "scripts" / "prebuild_release.sh").read_text())
    if own_rooftune:
        (tree / "kernels").mkdir()
        (tree / "kernels" / "__init__.py").write_text("")
        (tree / "rooftune").mkdir()
        (tree / "rooftune" / "__init__.py").write_text("")
        (tree / "rooftune" / "kernels").symlink_to("../kernels")
    builds = tmp_path / "build.log"
    py = tmp_path / "py"
    py.write_text(f'#!/bin/bash\nif [ "$1 $2" = "-m rooftune.kernels.harness.prebuild" ]; then\n'
                  f'  echo "${{@:3}} | $TRITON_PTXAS_BLACKWELL_PATH $TRITON_DEFAULT_FP_FUSION ${{PYTHONPATH%%:*}}"'
                  f' >> {builds}\n'
                  f'  echo built > "${{@: -1}}"; exit 0\nfi\nexec {sys.executable} "$@"\n')
    py.chmod(0o755)
    env = {**os.environ, "PY": str(py), "PTXAS": str(_fake_ptxas(tmp_path / "nvcc")), "TRITON_UNPACK":
           str(tmp_path / "tri"), "DEVICE_PYTHON": f"{sys.version_info[0]}.{sys.version_info[1]}"}
    return tree, env, builds


def _prebuild(tree, env, *args):
    return subprocess.run(["bash", "scripts/prebuild_release.sh", *args], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=120)


def test_prebuild_release_builds_the_lists_binaries_under_the_packed_triton_into_tcache(tmp_path):
    tree, env, builds = _prebuild_tree(tmp_path)
    run = _prebuild(tree, env, "3.9", "gemm", "train")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith(f"Triton 3.9.0 ({tmp_path / 'tri'}), Python {env['DEVICE_PYTHON']}, ptxas "
                                 f"{env['PTXAS']}: Cuda compilation tools, release 13.0, V13.0.88; Build ")
    assert builds.read_text() == (
        "build --kernel gemm --shapes datasets/h200/releases/gemm/shapes_train.json --gpu h200 --cache "
        f"/tmp/rooftune_prebuild/r39_gemm_train --tar .tcache/r39_gemm_train.tar.xz | {env['PTXAS']} 1 "
        f"{tmp_path / 'tri'}\n")
    assert (tree / ".tcache" / "r39_gemm_train.tar.xz").read_text() == "built\n"
    assert "CPU time: " in run.stderr
    assert run.stdout.rstrip().endswith("PREBUILT=.tcache/r39_gemm_train.tar.xz bash scripts/device/release.sh 3.9 540")
    run = _prebuild(tree, {**env, "CACHE": str(tmp_path / "c"), "WORKERS": "2"}, "3.9", "moe", "heldout")
    assert run.returncode == 0, run.stdout + run.stderr
    assert builds.read_text().splitlines()[1].startswith(
        "build --kernel moe --shapes datasets/h200/releases/moe/shapes_heldout.json --gpu h200 --cache "
        f"{tmp_path / 'c'} --tar .tcache/r39_moe_heldout.tar.xz --workers 2 | ")


@pytest.mark.parametrize("args, env_change, tree_change, said", [
    (("3.9", "gemm"), {}, {}, "usage: "),
    (("3.9", "gemm", "nope"), {}, {}, "no list datasets/h200/releases/gemm/shapes_nope.json"),
    (("3.7", "gemm", "train"), {}, {}, "no .triton37/triton.tar.xz: pack Triton 3.7 first"),
    (("3.9", "gemm", "train"), {}, {"version": "3.6.0"}, "Triton 3.6.0 imported, not 3.9: nothing built"),
    (("3.9", "gemm", "train"), {"DEVICE_PYTHON": "3.0"}, {}, "not the GPU machine's 3.0: nothing built"),
    (("3.9", "gemm", "train"), {"PTXAS": "/nonexistent/ptxas"}, {}, "no ptxas: PTXAS=PATH, or pip install"),
    (("3.9", "gemm", "train"), {}, {"own_rooftune": False}, "not this checkout (pip install --no-deps -e .)"),
])
def test_prebuild_release_builds_nothing_where_the_keys_would_not_be_the_devices(tmp_path, args, env_change,
                                                                                  tree_change, said):
    tree, env, builds = _prebuild_tree(tmp_path, **tree_change)
    run = _prebuild(tree, {**env, **env_change}, *args)
    assert run.returncode == 2 and said in run.stdout, run.stdout + run.stderr
    assert not builds.exists() and not (tree / ".tcache").exists()
