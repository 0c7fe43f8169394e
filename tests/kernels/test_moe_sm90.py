"""The MoE space's shared-memory rule is what Triton allocates for kernels/moe.py on sm_90: compiled on the CPU
(Triton's bundled ptxas, no GPU), a tile at the most stages the rule allows fits the H200's per-block limit and
one stage more does not, each allocating exactly the estimate. (Run over every tile and warp count of the space,
104 compiles, the estimate was exact at every boundary; this test keeps four.)"""

from pathlib import Path

import numpy as np
from compile_script import run_script

from rooftune.candidates import MOE_SPACE, Config
from rooftune.candidates.moe_space import moe_smem_bytes
from rooftune.hwprofiles import load_profile

SCRIPT = Path(__file__).with_name("sm90_moe_compile.py")
SHAPE = [128, 8, 2048, 768, 4096, "gate_up"]
# (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps): mma.sync tiles (16, 32 rows: num_stages - 1 buffers on
# sm_90) and wgmma tiles whose stage limit falls inside the space's 2 to 5 stages.
TILES = [(16, 256, 256, 4), (32, 128, 256, 8), (64, 256, 128, 8), (128, 128, 128, 4)]


def compile_sm90(jobs: list[dict], cache: Path) -> list[dict]:
    return run_script(SCRIPT, jobs, cache)


def estimate(config: Config) -> int:
    return int(moe_smem_bytes({k: np.array([config[k]]) for k in MOE_SPACE.names}, 2, hopper=True)[0])


def test_shared_memory_rule_is_exact_at_each_tiles_stage_limit(tmp_path):
    limit = load_profile("h200").smem_per_block_bytes
    configs = []
    for bm, bn, bk, warps in TILES:
        stages = [Config.make(warps, s, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=1)
                  for s in (2, 3, 4, 5)]
        most = max((c for c in stages if estimate(c) <= limit), key=lambda c: c.num_stages)  # a tile at its stage limit, and one stage more
        configs += [most, next(c for c in stages if c.num_stages == most.num_stages + 1)]
    results = compile_sm90([{"shape": SHAPE, "config": str(c)} for c in configs], tmp_path)
    for c, r in zip(configs, results):
        assert r["shared"] == estimate(c), (str(c), r["shared"], estimate(c))
        assert r["cp_async"]  # the gathered rows are pipelined like a GEMM's A
        assert r["wgmma"] == (c["BLOCK_SIZE_M"] >= 64) and r["mma_sync"] == (c["BLOCK_SIZE_M"] < 64)
    assert [r["shared"] <= limit for r in results] == [True, False] * len(TILES)
