"""rooftune's Triton kernels as PyTorch ops: `matmul`, `linear` and `attention`.

Each kernel is one `torch.library` custom op (`rooftune::gemm`, `rooftune::attention`) with a fake
implementation for shape inference, so torch.compile keeps it as one opaque node and a CUDA graph
captures its launches. The op body asks a config resolver for the config of its shape on its device;
the tuner installs that resolver (`set_config_resolver`: cache, tune on first use, zero-trial pick),
so this module never imports the tuner. Where a tune timed the library's own op faster than its winner,
the resolver answers LIBRARY_ROUTE and the op runs torch.matmul or SDPA for that shape instead (tuner/pytorch/ops.py;
ROOFTUNE_KERNEL_ONLY=1 keeps the kernel). The user-facing functions check their inputs first: what the
kernels cannot run raises `UnsupportedInputError` naming the problem, or, with `fallback=True` (or
ROOFTUNE_FALLBACK=1), runs torch's own op instead. On the CPU the kernels run only in Triton's
interpreter (TRITON_INTERPRET=1 before triton is imported), bf16 there on fp32 copies (`interpreted_bf16`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F

from rooftune.candidates.families import LIBRARY_ROUTE
from rooftune.candidates.shapes import AttentionShape, GemmShape, ShapeError
from rooftune.environment import env_flag
from rooftune.kernels import attention as kattn
from rooftune.kernels import gemm as kgemm

TUNE_ENV = "ROOFTUNE_TUNE"
FALLBACK_ENV = "ROOFTUNE_FALLBACK"
# The dtypes the ops run; fp32 would run through TF32 dots, less precise than torch's fp32.
DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}
# torch >= 2.5's SDPA takes grouped K/V heads itself (`enable_gqa`).
SDPA_GQA = "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or "")
_FALLBACK_HINT = f"pass fallback=True (or set {FALLBACK_ENV}=1) to run torch's op instead"

# resolve(shape, device, tune) -> the config (a Mapping of kernel parameters) to run `shape` with, or
# LIBRARY_ROUTE: run the library's op (torch.matmul, SDPA), measured faster for this shape.
ConfigResolver = Callable[[object, torch.device, bool], Mapping[str, int] | str]
_resolver: ConfigResolver | None = None


class UnsupportedInputError(ValueError):
    """Inputs rooftune's kernels cannot run (a dtype, device, or shape they do not take)."""


def set_config_resolver(resolve: ConfigResolver) -> None:
    """Install the function the ops ask for a shape's config (tuner/pytorch/ops.py installs its `resolve_config`)."""
    global _resolver
    _resolver = resolve


def _config(shape, device: torch.device, tune: bool) -> Mapping[str, int] | str:
    if _resolver is None:
        raise RuntimeError("no config resolver installed: call rooftune.matmul / rooftune.linear / "
                           "rooftune.attention (the first access installs it)")
    return _resolver(shape, device, tune)


def interpreted_bf16(t: torch.Tensor) -> bool:
    """Whether `t` is bf16 on the CPU, where the kernels run in Triton's interpreter. Triton 3.6's
    interpreter keeps bf16 as its raw 16 bits and its `tl.dot` multiplies those bits as integers
    (InterpreterBuilder.create_dot): a bf16 GEMM there is garbage (errors of 1e11). So the ops run the
    kernel on fp32 copies there and round its result to bf16 once: the product of two bf16 values is exact
    in fp32 and the kernels accumulate in fp32 on the GPU too, so a GEMM is the GPU's but for the order of
    its sums (attention keeps its P in fp32, where the GPU rounds it to bf16: as accurate or more)."""
    return t.device.type == "cpu" and t.dtype == torch.bfloat16


def flag(value: bool | None, env: str) -> bool:
    """An explicit argument, else the environment variable (rooftune/environment.py `env_flag`: 1, true, yes or on;
    0, false, no or off; SettingError, naming it, for anything else)."""
    if value is not None:
        return bool(value)
    return env_flag(env)


# --- the custom ops -------------------------------------------------------------------------------------

@torch.library.custom_op("rooftune::gemm", mutates_args=())
def gemm_op(a: torch.Tensor, b: torch.Tensor, layout: str, tune: bool) -> torch.Tensor:
    """C [M, N] = A [M, K] @ B (contiguous, [K, N] for 'kn' or [N, K] for 'nk') with the resolved config,
    or with torch.matmul where the resolver routes the shape there."""
    m, n, k = kgemm.gemm_dims(a, b, layout)
    shape = GemmShape(m, n, k, layout=layout, dtype=DTYPE_NAMES[a.dtype])
    config = _config(shape, a.device, tune)
    if config == LIBRARY_ROUTE:
        return torch.matmul(a, b if layout == "kn" else b.t())
    if interpreted_bf16(a):  # .float() keeps B's storage order
        return kgemm.gemm(a.float(), b.float(), config, layout=layout).to(a.dtype)
    return kgemm.gemm(a, b, config, layout=layout)


@gemm_op.register_fake
def _gemm_fake(a, b, layout, tune):
    return a.new_empty((a.shape[0], b.shape[1] if layout == "kn" else b.shape[0]))


def _gemm_setup(ctx, inputs, output):
    a, b, layout, _ = inputs
    ctx.save_for_backward(a, b)
    ctx.layout = layout


def _gemm_backward(ctx, grad):
    """dA = dC Bᵀ, dB = Aᵀ dC, with torch's matmul (the kernels are forward only)."""
    a, b = ctx.saved_tensors
    b_kn = b if ctx.layout == "kn" else b.t()                                          # [K, N]
    grad_a = grad @ b_kn.t() if ctx.needs_input_grad[0] else None
    grad_b = None
    if ctx.needs_input_grad[1]:
        grad_b = a.t() @ grad                                                          # [K, N]
        grad_b = grad_b if ctx.layout == "kn" else grad_b.t()
    return grad_a, grad_b, None, None


gemm_op.register_autograd(_gemm_backward, setup_context=_gemm_setup)


def _attention_shape(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> AttentionShape:
    batch, heads, kv_heads, seq, head_dim = kattn.attention_dims(q, k, v)
    return AttentionShape(batch, heads, seq, head_dim, causal=causal, dtype=DTYPE_NAMES[q.dtype], kv_heads=kv_heads)


@torch.library.custom_op("rooftune::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None,
                 tune: bool) -> torch.Tensor:
    """O = softmax(Q Kᵀ · scale) V (kernels/attention.py) with the resolved config, or with SDPA where the
    resolver routes the shape there (its output in Q's layout, as the kernel's)."""
    config = _config(_attention_shape(q, k, v, causal), q.device, tune)
    if config == LIBRARY_ROUTE:
        out = _sdpa(q, k, v, causal, scale)
        return out if out.stride() == q.stride() else torch.empty_like(q).copy_(out)
    if interpreted_bf16(q):  # .float() keeps each tensor's strides, so the output's are Q's
        return kattn.attention(q.float(), k.float(), v.float(), config, causal=causal, scale=scale).to(q.dtype)
    return kattn.attention(q, k, v, config, causal=causal, scale=scale)


@attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, tune):
    return torch.empty_like(q)


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, scale, _ = inputs
    ctx.save_for_backward(q, k, v)
    ctx.causal, ctx.scale = causal, scale


def _attention_backward(ctx, grad):
    """The attention gradients recomputed in fp32 with torch from the whole score matrix (memory
    O(seq²) per head: a correct fallback, not a fast one; the kernels are forward only):
    P = softmax(S), dV = Pᵀ dO, dS = P ∘ (dO Vᵀ − rowsum(P ∘ dO Vᵀ)), dQ = dS K·scale, dK = dSᵀ Q·scale,
    K/V gradients summed over each K/V head's group of query heads."""
    q, k, v = ctx.saved_tensors
    batch, heads, kv_heads, seq, head_dim = kattn.attention_dims(q, k, v)
    group, scale = heads // kv_heads, kattn.softmax_scale(ctx.scale, head_dim)
    qf = q.float()
    kf, vf = (t.float().repeat_interleave(group, dim=1) for t in (k, v))               # [B, H, S, D]
    scores = (qf @ kf.transpose(-1, -2)) * scale                                       # [B, H, S, S]
    if ctx.causal:
        above = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(above, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    g = grad.float()
    dv = p.transpose(-1, -2) @ g
    dp = g @ vf.transpose(-1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdim=True))
    dq = (ds @ kf) * scale
    dk = (ds.transpose(-1, -2) @ qf) * scale

    def fold(t):  # [B, H, S, D] -> [B, KV, S, D]
        return t.reshape(batch, kv_heads, group, seq, head_dim).sum(2)

    return dq.to(q.dtype), fold(dk).to(k.dtype), fold(dv).to(v.dtype), None, None, None


attention_op.register_autograd(_attention_backward, setup_context=_attention_setup)


# --- what users call ------------------------------------------------------------------------------------

def _device_problem(names: str, *tensors: torch.Tensor) -> str | None:
    """Why the kernels cannot run on these tensors' device, or None; `names` names them ('a and b')."""
    device = tensors[0].device
    if any(t.device != device for t in tensors):
        return f"{names} are on different devices: {', '.join(str(t.device) for t in tensors)}"
    if device.type not in ("cuda", "cpu"):
        return f"{names} are on {device}; rooftune's kernels run on CUDA GPUs"
    if device.type == "cpu" and kgemm.compiled():  # compiled, not interpreted
        return (f"{names} are on the CPU, where the kernels run only in Triton's interpreter (TRITON_INTERPRET=1 "
                "before triton is imported)")
    return None


def _dtype_problem(*tensors: torch.Tensor) -> str | None:
    dtype = tensors[0].dtype
    if dtype not in DTYPE_NAMES or any(t.dtype != dtype for t in tensors):
        return (f"dtypes are {', '.join(str(t.dtype) for t in tensors)}; rooftune's kernels take bf16 or fp16 "
                f"(all inputs alike)")
    return None


def _gemm_problem(x: torch.Tensor, b_kn: torch.Tensor, names: tuple[str, str]) -> str | None:
    """Why x [..., K] @ b_kn [K, N] cannot run on the GEMM kernel, or None; `names` name the arguments."""
    if not isinstance(x, torch.Tensor) or not isinstance(b_kn, torch.Tensor):
        return f"{' and '.join(names)} must be tensors"
    if x.dim() < 1 or b_kn.dim() != 2:
        return f"{names[0]} must be [..., K] and {names[1]} 2-D, got {tuple(x.shape)} and {tuple(b_kn.shape)}"
    if x.shape[-1] != b_kn.shape[0]:
        return (f"inner dimensions differ: {names[0]} {tuple(x.shape)} has K = {x.shape[-1]}, {names[1]} "
                f"{tuple(b_kn.shape)} has K = {b_kn.shape[0]}")
    if x.numel() == 0 or b_kn.numel() == 0:
        return f"empty operands ({tuple(x.shape)}, {tuple(b_kn.shape)}): M, N and K must be >= 1"
    return (_dtype_problem(x, b_kn) or _device_problem(" and ".join(n.removesuffix(".T") for n in names), x, b_kn)
            or _shape_problem(lambda: GemmShape(x.numel() // x.shape[-1], b_kn.shape[1], b_kn.shape[0],
                                                dtype=DTYPE_NAMES[x.dtype])))


def _shape_problem(make: Callable[[], object]) -> str | None:
    """Why the shape `make()` builds is not one the kernels take (over a size limit: candidates/shapes.py), or None."""
    try:
        make()
    except ShapeError as exc:
        return str(exc)
    return None


def _refuse(op: str, why: str):
    raise UnsupportedInputError(f"rooftune.{op}: {why}; {_FALLBACK_HINT}")


def _library_routed(shape, device: torch.device, tune: bool, sizes) -> bool:
    """Whether the resolver sends `shape` to the library's op. Asked before the custom op, so that the library's op
    then runs as torch runs it (F.linear with its fused bias, SDPA in its own output layout) rather than inside
    the op, which must return the kernel's layout; where `sizes` are symbolic (torch.compile's dynamic shapes)
    the op decides inside, as it does for the kernel's config."""
    return not any(isinstance(s, torch.SymInt) for s in sizes) and _config(shape, device, tune) == LIBRARY_ROUTE


def _gemm(x: torch.Tensor, b_kn: torch.Tensor, tune: bool, library: Callable[[], torch.Tensor],
          bias: torch.Tensor | None = None) -> torch.Tensor:
    """x [..., K] @ b_kn [K, N] (+ bias [N]) -> [..., N]; B goes to the kernel in whichever storage order it has;
    `library()` computes the same (bias included) with torch's op, run where the resolver routes the shape there."""
    lead, (k, n) = x.shape[:-1], b_kn.shape
    a = x.reshape(-1, k)                                                               # [M, K]
    layout = "kn" if b_kn.is_contiguous() else "nk" if b_kn.t().is_contiguous() else None
    if _library_routed(GemmShape(a.shape[0], n, k, layout=layout or "kn", dtype=DTYPE_NAMES[x.dtype]), x.device,
                       tune, (a.shape[0], n, k)):
        return library()
    a = a.contiguous()
    if layout == "kn":
        out = gemm_op(a, b_kn, "kn", tune)
    elif layout == "nk":  # the transpose of a row-major [N, K] tensor, e.g. an nn.Linear weight
        out = gemm_op(a, b_kn.t(), "nk", tune)
    else:
        out = gemm_op(a, b_kn.contiguous(), "kn", tune)
    out = out.reshape(*lead, n)
    return out if bias is None else out + bias


def matmul(a: torch.Tensor, b: torch.Tensor, *, tune: bool | None = None, fallback: bool | None = None) -> torch.Tensor:
    """a [..., K] @ b [K, N] -> [..., N] on rooftune's GEMM (bf16 or fp16, fp32 accumulation). b may be
    the transpose of a row-major [N, K] tensor (read in place). `tune`: tune an uncached shape on first
    use (default: ROOFTUNE_TUNE); `fallback`: torch.matmul for inputs the kernel cannot run (default:
    ROOFTUNE_FALLBACK), else UnsupportedInputError."""
    tune, fallback = flag(tune, TUNE_ENV), flag(fallback, FALLBACK_ENV)  # a setting that is no boolean: refused
    why = _gemm_problem(a, b, ("a", "b"))
    if why is not None:
        if fallback:
            return torch.matmul(a, b)
        _refuse("matmul", why)
    return _gemm(a, b, tune, lambda: torch.matmul(a, b))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *, tune: bool | None = None,
           fallback: bool | None = None) -> torch.Tensor:
    """As torch.nn.functional.linear: x [..., K] @ weight [N, K]ᵀ (+ bias [N]) -> [..., N] on rooftune's
    GEMM; `tune` and `fallback` as in `matmul`."""
    tune, fallback = flag(tune, TUNE_ENV), flag(fallback, FALLBACK_ENV)
    why = _gemm_problem(x, weight.t() if isinstance(weight, torch.Tensor) and weight.dim() == 2 else weight,
                        ("x", "weight.T"))
    if why is None and bias is not None and (not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (weight.shape[0],)
                                             or bias.dtype != x.dtype or bias.device != x.device):
        why = (f"bias must be [{weight.shape[0]}] {x.dtype} on {x.device}, got "
               f"{tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__}")
    if why is not None:
        if fallback:
            return F.linear(x, weight, bias)
        _refuse("linear", why)
    return _gemm(x, weight.t(), tune, lambda: F.linear(x, weight, bias), bias)


def _attention_problem(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None) -> str | None:
    """Why the attention kernel cannot run these inputs, or None."""
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        return "q, k and v must be tensors"
    try:
        kattn.attention_dims(q, k, v)
        kattn.softmax_scale(scale, q.shape[-1])
    except ValueError as exc:
        return str(exc)
    if q.numel() == 0:
        return f"empty q {tuple(q.shape)}"
    return (_dtype_problem(q, k, v) or _device_problem("q, k and v", q, k, v)
            or _shape_problem(lambda: _attention_shape(q, k, v, bool(causal))))


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None) -> torch.Tensor:
    """PyTorch's attention; grouped K/V heads through `enable_gqa` (torch >= 2.5), which reads them in place,
    else repeated (a copy of K and V per call)."""
    grouped = q.dim() == k.dim() == v.dim() == 4 and k.shape[1] != q.shape[1]
    if grouped and SDPA_GQA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True)
    if grouped and k.shape[1] and q.shape[1] % k.shape[1] == 0:
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True, *, scale: float | None = None,
              tune: bool | None = None, fallback: bool | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ · scale) V for Q [batch, heads, seq, head_dim] and K, V [batch, kv_heads, seq, head_dim]
    (kv_heads dividing heads: grouped-query attention) on rooftune's attention kernel; key j visible to
    query i only where j <= i when `causal`; scale (> 0) defaults to 1/sqrt(head_dim). head_dim one of
    16, 32, 64, 128, 256; bf16 or fp16; Q, K, V of one sequence length. `tune` and `fallback` as in
    `matmul` (the fallback is torch's scaled_dot_product_attention)."""
    tune, fallback = flag(tune, TUNE_ENV), flag(fallback, FALLBACK_ENV)
    # Refused whatever `fallback` says: SDPA too returns NaN for it. Checked here, not in softmax_scale: the kernel
    # module's source digest keys every cached attention tune.
    if isinstance(scale, (int, float)) and not math.isfinite(scale):
        raise UnsupportedInputError(f"rooftune.attention: scale must be finite, got {scale} (every score would be "
                                    f"infinite: all NaN out, here or in torch's SDPA)")
    why = _attention_problem(q, k, v, causal, scale)
    if why is not None:
        if fallback:
            return _sdpa(q, k, v, causal, scale)
        _refuse("attention", why)
    if _library_routed(_attention_shape(q, k, v, bool(causal)), q.device, tune, q.shape):
        return _sdpa(q, k, v, bool(causal), scale)
    return attention_op(q, k, v, bool(causal), None if scale is None else float(scale), tune)
