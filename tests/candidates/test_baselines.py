"""The tutorial's configs as baselines: which a sweep must time beside the space, and which are the same kernel."""

import numpy as np

from rooftune.candidates import GEMM_SPACE, Config, GemmShape, legal_configs
from rooftune.candidates.tutorial import (
    TUTORIAL_GEMM,
    gemm_baseline_aliases,
    gemm_baseline_extras,
    same_gemm_kernel,
    tutorial_configs,
)
from rooftune.hwprofiles import load_profile

H200 = load_profile("h200")


def cfg(bm, bn, bk, w, s, gm, **tma):
    return Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, SPLIT_K=1, **tma)


def test_tutorial_configs_use_the_space_parameter_names():
    configs = tutorial_configs(GEMM_SPACE.names)
    assert len(configs) == len(TUTORIAL_GEMM) == 8
    assert all(list(c) == GEMM_SPACE.names and c["GROUP_M"] == 8 and c["TMA"] == 0 for c in configs)
    assert configs[0] == cfg(128, 256, 64, 8, 3, 8, TMA=0, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    # the space's first version had neither TMA nor PERSISTENT; its datasets record the tutorial without them,
    # the second had TMA only
    assert tutorial_configs()[0] == cfg(128, 256, 64, 8, 3, 8) and "TMA" not in tutorial_configs()[0]
    space2 = [n for n in GEMM_SPACE.names if n != "PERSISTENT"]
    assert list(tutorial_configs(space2)[0]) == space2 and tutorial_configs(space2)[0]["TMA"] == 0


def test_same_kernel_drops_group_m_only_where_it_has_no_effect():
    c = cfg(128, 256, 64, 8, 3, 8)
    assert same_gemm_kernel(GemmShape(100, 4096, 4096), c) == cfg(128, 256, 64, 8, 3, 1)  # one tile row
    assert same_gemm_kernel(GemmShape(4096, 200, 4096), c) == cfg(128, 256, 64, 8, 3, 1)  # one tile column
    assert same_gemm_kernel(GemmShape(4096, 4096, 4096), c) == c
    assert same_gemm_kernel(GemmShape(100, 4096, 4096), cfg(128, 256, 64, 8, 3, 1)) == cfg(128, 256, 64, 8, 3, 1)


def test_extras_are_the_tutorial_configs_the_space_lacks():
    # Where the H200 loads through TMA, the tutorial's pointer configs are all outside the space.
    big = GemmShape(4096, 4096, 4096)
    space = legal_configs(GEMM_SPACE, big, H200).configs
    assert gemm_baseline_extras(big, space) == tutorial_configs(GEMM_SPACE.names)
    # Rows that TMA cannot address (K = 4100) are swept through pointers: on a large shape only the
    # two 2-warp configs are then outside the space (num_warps is 4 or 8 there).
    odd = GemmShape(4096, 4096, 4100)
    space = legal_configs(GEMM_SPACE, odd, H200).configs
    assert gemm_baseline_extras(odd, space) == [cfg(64, 32, 32, 2, 5, 8, TMA=0, PERSISTENT=0, FIXUP=0, BLOCK_N2=0), cfg(32, 64, 32, 2, 5, 8, TMA=0, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)]
    decode = GemmShape(1, 4100, 4100, layout="nk")
    assert gemm_baseline_extras(decode, legal_configs(GEMM_SPACE, decode, H200).configs) == tutorial_configs(GEMM_SPACE.names)
    # M = 17: on sm_90 64-row tiles are in the space from M = 17 (they run on wgmma), so the tutorial's
    # 64-row, 4-warp configs have GROUP_M=1 twins there; the others stay extras.
    decode = GemmShape(17, 4100, 4100, layout="nk")
    sixty_four = [c for c in tutorial_configs(GEMM_SPACE.names) if c["BLOCK_M"] == 64 and c.num_warps == 4]
    assert len(sixty_four) == 2
    assert gemm_baseline_extras(decode, legal_configs(GEMM_SPACE, decode, H200).configs) == [
        c for c in tutorial_configs(GEMM_SPACE.names) if c not in sixty_four]
    # M = 100: the 128-row tiles have one tile row; their GROUP_M=1 twins are in the space, so they are
    # not extras but aliases of the twins once recorded.
    mid = GemmShape(100, 4100, 4100, layout="nk")
    space = legal_configs(GEMM_SPACE, mid, H200).configs
    extras = gemm_baseline_extras(mid, space)
    aliases = gemm_baseline_aliases(mid, space + extras)
    assert cfg(128, 256, 64, 8, 3, 8, TMA=0, PERSISTENT=0, FIXUP=0, BLOCK_N2=0) in aliases and cfg(128, 256, 64, 8, 3, 8, TMA=0, PERSISTENT=0, FIXUP=0, BLOCK_N2=0) not in extras
    in_space = [c for c in tutorial_configs(GEMM_SPACE.names) if c in space]  # e.g. 64-row tiles: two tile rows, GROUP_M acts
    assert in_space and sorted(map(str, [*extras, *aliases, *in_space])) == sorted(map(str, tutorial_configs(GEMM_SPACE.names)))
    assert all(twin in space for twin in aliases.values())


def test_legal_configs_cannot_run_out_of_shared_memory_in_the_epilogue():
    """Triton converts the fp32 accumulator tile through shared memory after the main loop; that
    scratch can exceed gemm_smem_bytes (up to BLOCK_M·BLOCK_N·4 bytes: 262,144 B for 256x256 with an
    odd N) but never the per-block limit for a config the other rules leave legal."""
    for shape in (GemmShape(4096, 4097, 4096), GemmShape(1, 4097, 4097, layout="nk"), GemmShape(300, 1001, 1025)):
        cols = legal_configs(GEMM_SPACE, shape, H200).columns
        assert np.all(cols["BLOCK_M"] * cols["BLOCK_N"] * 4 <= H200.smem_per_block_bytes)
