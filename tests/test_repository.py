"""The repository stays a product: its tracked files fit the size budget (a GPU call carries at most 64 MiB of
working tree, and a newer Triton travels with it), so growth is a decision, not an accident."""

import shutil
import subprocess
from pathlib import Path

import pytest

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
