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


# Parameters later versions of the GEMM space added, at the tutorial kernel's values: pointer loads
# (TMA, space 2), one program per tile (PERSISTENT, space 3), no split of K to sum (FIXUP, space 4), one
# accumulator (BLOCK_N2, space 7).
TUTORIAL_LATER_PARAMS = (("TMA", 0), ("PERSISTENT", 0), ("FIXUP", 0), ("BLOCK_N2", 0))


def tutorial_configs(names: Iterable[str] = ()) -> list[Config]:
    """The tutorial's 8 configs in its order, with the GEMM space's parameter names (SPLIT_K=1), plus
    those of TUTORIAL_LATER_PARAMS that `names` (a space's parameter names: `param_names`) holds, at the
    tutorial's values; the space's first version had none of them (its datasets record none)."""
    names = set(names)
    extra = {name: value for name, value in TUTORIAL_LATER_PARAMS if name in names}
    return [Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=TUTORIAL_GROUP_M, SPLIT_K=1, **extra)
            for bm, bn, bk, s, w in TUTORIAL_GEMM]


def param_names(configs: Iterable[Config]) -> tuple[str, ...]:
    """The parameter names of these configs (of one space, so the first says it); () when there are none."""
    first = next(iter(configs), None)
    return () if first is None else tuple(name for name, _ in first.params)


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
    return [c for c in tutorial_configs(param_names(have)) if same_gemm_kernel(shape, c) not in have]


def gemm_baseline_aliases(shape: GemmShape, recorded: Iterable[Config]) -> dict[Config, Config]:
    """Tutorial config -> the recorded config that is the same kernel, where the tutorial config itself
    was not recorded (a sweep times each kernel once)."""
    have = set(recorded)
    aliases = {}
    for c in tutorial_configs(param_names(have)):
        twin = same_gemm_kernel(shape, c)
        if c not in have and twin in have:
            aliases[c] = twin
    return aliases
