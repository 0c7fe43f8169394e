import csv
import gzip
from collections import defaultdict

import numpy as np
import pytest

from rooftune.candidates import (
    ATTENTION_SPACE,
    GEMM_SPACE,
    AttentionShape,
    Config,
    GemmShape,
    config_legality,
    legal_configs,
)
from rooftune.candidates.gemm_space import FIXUP_MAX_M, FIXUP_ONLY_MAX_M, WGMMA_PAD_MIN_M, gemm_legality
from rooftune.hwprofiles import load_profile

H200 = load_profile("h200")
SMEM = "shared memory over the per-block limit"
REGS = "registers over the per-thread limit"
WARPS = "too many warps for the tile"


def _probe_by_shape(shared_dir):
    rows = csv.DictReader(gzip.open(shared_dir / "datasets/h200-probe/gemm_probe.csv.gz", "rt"))
    by_shape = defaultdict(list)
    for r in rows:
        if r["BM"] != "cublas":
            by_shape[(int(r["M"]), int(r["N"]), int(r["K"]))].append(r)
    return by_shape


def test_legality_matches_the_probes_compiler_results(shared_dir):
    """Every OutOfResources row of the H200 probe is judged illegal by the shared-memory rule, and
    every config that compiled passes it. The register rule rejects configs that do compile but
    spill their accumulators: on the probe none of them reached half the best config's speed."""
    for (m, n, k), rows in _probe_by_shape(shared_dir).items():
        cols = {name: np.array([int(r[src]) for r in rows]) for name, src in
                [("BLOCK_M", "BM"), ("BLOCK_N", "BN"), ("BLOCK_K", "BK"), ("num_stages", "stages"),
                 ("num_warps", "warps"), ("GROUP_M", "GM")]}
        cols["SPLIT_K"] = np.ones(len(rows), dtype=np.int64)
        cols["TMA"] = np.zeros(len(rows), dtype=np.int64)  # the probe's kernel loads through pointers
        cols["PERSISTENT"] = np.zeros(len(rows), dtype=np.int64)  # one program per tile
        cols["FIXUP"] = np.zeros(len(rows), dtype=np.int64)       # no split-K to sum
        cols["BLOCK_N2"] = np.zeros(len(rows), dtype=np.int64)    # one accumulator
        failed = np.array([r["err"] == "OutOfResources" for r in rows])
        times = np.array([float(r["us"]) if r["us"] else np.nan for r in rows])
        best = np.nanmin(times)
        reasons = gemm_legality(GemmShape(m, n, k), cols, H200)
        np.testing.assert_array_equal(reasons[SMEM], failed, err_msg=f"{m}x{n}x{k}")
        assert not (reasons[REGS] & failed).any()
        spilled = reasons[REGS] & ~failed
        assert (best / times[spilled] < 0.5).all(), f"{m}x{n}x{k}: a register-illegal config ran fast"


def test_space_sizes_on_the_h200():
    big = legal_configs(GEMM_SPACE, GemmShape(4096, 4096, 4096), H200)
    assert 1000 <= len(big) <= 3000
    for shape in (GemmShape(1, 4096, 4096), GemmShape(16, 14336, 4096, layout="nk"), GemmShape(777, 2048, 3072)):
        assert 100 <= len(legal_configs(GEMM_SPACE, shape, H200)) <= 3000
    attn = legal_configs(ATTENTION_SPACE, AttentionShape(2, 32, 4096, 128), H200)
    assert 40 <= len(attn) <= 200 and attn.columns["TMA"].all()  # TMA where the GPU has it
    a100 = legal_configs(ATTENTION_SPACE, AttentionShape(2, 32, 4096, 128), load_profile("a100_sxm4_80gb"))
    assert 0 < len(a100) <= len(attn) and not a100.columns["TMA"].any()  # pointer loads before compute capability 9.0
    for seq in (1, 8, 31):  # the smallest query and key blocks serve any sequence
        short = legal_configs(ATTENTION_SPACE, AttentionShape(1, 8, seq, 64), H200).configs
        assert short and {(c["BLOCK_M"], c["BLOCK_N"]) for c in short} == {(64, 32)}


def test_every_legal_config_passes_every_rule():
    shape = GemmShape(100, 3000, 777, layout="nk")
    legal = legal_configs(GEMM_SPACE, shape, H200)
    assert len(legal) == len(legal.configs) == len(legal.columns["BLOCK_M"])
    for config in legal.configs[::37]:
        assert config_legality(GEMM_SPACE, shape, config, H200) == []
    assert sum(legal.rejected.values()) >= legal.total - len(legal)


def test_rules_follow_the_shape_and_the_gpu():
    cfg = Config.make(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=1, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    ptr = Config.make(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=1, SPLIT_K=1, TMA=0, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    a100 = load_profile("a100_sxm4_80gb")
    assert config_legality(GEMM_SPACE, GemmShape(4096, 4096, 4096), cfg, H200) == []
    # 4 stages x (128 + 256) x 64 x 2 B = 196,608 B: fits the H200, not the A100's 166,912 B
    assert SMEM in config_legality(GEMM_SPACE, GemmShape(4096, 4096, 4096), ptr, a100)
    # fp32 operands take twice the shared memory
    assert SMEM in config_legality(GEMM_SPACE, GemmShape(4096, 4096, 4096, dtype="fp32"), cfg, H200)
    # a 128-row tile is larger than a 16-row problem needs
    assert "BLOCK_M larger than M needs" in config_legality(GEMM_SPACE, GemmShape(16, 4096, 4096), cfg, H200)
    # 128 x 256 accumulators over 4 warps = 256 registers per thread: spills
    spill = Config.make(4, 3, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=1, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    assert REGS in config_legality(GEMM_SPACE, GemmShape(4096, 4096, 4096), spill, H200)
    # split-K only where output tiles leave SMs idle
    split = Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, SPLIT_K=4, TMA=1, PERSISTENT=0, FIXUP=1, BLOCK_N2=0)
    assert config_legality(GEMM_SPACE, GemmShape(16, 4096, 8192), split, H200) == ["BLOCK_M larger than M needs"]
    assert "SPLIT_K while output tiles already fill the GPU" in config_legality(
        GEMM_SPACE, GemmShape(4096, 4096, 8192), split, H200)


def test_tma_where_the_gpu_and_the_rows_allow_it_and_pointers_elsewhere():
    cfg = Config.make(8, 3, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    ptr = Config.make(8, 3, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=0, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    a100 = load_profile("a100_sxm4_80gb")
    aligned, odd_k = GemmShape(4096, 4096, 4096, "nk"), GemmShape(4096, 4096, 4100, "nk")
    assert config_legality(GEMM_SPACE, aligned, ptr, H200) == ["pointer loads where TMA is available"]
    assert config_legality(GEMM_SPACE, odd_k, ptr, H200) == []
    assert any(r.startswith("TMA needs 16-byte") for r in config_legality(GEMM_SPACE, odd_k, cfg, H200))
    # B [K, N] needs N's rows aligned too (K = 4104: 16-byte rows; N = 4100 not); A stored [K, M] never
    assert any(r.startswith("TMA needs 16-byte") for r in
               config_legality(GEMM_SPACE, GemmShape(4096, 4100, 4104, "kn"), cfg, H200))
    assert any(r.startswith("TMA needs 16-byte") for r in
               config_legality(GEMM_SPACE, GemmShape(4096, 4096, 4096, "nk", a_layout="km"), cfg, H200))
    assert "TMA needs compute capability 9.0" in config_legality(GEMM_SPACE, aligned, cfg, a100)
    assert config_legality(GEMM_SPACE, aligned, ptr, a100) == []
    for profile in (H200, a100):  # each GPU sweeps one load path per shape
        tma = legal_configs(GEMM_SPACE, aligned, profile).columns["TMA"]
        assert len(set(tma.tolist())) == 1


def test_small_tiles_keep_one_buffer_less_on_hopper():
    """BLOCK_M 16 or 32 runs mma.sync, for which Triton's sm_90 pipeliner allocates num_stages - 1
    buffers (compiled and checked in tests/kernels/test_alignment.py): 4 x (32 + 256) x 128 x 2 B is
    over the H200's per-block limit, 3 buffers are not; the A100 keeps the upper bound."""
    c = Config.make(4, 4, BLOCK_M=32, BLOCK_N=256, BLOCK_K=128, GROUP_M=1, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    shape = GemmShape(64, 4096, 4096, "nk")
    assert SMEM not in config_legality(GEMM_SPACE, shape, c, H200)
    ptr = Config.make(4, 4, BLOCK_M=32, BLOCK_N=256, BLOCK_K=128, GROUP_M=1, SPLIT_K=1, TMA=0, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    assert SMEM in config_legality(GEMM_SPACE, shape, ptr, load_profile("a100_sxm4_80gb"))
    wide = Config.make(4, 4, BLOCK_M=64, BLOCK_N=256, BLOCK_K=128, GROUP_M=1, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    assert SMEM in config_legality(GEMM_SPACE, shape, wide, H200)  # wgmma: all 4 buffers


def test_space_version_is_a_content_hash():
    assert GEMM_SPACE.version.startswith("gemm-") and ATTENTION_SPACE.version.startswith("attention-")
    assert GEMM_SPACE.version != ATTENTION_SPACE.version
    assert GEMM_SPACE.version == GEMM_SPACE.version  # stable within a process
    with pytest.raises(KeyError, match="lacks"):
        config_legality(GEMM_SPACE, GemmShape(1, 2, 3), Config.make(4, 2, BLOCK_M=16), H200)


def test_persistent_only_with_tma_one_split_large_tiles_and_two_waves():
    def make(bm=128, bn=128, split=1, tma=1, persistent=1):
        return Config.make(4, 3, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=1, SPLIT_K=split, TMA=tma,
                           PERSISTENT=persistent, FIXUP=0, BLOCK_N2=0)

    big = GemmShape(4096, 4096, 4096, "nk")  # 1,024 tiles of 128x128: 7.8 waves of 132 SMs
    assert config_legality(GEMM_SPACE, big, make(), H200) == []
    assert "PERSISTENT needs TMA loads and SPLIT_K 1" in config_legality(GEMM_SPACE, big, make(split=2), H200)
    assert "PERSISTENT with a tile under 128x128" in config_legality(GEMM_SPACE, big, make(bn=64), H200)
    one_wave = GemmShape(1024, 2048, 4096, "nk")  # 128 tiles
    assert "PERSISTENT with fewer than 2 waves of tiles" in config_legality(GEMM_SPACE, one_wave, make(), H200)
    odd_k = GemmShape(4096, 4096, 4100, "nk")  # no TMA here, so no persistent config either
    assert "PERSISTENT needs TMA loads and SPLIT_K 1" in config_legality(GEMM_SPACE, odd_k, make(tma=0), H200)
    legal = legal_configs(GEMM_SPACE, big, H200).columns
    # 142 since gemm-rules-9 (140 before rules 8): the epilogue holds half a C tile (the TMA store), which lets
    # more 8-warp configs fit, and 64x256 on 8 warps also its fp32 conversion, which drops 5 stages there.
    assert legal["PERSISTENT"].sum() == 142 and (legal["TMA"][legal["PERSISTENT"] == 1] == 1).all()
    assert not legal_configs(GEMM_SPACE, one_wave, H200).columns["PERSISTENT"].any()


def test_split_k_sums_in_the_kernel_up_to_fixup_only_max_m_both_ways_to_fixup_max_m_and_in_the_reduction_above():
    def make(split=4, fixup=1, bm=64):
        return Config.make(4, 3, BLOCK_M=bm, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, SPLIT_K=split, TMA=1, PERSISTENT=0,
                           FIXUP=fixup, BLOCK_N2=0)
    small = GemmShape(FIXUP_ONLY_MAX_M, 4096, 8192)
    both = [GemmShape(m, 4096, 8192) for m in (FIXUP_ONLY_MAX_M + 1, FIXUP_MAX_M)]
    prefill = GemmShape(FIXUP_MAX_M + 1, 1024, 8192)
    assert config_legality(GEMM_SPACE, small, make(), H200) == []
    assert config_legality(GEMM_SPACE, small, make(fixup=0), H200) == [
        f"split-K sums in the GEMM kernel (FIXUP) where M <= {FIXUP_ONLY_MAX_M}"]
    for shape in both:
        assert config_legality(GEMM_SPACE, shape, make(), H200) == []
        assert config_legality(GEMM_SPACE, shape, make(fixup=0), H200) == []
    assert config_legality(GEMM_SPACE, prefill, make(fixup=0, bm=128), H200) == []
    assert config_legality(GEMM_SPACE, prefill, make(bm=128), H200) == [
        f"split-K sums in the reduction kernel where M > {FIXUP_MAX_M}"]
    assert "FIXUP needs SPLIT_K > 1" in config_legality(GEMM_SPACE, small, make(split=1), H200)
    # One summing path where M <= 32 or M > 64, FIXUP exactly on the split configs (or never) ...
    for shape, fixup in ((small, 1), (prefill, 0), (GemmShape(1, 4096, 4096, layout="nk"), 1)):
        legal = legal_configs(GEMM_SPACE, shape, H200).columns
        split = legal["SPLIT_K"] > 1
        assert split.any() and (legal["FIXUP"] == np.where(split, fixup, 0)).all()
    # ... and both for 32 < M <= 64: every split config once with each sum.
    for shape in both:
        legal = legal_configs(GEMM_SPACE, shape, H200).columns
        split = legal["SPLIT_K"] > 1
        keys = lambda f: sorted(zip(*(legal[p][split & (legal["FIXUP"] == f)] for p in legal if p != "FIXUP")))
        assert split.any() and keys(0) == keys(1)
        assert not legal["FIXUP"][~split].any()


def test_sm90_tiles_of_64_rows_from_m_17_and_no_larger_than_m_needs_elsewhere():
    """On sm_90 a 64-row tile runs on wgmma (16 or 32 rows fall back to mma.sync), so it is legal from
    M > WGMMA_PAD_MIN_M; 128 rows only from M > 64; 16 or fewer rows, and without wgmma (the A100),
    BLOCK_M stays within M's power of two."""
    a100 = load_profile("a100_sxm4_80gb")
    tile = lambda bm, tma: Config.make(4, 3, BLOCK_M=bm, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, SPLIT_K=1, TMA=tma,
                                       PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    for m, tma in ((WGMMA_PAD_MIN_M + 1, 1), (32, 1), (33, 1), (17, 0)):
        shape = GemmShape(m, 4096, 8192 if tma else 8190, layout="nk")
        assert config_legality(GEMM_SPACE, shape, tile(64, tma), H200) == []
        assert config_legality(GEMM_SPACE, shape, tile(128, tma), H200) == ["BLOCK_M larger than M needs"]
        assert "BLOCK_M larger than M needs" not in config_legality(GEMM_SPACE, shape, tile(16, tma), H200)
    for m in (1, WGMMA_PAD_MIN_M):
        assert config_legality(GEMM_SPACE, GemmShape(m, 4096, 8192), tile(64, 1), H200) == ["BLOCK_M larger than M needs"]
        assert set(legal_configs(GEMM_SPACE, GemmShape(m, 4096, 8192), H200).columns["BLOCK_M"]) == {16}
    assert config_legality(GEMM_SPACE, GemmShape(17, 4096, 8192), tile(64, 0), a100) == ["BLOCK_M larger than M needs"]
    assert config_legality(GEMM_SPACE, GemmShape(33, 4096, 8192), tile(64, 0), a100) == []


def test_composite_tiles_only_where_they_fill_the_waves():
    """BLOCK_N2 > 0 (space 7): TMA, one tile per program, SPLIT_K 1, BLOCK_M 64 or 128, BLOCK_N >= 128 and wider
    than BLOCK_N2, and only where the composite tiles fill at most 2 waves well and better than BLOCK_N's."""
    def make(bm=128, bn=128, bn2=32, split=1, persistent=0, tma=1, w=4):
        return Config.make(w, 3, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, SPLIT_K=split, TMA=tma,
                           PERSISTENT=persistent, FIXUP=0, BLOCK_N2=bn2)

    few = GemmShape(2048, 1280, 8192, "nk")  # 128x160: 128 tiles on 132 SMs; 128x128: 160 (1.2 waves)
    assert config_legality(GEMM_SPACE, few, make(), H200) == []
    fill = "BLOCK_N2 where the tiles do not fill their waves"
    assert any(r.startswith(fill) for r in config_legality(GEMM_SPACE, GemmShape(4096, 4096, 4096, "nk"), make(), H200))
    shape_rule = "BLOCK_N2 needs BLOCK_M 64 or 128 and a wider BLOCK_N, of 128 or more"
    for bad in (make(bm=256, w=8), make(bn=64), make(bn=128, bn2=128)):
        assert shape_rule in config_legality(GEMM_SPACE, few, bad, H200), bad
    path_rule = "BLOCK_N2 needs TMA loads, one tile per program and SPLIT_K 1"
    for bad in (make(split=2), make(persistent=1), make(tma=0)):
        assert path_rule in config_legality(GEMM_SPACE, few, bad, H200), bad
    assert "BLOCK_N2 where BLOCK_N already spans N" in config_legality(GEMM_SPACE, GemmShape(4096, 128, 8192, "nk"),
                                                                      make(), H200)
    # Composite tiles need the copy engine: none on a GPU without TMA; on the H200 only in this narrow set.
    a100 = load_profile("a100_sxm4_80gb")
    assert not legal_configs(GEMM_SPACE, few, a100).columns["BLOCK_N2"].any()
    cols = legal_configs(GEMM_SPACE, few, H200).columns
    assert cols["BLOCK_N2"].any() and (cols["TMA"][cols["BLOCK_N2"] > 0] == 1).all()
