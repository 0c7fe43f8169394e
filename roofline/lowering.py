"""How Triton lowers a GEMM's tl.dot for each config: instruction path, operand staging, shared-memory buffers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rooftune.candidates.shapes import GemmShape
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline.occupancy import THREADS_PER_WARP, tensor_flops_per_sm_s

# Hopper's full tensor rate needs wgmma, issued by a warpgroup (4 warps) on a 64-row slice of the
# tile. Triton emits it only when BLOCK_M is a multiple of 64 and num_warps a multiple of 4
# (supportMMA, version 3); otherwise it falls back to the Ampere-style mma.sync.
WGMMA_MIN_COMPUTE_CAPABILITY = (9, 0)
WGMMA_ROWS = 64
WARPS_PER_WARPGROUP = 4
TENSOR_DTYPES = ("bf16", "fp16", "tf32", "fp8e4m3")
# Hopper's mma.sync fallback: microbenchmarks of H100/H800 (Luo et al. 2024, "Benchmarking and
# Dissecting the Nvidia Hopper GPU Architecture") find it reaching about 60% of the wgmma rate.
MMA_SYNC_FRACTION_OF_WGMMA = 0.6
REGISTER_BYTES = 4
# wgmma reads 32-bit (tf32) operands from shared memory only K-major (PTX ISA, wgmma descriptors:
# the transpose bits apply to 16-bit types only). Triton's AccelerateMatmul therefore allocates a
# tf32 operand that is not K-major in K-major order: getSharedMemoryMMAOperand, called for A
# (opIdx 0) and B (opIdx 1) alike with allowTranspose = f16 || bf16 ("In MMAV3 transpose is only
# supported for f16 and bf16"), forces order {1, 0} on A and {0, 1} on B. So B stored [K, N] and
# A stored [K, M] take the same path; a 16-bit operand keeps its loaded order and the descriptor's
# transpose bit reads it for free. The loop pipeliner cannot cp.async into the forced order, so
# such an operand is loaded into registers inside the loop, not ahead of it, and stored transposed
# into one shared buffer that the wgmma then reads: per iteration a CTA waits a load latency, the
# store, and its wgmma in sequence (one buffer: the next store waits for the wgmma to finish).
#
# The store meets bank conflicts. Coalesced loads give each thread 16 contiguous bytes along the
# operand's contiguous dimension, N for B [K, N], M for A [K, M] (vec = 4 fp32), lanes spread
# along it first. In the K-major layout each n (or m) is its own 128-byte K row, and the 128-byte
# swizzle places a row's 16-byte chunk by row mod 8; n = vec·lane + j takes only 8 / vec of those
# values, so a warp's lanes along N share that many chunks, i.e. banks: conflict ways = lanes
# along N / (8 / vec) = min(32·vec, BLOCK_N) / 8 (16-way for BLOCK_N = 128); for A, BLOCK_M.
GLOBAL_VECTOR_BYTES = 16
SWIZZLE_ROWS = 8  # the 128-byte swizzle permutes a row's eight 16-byte chunks by row index mod 8


@dataclass(frozen=True)
class DotLowering:
    """Per-config facts of the lowered main loop (arrays of one element per config)."""

    wgmma: np.ndarray            # Hopper warpgroup MMA at the full tensor rate
    a_via_registers: np.ndarray  # A loaded in the loop into registers, stored transposed into one smem buffer
    b_via_registers: np.ndarray  # the same for B
    a_transpose_ways: np.ndarray  # bank-conflict ways of A's transposing store (0 where A is not transposed)
    b_transpose_ways: np.ndarray  # the same for B
    smem_bytes: np.ndarray       # shared memory per CTA: pipelined operand buffers
    staged_regs: np.ndarray      # registers per thread holding the transposed tiles between load and store

    @property
    def via_registers(self) -> np.ndarray:
        """Either operand takes the unpipelined transposing path."""
        return self.a_via_registers | self.b_via_registers


def _hopper_tensor(dtype: str, profile: HardwareProfile) -> bool:
    """The dtype runs on matrix units and the GPU has wgmma."""
    return dtype in TENSOR_DTYPES and profile.compute_capability >= WGMMA_MIN_COMPUTE_CAPABILITY


def uses_wgmma(dtype: str, bm: np.ndarray, warps: np.ndarray, profile: HardwareProfile) -> np.ndarray:
    """Where Triton emits wgmma: a matrix-unit dtype on Hopper, BLOCK_M a multiple of 64 and
    num_warps a multiple of a warpgroup (GEMM and attention alike)."""
    return _hopper_tensor(dtype, profile) & (bm % WGMMA_ROWS == 0) & (warps % WARPS_PER_WARPGROUP == 0)


def mma_flops_per_sm_s(dtype: str, wgmma: np.ndarray, profile: HardwareProfile) -> np.ndarray:
    """Matrix-unit rate of one SM per config, FLOP/s: the dtype's dense rate per SM, times
    MMA_SYNC_FRACTION_OF_WGMMA where a Hopper matrix-unit dtype falls back to mma.sync."""
    fallback = ~wgmma & _hopper_tensor(dtype, profile)
    return tensor_flops_per_sm_s(profile, dtype) * np.where(fallback, MMA_SYNC_FRACTION_OF_WGMMA, 1.0)


def smem_buffers(stages: np.ndarray, wgmma: np.ndarray) -> np.ndarray:
    """Shared-memory copies of each operand tile the software pipeline keeps.

    Triton's loop pipeliner issues a stage's loads num_stages-1 iterations ahead, so num_stages-1
    buffers are in flight; an asynchronous wgmma still reads the consumed buffer while the next
    copy lands, which costs one more (num_stages). At least one buffer always exists."""
    return np.maximum(np.where(wgmma, stages, stages - 1), 1)


def transpose_ways(tile_contiguous: np.ndarray, elem: int) -> np.ndarray:
    """Bank-conflict ways of storing a tf32 tile K-major whose global rows run along the other
    dimension: min(32·vec, tile extent along the contiguous dimension) / 8, at least 1."""
    vec = GLOBAL_VECTOR_BYTES // elem
    return np.maximum(np.minimum(THREADS_PER_WARP * vec, tile_contiguous) // SWIZZLE_ROWS, 1)


def lower_dot(shape: GemmShape, bm, bn, bk, warps, stages, elem: int, profile: HardwareProfile) -> DotLowering:
    """Which instructions and staging Triton uses for every config (see DotLowering)."""
    wgmma = uses_wgmma(shape.dtype, bm, warps, profile)
    # Only 32-bit operands lack the transposed wgmma read; K-major is A [M, K] and B [N, K].
    transposed_32 = wgmma & (elem == 4)
    a_via_registers = transposed_32 & (shape.a_layout == "km")
    b_via_registers = transposed_32 & (shape.layout == "kn")
    buffers = smem_buffers(stages, wgmma)
    a_tile, b_tile = bm * bk * elem, bn * bk * elem
    smem = np.where(a_via_registers, a_tile, buffers * a_tile) + np.where(b_via_registers, b_tile, buffers * b_tile)
    threads = warps * THREADS_PER_WARP
    staged_bytes = np.where(a_via_registers, a_tile, 0) + np.where(b_via_registers, b_tile, 0)
    return DotLowering(wgmma=wgmma, a_via_registers=a_via_registers, b_via_registers=b_via_registers,
                       a_transpose_ways=np.where(a_via_registers, transpose_ways(bm, elem), 0),
                       b_transpose_ways=np.where(b_via_registers, transpose_ways(bn, elem), 0),
                       smem_bytes=smem, staged_regs=staged_bytes // (REGISTER_BYTES * threads))
