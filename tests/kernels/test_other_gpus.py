"""Portability on the CPU: the configs a hardware profile makes legal compile for that GPU's architecture
(Triton's bundled ptxas, no GPU) and fit its per-block shared memory, so a tune there spends no trial on
a config that cannot launch. The A100 (sm_80) has no TMA and less shared memory per block than the H200; the
B200 (sm_100) has TMA and tensor cores of another kind (tcgen05), where Triton lays out shared memory anew.
(The H200's own checks are in test_alignment.py and test_attention.py.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

from rooftune.candidates import ATTENTION_SPACE, GEMM_SPACE, AttentionShape, GemmShape, legal_configs
from rooftune.candidates.attention_space import attention_smem_bytes
from rooftune.candidates.gemm_space import gemm_smem_bytes
from rooftune.hwprofiles import load_profile

PICKED = 3  # per shape and kind of pick

COMPILE_SCRIPT = r"""
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
from rooftune.candidates import AttentionShape, GemmShape, parse_config
from rooftune.kernels import attention, gemm
from rooftune.kernels.harness.offline import offline_target
arch, jobs = int(sys.argv[1]), json.loads(sys.argv[2])
results = []
for kind, shape, config in jobs:
    module, make = (gemm, GemmShape) if kind == "gemm" else (attention, AttentionShape)
    with offline_target(arch=arch):
        kernels = module.compile_kernels(make(*shape), parse_config(config))
    results.append({"shared": max(k.metadata.shared for k in kernels),
                    "tma_copies": sum(k.asm["ptx"].count("cp.async.bulk.tensor") for k in kernels)})
print(json.dumps(results))
"""


def compile_for(arch: int, jobs: list, cache: Path) -> list[dict]:
    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT, str(arch), json.dumps(jobs)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def demanding(configs, estimate, tile) -> list:
    """PICKED configs with the largest shared-memory estimate, then PICKED with the largest tile (whose
    epilogue's layout conversion can need more than the operand buffers), one per binary (GROUP_M, SPLIT_K
    and ORDER are run-time parameters or share one)."""
    out, seen = [], set()
    for key in (estimate, tile):
        taken = 0
        for c in sorted(configs, key=lambda c: (-key(c), str(c))):
            binary = (tile(c), estimate(c), c.num_warps, c.num_stages)
            if binary in seen:
                continue
            seen.add(binary)
            out.append(c)
            taken += 1
            if taken == PICKED:
                break
    return out


@pytest.mark.slow  # ~20 configs compiled per GPU through ptxas: ~20 s each (the H200's own: test_alignment.py)
@pytest.mark.parametrize("profile_name, arch", [("a100_sxm4_80gb", 80), ("b200", 100)])
def test_legal_gemm_and_attention_configs_compile_for_the_gpu_and_fit_its_shared_memory(tmp_path, profile_name, arch):
    profile = load_profile(profile_name)
    tma = tuple(profile.compute_capability) >= (9, 0)
    jobs, limits = [], []
    for shape in (GemmShape(512, 4096, 4096, "nk"), GemmShape(300, 1000, 4097, "kn")):
        legal = legal_configs(GEMM_SPACE, shape, profile).configs
        # TMA where the GPU has it and the rows allow (K = 4097 does not), pointer loads elsewhere
        assert legal and all(c["TMA"] == int(tma and shape.k % 8 == 0) for c in legal)
        estimate = {c: int(gemm_smem_bytes({k: c[k] for k in GEMM_SPACE.names}, 2, hopper=tma)) for c in legal}
        for c in demanding(legal, estimate.get, lambda c: c["BLOCK_M"] * (c["BLOCK_N"] + c["BLOCK_N2"])):
            jobs.append(("gemm", [shape.m, shape.n, shape.k, shape.layout, shape.dtype], str(c)))
            limits.append(estimate[c])
    for shape in (AttentionShape(2, 32, 4096, 128), AttentionShape(2, 32, 4096, 64, kv_heads=8)):
        legal = legal_configs(ATTENTION_SPACE, shape, profile).configs
        assert legal and (tma or not any(c["TMA"] for c in legal))
        estimate = {c: int(attention_smem_bytes(dict(c), shape.head_dim, 2)) for c in legal}
        for c in demanding(legal, estimate.get, lambda c: c["BLOCK_M"] * c["BLOCK_N"]):
            jobs.append(("attention", [shape.batch, shape.heads, shape.seq, shape.head_dim, shape.causal,
                                       shape.dtype, shape.kv_heads], str(c)))
            limits.append(estimate[c])
    results = compile_for(arch, jobs, tmp_path)
    assert len(results) == len(jobs) >= 16
    for (kind, shape, config), assumed, r in zip(jobs, limits, results):
        assert (r["tma_copies"] > 0) == ("TMA=1" in config), (kind, shape, config)
        # what Triton allocates and what the space's rule assumes both fit the GPU's per-block limit
        assert r["shared"] <= profile.smem_per_block_bytes, (kind, shape, config, r["shared"])
        assert assumed <= profile.smem_per_block_bytes, (kind, shape, config, assumed)
