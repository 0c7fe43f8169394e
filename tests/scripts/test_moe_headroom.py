"""The fused-MoE headroom script's roofline bound: the active experts' weights once, rows in and out, or the FLOPs."""

import pytest
from script_module import load_script

from rooftune.candidates import MoeShape
from rooftune.candidates.routing import expert_rows
from rooftune.hwprofiles import load_profile

headroom = load_script("scripts/moe_headroom.py")
PROFILE = load_profile("h200")


def test_a_decode_shape_is_bound_by_its_active_experts_weights():
    shape = MoeShape(64, 2, 4096, 1024, tokens=1, gemm="down")  # 2 active experts of 64
    assert int((expert_rows(shape) > 0).sum()) == 2
    bound, dram = headroom.bound_us(shape, PROFILE)
    weights = 2 * 4096 * 1024 * 2
    rows = 2 * 1024 * 2 + 2 * 4096 * 2
    assert dram and bound == pytest.approx((weights + rows) / (PROFILE.dram_bw_gbps * 1e3))


def test_a_large_dense_shape_is_bound_by_the_tensor_cores():
    shape = MoeShape(8, 2, 8192, 8192, tokens=65536, gemm="gate_up")
    bound, dram = headroom.bound_us(shape, PROFILE)
    assert not dram and bound == pytest.approx(shape.flops / (PROFILE.bf16_tflops * 1e6))
