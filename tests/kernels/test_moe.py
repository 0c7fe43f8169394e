"""The fused-MoE kernel against its fp64 per-expert reference: odd token counts, top-k 1 and 8, empty experts,
both GEMMs, every GROUP_SIZE_M order; the align step; launchers, the reference check and the torch baseline.

On the CPU these run in Triton's interpreter (fp16/fp32 inputs: it mishandles bf16); GPU-only tests are marked."""

import numpy as np
import pytest
import torch

from rooftune.candidates import Config, MoeShape
from rooftune.candidates.routing import expert_rows, padded_rows, padded_rows_bound
from rooftune.kernels import moe
from rooftune.kernels.harness.benches import MoeBench, bench_of
from rooftune.kernels.harness.check import TOLERANCE, check_moe, relative_error

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def small(bm: int = 16, bn: int = 32, bk: int = 64, group: int = 1, warps: int = 4, stages: int = 2) -> Config:
    return Config.make(warps, stages, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=group)


def assert_matches(shape: MoeShape, config: Config, seed: int = 0) -> torch.Tensor:
    a, w, ids, weights = moe.make_inputs(shape, DEVICE, seed)
    down = shape.gemm == "down"
    out = moe.moe_gemm(a, w, ids, weights, config, mul_weight=down)
    assert out.shape == (shape.rows, shape.n) and out.dtype == a.dtype
    rel = relative_error(out, moe.reference(a, w, ids, weights, mul_weight=down))
    assert rel <= TOLERANCE[a.dtype], f"{shape} {config}: rel err {rel:.3g}"
    return out


# (experts, topk, hidden, intermediate, tokens): odd token counts and sizes off the tiles; top-k 1 and 8; more
# experts than routed rows (most of them empty); N and K not multiples of the blocks.
SHAPES = [(8, 2, 64, 48, 7), (16, 1, 40, 24, 13), (16, 8, 48, 40, 3), (32, 2, 64, 33, 1), (4, 4, 100, 20, 9)]


@pytest.mark.parametrize("gemm", ["gate_up", "down"])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("dims", SHAPES, ids=lambda d: "x".join(map(str, d)))
def test_odd_shapes_both_gemms(dims, dtype, gemm):
    assert_matches(MoeShape(*dims, gemm=gemm, dtype=dtype), small())


def test_empty_experts_and_tiles_taller_than_any_experts_rows():
    shape = MoeShape(64, 2, 32, 32, 3, "down", "fp16")  # 6 rows over 64 experts: at least 58 empty
    assert (expert_rows(shape) == 0).sum() >= 58
    assert_matches(shape, small(bm=64, bn=64, bk=64))


@pytest.mark.parametrize("group", [1, 2, 3, 16])
def test_every_group_order_covers_every_tile(group):
    # 96 rows over 4 experts in 16-row tiles: several tile rows per expert and 3 tile columns
    assert_matches(MoeShape(4, 4, 64, 48, 24, "gate_up", "fp32"), small(group=group))


def test_the_routing_weight_is_on_the_down_gemm_only():
    shape = MoeShape(8, 2, 32, 32, 5, "down", "fp32")
    a, w, ids, weights = moe.make_inputs(shape, DEVICE, 1)
    plain = moe.moe_gemm(a, w, ids, weights, small(), mul_weight=False)
    scaled = moe.moe_gemm(a, w, ids, weights, small(), mul_weight=True)
    assert torch.allclose(scaled, plain * weights.reshape(-1, 1), rtol=1e-5, atol=1e-6)


def test_align_sorts_by_expert_and_pads_each_to_whole_tiles():
    shape = MoeShape(8, 2, 32, 32, 9)
    _, _, ids, _ = moe.make_inputs(shape, DEVICE, 0)
    for bm in (16, 32):
        row_ids, tile_experts, padded = moe.align(ids, shape.experts, bm)
        counts = expert_rows(shape)
        assert int(padded) == padded_rows(counts, bm) and row_ids.numel() == padded_rows_bound(shape.rows, 8, bm)
        flat = ids.reshape(-1).tolist()
        got = row_ids[: int(padded)].tolist()
        assert sorted(r for r in got if r < shape.rows) == list(range(shape.rows))  # every routed row once
        for t in range(int(padded) // bm):
            tile = [r for r in got[t * bm:(t + 1) * bm] if r < shape.rows]
            assert tile and {flat[r] for r in tile} == {int(tile_experts[t])}    # one expert a tile
            assert tile == sorted(tile)                                          # stable: in row order
        assert all(r == shape.rows for r in row_ids[int(padded):].tolist())      # the rest is the sentinel
        assert [int(e) for e in tile_experts[: int(padded) // bm]] == sorted(tile_experts[: int(padded) // bm].tolist())


def test_launcher_rotates_input_sets_and_refuses_a_mismatch():
    shape = MoeShape(8, 2, 32, 48, 5, "down", "fp16")
    sets = [moe.make_inputs(shape, DEVICE, s) for s in (1, 2)]
    assert sets[0][2] is sets[1][2] and not torch.equal(sets[0][0], sets[1][0])  # one routing, fresh A and W
    out = torch.empty(shape.rows, shape.n, dtype=torch.float16, device=DEVICE)
    launch = moe.make_launcher(small(bn=64), shape, sets, out)
    for i in (0, 1):
        launch(i)
        assert relative_error(out, moe.reference(*sets[i], mul_weight=True)) <= TOLERANCE[torch.float16]
    other = moe.make_inputs(MoeShape(8, 2, 32, 48, 6, "down", "fp16"), DEVICE, 0)
    with pytest.raises(ValueError, match="every input set"):
        moe.make_launcher(small(), shape, [other], out)
    with pytest.raises(ValueError):
        moe.moe_gemm(sets[0][0], sets[0][1], sets[0][2], sets[0][3], small(), out=out[:, :8])


def test_the_reference_check_passes_a_good_config_and_catches_a_wrong_one():
    shape = MoeShape(16, 4, 32, 40, 6, "down", "fp32")
    assert check_moe(small(), shape, DEVICE, 0) is None

    def unweighted(a, w, ids, weights, out):  # forgets the routing weight
        moe.moe_gemm(a, w, ids, weights, small(), mul_weight=False, out=out)

    assert "reference check failed" in check_moe(small(), shape, DEVICE, 0, run=unweighted)
    assert "run failed" in check_moe(small(), shape, DEVICE, 0, run=lambda *args: 1 / 0)


@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_the_torch_baseline_computes_the_same(gemm):
    bench = bench_of("moe")
    shape = MoeShape(8, 2, 64, 48, 7, gemm, "bf16")
    sets = [bench.inputs(shape, DEVICE, s) for s in (1, 2)]
    out = bench.output(shape, DEVICE)
    for i in (0, 1):
        bench.baseline(shape, sets, out)(i)
        rel = relative_error(out, moe.reference(*sets[i], mul_weight=gemm == "down"))
        assert rel <= TOLERANCE[torch.bfloat16], rel
    routes, errors = bench.extra_baselines(shape, sets, out)
    assert set(routes) == {"grouped_mm:gemm"} and errors == {}
    routes["grouped_mm:gemm"](0)


def test_bench_sizes_what_a_launch_reads():
    bench = MoeBench()
    up, down = MoeShape(64, 2, 256, 128, 1, "gate_up"), MoeShape(64, 2, 256, 128, 1, "down")
    assert bench.bytes_per_set(up) == 2 * (1 + 2 * 256) * 256   # one token's row and two experts' W [256, 256]
    assert bench.bytes_per_set(down) == 2 * (2 + 2 * 256) * 128  # two routed rows and two experts' W [256, 128]
    assert bench.kernel.baseline == "grouped_mm"


def test_specialization_key_shares_binaries_across_token_counts_and_routing():
    key = moe.specialization_key
    layer = (64, 6, 2048, 1408)
    assert len({key(MoeShape(*layer, m, "gate_up")) for m in (1, 7, 4096)}) == 1
    assert len({key(MoeShape(*layer, m, "gate_up", seed=s)) for m, s in ((5, 0), (5, 3))}) == 1
    assert key(MoeShape(*layer, 1, "gate_up")) != key(MoeShape(*layer, 1, "down"))
    assert key(MoeShape(64, 8, 2048, 1408, 1)) != key(MoeShape(*layer, 1))  # topk divides the A row index
    assert key(MoeShape(64, 6, 2048, 1404, 1)) != key(MoeShape(*layer, 1))  # N = 2808: no longer a multiple of 16


def test_warmup_compiles_the_binary_a_launch_binds(monkeypatch):
    """compile_kernels passes the arguments a launch passes: the same constexprs, N, K, strides and
    GROUP_SIZE_M, and the grid's padded-rows bound."""
    shape = MoeShape(8, 2, 64, 48, 7, "down", "fp16")
    config = small(bn=64, group=16)
    seen = {}

    class Recorder:
        def warmup(self, *args, grid, **kwargs):
            seen["warmup"] = (args[7:], kwargs)

        def __getitem__(self, grid):
            def run(*args, **kwargs):
                seen["launch"] = (args[7:], kwargs)
            return run

    monkeypatch.setattr(moe, "_moe_kernel", Recorder())
    moe.compile_kernels(shape, config)
    a, w, ids, weights = moe.make_inputs(shape, "cpu", 0)
    moe.moe_gemm(a, w, ids, weights, config, mul_weight=True)
    assert seen["warmup"] == seen["launch"]
    assert seen["warmup"][0][2] == padded_rows_bound(shape.rows, shape.experts, 16)


@pytest.mark.gpu
@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_bf16_on_the_gpu(gemm):
    for config in (small(), Config.make(8, 4, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=64, GROUP_SIZE_M=16)):
        assert check_moe(config, MoeShape(128, 8, 2048, 192, 333, gemm), "cuda", 0) is None
        assert check_moe(config, MoeShape(8, 2, 4096, 1024, 1, gemm), "cuda", 0) is None


def test_inputs_use_the_shapes_routing():
    shape = MoeShape(16, 4, 32, 32, 11)
    _, _, ids_a, _ = moe.make_inputs(shape, "cpu", 0)
    _, _, ids_b, _ = moe.make_inputs(shape, "cpu", 1)
    assert torch.equal(ids_a, ids_b) and np.array_equal(ids_a.numpy(), moe.routing(shape)[0])
