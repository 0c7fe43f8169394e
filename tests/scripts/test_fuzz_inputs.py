"""scripts/fuzz_inputs.py, the fuzz pass of issue 57: every case clean (no traceback, nothing silent); one quick
category in the default run, all of them (about 600 cases, a minute and a half) among the slow tests."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _fuzz(*args: str) -> str:
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "fuzz_inputs.py"), *args], capture_output=True,
                         text=True, timeout=900, cwd=REPO)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def test_the_outputs_category_is_clean():
    last = _fuzz("--only", "outputs").strip().splitlines()[-1]
    assert " 0 tracebacks, 0 silent" in last and int(last.split()[0]) >= 20


@pytest.mark.slow
def test_every_case_is_clean(tmp_path):
    _fuzz("--log", str(tmp_path / "fuzz.log"))
    summary = (tmp_path / "fuzz.log").read_text().strip().splitlines()[-1]
    cases = int(summary.split()[0])
    assert cases >= 300 and f"{cases} clean, 0 tracebacks, 0 silent" in summary
