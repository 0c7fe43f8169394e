"""Running one of this folder's compile scripts (sm90_compile.py, sm90_moe_compile.py,
binder_keys.py) in a process of its own: outside Triton's interpreter, which the CPU tests run under and which
must be off before triton loads. Each script takes a JSON list of jobs and prints a JSON list of results."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_script(script: Path, jobs: list, cache: Path | None = None, *, needs_ptxas: bool = True) -> list:
    """`script`'s results for `jobs`, compiled into the Triton cache `cache` (None: the default); skips the test
    where `needs_ptxas` and this Triton bundles no ptxas (no sm_90 code without it)."""
    import triton

    if needs_ptxas and not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if cache is not None:
        env["TRITON_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, str(script), json.dumps(jobs)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
