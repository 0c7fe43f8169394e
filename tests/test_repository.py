"""The repository stays a product: its tracked files fit the size budget (a GPU call carries at most 64 MiB of
working tree, and a newer Triton travels with it), so growth is a decision, not an accident; and its datasets are
committed in slim form."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rooftune.eval.datasets.format import SCREEN_COLUMNS, SHAPE_SUFFIXES, SHAPES_DIR, is_slim_text, read_shape_text

REPO = Path(__file__).resolve().parents[1]
LIMIT_MIB = 16    # the repository's budget: this test fails above it


def _tracked_bytes() -> int:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    return sum((REPO / name).stat().st_size for name in listed.decode().split("\0")
               if name and (REPO / name).is_file())


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_tracked_files_fit_the_size_budget():
    size_mib = _tracked_bytes() / 2**20
    assert size_mib <= LIMIT_MIB, (f"tracked files weigh {size_mib:.2f} MiB, over the {LIMIT_MIB} MiB budget: "
                                   "history belongs in git, data in compact form")


def _dataset_shape_files() -> list[Path]:
    """The shape files under datasets/: the tracked ones in a git checkout, else those on disk."""
    if shutil.which("git") is not None and (REPO / ".git").exists():
        listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "datasets"], capture_output=True,
                                check=True).stdout.decode().split("\0")
        paths = [REPO / name for name in listed if name]
    else:
        paths = [p for p in (REPO / "datasets").rglob("*") if p.is_file()]
    return [p for p in paths if p.parent.name == SHAPES_DIR and p.name.endswith(SHAPE_SUFFIXES)]


def test_committed_shape_files_are_slim():
    """The committed ground truth leaves out the screening columns, which nothing that replays, fits or scores
    reads (docs/datasets.md): a sweep's full folder committed as it came from the GPU machine fails here."""
    files = _dataset_shape_files()
    assert len(files) > 1000  # the committed datasets are there
    full = sorted({str(p.parent.parent.relative_to(REPO)) for p in files if not is_slim_text(read_shape_text(p))})
    assert not full, (f"full shape files (with {', '.join(SCREEN_COLUMNS)}) in {', '.join(full)}; commit datasets "
                      f"in slim form: python -m rooftune.eval.datasets.recompress --slim {' '.join(full)}")


# Each GPU's dataset folder and the profile its data were swept with; a new GPU's folder is added here.
FOLDER_PROFILES = {"h100": "h100_sxm", "h200": "h200", "h200-sm66": "h200-sm66"}


def test_every_dataset_manifest_names_its_folders_gpu():
    """Every manifest under datasets/<gpu>/ (the sweeps' datasets and the suite's) says in `gpu_profile` which
    profile's GPU it holds, and it is that folder's: a sweep written into another GPU's folder, or a format that
    forgets the field, fails here."""
    from rooftune.hwprofiles import load_profile

    manifests = sorted((REPO / "datasets").rglob("manifest.json"))
    assert len(manifests) > 20
    for path in manifests:
        folder = path.relative_to(REPO / "datasets").parts[0]
        assert folder in FOLDER_PROFILES, f"{folder}: a GPU folder this test does not know; add it to FOLDER_PROFILES"
        recorded = json.loads(path.read_text()).get("gpu_profile")
        assert recorded == load_profile(FOLDER_PROFILES[folder]).name, f"{path}: gpu_profile {recorded!r}"
