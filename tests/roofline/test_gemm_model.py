"""Sanity of the GEMM cost model: physics directions, consistency of the breakdown, profile use."""

import dataclasses

import numpy as np
import pytest

from rooftune.candidates import GEMM_SPACE, Config, GemmShape, configs_to_columns, legal_configs
from rooftune.hwprofiles import load_profile
from rooftune.roofline import predict, rank
from rooftune.roofline.gemm import TERMS

H200 = load_profile("h200")


def cfg(bm=128, bn=128, bk=64, gm=8, sk=1, w=8, s=3):
    return Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, SPLIT_K=sk)


def one(shape, config, profile=H200):
    bd = predict(shape, configs_to_columns([config]), profile)
    return {f.name: getattr(bd, f.name)[0] for f in dataclasses.fields(bd)}


def test_more_work_never_predicted_faster():
    legal = legal_configs(GEMM_SPACE, GemmShape(2048, 2048, 2048), H200).columns
    for bigger in (GemmShape(4096, 2048, 2048), GemmShape(2048, 4096, 2048), GemmShape(2048, 2048, 4096)):
        small = predict(GemmShape(2048, 2048, 2048), legal, H200).time_us
        large = predict(bigger, legal, H200).time_us
        assert np.all(large >= small * (1 - 1e-9)), bigger


def test_time_is_at_least_every_bound_term():
    shape = GemmShape(3000, 5120, 768)
    bd = predict(shape, legal_configs(GEMM_SPACE, shape, H200).columns, H200)
    for term in (bd.compute_us, bd.memory_us, bd.l2_us, bd.smem_us):
        assert np.all(bd.time_us >= term * (1 - 1e-9))
    assert np.all(bd.time_us >= bd.flops / (H200.bf16_tflops * 1e12) * 1e6)
    assert set(np.unique(bd.bound)) <= {"compute", "memory", "latency"}
    assert np.all((bd.dominant >= 0) & (bd.dominant < len(TERMS)))


def test_flops_and_padding():
    shape = GemmShape(100, 200, 300)
    b = one(shape, cfg(bm=64, bn=64, bk=64, w=4))
    assert b["flops"] == 2 * 100 * 200 * 300
    assert b["padded_flops"] == 2 * 128 * 256 * 320
    assert b["padding_efficiency"] == pytest.approx(b["flops"] / b["padded_flops"])


def test_more_stages_hide_latency():
    shape = GemmShape(1024, 1024, 8192)
    times = [one(shape, cfg(bm=128, bn=64, bk=64, w=4, s=s))["time_us"] for s in (2, 3, 4)]
    assert times[0] > times[1] > times[2]


def test_small_tiles_on_hopper_lose_wgmma():
    shape = GemmShape(4096, 4096, 4096)
    wg, sync = one(shape, cfg(bm=64, bn=128, w=4)), one(shape, cfg(bm=32, bn=128, w=4))
    assert wg["uses_wgmma"] and not sync["uses_wgmma"]
    assert sync["compute_us"] > wg["compute_us"] * 1.5
    a100 = load_profile("a100_sxm4_80gb")
    assert not one(shape, cfg(bm=64, bn=128, w=4), a100)["uses_wgmma"]


def test_occupancy_from_shared_memory():
    shape = GemmShape(4096, 4096, 4096)
    few = one(shape, cfg(bm=128, bn=128, bk=64, s=5, w=4))
    many = one(shape, cfg(bm=128, bn=128, bk=32, s=2, w=4))
    assert few["smem_bytes_per_cta"] > many["smem_bytes_per_cta"]
    assert few["ctas_per_sm"] < many["ctas_per_sm"]
    assert few["ctas_per_sm"] == H200.smem_per_sm_bytes // few["smem_bytes_per_cta"]


def test_waves_and_quantization():
    # 132 SMs: 16×8 = 128 tiles fill one wave at 97%, 4096² with 128×128 tiles gives 1024 CTAs.
    b = one(GemmShape(2048, 1024, 4096), cfg(bm=128, bn=128, bk=64, s=5, w=8))
    assert b["ctas"] == 128 and b["ctas_per_sm"] == 1
    assert b["waves"] == pytest.approx(128 / 132)
    assert b["wave_efficiency"] == pytest.approx(128 / 132)


def test_group_m_reduces_dram_traffic_when_b_exceeds_l2():
    shape = GemmShape(8192, 28672, 4096)
    grouped, plain = one(shape, cfg(gm=8)), one(shape, cfg(gm=1))
    assert grouped["dram_bytes"] < plain["dram_bytes"]
    assert grouped["l2_bytes"] == plain["l2_bytes"]


def test_sharers_far_apart_in_launch_order_read_their_operand_once_per_l2_partition():
    # Two tile rows, all 128 CTAs in one wave: without grouping a B column's two CTAs are 32 programs apart
    # (either L2 partition), with GROUP_M 8 consecutive (one), which then puts an A row's 32 CTAs 2 apart
    # (A read about twice).
    shape = GemmShape(48, 8192, 28672)
    plain, grouped = (one(shape, cfg(bm=32, bn=256, bk=128, sk=2, w=4, s=4, gm=g)) for g in (1, 8))
    a_bytes, b_bytes = 48 * 28672 * 2, 8192 * 28672 * 2
    assert plain["dram_bytes"] - grouped["dram_bytes"] == pytest.approx(0.5 * b_bytes - a_bytes, rel=1e-3)
    assert plain["time_us"] > grouped["time_us"]
    # Tall and narrow: grouping puts an A row's two CTAs GROUP_M programs apart, so GROUP_M 8 reads A more.
    tall = GemmShape(10009, 176, 2824)
    plain, grouped = (one(tall, cfg(bm=256, bn=128, gm=g)) for g in (1, 8))
    assert grouped["dram_bytes"] > plain["dram_bytes"]


def test_decode_is_memory_bound_and_reads_b_once():
    shape = GemmShape(1, 28672, 8192)
    b = one(shape, cfg(bm=16, bn=64, bk=128, w=4, s=4, gm=1))
    assert b["bound"] in ("memory", "latency")
    b_bytes = 28672 * 8192 * 2
    assert b_bytes <= b["dram_bytes"] < 1.01 * b_bytes + 28672 * 2 * 2 + 8192 * 2


def test_split_k_adds_reduction_and_fills_sms():
    shape = GemmShape(64, 512, 16384)  # 8 output tiles of 64×64: most SMs idle without split-K
    plain, split = one(shape, cfg(bm=64, bn=64, bk=64, w=4, s=4, sk=1)), one(shape, cfg(bm=64, bn=64, bk=64, w=4, s=4, sk=8))
    assert plain["splitk_us"] == 0 and split["splitk_us"] > 0
    assert split["ctas"] == 8 * plain["ctas"]
    assert split["dram_bytes"] > plain["dram_bytes"]  # fp32 partials written
    assert split["time_us"] < plain["time_us"]


def test_faster_profile_predicts_faster():
    shape = GemmShape(4096, 4096, 4096)
    columns = legal_configs(GEMM_SPACE, shape, H200).columns
    faster = dataclasses.replace(H200, bf16_tflops=H200.bf16_tflops * 2, dram_bw_gbps=H200.dram_bw_gbps * 2,
                                 l2_bw_gbps=H200.l2_bw_gbps * 2)
    assert np.all(predict(shape, columns, faster).time_us <= predict(shape, columns, H200).time_us)


def test_register_spills_are_slow():
    shape = GemmShape(4096, 4096, 4096)
    spill, fine = one(shape, cfg(bm=128, bn=256, w=4)), one(shape, cfg(bm=128, bn=256, w=8))
    assert spill["regs_per_thread"] > H200.regs_per_thread_max >= fine["regs_per_thread"]
    assert spill["time_us"] > 2 * fine["time_us"]


def test_missing_group_and_split_default_to_one():
    shape = GemmShape(512, 512, 512)
    full = configs_to_columns([cfg(gm=1, sk=1)])
    bare = {k: v for k, v in full.items() if k not in ("GROUP_M", "SPLIT_K")}
    assert predict(shape, bare, H200).time_us[0] == predict(shape, full, H200).time_us[0]


def test_rank_orders_by_predicted_time():
    shape = GemmShape(2048, 2048, 2048)
    columns = legal_configs(GEMM_SPACE, shape, H200).columns
    order = rank(shape, columns, H200)
    times = predict(shape, columns, H200).time_us[order]
    assert sorted(order.tolist()) == list(range(len(times)))
    assert np.all(np.diff(times) >= 0)


def test_fp32_without_tensor_cores_uses_the_fp32_rate():
    shape_bf16, shape_fp32 = GemmShape(2048, 2048, 2048), GemmShape(2048, 2048, 2048, dtype="fp32")
    c = cfg(bm=64, bn=64, bk=32, w=4, s=3)
    assert one(shape_fp32, c)["compute_us"] > 5 * one(shape_bf16, c)["compute_us"]


H100 = load_profile("h100_sxm")
A100 = load_profile("a100_sxm4_80gb")


def test_tf32_with_b_kn_is_never_faster_than_b_nk_on_hopper():
    # wgmma reads 32-bit operands only K-major: B [K, N] is transposed through registers and one
    # shared buffer every iteration; B [N, K] is read as it lies. The single buffer frees shared
    # memory, so only where that buys more resident CTAs may B [K, N] come out ahead.
    kn, nk = GemmShape(8192, 8192, 8192, "kn", "tf32"), GemmShape(8192, 8192, 8192, "nk", "tf32")
    columns = legal_configs(GEMM_SPACE, nk, H100).columns
    b_kn, b_nk = predict(kn, columns, H100), predict(nk, columns, H100)
    same_occupancy = b_kn.ctas_per_sm == b_nk.ctas_per_sm
    assert same_occupancy.mean() > 0.5
    assert np.all(b_kn.time_us[same_occupancy] >= b_nk.time_us[same_occupancy] * (1 - 1e-9))
    assert np.all(b_kn.time_us[b_kn.uses_wgmma].min() > 1.3 * b_nk.time_us[b_nk.uses_wgmma].min())
    wg = one(nk, cfg(bm=128, bn=128, bk=32, w=4, s=3), H100)
    transposed = one(kn, cfg(bm=128, bn=128, bk=32, w=4, s=3), H100)
    assert wg["uses_wgmma"] and transposed["uses_wgmma"]
    assert transposed["time_us"] > 1.3 * wg["time_us"]


def test_tf32_transpose_costs_grow_with_block_n():
    # The transposed store's bank conflicts grow with the lanes along N (BLOCK_N / 4): per FLOP a
    # 64×128 tile pays four times what a 128×64 tile pays. With B [N, K] the two are mirror images.
    kn, nk = GemmShape(8192, 8192, 8192, "kn", "tf32"), GemmShape(8192, 8192, 8192, "nk", "tf32")
    wide, tall = cfg(bm=64, bn=128, bk=32, w=4, s=3), cfg(bm=128, bn=64, bk=32, w=4, s=3)
    assert one(kn, wide, H100)["time_us"] > 1.3 * one(kn, tall, H100)["time_us"]
    assert one(nk, wide, H100)["time_us"] == pytest.approx(one(nk, tall, H100)["time_us"], rel=0.05)


def test_16_bit_operands_transpose_for_free():
    c = cfg(bm=128, bn=128, bk=64, w=8, s=3)
    kn, nk = one(GemmShape(4096, 4096, 4096, "kn"), c, H100), one(GemmShape(4096, 4096, 4096, "nk"), c, H100)
    assert kn["time_us"] == pytest.approx(nk["time_us"])
    assert kn["smem_bytes_per_cta"] == nk["smem_bytes_per_cta"]


def test_pipeline_buffers_per_instruction_path():
    # Triton keeps num_stages-1 operand buffers; an asynchronous wgmma needs one more; a tf32 B
    # transposed for wgmma has one buffer of its own and no pipelined copies.
    shape = GemmShape(4096, 4096, 4096, dtype="fp32")
    fma = one(shape, cfg(bm=128, bn=128, bk=64, w=8, s=3), A100)
    assert fma["smem_bytes_per_cta"] == 2 * (128 + 128) * 64 * 4 <= A100.smem_per_block_bytes and fma["fits"]
    wg = one(GemmShape(4096, 4096, 4096, "nk", "tf32"), cfg(bm=128, bn=128, bk=32, w=4, s=3), H100)
    assert wg["smem_bytes_per_cta"] == 3 * (128 + 128) * 32 * 4
    transposed = one(GemmShape(4096, 4096, 4096, "kn", "tf32"), cfg(bm=128, bn=128, bk=32, w=4, s=3), H100)
    assert transposed["smem_bytes_per_cta"] == 3 * 128 * 32 * 4 + 128 * 32 * 4
    sync = one(GemmShape(4096, 4096, 4096), cfg(bm=32, bn=128, bk=64, w=4, s=3), H100)
    assert not sync["uses_wgmma"] and sync["smem_bytes_per_cta"] == 2 * (32 + 128) * 64 * 2


def test_tf32_with_a_km_is_never_faster_than_a_mk_on_hopper():
    # The same wgmma restriction read from A's side: A stored [K, M] is not K-major, so a tf32 A
    # takes B [K, N]'s path (registers, one transposing buffer, no pipelining).
    mk = GemmShape(8192, 8192, 8192, "nk", "tf32")
    km = GemmShape(8192, 8192, 8192, "nk", "tf32", a_layout="km")
    columns = legal_configs(GEMM_SPACE, mk, H100).columns
    a_mk, a_km = predict(mk, columns, H100), predict(km, columns, H100)
    same_occupancy = a_km.ctas_per_sm == a_mk.ctas_per_sm
    assert same_occupancy.mean() > 0.5
    assert np.all(a_km.time_us[same_occupancy] >= a_mk.time_us[same_occupancy] * (1 - 1e-9))
    assert a_km.time_us[a_km.uses_wgmma].min() > 1.3 * a_mk.time_us[a_mk.uses_wgmma].min()
    c = cfg(bm=128, bn=128, bk=32, w=4, s=3)
    assert one(km, c, H100)["smem_bytes_per_cta"] == 128 * 32 * 4 + 3 * 128 * 32 * 4
    assert one(km, c, H100)["regs_per_thread"] == one(mk, c, H100)["regs_per_thread"] + 128 * 32 * 4 // (4 * 128)


def test_tf32_a_transpose_costs_grow_with_block_m():
    # A [K, M] is loaded with lanes along M, so its store conflicts grow with BLOCK_M: the mirror
    # image of B [K, N] and BLOCK_N. With A [M, K] (and B [N, K]) the two tiles cost alike.
    km = GemmShape(8192, 8192, 8192, "nk", "tf32", a_layout="km")
    mk = GemmShape(8192, 8192, 8192, "nk", "tf32")
    wide, tall = cfg(bm=64, bn=128, bk=32, w=4, s=3), cfg(bm=128, bn=64, bk=32, w=4, s=3)
    assert one(km, tall, H100)["time_us"] > 1.3 * one(km, wide, H100)["time_us"]
    assert one(mk, tall, H100)["time_us"] == pytest.approx(one(mk, wide, H100)["time_us"], rel=0.05)


def test_tf32_both_operands_transposed_costs_more_than_either():
    c = cfg(bm=128, bn=128, bk=32, w=4, s=3)
    both = one(GemmShape(8192, 8192, 8192, "kn", "tf32", a_layout="km"), c, H100)
    only_a = one(GemmShape(8192, 8192, 8192, "nk", "tf32", a_layout="km"), c, H100)
    only_b = one(GemmShape(8192, 8192, 8192, "kn", "tf32"), c, H100)
    assert both["time_us"] > max(only_a["time_us"], only_b["time_us"])
    assert both["smem_bytes_per_cta"] == 2 * 128 * 32 * 4  # one transposing buffer each, no pipelined copies


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_16_bit_a_km_transposes_for_free(dtype):
    # Triton keeps a 16-bit operand's loaded order in shared memory and sets the wgmma descriptor's
    # transpose bit; with rows aligned for cp.async on both sides nothing changes.
    c = cfg(bm=128, bn=128, bk=64, w=8, s=3)
    mk = one(GemmShape(4096, 4096, 4096, "kn", dtype), c, H100)
    km = one(GemmShape(4096, 4096, 4096, "kn", dtype, a_layout="km"), c, H100)
    assert km["time_us"] == pytest.approx(mk["time_us"]) and km["smem_bytes_per_cta"] == mk["smem_bytes_per_cta"]


def test_a_km_on_ampere_keeps_the_mma_sync_path():
    # No wgmma on the A100: a tf32 A [K, M] is read by mma.sync as before.
    c = cfg(bm=128, bn=128, bk=32, w=4, s=3)
    mk = one(GemmShape(4096, 4096, 4096, "nk", "tf32"), c, A100)
    km = one(GemmShape(4096, 4096, 4096, "nk", "tf32", a_layout="km"), c, A100)
    assert km["time_us"] == pytest.approx(mk["time_us"]) and km["smem_bytes_per_cta"] == mk["smem_bytes_per_cta"]


def test_a_row_stride_decides_cp_async_alignment():
    # A [K, M] rows are M elements apart: M = 4100 bf16 (8200 bytes) is not 16-byte aligned, so
    # the prefetched A and B stages also sit in registers; A [M, K] rows (K = 4096) are aligned.
    c = cfg(bm=128, bn=128, bk=64, w=8, s=3)
    aligned = one(GemmShape(4100, 4096, 4096), c, H200)
    misaligned = one(GemmShape(4100, 4096, 4096, a_layout="km"), c, H200)
    assert misaligned["regs_per_thread"] == aligned["regs_per_thread"] + 2 * (128 + 128) * 64 * 2 // (4 * 256)
    assert misaligned["time_us"] >= aligned["time_us"]


def test_the_load_path_follows_the_config_and_the_rows():
    """TMA = 1 goes through the copy engine; a pointer config uses cp.async where the rows are 16-byte
    aligned and registers (which then also hold the prefetched stages) where they are not."""
    tma = Config.make(8, 3, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1)
    ptr = Config.make(8, 3, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=0)
    aligned, odd = GemmShape(4096, 4096, 4096, "nk"), GemmShape(4096, 4096, 4100, "nk")
    assert one(aligned, tma)["load_path"] == "TMA" and one(aligned, ptr)["load_path"] == "cp.async"
    assert one(odd, ptr)["load_path"] == "registers" and one(aligned, cfg())["load_path"] == "cp.async"
    assert one(odd, ptr)["regs_per_thread"] > one(aligned, ptr)["regs_per_thread"]
    assert one(aligned, tma)["regs_per_thread"] == one(aligned, ptr)["regs_per_thread"]


def test_a_persistent_config_hides_all_but_one_prologue_and_keeps_an_epilogue_buffer():
    """PERSISTENT = 1 on a multi-wave shape: the same waves, one prologue (not one per wave), the
    epilogue's C buffer on top of the operand buffers, so never slower than its one-tile-per-program twin
    unless the buffer costs occupancy; on a one-wave grid there is nothing to hide."""
    base = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1)
    pers, plain = Config.make(4, 3, PERSISTENT=1, **base), Config.make(4, 3, PERSISTENT=0, **base)
    big = GemmShape(8192, 8192, 1024, "nk")
    p, d = one(big, pers), one(big, plain)
    assert p["schedule"] == "persistent" and d["schedule"] == "one tile per program"
    assert p["store_path"] == "TMA, two halves" and d["store_path"] == "pointers"
    assert p["smem_bytes_per_cta"] == d["smem_bytes_per_cta"] + 128 * 128 // 2 * 2  # half the bf16 C tile
    odd_n = one(GemmShape(8192, 8196, 1024, "nk"), pers)  # C's rows of 16,392 bytes: pointer stores, the whole tile
    assert odd_n["store_path"] == "pointers" and odd_n["smem_bytes_per_cta"] == d["smem_bytes_per_cta"] + 128 * 128 * 2
    assert p["waves"] == d["waves"] and p["prologue_us"] < d["prologue_us"]
    if p["ctas_per_sm"] == d["ctas_per_sm"]:
        assert p["time_us"] < d["time_us"]
    small = GemmShape(1024, 1024, 1024, "nk")  # 64 tiles: one wave
    assert one(small, pers)["prologue_us"] == one(small, plain)["prologue_us"]


def test_a_composite_tile_is_costed_as_one_tile_of_its_width_that_reads_a_twice():
    """128x(128+32) against a one-accumulator tile 160 wide (which Triton cannot make, but the model can cost):
    the same tiles, waves, FLOPs and operand traffic, and the shared-memory reads of A counted once per
    accumulator, so no faster."""
    shape = GemmShape(2048, 1280, 8192, "nk")

    def tile(bn, bn2):
        return Config.make(4, 4, BLOCK_M=128, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=0,
                           FIXUP=0, BLOCK_N2=bn2)

    composite, wide = one(shape, tile(128, 32)), one(shape, tile(160, 0))
    for same in ("ctas", "waves", "flops", "padded_flops", "l2_bytes", "dram_bytes", "compute_us", "smem_bytes_per_cta"):
        assert composite[same] == pytest.approx(wide[same]), same
    assert composite["smem_us"] > wide["smem_us"] and composite["time_us"] >= wide["time_us"]
    assert composite["ctas"] == 16 * 8  # 128 tiles on 132 SMs, where 128x128 makes 160
    assert (composite["accumulators"], wide["accumulators"]) == (2, 1)  # what `explain` shows


def test_one_warp_per_scheduler_starves_the_fma_path_only(monkeypatch):
    """fp32 without matrix units: a 64×64 tile of 4 warps that shares no SM (BLOCK_K 128 fills the A100's shared
    memory) loses time against the same tile at BLOCK_K 32, several to an SM; bf16 ignores the FMA term."""
    from rooftune.roofline import gemm

    a100 = load_profile("a100_sxm4_80gb")
    lone, shared = (Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=bk, GROUP_M=8) for bk in (128, 32))

    def times(dtype):
        b = predict(GemmShape(2688, 2688, 7936, "nk", dtype), configs_to_columns([lone, shared]), a100)
        assert list(b.ctas_per_sm) == [1, 5] or dtype != "fp32"
        return b.time_us

    fp32, bf16 = times("fp32"), times("bf16")
    assert fp32[0] > 1.1 * fp32[1]
    monkeypatch.setattr(gemm, "FMA_EXPOSED_CLOCKS", 0.0)  # the term off: the two tie on the FMA path
    assert times("fp32")[0] < 1.02 * times("fp32")[1]
    monkeypatch.setattr(gemm, "FMA_EXPOSED_CLOCKS", 1000.0)
    assert np.array_equal(times("bf16"), bf16)


def test_crowded_fma_tiles_slow_down_only_with_b_n_contiguous(monkeypatch):
    """fp32 without matrix units, B 'kn': a 128×128 tile of 4 warps (128 accumulators a thread, at least
    FMA_KN_ACCUMULATORS) slows by about FMA_KN_SLOWDOWN where its FMAs bind, and a 64×64 tile of 4 warps (32)
    does not; with B 'nk', or in bf16, the term changes nothing."""
    from rooftune.roofline import gemm

    h100 = load_profile("h100_sxm")
    crowded, light = Config.make(4, 3, BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8), \
        Config.make(4, 2, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8)

    def times(layout, dtype="fp32"):
        return predict(GemmShape(4096, 4096, 4096, layout, dtype), configs_to_columns([crowded, light]), h100).time_us

    with_term = {(lay, dt): times(lay, dt) for lay in ("kn", "nk") for dt in ("fp32", "bf16")}
    monkeypatch.setattr(gemm, "FMA_KN_SLOWDOWN", 1.0)  # the term off
    without = {(lay, dt): times(lay, dt) for lay in ("kn", "nk") for dt in ("fp32", "bf16")}
    assert 32 < gemm.FMA_KN_ACCUMULATORS <= 128  # the crowded tile (128 a thread) over the threshold, the light (32) under
    assert with_term[("kn", "fp32")][0] > 1.3 * without[("kn", "fp32")][0]
    assert with_term[("kn", "fp32")][1] == pytest.approx(without[("kn", "fp32")][1])
    for same in (("nk", "fp32"), ("kn", "bf16"), ("nk", "bf16")):
        assert np.array_equal(with_term[same], without[same]), same
