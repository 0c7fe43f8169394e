"""The FP8 fused-MoE family's CPU parts: its shape and header, vLLM's block-alignment rule and FP8's one-byte
shared-memory rule, the table file names, and the FP8 rates in the model."""

import numpy as np
import pytest

from rooftune.candidates import MOE_FP8_SPACE, MOE_SPACE, Config, MoeFp8Shape, ShapeError, legal_configs
from rooftune.candidates.families import header_shape, kernel_of, shape_header
from rooftune.candidates.moe_fp8_space import block_twin
from rooftune.candidates.shapes import load_moe_fp8_shapes
from rooftune.hwprofiles import load_profile
from rooftune.hwprofiles.profile import ProfileError, profile_from_dict, profile_to_dict
from rooftune.roofline.moe import predict_moe
from rooftune.roofline.moe_fp8 import predict_moe_fp8
from rooftune.tuner.llm.moe_tables import moe_fp8_table_entry, table_file_name

H200 = load_profile("h200")
DEEPSEEK_TP8 = MoeFp8Shape(256, 8, 7168, 256, 64, quant="block")


def test_the_shape_carries_its_scales_and_round_trips_its_header():
    assert kernel_of(DEEPSEEK_TP8).name == "moe-fp8" and kernel_of(DEEPSEEK_TP8.base).name == "moe"
    for shape in (DEEPSEEK_TP8, MoeFp8Shape(8, 2, 4096, 14336, 3, "down", "w8a8", seed=2)):
        assert header_shape(shape_header(shape)) == shape
    assert header_shape(shape_header(DEEPSEEK_TP8.base)) == DEEPSEEK_TP8.base  # a bf16 header stays MoE's
    assert (DEEPSEEK_TP8.dtype, DEEPSEEK_TP8.out_dtype, DEEPSEEK_TP8.block_shape) == ("fp8e4m3", "bf16", (128, 128))
    with pytest.raises(ShapeError, match="multiples of 128"):
        MoeFp8Shape(128, 8, 4096, 192, 64, quant="block")  # Qwen3-235B at TP8: not whole blocks
    with pytest.raises(ShapeError, match="quant"):
        MoeFp8Shape(8, 2, 4096, 14336, 3, quant="int8")


def test_block_tiles_are_whole_quant_blocks_and_per_tensor_keeps_the_grid():
    """vLLM's benchmark_moe rule for block scales: BLOCK_SIZE_N and BLOCK_SIZE_K multiples of 128, and 256 as
    launched (128) a twin; per-tensor scales keep every tile the MoE rules keep."""
    block = legal_configs(MOE_FP8_SPACE, DEEPSEEK_TP8, H200)
    assert block.configs and all(c["BLOCK_SIZE_N"] % 128 == 0 and c["BLOCK_SIZE_K"] == 128 for c in block.configs)
    assert {c["BLOCK_SIZE_N"] for c in block.configs} == {128, 256}
    w8a8 = legal_configs(MOE_FP8_SPACE, MoeFp8Shape(256, 8, 7168, 256, 64, quant="w8a8"), H200)
    assert {c["BLOCK_SIZE_N"] for c in w8a8.configs} == {32, 64, 128, 256}
    assert {c["BLOCK_SIZE_K"] for c in w8a8.configs} == {64, 128, 256}
    wide = Config.make(4, 3, BLOCK_SIZE_M=64, BLOCK_SIZE_N=128, BLOCK_SIZE_K=256, GROUP_SIZE_M=1)
    assert block_twin(DEEPSEEK_TP8, wide)["BLOCK_SIZE_K"] == 128 and block_twin(DEEPSEEK_TP8, wide) in block.configs
    assert MOE_FP8_SPACE.grid == MOE_SPACE.grid and MOE_FP8_SPACE.version != MOE_SPACE.version


def test_fp8_buffers_take_one_byte_an_element():
    """A tile whose stages overflow shared memory in bf16 fits in FP8: 5 × (128 + 256) × 128 × 2 B = 480 KiB
    is over the H200's 227 KiB, 240 KiB still over, 3 stages in FP8 (144 KiB) fit where bf16's (288 KiB) do not."""
    shape = MoeFp8Shape(8, 2, 4096, 14336, 4096, quant="w8a8")
    fits = Config.make(8, 3, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=1)
    fp8 = legal_configs(MOE_FP8_SPACE, shape, H200).configs
    bf16 = legal_configs(MOE_SPACE, shape.base, H200).configs
    assert fits in fp8 and fits not in bf16 and len(fp8) > len(bf16)


def test_vllm_table_names():
    class Result:
        winner = Config.make(4, 3, BLOCK_SIZE_M=64, BLOCK_SIZE_N=128, BLOCK_SIZE_K=128, GROUP_SIZE_M=1)

    name, m, entry = moe_fp8_table_entry(DEEPSEEK_TP8, Result(), "NVIDIA H200")
    assert name == "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json" and m == 64
    assert entry == {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                     "num_warps": 4, "num_stages": 3}
    down = MoeFp8Shape(8, 2, 4096, 14336, 2, "down", "w8a8")
    assert moe_fp8_table_entry(down, Result(), "NVIDIA H200")[0] == "E=8,N=14336,device_name=NVIDIA_H200,dtype=fp8_w8a8_down.json"
    assert table_file_name(128, 384, "NVIDIA H200", "fp8_w8a8", block_shape=(128, 128)) == \
        "E=128,N=384,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"


def test_fp8_halves_compute_and_weight_bytes():
    """A compute-bound config (M = 4096 on a big layer): the main loop's compute at the FP8 rate is half bf16's,
    as the profile's fp8_tflops is twice bf16_tflops; the weights' DRAM bytes halve too."""
    shape = MoeFp8Shape(8, 2, 4096, 14336, 4096, quant="w8a8")
    cfg = Config.make(8, 3, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=16)
    columns = {k: np.array([v]) for k, v in cfg.items()}
    fp8, bf16 = predict_moe_fp8(shape, columns, H200), predict_moe(shape.base, columns, H200)
    assert H200.fp8_tflops == pytest.approx(2 * H200.bf16_tflops)
    assert fp8.compute_us[0] == pytest.approx(bf16.compute_us[0] / 2)
    assert fp8.weight_bytes[0] == pytest.approx(bf16.weight_bytes[0] / 2)
    assert fp8.scale_us[0] == 0 and fp8.quant_us[0] > 0
    block = predict_moe_fp8(MoeFp8Shape(8, 2, 4096, 14336, 4096, quant="block"),
                            {**columns, "BLOCK_SIZE_K": np.array([128])}, H200)
    assert block.scale_us[0] > 0 and block.time_us[0] > block.quant_us[0] + block.scale_us[0]


def test_fp8_roughly_halves_the_best_layer_time():
    """Over each space, the best predicted GEMM (the quantization pass aside) of a compute-bound shape takes about
    half bf16's best: both bound by the tensor cores (TERMS index 0)."""
    from rooftune.candidates import configs_to_columns

    shape = MoeFp8Shape(8, 2, 4096, 14336, 4096, quant="w8a8")
    fp8 = predict_moe_fp8(shape, configs_to_columns(legal_configs(MOE_FP8_SPACE, shape, H200).configs), H200)
    bf16 = predict_moe(shape.base, configs_to_columns(legal_configs(MOE_SPACE, shape.base, H200).configs), H200)
    assert fp8.dominant[fp8.time_us.argmin()] == bf16.dominant[bf16.time_us.argmin()] == 0
    assert 0.45 < (fp8.time_us - fp8.quant_us).min() / bf16.time_us.min() < 0.6


def test_fp8_rate_is_an_optional_profile_field(tmp_path):
    a100 = load_profile("a100_sxm4_80gb")
    assert a100.fp8_tflops is None and "fp8_tflops" not in profile_to_dict(a100)
    with pytest.raises(ProfileError, match="fp8_tflops"):
        predict_moe_fp8(DEEPSEEK_TP8, {k: np.array([v]) for k, v in legal_configs(
            MOE_FP8_SPACE, DEEPSEEK_TP8, H200).configs[0].items()}, a100)
    assert profile_from_dict(profile_to_dict(H200)).fp8_tflops == H200.fp8_tflops
    assert "fp8_tflops" in H200.sources
    with pytest.raises(ProfileError, match="fp8_tflops"):
        profile_from_dict({**profile_to_dict(H200), "fp8_tflops": -1.0})


def test_the_committed_lists_split_by_model():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "datasets" / "h200" / "moe_fp8"
    train, heldout = (load_moe_fp8_shapes(root / f"shapes_{n}.json") for n in ("train", "heldout"))
    assert len(heldout) >= 200
    layers = lambda shapes: {(s.experts, s.topk, s.hidden, s.intermediate, s.quant) for s in shapes}
    assert {(256, 8, 7168, 256, "block"), (256, 8, 7168, 512, "block"), (128, 8, 4096, 384, "block"),
            (8, 2, 4096, 14336, "w8a8")} <= layers(heldout)
    assert not layers(train) & layers(heldout)


def test_block_scales_hold_the_partial_product_beside_the_accumulator():
    """With block scales the kernel keeps each K block's partial product beside the accumulator: a second BM·BN
    fp32 tile in registers, so 128×256 with 8 warps (128 + 128 a thread) spills where per-tensor scales do not."""
    cfg = Config.make(8, 4, BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=1)
    columns = {k: np.array([v]) for k, v in cfg.items()}
    block = predict_moe_fp8(MoeFp8Shape(8, 2, 4096, 14336, 4096, quant="block"), columns, H200)
    tensor = predict_moe_fp8(MoeFp8Shape(8, 2, 4096, 14336, 4096, quant="w8a8"), columns, H200)
    assert block.regs_per_thread[0] - tensor.regs_per_thread[0] == 128 * 256 // (32 * 8)
    assert block.regs_per_thread[0] > H200.regs_per_thread_max >= tensor.regs_per_thread[0]
    assert not MoeFp8Shape(8, 2, 4096, 14336, 4, quant="w8a8").rescaled_partials
    assert not MoeFp8Shape(8, 2, 4096, 14336, 4, quant="w8a8").base.rescaled_partials


def test_rows_read_in_pieces_under_128_bytes_cost_as_whole_pieces():
    """FP8 with BLOCK_SIZE_K 64 reads 64-byte pieces of each row: twice the DRAM time of the same bytes in 128-byte
    pieces; bf16's smallest BLOCK_SIZE_K (64, 128 bytes) is unchanged."""
    from rooftune.roofline.moe import short_row_cost

    assert H200.dram_piece_bytes == 128
    assert short_row_cost(np.array([64, 128, 256]), 1, H200).tolist() == [2.0, 1.0, 1.0]
    assert short_row_cost(np.array([64]), 2, H200).tolist() == [1.0]
    shape = MoeFp8Shape(8, 2, 4096, 14336, 16, quant="w8a8")  # decode: the weights' bytes bound it
    times = {}
    for bk in (64, 128):
        cfg = Config.make(4, 4, BLOCK_SIZE_M=16, BLOCK_SIZE_N=128, BLOCK_SIZE_K=bk, GROUP_SIZE_M=1)
        bd = predict_moe_fp8(shape, {k: np.array([v]) for k, v in cfg.items()}, H200)
        times[bk] = bd.memory_us[0]
    assert times[64] == pytest.approx(2 * times[128], rel=0.05)
