"""The FP8 fused-MoE cost model (kernels/moe_fp8.py): the MoE model on one-byte operands at the FP8 tensor rate,
plus what FP8 adds to a layer: the activations' quantization and, with block scales, the per-K-block rescale.

`predict_moe` (roofline/moe.py) reads the shape's operand dtype, FP8 e4m3: one byte per element of A and W in
every term (shared-memory buffers, hence occupancy; L2 and DRAM traffic, so the weights' bytes halve), the
profile's `fp8_tflops` for the matrix units (twice bf16's on Hopper, so a compute-bound config's main loop
halves), and C in bf16 (`out_dtype`). Then, composed here:

- `quant_us`: the activation quantization kernel the layer runs first (kernels/moe_fp8.py `quantize`): it reads
  A in bf16 and writes it in FP8 with its scales (fp32, one per row and 128 columns for block scales), a
  memory-bound pass over A: bytes / DRAM bandwidth + one launch. The same for every config (it never changes a
  ranking) but part of the layer's time, as the engine runs it.
- `scale_us` (block scales only): each K block's partial product is scaled by its rows' activation scales and
  its columns' weight scales before it is added, acc += dot(a, b) · a_s[:, None] · b_s[None, :]: a multiply and
  an FMA per accumulator element per K block on the FP32 lanes, which waits for the dot (the accumulator cannot
  stay in the matrix unit across K blocks), so it adds to the main loop rather than overlapping it; and the
  scales' loads, BLOCK_SIZE_M + BLOCK_SIZE_N fp32 per program and K block, through L2.
Per-tensor scales add one multiply per accumulator element after the loop (negligible, not modelled).
Two FP8 effects live in the MoE model itself (roofline/moe.py), as they change its residency and traffic: block
scales hold the partial product beside the accumulator (`rescaled_partials`: twice the tile's registers), and
one-byte rows read in BLOCK_SIZE_K pieces under the profile's `dram_piece_bytes` cost as whole pieces
(`short_row_cost`).
No constant is fitted here: every number is the profile's or the kernel's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from rooftune.candidates.shapes import DTYPE_BYTES, FP8_BLOCK, MoeFp8Shape
from rooftune.candidates.space import cdiv
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.costmodel import CostModel
from rooftune.roofline.gemm import TERMS
from rooftune.roofline.moe import MoeBreakdown, predict_moe, routing_note
from rooftune.roofline.occupancy import clock_hz

SCALE_BYTES = 4           # an fp32 scale
SCALE_OPS_PER_ELEMENT = 2  # acc += d · a_s · b_s: a multiply and an FMA per accumulator element


@dataclass(frozen=True)
class MoeFp8Breakdown(MoeBreakdown):
    """`MoeBreakdown`'s terms on FP8 operands, with the activation quantization and the block rescale; `time_us`
    includes both."""

    quant_us: np.ndarray = None          # the activation quantization pass (the same for every config)
    scale_us: np.ndarray = None          # the per-K-block rescale of block scales (0 with per-tensor scales)


def activation_quant_s(shape: MoeFp8Shape, profile: HardwareProfile) -> float:
    """Seconds of quantizing A: (rows of A · K · (2 bytes read + 1 written) + its scales' bytes) / DRAM bandwidth
    + one launch. Rows of A: tokens (gate_up, the hidden states) or routed rows (down, their activations); scales:
    rows · ceil(K / 128) fp32 with block scales, none with a static per-tensor scale."""
    a_rows = shape.tokens if shape.gemm == "gate_up" else shape.rows
    scales = a_rows * int(cdiv(shape.k, FP8_BLOCK[1])) * SCALE_BYTES if shape.block_shape else 0
    moved = a_rows * shape.k * (DTYPE_BYTES[shape.out_dtype] + DTYPE_BYTES[shape.dtype]) + scales
    return moved / (profile.dram_bw_gbps * 1e9) + profile.launch_overhead_us * 1e-6


def block_rescale_s(shape: MoeFp8Shape, bd: MoeBreakdown, columns: dict[str, np.ndarray],
                    profile: HardwareProfile) -> np.ndarray:
    """Seconds of the block scales' rescale over the real programs, per config: the FP32 work
    SCALE_OPS_PER_ELEMENT · BM · BN per program and K block, on every SM's FP32 lanes, plus the scales' loads
    (BM + BN) · 4 bytes per program and K block through L2; 0 for per-tensor scales."""
    bm, bn, bk = (np.asarray(columns[k], dtype=np.int64) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
    if shape.block_shape is None:
        return np.zeros(bm.shape)
    blocks = bd.ctas * cdiv(shape.k, bk)
    alu_s = blocks * SCALE_OPS_PER_ELEMENT * bm * bn / (profile.fp32_lanes_per_sm * profile.sm_count * clock_hz(profile))
    l2_s = blocks * (bm + bn) * SCALE_BYTES / (profile.l2_bw_gbps * 1e9)
    return alu_s + l2_s


def predict_moe_fp8(shape: MoeFp8Shape, columns: dict[str, np.ndarray], profile: HardwareProfile) -> MoeFp8Breakdown:
    """Cost of every config in `columns` for the FP8 `shape` on `profile`: `predict_moe` on FP8 operands, plus the
    activation quantization and the block rescale (module docstring)."""
    bd = predict_moe(shape, columns, profile)
    quant_us = np.full(bd.time_us.shape, 1e6 * activation_quant_s(shape, profile))
    scale_us = 1e6 * block_rescale_s(shape, bd, columns, profile)
    fields = {f.name: getattr(bd, f.name) for f in dataclasses.fields(MoeBreakdown)}
    fields["time_us"] = bd.time_us + quant_us + scale_us
    return MoeFp8Breakdown(**fields, quant_us=quant_us, scale_us=scale_us)


def fp8_note(shape: MoeFp8Shape, bd: MoeFp8Breakdown, i: int) -> str:
    """The routing's line (`routing_note`) and what FP8 adds to config `i`."""
    scales = "128×128 weight blocks, 1×128 activation groups" if shape.block_shape else "per-tensor scales"
    return (routing_note(shape, bd, i) + f"; FP8 ({scales}): activation quantization {bd.quant_us[i]:.2f} µs, "
            f"block rescale {bd.scale_us[i]:.2f} µs")


MOE_FP8_MODEL = CostModel(predict_moe_fp8, MoeFp8Breakdown, TERMS, fp8_note)
