"""A Hopper GEMM in Gluon: 2-CTA clusters that share B's tile through TMA multicast, wgmma, an mbarrier ring.

What it is: C = A @ B^T in bf16 (fp32 accumulation), A [M, K] and B [N, K] row-major (an nn.Linear
weight, layout 'nk'), or B [K, N] ('kn'). With CLUSTER_M = 2 a program is a cluster of two CTAs that
compute the two neighbouring BLOCK_M x BLOCK_N tiles of one column block: each loads its own rows of A,
while the first CTA loads B's tile once and the copy engine delivers it into both CTAs' shared memory
(`tma.async_load(..., multicast=True)` into a layout broadcast over the cluster, cga_layout [[0, 0]]).
B's traffic from L2 halves; before a stage is refilled, both CTAs release it on a barrier that lives in
the first CTA (a 2-CTA mbarrier), since the refill writes into both. CLUSTER_M = 1 is the same ring
without a cluster. num_warps 4 or 8: one or two warpgroups share the tile's rows.

Where it applies: sm_90 and a Triton whose Gluon has multi-CTA layouts (`cga_layout`), multi-CTA
mbarriers (`mbarrier.allocate_mbarrier`) and a multicast `tma.async_load` (Triton 3.9 has them; 3.6,
the project's plain-Triton baseline, does not). `available()` says whether the installed Triton does;
where it does not, this module still imports and defines no kernel.

Why it exists: the family where cuBLAS still beats the project's Triton kernels (docs/results.md, "The
kernels against the libraries"): M of 100-800 tokens against N up to ~6k with K 2k-8k, and large M
against modest N (5158x1280x8192). There cuBLAS runs 2-CTA clusters with multicast loads, which plain
Triton 3.6 cannot express.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import triton
import triton.language as tl
from triton.runtime.jit import MockTensor

from rooftune.kernels.lazy import torch


def _interpreted() -> bool:
    """Triton's language was loaded for its interpreter (TRITON_INTERPRET, as the CPU tests run): Gluon has no
    interpreter, and importing it then fails (3.6 asserts) or leaves Triton's own lazy import of it broken."""
    from triton.runtime.jit import JITFunction

    return not isinstance(tl.standard.cdiv, JITFunction)


gluon = None
if not _interpreted():
    try:
        from triton.experimental import gluon
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.language.nvidia.hopper import (
            fence_async_shared,
            mbarrier,
            tma,
            warpgroup_mma,
            warpgroup_mma_wait,
        )
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    except ImportError:  # a Triton without Gluon's Hopper dialect
        gluon = None

CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "CLUSTER_M", "num_warps")
LAYOUTS = ("nk", "kn")


def available() -> bool:
    """Whether the installed Triton's Gluon has what the kernel uses: multicast TMA loads, multi-CTA
    mbarriers and CTA layouts in shared memory."""
    if gluon is None:
        return False
    try:
        return ("multicast" in inspect.signature(tma.async_load).parameters
                and hasattr(mbarrier, "allocate_mbarrier") and hasattr(gl, "num_ctas")
                and "cga_layout" in inspect.signature(gl.NVMMASharedLayout).parameters)
    except (AttributeError, TypeError, ValueError):
        return False


def check_config(config: Mapping[str, int]) -> None:
    """Raise ValueError for a config the kernel cannot run: wgmma takes a warpgroup 64 rows at a time."""
    missing = [key for key in CONFIG_KEYS if key not in config]
    if missing:
        raise ValueError(f"a Gluon GEMM config needs {missing}")
    if config["CLUSTER_M"] not in (1, 2) or config["num_warps"] not in (4, 8):
        raise ValueError("CLUSTER_M must be 1 or 2 and num_warps 4 or 8")
    if config["BLOCK_M"] % 64 or config["BLOCK_N"] % 16 or config["BLOCK_K"] % 16 or config["num_stages"] < 2:
        raise ValueError(f"illegal tile for wgmma: {dict(config)}")


# Only where the APIs exist: an older Gluon (Triton 3.6) may lack what the definitions below call at import.
if available():

    @gluon.constexpr_function
    def _warps_per_cta(block_m, num_warps):
        # A warpgroup's atom is [4, 1] (16 rows a warp); a second warpgroup takes more rows where there
        # are 64 per warpgroup to give, else the other half of the columns.
        return [num_warps, 1] if block_m >= 16 * num_warps else [4, num_warps // 4]

    @gluon.constexpr_function
    def _instr_n(block_m, block_n, num_warps):
        """The widest wgmma N (a multiple of 8, <= 256) dividing the columns one warp's row block owns."""
        m_reps = triton.cdiv(block_m, 16)
        n_reps = triton.cdiv(num_warps, m_reps)
        max_n = max(block_n // n_reps, 8)
        n = 256
        while n > max_n or block_n % n:
            n -= 8
        return n

    @gluon.jit
    def _gemm_kernel(a_desc, b_desc, c_desc, B_NK: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
        # The program is the cluster: tiles here are cluster tiles, split over its CTAs by the layouts.
        CLUSTER_M: gl.constexpr = gl.num_ctas()
        TILE_M: gl.constexpr = c_desc.block_type.shape[0]  # CLUSTER_M * BLOCK_M rows
        BLOCK_N: gl.constexpr = c_desc.block_type.shape[1]
        BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
        BLOCK_M: gl.constexpr = TILE_M // CLUSTER_M
        K = a_desc.shape[1]
        off_m = gl.program_id(0) * TILE_M
        off_n = gl.program_id(1) * BLOCK_N

        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
        b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
        ready = mbarrier.allocate_mbarrier(batch=STAGES)  # one per CTA: its A rows and its copy of B landed
        # Both CTAs done with a stage (a 2-CTA barrier in the first CTA, which issues B's multicast).
        empty = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=CLUSTER_M > 1)
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        tile_bytes: gl.constexpr = a_desc.nbytes_per_cta + b_desc.nbytes_per_cta
        multicast: gl.constexpr = CLUSTER_M > 1

        num_k = gl.cdiv(K, BLOCK_K)
        for i in gl.static_range(STAGES - 1):  # fill the ring
            pred = i < num_k
            mbarrier.expect(ready.index(i), tile_bytes, pred=pred)
            tma.async_load(a_desc, [off_m, i * BLOCK_K], ready.index(i), a_bufs.index(i), pred=pred)
            if B_NK:
                tma.async_load(b_desc, [off_n, i * BLOCK_K], ready.index(i), b_bufs.index(i), pred=pred,
                               multicast=multicast)
            else:
                tma.async_load(b_desc, [i * BLOCK_K, off_n], ready.index(i), b_bufs.index(i), pred=pred,
                               multicast=multicast)

        mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=_warps_per_cta(BLOCK_M, num_warps),
            instr_shape=[16, _instr_n(BLOCK_M, BLOCK_N, num_warps), 16], cga_layout=c_desc.layout.cga_layout)
        acc = gl.zeros((TILE_M, BLOCK_N), dtype=gl.float32, layout=mma_layout)
        for k in range(num_k):
            s = k % STAGES
            mbarrier.wait(ready.index(s), (k // STAGES) & 1)
            if B_NK:
                b_tile = b_bufs.index(s).permute((1, 0))
            else:
                b_tile = b_bufs.index(s)
            acc = warpgroup_mma(a_bufs.index(s), b_tile, acc, is_async=True)
            # The wgmma of step k - 1 has finished reading its stage: release it, then refill it with step
            # k + STAGES - 1. In a cluster the refill writes into both CTAs, so the issuer waits for both.
            acc, _, _ = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_bufs.index(s), b_bufs.index(s)))
            t = k + STAGES - 1
            ts = t % STAGES
            if multicast:
                if k > 0:
                    mbarrier.arrive(empty.index(ts))
            if t < num_k:
                if multicast:
                    if k > 0:
                        mbarrier.wait(empty.index(ts), ((t // STAGES) - 1) & 1)
                mbarrier.expect(ready.index(ts), tile_bytes)
                tma.async_load(a_desc, [off_m, t * BLOCK_K], ready.index(ts), a_bufs.index(ts))
                if B_NK:
                    tma.async_load(b_desc, [off_n, t * BLOCK_K], ready.index(ts), b_bufs.index(ts),
                                   multicast=multicast)
                else:
                    tma.async_load(b_desc, [t * BLOCK_K, off_n], ready.index(ts), b_bufs.index(ts),
                                   multicast=multicast)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))

        c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_store(c_desc, [off_m, off_n], c_smem)
        tma.store_wait(pendings=0)


def _layouts(config: Mapping[str, int], layout: str, dtype) -> tuple[tuple[list[int], object], ...]:
    """(block shape, shared layout) of A's, B's and C's descriptors: cluster tiles, A and C split over
    the cluster's CTAs along M, B broadcast to all of them."""
    cm, bm, bn, bk = config["CLUSTER_M"], config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    split, bcast = ([[1, 0]], [[0, 0]]) if cm > 1 else (None, None)
    b_block = [bn, bk] if layout == "nk" else [bk, bn]
    blocks = ([cm * bm, bk], b_block, [cm * bm, bn])
    return tuple((block, gl.NVMMASharedLayout.get_default_for(block, dtype, cga_layout=cga))
                 for block, cga in zip(blocks, (split, bcast, split)))


def _descriptors(a, b, c, dims: tuple[int, int, int], row_strides: tuple[int, int, int],
                 config: Mapping[str, int], layout: str, dtype) -> tuple:
    """Descriptors of A [M, K], B ([N, K] or [K, N]) and C [M, N]; `a`, `b`, `c` may be MockTensors (a compile
    without tensors), so the row strides come from `row_strides`."""
    m, n, k = dims
    (a_block, a_l), (b_block, b_l), (c_block, c_l) = _layouts(config, layout, dtype)
    b_shape = [n, k] if layout == "nk" else [k, n]
    return (TensorDescriptor(a, [m, k], [row_strides[0], 1], a_block, a_l),
            TensorDescriptor(b, b_shape, [row_strides[1], 1], b_block, b_l),
            TensorDescriptor(c, [m, n], [row_strides[2], 1], c_block, c_l))


def _grid(config: Mapping[str, int], m: int, n: int) -> tuple[int, int]:
    """One program (a cluster of CLUSTER_M CTAs) per CLUSTER_M * BLOCK_M x BLOCK_N tile."""
    return triton.cdiv(m, config["CLUSTER_M"] * config["BLOCK_M"]), triton.cdiv(n, config["BLOCK_N"])


def _options(config: Mapping[str, int], layout: str) -> dict:
    return dict(B_NK=layout == "nk", STAGES=config["num_stages"], num_warps=config["num_warps"],
                num_ctas=config["CLUSTER_M"])


def _require(config: Mapping[str, int], layout: str) -> None:
    if not available():
        raise RuntimeError(f"the installed Triton {triton.__version__} has no Gluon with multicast TMA and "
                           "multi-CTA layouts (gluon_gemm.available() is False)")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    check_config(config)


def gluon_matmul(a: torch.Tensor, b: torch.Tensor, config: Mapping[str, int], out: torch.Tensor | None = None,
                 layout: str = "nk") -> torch.Tensor:
    """C[M, N] = A[M, K] @ B^T for B [N, K] ('nk'), or A @ B for B [K, N] ('kn'); bf16 in and out.
    The tensors must be contiguous in their last dimension with 16-byte aligned rows (TMA's rule)."""
    _require(config, layout)
    m, k = a.shape
    n = b.shape[0] if layout == "nk" else b.shape[1]
    if (b.shape[1] if layout == "nk" else b.shape[0]) != k:
        raise ValueError(f"A is {tuple(a.shape)} but B is {tuple(b.shape)} for layout {layout!r}")
    if a.dtype != torch.bfloat16 or b.dtype != torch.bfloat16:
        raise ValueError("gluon_matmul takes bf16 A and B")
    if out is None:
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    descs = _descriptors(a, b, out, (m, n, k), (a.stride(0), b.stride(0), out.stride(0)), config, layout, gl.bfloat16)
    _gemm_kernel[_grid(config, m, n)](*descs, **_options(config, layout))
    return out


def compile_kernels(shape_mnk: tuple[int, int, int], config: Mapping[str, int], layout: str = "nk") -> list:
    """The compiled kernel (Triton CompiledKernel: `.asm`, `.metadata.shared`) a launch of `config` on
    contiguous bf16 inputs of `shape_mnk` uses, for the current target; under
    `rooftune.kernels.harness.offline.offline_target(90)` this compiles for sm_90 with no GPU."""
    _require(config, layout)
    m, n, k = shape_mnk
    bf16 = MockTensor(tl.bfloat16)
    rows = (k, k if layout == "nk" else n, n)
    descs = _descriptors(bf16, bf16, bf16, (m, n, k), rows, config, layout, gl.bfloat16)
    return [_gemm_kernel.warmup(*descs, **_options(config, layout), grid=_grid(config, m, n))]
