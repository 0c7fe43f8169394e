"""The reference check every candidate passes before its time counts: fresh inputs, poisoned output, relative error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache

import torch

from rooftune.candidates.shapes import AttentionShape, GemmShape, MoeFp8Shape, MoeShape
from rooftune.kernels import attention as attn
from rooftune.kernels import moe, moe_fp8
from rooftune.kernels.gemm import gemm, make_inputs, reference
from rooftune.kernels.harness.context import error_line

# Largest accepted ‖out − ref‖ / ‖ref‖ against an fp64 reference on the same (already rounded) inputs.
# The error is dominated by rounding the output once to the storage type (fp32 accumulation over K adds
# ~sqrt(K)·2^-24, negligible); a rounding to nearest with unit roundoff u leaves a relative RMS near u/√3:
#   bf16, u = 2^-8: ~2.3e-3 expected -> 1e-2 (over 4x margin);
#   fp16, u = 2^-11: ~3e-4 expected -> 2e-3;
#   fp32 inputs go through TF32 dots on the GPU (operands rounded to a 10-bit mantissa, u = 2^-11, the
#   two operand roundings compound to ~3e-4 in practice) -> 5e-3, well above that but far below any
#   indexing mistake, which gives errors of order 1.
# Attention keeps these bounds. Besides the output rounding, P is rounded to the input dtype before PV
# (as in FlashAttention) while the row sum keeps the fp32 P: each weight off by a relative ~u/√3, an
# error that averages over the row like the output itself, so it adds about as much as one more
# rounding: ~√2·u/√3 in all (scores: fp32 dots of the already-rounded Q and K, exp2 ~2^-22). A
# CPU emulation of exactly that arithmetic (seq 512-4096, head_dim 16-256, causal or not) gave
# bf16 2.0-2.3e-3, fp16 2.5-2.9e-4, fp32 through TF32 (Q, K, P, V rounded) 3.7-5.0e-4: margins of 4x,
# 7x and 10x; the fp16 kernel in Triton's interpreter lands at ~2.5e-4.
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 5e-3}

CHUNK_ELEMS = 1 << 24  # rows are compared in chunks of about this many elements to bound fp64 temporaries


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖₂ / ‖ref‖₂ over all elements, accumulated in fp64; NaN or inf anywhere gives inf."""
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}")
    out2, ref2 = out.reshape(out.shape[0], -1), ref.reshape(ref.shape[0], -1)
    rows = max(1, CHUNK_ELEMS // max(1, out2.shape[1]))
    err_sq = ref_sq = torch.zeros((), dtype=torch.float64, device=out.device)
    for start in range(0, out2.shape[0], rows):
        o = out2[start:start + rows].double()
        r = ref2[start:start + rows].to(device=out.device, dtype=torch.float64)
        err_sq = err_sq + (o - r).square().sum()
        ref_sq = ref_sq + r.square().sum()
    err, norm = err_sq.sqrt().item(), ref_sq.sqrt().item()
    rel = err / norm if norm > 0 else (0.0 if err == 0 else float("inf"))
    return rel if rel == rel and rel != float("inf") else float("inf")


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill with NaN, in place, so that any element the kernel fails to write fails the check."""
    return t.fill_(float("nan"))


@lru_cache(maxsize=1)
def _problem(shape: GemmShape, layout: str, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs and fp64-computed reference for one (shape, seed); kept for the next config of the same shape,
    since a sweep checks hundreds of configs on one shape and the reference is the costly part."""
    shape = GemmShape(shape.m, shape.n, shape.k, layout=layout, dtype=shape.dtype)
    a, b = make_inputs(shape, device, seed)
    return a, b, reference(a, b, layout)


def check_gemm(config: Mapping[str, int], shape: GemmShape, layout: str | None = None, device: str = "cuda",
               seed: int = 0, run: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object] | None = None
               ) -> str | None:
    """None when `config` computes `shape` correctly, else a short reason. Inputs are random normal
    drawn from `seed`, the output is poisoned with NaN first. `run(a, b, out)` replaces the kernel
    under test (default: this config's `gemm`); errors while running are reported, not raised."""
    layout = layout or shape.layout
    a, b, ref = _problem(shape, layout, str(device), seed)
    out = poison_(torch.empty((shape.m, shape.n), dtype=a.dtype, device=a.device))
    if run is None:
        return _verdict(lambda: gemm(a, b, config, layout=layout, out=out), out, ref)
    return _verdict(lambda: run(a, b, out), out, ref)


@lru_cache(maxsize=1)
def _attention_problem(shape: AttentionShape, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    """Q, K, V and the fp64-computed reference for one (shape, seed), kept for the next config (as `_problem`)."""
    q, k, v = attn.make_inputs(shape, device, seed)
    return q, k, v, attn.reference(q, k, v, shape.causal)


def check_attention(config: Mapping[str, int], shape: AttentionShape, device: str = "cuda", seed: int = 0,
                    run: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], object] | None = None
                    ) -> str | None:
    """None when `config` computes the attention forward of `shape` (causal as the shape says)
    correctly, else a short reason; as `check_gemm`, with `run(q, k, v, out)` replacing the kernel."""
    q, k, v, ref = _attention_problem(shape, str(device), seed)
    out = poison_(torch.empty_like(q))
    if run is None:
        return _verdict(lambda: attn.attention(q, k, v, config, causal=shape.causal, out=out), out, ref)
    return _verdict(lambda: run(q, k, v, out), out, ref)


@lru_cache(maxsize=1)
def _moe_problem(shape: MoeShape, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    """A, W, the routing and the fp64-computed reference for one (shape, seed), kept for the next config (as `_problem`)."""
    a, w, ids, weights = moe.make_inputs(shape, device, seed)
    return a, w, ids, weights, moe.reference(a, w, ids, weights, mul_weight=shape.gemm == "down")


def check_moe(config: Mapping[str, int], shape: MoeShape, device: str = "cuda", seed: int = 0,
              run: Callable[..., object] | None = None) -> str | None:
    """None when `config` computes `shape`'s MoE GEMM correctly (every routed row, the routing weight on the down
    GEMM), else a short reason; as `check_gemm`, with `run(a, w, topk_ids, topk_weights, out)` replacing the kernel."""
    a, w, ids, weights, ref = _moe_problem(shape, str(device), seed)
    out = poison_(torch.empty((shape.rows, shape.n), dtype=a.dtype, device=a.device))
    if run is None:
        return _verdict(lambda: moe.moe_gemm(a, w, ids, weights, config, mul_weight=shape.gemm == "down", out=out),
                        out, ref)
    return _verdict(lambda: run(a, w, ids, weights, out), out, ref)


@lru_cache(maxsize=1)
def _moe_fp8_problem(shape: MoeFp8Shape, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    """The FP8 layer's inputs and its dequantized fp32 reference for one (shape, seed), kept for the next config."""
    inputs = moe_fp8.make_inputs(shape, device, seed)
    return (*inputs, moe_fp8.reference(*inputs, shape))


def check_moe_fp8(config: Mapping[str, int], shape: MoeFp8Shape, device: str = "cuda", seed: int = 0) -> str | None:
    """None when `config` computes `shape`'s FP8 layer GEMM (activation quantization, then the GEMM) correctly, else
    a short reason. The reference multiplies the same FP8 values in fp64 (A quantized by torch as the kernel does,
    both operands dequantized), so the bound is bf16's (TOLERANCE): C is rounded once to bf16 as there (~2.3e-3
    RMS; the FP8 products are exact in the fp32 accumulator, and Hopper's FP8 MMA, which keeps fewer accumulator
    bits between its K steps, adds ~2^-13 per sum, far below it), and the kernel's quantization differs from
    torch's only where its fp32 division rounds the other way, one e4m3 step on a rare element. The
    quantization's own error (e4m3's 2^-4) is deliberately not compared: it is the format's, not the kernel's."""
    *inputs, ref = _moe_fp8_problem(shape, str(device), seed)
    out = poison_(torch.empty((shape.rows, shape.n), dtype=torch.bfloat16, device=ref.device))
    return _verdict(lambda: moe_fp8.layer(*inputs, config, shape, out=out), out, ref)


def _verdict(run: Callable[[], object], out: torch.Tensor, ref: torch.Tensor) -> str | None:
    """Runs `run` (which writes `out`) and compares `out` with `ref` under the dtype's TOLERANCE."""
    try:
        run()
        if out.is_cuda:
            torch.cuda.synchronize(out.device)
    except Exception as exc:  # a compile error, out of resources or a launch failure is a result here
        return f"run failed: {error_line(exc)}"
    rel = relative_error(out, ref)
    tol = TOLERANCE[out.dtype]
    if not rel <= tol:
        return f"reference check failed: rel err {rel:.3g} > {tol:g}"
    return None
