"""The Triton FP8 fused-MoE GEMM (vLLM's `fused_moe_kernel` with use_fp8_w8a8) and the activation quantization
the layer runs before it.

The kernel is kernels/moe.py's (the same align step, grid, grouped order, gather and scatter; `moe.align` sorts
and pads the routed rows) on FP8 e4m3 operands, A [rows of A, K] and W [E, N, K], with fp32 accumulation and a
bf16 C, in one of two scale layouts (MoeFp8Shape `quant`):
- 'w8a8' (per tensor): one activation scale a_s (static, calibrated) and one weight scale per expert w_s[e];
  the loop accumulates dot(a, w) as bf16's does and multiplies the sum by a_s · w_s[e] once, after the loop.
- 'block': weight scales per 128×128 block, w_s [E, ceil(N/128), ceil(K/128)], and activation scales per row
  and 128 columns, a_s [rows of A, ceil(K/128)] (one token group); each K block's product is scaled by its
  rows' and columns' scales before it is added, acc += dot(a, w) · a_s[rows, kb][:, None] · w_s[e, n/128, kb]
  [None, :]. So a K block must lie in one group: BLOCK_SIZE_K divides 128 (candidates/moe_fp8_space.py keeps
  128; vLLM launches min(BLOCK_SIZE_K, 128)).
The routing weight (down GEMM) multiplies the rows after the scales, and C is stored in bf16, as vLLM does.

`quantize` is the activation quantization of the layer (vLLM's `per_token_group_quant_fp8` and static
`scaled_fp8_quant`): one program per row and group of columns; per token group, scale = max(|x|, 1e-10) / 448
over the group's 128 values and q = x / scale; per tensor, q = x / a_s with the static scale; q clamped to
±448 (e4m3's largest finite value) and rounded to e4m3. A layer launch runs it, then the GEMM.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import triton
import triton.language as tl
from triton.runtime.jit import MockTensor

from rooftune.candidates.routing import padded_rows_bound
from rooftune.candidates.shapes import FP8_BLOCK, MoeFp8Shape
from rooftune.kernels import moe
from rooftune.kernels.gemm import grouped_tile
from rooftune.kernels.lazy import torch

FP8_MAX = 448.0          # e4m3's largest finite value (torch.finfo(torch.float8_e4m3fn).max)
GROUP_EPS = 1e-10        # a token group's smallest |x| max, so that an all-zero group gets a finite scale
STATIC_QUANT_COLUMNS = 1024  # columns per program of the per-tensor quantization (no reduction: any width)
Fp8Inputs = tuple  # (a bf16, w fp8 [E, N, K], w_scale fp32, a_scale fp32 [1] (w8a8) or None, topk_ids, topk_weights)


@triton.jit(do_not_specialize=["EM", "num_rows", "GROUP_SIZE_M"])
def _moe_fp8_kernel(
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, weights_ptr, row_ids_ptr, tile_experts_ptr, padded_ptr,
    N, K, EM, num_rows,
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    stride_asm, stride_ask, stride_bse, stride_bsn, stride_bsk,
    GROUP_SIZE_M,
    A_ROW_DIV: tl.constexpr, MUL_WEIGHT: tl.constexpr, GROUP_N: tl.constexpr, GROUP_K: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
):
    # As kernels/moe.py's _moe_kernel; GROUP_K = 0: per-tensor scales (a_scale [1], b_scale [E]); else block
    # scales, a_scale [rows of A, K / GROUP_K], b_scale [E, N / GROUP_N, K / GROUP_K] (any strides).
    pid_m, pid_n = grouped_tile(tl.program_id(0), EM, N, GROUP_SIZE_M, BLOCK_SIZE_M, BLOCK_SIZE_N)
    if pid_m * BLOCK_SIZE_M >= tl.load(padded_ptr):
        return
    rows = tl.load(row_ids_ptr + pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M))   # [BLOCK_SIZE_M]
    valid = rows < num_rows
    expert = tl.load(tile_experts_ptr + pid_m).to(tl.int64)
    rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_rows = (rows // A_ROW_DIV).to(tl.int64)
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert * stride_be + (rn % N)[None, :] * stride_bn + offs_k[:, None] * stride_bk
    as_ptrs = a_scale_ptr + a_rows * stride_asm                                         # block scales' rows
    bs_ptrs = b_scale_ptr + expert * stride_bse + ((rn % N) // GROUP_N) * stride_bsn     # and columns
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - kb * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if GROUP_K > 0:
            group = (kb * BLOCK_SIZE_K) // GROUP_K
            a_s = tl.load(as_ptrs + group * stride_ask, mask=valid, other=0.0)
            b_s = tl.load(bs_ptrs + group * stride_bsk)
            acc += tl.dot(a, b) * a_s[:, None] * b_s[None, :]
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if GROUP_K == 0:
        acc = acc * (tl.load(a_scale_ptr) * tl.load(b_scale_ptr + expert * stride_bse))
    if MUL_WEIGHT:
        acc = acc * tl.load(weights_ptr + rows, mask=valid, other=0.0)[:, None]
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & (rn < N)[None, :])


@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, K, stride_xm, stride_qm, stride_sm,
                  COLUMNS: tl.constexpr, PER_GROUP: tl.constexpr, EPS: tl.constexpr, QMAX: tl.constexpr):
    # One program per (row, COLUMNS columns). PER_GROUP: the columns are one token group, whose scale it
    # computes and stores at s[row, group]; else s[0] is the static per-tensor scale.
    row = tl.program_id(0).to(tl.int64)
    group = tl.program_id(1)
    cols = group * COLUMNS + tl.arange(0, COLUMNS)
    x = tl.load(x_ptr + row * stride_xm + cols, mask=cols < K, other=0.0).to(tl.float32)
    if PER_GROUP:
        scale = tl.maximum(tl.max(tl.abs(x), axis=0), EPS) / QMAX
        tl.store(s_ptr + row * stride_sm + group, scale)
    else:
        scale = tl.load(s_ptr)
    q = tl.clamp(x / scale, -QMAX, QMAX)
    tl.store(q_ptr + row * stride_qm + cols, q.to(q_ptr.dtype.element_ty), mask=cols < K)


def _check_runnable(t: torch.Tensor) -> None:
    """CPU tensors only where the kernels are interpreted (a compiled Triton kernel needs a GPU)."""
    if t.device.type == "cpu" and isinstance(_moe_fp8_kernel, triton.runtime.JITFunction):
        raise ValueError("the inputs are on the CPU, where the kernel runs only in Triton's interpreter "
                         "(TRITON_INTERPRET=1 before triton is imported)")


def quantize(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, per_group: bool) -> None:
    """Quantize bf16 `x` [rows, K] into FP8 `q` [rows, K]: per token group (`per_group`: `scales` [rows,
    ceil(K/128)] fp32 written, one per row and 128 columns) or per tensor (`scales` [1] fp32, the static scale,
    read)."""
    _check_runnable(x)
    rows, k = x.shape
    columns = FP8_BLOCK[1] if per_group else min(STATIC_QUANT_COLUMNS, triton.next_power_of_2(k))
    _quant_kernel[(rows, triton.cdiv(k, columns))](x, q, scales, k, x.stride(0), q.stride(0),
                                                   scales.stride(0) if per_group else 0, COLUMNS=columns,
                                                   PER_GROUP=per_group, EPS=GROUP_EPS, QMAX=FP8_MAX)


def quantize_reference(x: torch.Tensor, per_group: bool, scale: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scales) as `quantize` computes them, in torch (fp32, then torch's round-to-nearest-even cast)."""
    x32 = x.float()
    if per_group:
        rows, k = x.shape
        groups = -(-k // FP8_BLOCK[1])
        padded = torch.nn.functional.pad(x32, (0, groups * FP8_BLOCK[1] - k)).reshape(rows, groups, FP8_BLOCK[1])
        scales = padded.abs().amax(-1).clamp(min=GROUP_EPS) / FP8_MAX                        # [rows, groups]
        spread = scales.repeat_interleave(FP8_BLOCK[1], dim=1)[:, :k]
    else:
        scales = spread = scale.float()
    return (x32 / spread).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scales


def dequantize(q: torch.Tensor, scales: torch.Tensor, block: tuple[int, int] | None) -> torch.Tensor:
    """fp32 values of FP8 `q` [..., R, C] with `scales`: one per leading index (per tensor: [E] or [1]), or
    per `block` (rows, columns) of the last two dimensions ([..., ceil(R/rows), ceil(C/cols)])."""
    if block is None:
        return q.float() * scales.float().reshape(-1, *([1] * (q.dim() - 1)))
    r, c = q.shape[-2:]
    spread = scales.float().repeat_interleave(block[0], dim=-2)[..., :r, :].repeat_interleave(block[1], dim=-1)
    return q.float() * spread[..., :c]


def _launch_fn(config: Mapping[str, int], shape: MoeFp8Shape) -> Callable:
    """A function (a_q, a_scale, w, w_scale, weights, aligned, out) -> None launching the GEMM of `shape` with
    `aligned` = `moe.align(topk_ids, experts, BLOCK_SIZE_M)`."""
    bm, bn, bk = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"]
    group_n, group_k = shape.block_shape or (1, 0)
    if group_k and group_k % bk:
        raise ValueError(f"BLOCK_SIZE_K={bk} must divide the quant block's K ({group_k}): one scale per K block")
    em = int(padded_rows_bound(shape.rows, shape.experts, bm))
    kernel = _moe_fp8_kernel[(triton.cdiv(em, bm) * triton.cdiv(shape.n, bn),)]
    constexprs = dict(A_ROW_DIV=shape.topk if shape.gemm == "gate_up" else 1, MUL_WEIGHT=shape.gemm == "down",
                      GROUP_N=group_n, GROUP_K=group_k, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk,
                      num_warps=config["num_warps"], num_stages=config["num_stages"])

    def launch(a_q, a_scale, w, w_scale, weights, aligned, out) -> None:
        row_ids, tile_experts, padded = aligned
        a_strides = (a_scale.stride(0), a_scale.stride(1)) if group_k else (0, 0)
        w_strides = (w_scale.stride(0), w_scale.stride(1), w_scale.stride(2)) if group_k else (w_scale.stride(0), 0, 0)
        kernel(a_q, w, out, a_scale, w_scale, weights, row_ids, tile_experts, padded, shape.n, shape.k, em, shape.rows,
               a_q.stride(0), a_q.stride(1), w.stride(0), w.stride(1), w.stride(2), out.stride(0), out.stride(1),
               *a_strides, *w_strides, config["GROUP_SIZE_M"], **constexprs)

    return launch


def moe_fp8_gemm(a_q: torch.Tensor, a_scale: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor,
                 topk_ids: torch.Tensor, topk_weights: torch.Tensor, config: Mapping[str, int], shape: MoeFp8Shape,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """C [tokens·topk, N] bf16 of `shape`'s GEMM on already quantized A (`a_q` FP8 with `a_scale`) and W (`w` FP8
    [E, N, K] with `w_scale`), each scale layout as the module docstring says; the routing weight on down."""
    _check_runnable(a_q)
    if out is None:
        out = torch.empty((shape.rows, shape.n), dtype=torch.bfloat16, device=a_q.device)
    aligned = moe.align(topk_ids, shape.experts, config["BLOCK_SIZE_M"])
    _launch_fn(config, shape)(a_q, a_scale, w, w_scale, topk_weights.reshape(-1).float(), aligned, out)
    return out


def activation_buffers(shape: MoeFp8Shape, a: torch.Tensor, a_scale: torch.Tensor | None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """(a_q, scales) that `quantize` writes for `a`: FP8 [rows of A, K] and, per token group, fp32 [rows of A,
    ceil(K/128)]; per tensor, the static scale itself."""
    a_q = torch.empty(a.shape, dtype=torch.float8_e4m3fn, device=a.device)
    if shape.block_shape is None:
        return a_q, a_scale
    return a_q, torch.empty((a.shape[0], triton.cdiv(a.shape[1], FP8_BLOCK[1])), dtype=torch.float32, device=a.device)


def layer(a, w, w_scale, a_scale, topk_ids, topk_weights, config: Mapping[str, int], shape: MoeFp8Shape,
          out: torch.Tensor | None = None) -> torch.Tensor:
    """The FP8 layer's GEMM from bf16 activations: `quantize` A (per token group, or with the static `a_scale`),
    then `moe_fp8_gemm`."""
    a_q, scales = activation_buffers(shape, a, a_scale)
    quantize(a, a_q, scales, per_group=shape.block_shape is not None)
    return moe_fp8_gemm(a_q, scales, w, w_scale, topk_ids, topk_weights, config, shape, out)


def make_launcher(config: Mapping[str, int], shape: MoeFp8Shape, inputs: list[Fp8Inputs],
                  out: torch.Tensor) -> Callable[[int], None]:
    """`launch(i)`: the layer's GEMM on inputs[i % len(inputs)] into `out`: the activation quantization, then the
    GEMM (both timed, as the engine runs them). The align step and the quantized activations' buffers are made
    here, once per input set, so a launch neither allocates nor syncs the host (a CUDA graph captures it)."""
    if not inputs:
        raise ValueError("make_launcher needs at least one input set")
    _check_runnable(out)
    run = _launch_fn(config, shape)
    per_group = shape.block_shape is not None
    sets = []
    for a, w, w_scale, a_scale, ids, weights in inputs:
        if tuple(a.shape) != (shape.tokens if shape.gemm == "gate_up" else shape.rows, shape.k) or \
                tuple(w.shape) != (shape.experts, shape.n, shape.k):
            raise ValueError(f"every input set must be of {shape}: A {tuple(a.shape)}, W {tuple(w.shape)}")
        a_q, scales = activation_buffers(shape, a, a_scale)
        sets.append((a, a_q, scales, w, w_scale, weights.reshape(-1).float(),
                     moe.align(ids, shape.experts, config["BLOCK_SIZE_M"])))

    def launch(i: int) -> None:
        a, a_q, scales, w, w_scale, weights, aligned = sets[i % len(sets)]
        quantize(a, a_q, scales, per_group)
        run(a_q, scales, w, w_scale, weights, aligned, out)

    return launch


def quantize_weights(w: torch.Tensor, block: tuple[int, int] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(FP8 weights, fp32 scales) of `w` [E, N, K]: one scale per expert (max |w| / 448), or one per `block` of
    [N, K] ([E, ceil(N/bn), ceil(K/bk)]), as an FP8 checkpoint stores them."""
    w32 = w.float()
    if block is None:
        scales = w32.abs().amax(dim=(1, 2)).clamp(min=GROUP_EPS) / FP8_MAX                    # [E]
    else:
        e, n, k = w.shape
        bn, bk = block
        padded = torch.nn.functional.pad(w32, (0, -k % bk, 0, -n % bn))
        blocks = padded.reshape(e, padded.shape[1] // bn, bn, padded.shape[2] // bk, bk)
        scales = blocks.abs().amax(dim=(2, 4)).clamp(min=GROUP_EPS) / FP8_MAX                 # [E, N/bn, K/bk]
    return (w32 / dequantize(torch.ones_like(w32), scales, block)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scales


def make_inputs(shape: MoeFp8Shape, device: str | torch.device, seed: int) -> Fp8Inputs:
    """(A bf16, W FP8, W's scales, A's static scale or None, topk_ids, topk_weights): kernels/moe.py's bf16
    inputs of the same GEMM (standard-normal A, W scaled by 1/√K, the shape's routing), W quantized as a
    checkpoint is (`quantize_weights`), and for per-tensor scales A's static scale, max |A| / 448 (a
    calibration on this very A)."""
    a, w, ids, weights = moe.make_inputs(shape.base, device, seed)
    w_q, w_scale = quantize_weights(w, shape.block_shape)
    a_scale = None if shape.block_shape else (a.float().abs().amax().clamp(min=GROUP_EPS) / FP8_MAX).reshape(1)
    return a, w_q, w_scale, a_scale, ids, weights


def reference(a, w, w_scale, a_scale, topk_ids, topk_weights, shape: MoeFp8Shape) -> torch.Tensor:
    """The layer's result in fp32 [tokens·topk, N] from the dequantized operands: A quantized as `quantize` does
    (in torch, `quantize_reference`) and both operands dequantized to fp32, then kernels/moe.py's fp64 loop over
    the experts (the routing weight on down). The quantization's own error is not in the comparison: kernel and
    reference multiply the same FP8 values."""
    a_q, scales = quantize_reference(a, shape.block_shape is not None, a_scale)
    a32 = dequantize(a_q, scales, (1, FP8_BLOCK[1]) if shape.block_shape else None)
    w32 = dequantize(w, w_scale, shape.block_shape)
    return moe.reference(a32, w32, topk_ids, topk_weights, mul_weight=shape.gemm == "down")


def specialization_key(shape: MoeFp8Shape) -> tuple:
    """Shapes with equal keys share compiled binaries (for one config): kernels/moe.py's key of the same sizes,
    and the scale layout."""
    return (*moe.specialization_key(shape.base), shape.quant)


def compile_kernels(shape: MoeFp8Shape, config: Mapping[str, int]) -> list:
    """[the GEMM's CompiledKernel, the quantization's] that a launch of `config` on contiguous inputs of `shape`
    runs on the current device, with MockTensors (a compile worker never loads torch)."""
    fp8, f32, i32, bf16 = (MockTensor(t) for t in (tl.float8e4nv, tl.float32, tl.int32, tl.bfloat16))
    bm, block = config["BLOCK_SIZE_M"], shape.block_shape
    em = int(padded_rows_bound(shape.rows, shape.experts, bm))
    groups_k = -(-shape.k // FP8_BLOCK[1])
    a_strides = (groups_k, 1) if block else (0, 0)
    w_strides = (-(-shape.n // FP8_BLOCK[0]) * groups_k, groups_k, 1) if block else (1, 0, 0)
    gemm = _moe_fp8_kernel.warmup(
        fp8, fp8, bf16, f32, f32, f32, i32, i32, i32, shape.n, shape.k, em, shape.rows, shape.k, 1, shape.n * shape.k,
        shape.k, 1, shape.n, 1, *a_strides, *w_strides, config["GROUP_SIZE_M"],
        A_ROW_DIV=shape.topk if shape.gemm == "gate_up" else 1, MUL_WEIGHT=shape.gemm == "down",
        GROUP_N=block[0] if block else 1, GROUP_K=block[1] if block else 0, BLOCK_SIZE_M=bm,
        BLOCK_SIZE_N=config["BLOCK_SIZE_N"], BLOCK_SIZE_K=config["BLOCK_SIZE_K"], num_warps=config["num_warps"],
        num_stages=config["num_stages"], grid=(1,))
    columns = FP8_BLOCK[1] if block else min(STATIC_QUANT_COLUMNS, triton.next_power_of_2(shape.k))
    quant = _quant_kernel.warmup(bf16, fp8, f32, shape.k, shape.k, shape.k, groups_k if block else 0, COLUMNS=columns,
                                 PER_GROUP=block is not None, EPS=GROUP_EPS, QMAX=FP8_MAX, grid=(1,))
    return [gemm, quant]


def warmup(shape: MoeFp8Shape, config: Mapping[str, int], device: str = "cuda") -> float:
    """Compile, without launching, the kernels `config` needs for `shape`; returns the seconds spent."""
    start = time.perf_counter()
    with torch.cuda.device(torch.device(device)):
        compile_kernels(shape, config)
    return time.perf_counter() - start
