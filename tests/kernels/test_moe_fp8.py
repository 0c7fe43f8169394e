"""The FP8 fused-MoE kernel (both scale layouts) against its dequantized fp64 reference on odd token counts and
empty experts, both GEMMs; the activation quantization; a wrong scale fails the check; GPU-only tests marked.

On the CPU these run in Triton's interpreter, where FP8 loads and FP8 dots run, but its fp32 -> e4m3 cast does not
round as the GPU does (Triton 3.6: a rounding that carries into the exponent drops it, 7.81 -> 4; subnormals
flush to 0; ties go up). So the GEMM is checked here on operands quantized by torch, and the quantization kernel on
inputs it represents exactly (every value a code of e4m3 times a power-of-two scale, each group holding ±448 times
it): its scales, indexing and clamping are checked, its rounding only on the GPU (`test_fp8_on_the_gpu`)."""

import pytest
import torch

from rooftune.candidates import Config
from rooftune.candidates.routing import expert_rows
from rooftune.candidates.shapes import MoeFp8Shape
from rooftune.kernels import moe_fp8
from rooftune.kernels.harness.check import TOLERANCE, check_moe_fp8, relative_error

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def config(quant: str, bm: int = 16, group: int = 1) -> Config:
    tile = 128 if quant == "block" else 64
    return Config.make(4, 2, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=tile, BLOCK_SIZE_K=tile, GROUP_SIZE_M=group)


@pytest.mark.parametrize("quant", ["w8a8", "block"])
@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_gemm_matches_the_dequantized_reference(quant, gemm):
    """7 tokens (odd) routed to 2 of 16 experts: at most 14 experts have rows, so some are empty; N not a
    multiple of the tile on down (hidden 384 over BLOCK_SIZE_N 128 is whole; gate_up 2·128 over 64 is too)."""
    shape = MoeFp8Shape(16, 2, 384, 128, 7, gemm=gemm, quant=quant)
    assert (expert_rows(shape) == 0).any()
    a, w, w_scale, a_scale, ids, weights = moe_fp8.make_inputs(shape, DEVICE, 0)
    a_q, scales = moe_fp8.quantize_reference(a, quant == "block", a_scale)
    out = moe_fp8.moe_fp8_gemm(a_q, scales, w, w_scale, ids, weights, config(quant, group=4), shape)
    assert out.dtype == torch.bfloat16 and out.shape == (shape.rows, shape.n)
    ref = moe_fp8.reference(a, w, w_scale, a_scale, ids, weights, shape)
    assert relative_error(out, ref) <= TOLERANCE[torch.bfloat16]


def representable(rows: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x bf16 [rows, k], its per-group scales): e4m3 codes times 2^-j per (row, 128 columns), each group holding
    +448 · 2^-j once, so that max|x| / 448 is that power of two and x / scale a code, exactly."""
    gen = torch.Generator().manual_seed(seed)
    codes = (torch.randn(rows, k, generator=gen) * 64).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    codes[:, ::128] = 448.0
    powers = torch.randint(2, 9, (rows, -(-k // 128)), generator=gen).float()
    scales = torch.exp2(-powers)
    return (codes * scales.repeat_interleave(128, dim=1)[:, :k]).to(torch.bfloat16), scales


@pytest.mark.parametrize("quant", ["w8a8", "block"])
def test_the_layer_quantizes_as_the_reference(quant):
    """The layer (quantization kernel, then GEMM) on inputs it quantizes exactly: the same scales and codes as
    torch's, and the layer's C within bf16's tolerance of the reference."""
    shape = MoeFp8Shape(16, 2, 384, 128, 5, gemm="gate_up", quant=quant)
    _, w, w_scale, a_scale, ids, weights = moe_fp8.make_inputs(shape, DEVICE, 1)
    a, group_scales = representable(shape.tokens, shape.k, 2)
    if quant == "w8a8":  # one static scale: a power of two the whole tensor is codes of
        a = (a.float() / group_scales.repeat_interleave(128, dim=1)).to(torch.bfloat16) * 0.25
        a_scale = torch.tensor([0.25])
    a_q, scales = moe_fp8.activation_buffers(shape, a, a_scale)
    moe_fp8.quantize(a, a_q, scales, quant == "block")
    ref_q, ref_scales = moe_fp8.quantize_reference(a, quant == "block", a_scale)
    assert torch.equal(scales, ref_scales) and torch.equal(a_q.float(), ref_q.float())
    if quant == "block":
        assert torch.equal(scales, group_scales)
    out = moe_fp8.layer(a, w, w_scale, a_scale, ids, weights, config(quant, bm=32), shape)
    assert relative_error(out, moe_fp8.reference(a, w, w_scale, a_scale, ids, weights, shape)) <= 1e-2


def test_the_quantization_clamps_a_static_scale():
    """A static scale too small for the tensor saturates at ±448, never inf or NaN (e4m3fn has no inf)."""
    x = torch.tensor([[1.0, -1.0, 0.5] + [0.0] * 125], dtype=torch.bfloat16)
    q = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
    moe_fp8.quantize(x, q, torch.tensor([2.0 ** -10]), per_group=False)
    assert q.float()[0, :3].tolist() == [448.0, -448.0, 448.0]


@pytest.mark.parametrize("quant", ["w8a8", "block"])
def test_a_wrong_scale_fails_the_check(quant):
    """The comparison is sharp: one expert's weight scale doubled (one block of it, for block scales) is caught."""
    shape = MoeFp8Shape(16, 2, 256, 128, 3, gemm="down", quant=quant)
    a, w, w_scale, a_scale, ids, weights = moe_fp8.make_inputs(shape, DEVICE, 0)
    busy = int(expert_rows(shape).argmax())
    bad = w_scale.clone()
    bad[busy] *= 2
    out = moe_fp8.layer(a, w, bad, a_scale, ids, weights, config(quant), shape)
    assert relative_error(out, moe_fp8.reference(a, w, w_scale, a_scale, ids, weights, shape)) > 0.05


def test_block_scales_need_one_group_per_k_block():
    shape = MoeFp8Shape(8, 2, 256, 128, 4, quant="block")
    a, w, w_scale, a_scale, ids, weights = moe_fp8.make_inputs(shape, DEVICE, 0)
    wide = Config.make(4, 2, BLOCK_SIZE_M=16, BLOCK_SIZE_N=128, BLOCK_SIZE_K=256, GROUP_SIZE_M=1)
    with pytest.raises(ValueError, match="must divide the quant block"):
        moe_fp8.layer(a, w, w_scale, a_scale, ids, weights, wide, shape)


@pytest.mark.gpu
@pytest.mark.parametrize("quant", ["w8a8", "block"])
@pytest.mark.parametrize("gemm", ["gate_up", "down"])
def test_fp8_on_the_gpu(quant, gemm):
    """Both variants on two held-out layers (DeepSeek-V3 TP8 block, Mixtral-8x7B per tensor), wgmma tiles, the
    kernel's own quantization (its rounding is the GPU's) against torch's, through the sweep's check."""
    shapes = [MoeFp8Shape(256, 8, 7168, 256, 333, gemm, quant) if quant == "block"
              else MoeFp8Shape(8, 2, 4096, 14336, 65, gemm, quant)]
    for shape in shapes:
        for cfg in (config(quant, bm=64, group=16), Config.make(8, 4, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
                                                                BLOCK_SIZE_K=128, GROUP_SIZE_M=1)):
            assert check_moe_fp8(cfg, shape, "cuda", 0) is None
