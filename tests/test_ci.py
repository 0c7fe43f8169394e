"""The README's test command leaves out only the `slow` cases, and CI runs them beside it under every Triton it
tests, so nothing is left out of CI."""

import re
import shlex
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RUN = "python3 -m pytest -q"


def _pytest_options() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def test_the_default_run_leaves_out_the_slow_cases_only():
    addopts = shlex.split(_pytest_options()["addopts"])
    selections = [addopts[i + 1] for i, option in enumerate(addopts) if option == "-m"]
    assert selections == ["not slow"], addopts
    assert any(marker.startswith("slow:") for marker in _pytest_options()["markers"])


def test_the_readme_runs_the_default_run():
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    assert DEFAULT_RUN in [line.strip() for block in blocks for line in block.splitlines()]


def test_ci_runs_the_slow_cases_after_each_default_run():
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    runs = [line for line in lines if line.startswith(DEFAULT_RUN)]
    assert runs == [DEFAULT_RUN, f"{DEFAULT_RUN} -m slow"] * 2, runs  # under the lowest Triton and the newest
    installs = [i for i, line in enumerate(lines) if "pip install" in line and "--dry-run" not in line]
    first_slow = lines.index(f"{DEFAULT_RUN} -m slow")
    assert installs[0] < lines.index(DEFAULT_RUN) < first_slow < installs[1]  # both before the newest Triton
