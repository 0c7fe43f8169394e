"""scripts/ir_family_check.py: the IR's counts of rooftune's own GEMM, attention and fused-MoE kernels (compiled for
sm_90 on the CPU, outside Triton's interpreter: in a subprocess) equal their family models' FLOPs and bytes."""

import json
import os
import subprocess
import sys

import pytest
from script_module import REPO

CODE = """
import json, sys
sys.path.insert(0, "scripts")
import ir_family_check as check
print(json.dumps([(f, check.figures(f, s, t)) for f, s, t in check.CASES]))
"""


@pytest.mark.slow
def test_the_ir_counts_equal_the_family_models():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    for family, f in json.loads(done.stdout.splitlines()[-1]):
        assert f["ir_flops"] == pytest.approx(f["model_flops"], rel=1e-9)
        if family == "moe":  # a masked padding row's tile is counted whole; the model reads routed rows only
            loads = f["model_weights"] + f["model_gathered"] + f["model_padding"]
            assert f["ir_weights"] + f["ir_a"] == pytest.approx(loads, rel=1e-9)
            assert f["ir_stores"] == pytest.approx(f["model_stores"] + f["model_padding_stores"], rel=1e-9)
        else:
            assert f["ir_loads"] == pytest.approx(f["model_loads"], rel=1e-9)
            assert f["ir_stores"] == pytest.approx(f["model_stores"], rel=1e-9)
