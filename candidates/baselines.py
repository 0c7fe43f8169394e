"""Config lists timed beside the published space as baselines: the Triton tutorial's GEMM autotune list."""

from __future__ import annotations

from collections.abc import Iterable

from rooftune.candidates.config import Config
from rooftune.candidates.gemm_space import gemm_group_m_idle
from rooftune.candidates.shapes import GemmShape

# The Triton matmul tutorial's autotune list (03-matrix-multiplication.py, CUDA):
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps), all with GROUP_M=8.
TUTORIAL_GEMM = (
    (128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2), (32, 64, 32, 5, 2),
)
TUTORIAL_GROUP_M = 8


def tutorial_configs(tma: bool = False) -> list[Config]:
    """The tutorial's 8 configs in its order, with the GEMM space's parameter names (SPLIT_K=1). The
    tutorial loads through pointers: with `tma` (configs of a space that has the TMA parameter) they
    say so, TMA=0; the space's first version had no such parameter (its datasets record none)."""
    extra = {"TMA": 0} if tma else {}
    return [Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=TUTORIAL_GROUP_M, SPLIT_K=1, **extra)
            for bm, bn, bk, s, w in TUTORIAL_GEMM]


def names_tma(configs: Iterable[Config]) -> bool:
    """Whether these configs (of one space, so the first says it) carry the TMA parameter."""
    first = next(iter(configs), None)
    return first is not None and "TMA" in first


def same_gemm_kernel(shape: GemmShape, config: Config) -> Config:
    """The config that runs exactly the same GEMM as `config` on `shape`: GROUP_M=1 where GROUP_M has no
    effect (one tile row or column; GROUP_M is a runtime argument, so it is also the same binary)."""
    if config["GROUP_M"] == 1 or not gemm_group_m_idle(shape, config["BLOCK_M"], config["BLOCK_N"]):
        return config
    params = tuple((name, 1 if name == "GROUP_M" else value) for name, value in config.params)
    return Config(params, config.num_warps, config.num_stages)


def gemm_baseline_extras(shape: GemmShape, space_configs: Iterable[Config]) -> list[Config]:
    """The tutorial configs a sweep of `shape` must time beside `space_configs`: those that are not, as
    the same kernel, among them (e.g. BLOCK_M=64 for M=1, num_warps=2), in the tutorial's order."""
    have = set(space_configs)
    return [c for c in tutorial_configs(names_tma(have)) if same_gemm_kernel(shape, c) not in have]


def gemm_baseline_aliases(shape: GemmShape, recorded: Iterable[Config]) -> dict[Config, Config]:
    """Tutorial config -> the recorded config that is the same kernel, where the tutorial config itself
    was not recorded (a sweep times each kernel once)."""
    have = set(recorded)
    aliases = {}
    for c in tutorial_configs(names_tma(have)):
        twin = same_gemm_kernel(shape, c)
        if c not in have and twin in have:
            aliases[c] = twin
    return aliases
