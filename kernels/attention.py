"""The Triton attention forward of the published space: O = softmax(Q Kᵀ · scale) V, causal or not, in ORDER.

One program per (batch·head, query block) on a 1-D grid of cdiv(seq, BLOCK_M)·batch·heads programs;
`_program_order` maps a program id to its pair as ORDER says (candidates/attention_space.py ORDERS,
the same dispatch order roofline/attention.py `program_sequence` models). Each program keeps fp32 O,
row max and row sum of its BLOCK_M queries and walks the key blocks with an online softmax in exp2
(scale·log2(e) folded into one multiplier). The walk is split in two loops: the key blocks every
query of the block sees whole (below the causal diagonal; without causal masking, every whole block)
load and score without any mask, and only the rest (the diagonal blocks; without causal masking the
last partial block) apply the causal and sequence-end masks. P is rounded to the input dtype before
PV, as in FlashAttention. The launch's num_stages reaches both loops: Triton 3.6 pipelines every loop
with the kernel's num_stages unless a `tl.range(num_stages=...)` overrides it (compiled for sm_90:
each loop gets num_stages K and V buffers, and the two loops share them). The row log-sum-exp is
written only on request (constexpr STORE_LSE, another binary); launchers and compiles leave it off.

Compile reuse: `seq` and `heads` are runtime integers Triton does not specialize on, so one binary per
(dtype, HEAD_DIM, CAUSAL, BLOCK_M, BLOCK_N, ORDER, num_warps, num_stages) serves every batch, heads and
sequence length of a `specialization_key`. Masks along keys and queries are per row, constant along
the contiguous head_dim, so an unspecialized seq costs the loads no vectorization. The strides keep
Triton's default specialization: for contiguous tensors the head_dim stride is 1 (a constant) and
every other stride is a multiple of head_dim >= 16, so the row starts are known 16-element aligned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

import torch
import triton
import triton.language as tl

from rooftune.candidates.shapes import AttentionShape
from rooftune.kernels.gemm import TORCH_DTYPES

HEAD_DIMS = (16, 32, 64, 128, 256)
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
LOG2E = math.log2(math.e)
# The reference's fp64 score tile stays near this many elements (128 MiB).
REFERENCE_CHUNK_ELEMS = 1 << 24
QKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@triton.jit
def _program_order(pid, n_qblocks, n_heads_total, ORDER: tl.constexpr):
    """(batch·head, query block) of program `pid`: ORDER bit 1 makes batch·head vary fastest across
    consecutive ids (else the query blocks of one head are consecutive); bit 0 visits query blocks
    last-to-first. Plain integer arithmetic, so `_program_order.fn` runs in Python too."""
    if ORDER & 2:
        bh = pid % n_heads_total
        qb = pid // n_heads_total
    else:
        bh = pid // n_qblocks
        qb = pid % n_qblocks
    if ORDER & 1:
        qb = n_qblocks - 1 - qb
    return bh, qb


@triton.jit
def _attn_blocks(acc, l_i, m_i, q, k_start, v_start, offs_m, start, stop, seq, qk_scale,
                 stride_kn, stride_kd, stride_vn, stride_vd,
                 HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    # Key blocks [start, stop) in steps of BLOCK_N; k_start and v_start point at key `start`. Each loop
    # builds its own pointer tiles: pointer tensors carried from one loop into the next came out in
    # another layout, and converting them (8 bytes an element) took a scratch buffer that pushed the
    # second loop's K/V buffers past the first's: shared memory over attention_smem_bytes (sm_90).
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    k_ptrs = k_start + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd                # [BLOCK_N, HEAD_DIM]
    v_ptrs = v_start + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
    for start_n in range(start, stop, BLOCK_N):
        if MASKED:
            in_seq = (start_n + offs_n) < seq
            k = tl.load(k_ptrs, mask=in_seq[:, None], other=0.0)                       # [BLOCK_N, HEAD_DIM]
        else:
            k = tl.load(k_ptrs)
        qk = tl.dot(q, tl.trans(k)) * qk_scale                                         # [BLOCK_M, BLOCK_N], log2 units
        if MASKED:
            if CAUSAL:
                # A query row sees keys up to itself; a valid row's own key is < seq, so this bounds it too.
                visible = offs_m[:, None] >= (start_n + offs_n)[None, :]
            else:
                visible = in_seq[None, :]
            qk = tl.where(visible, qk, float("-inf"))
        # Every row sees key start_n or an earlier block before its first fully masked one, so m_new is finite.
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs, mask=in_seq[:, None], other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
        k_ptrs += BLOCK_N * stride_kn
        v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["heads", "seq"])
def _attn_fwd(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    heads, seq, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ORDER: tl.constexpr,
    CAUSAL: tl.constexpr, STORE_LSE: tl.constexpr,
):
    n_qblocks = tl.cdiv(seq, BLOCK_M)
    bh, qb = _program_order(tl.program_id(0), n_qblocks, tl.num_programs(0) // n_qblocks, ORDER)
    b = (bh // heads).to(tl.int64)
    h = (bh % heads).to(tl.int64)
    # Block origins go into 64-bit base pointers; offsets inside a block stay 32-bit.
    m0 = qb * BLOCK_M
    sm = tl.arange(0, BLOCK_M)
    offs_m = m0 + sm
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = (q_ptr + b * stride_qb + h * stride_qh + m0.to(tl.int64) * stride_qm
              + sm[:, None] * stride_qm + offs_d[None, :] * stride_qd)                  # [BLOCK_M, HEAD_DIM]
    k_head = k_ptr + b * stride_kb + h * stride_kh
    v_head = v_ptr + b * stride_vb + h * stride_vh
    q = tl.load(q_ptrs, mask=(offs_m < seq)[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    # Whole key blocks every query of the block sees: below the diagonal (causal; m0 < seq) or all
    # whole blocks of the sequence; then the masked rest, up to the block's last query or seq.
    if CAUSAL:
        full_end = (m0 // BLOCK_N) * BLOCK_N
        end = tl.minimum(m0 + BLOCK_M, seq)
    else:
        full_end = (seq // BLOCK_N) * BLOCK_N
        end = seq
    acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_head, v_head, offs_m, 0, full_end, seq, qk_scale,
                                 stride_kn, stride_kd, stride_vn, stride_vd, HEAD_DIM, BLOCK_N, False, CAUSAL)
    rest = full_end.to(tl.int64)
    acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_head + rest * stride_kn, v_head + rest * stride_vn, offs_m,
                                 full_end, end, seq, qk_scale,
                                 stride_kn, stride_kd, stride_vn, stride_vd, HEAD_DIM, BLOCK_N, True, CAUSAL)

    in_seq = offs_m < seq
    o_ptrs = (o_ptr + b * stride_ob + h * stride_oh + m0.to(tl.int64) * stride_om
              + sm[:, None] * stride_om + offs_d[None, :] * stride_od)
    tl.store(o_ptrs, (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=in_seq[:, None])
    if STORE_LSE:
        # Natural-log log-sum-exp of the row's scaled scores: m_i and log2(l_i) are in log2 units.
        lse_ptrs = lse_ptr + bh.to(tl.int64) * seq + offs_m
        tl.store(lse_ptrs, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=in_seq)  # · ln(2)


def _dims(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int]:
    """(batch, heads, seq, head_dim) of Q, K, V; raises on anything the kernel cannot run."""
    for name, t in (("Q", q), ("K", k), ("V", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D [batch, heads, seq, head_dim], got {tuple(t.shape)}")
    if not q.shape == k.shape == v.shape:
        raise ValueError(f"Q, K and V shapes differ: {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"Q, K and V dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in DTYPES:
        raise ValueError(f"attention dtype must be one of {DTYPES}, got {q.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"Q, K and V devices differ: {q.device}, {k.device}, {v.device}")
    batch, heads, seq, head_dim = q.shape
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if min(batch, heads, seq) < 1:
        raise ValueError(f"batch, heads and seq must be >= 1, got {tuple(q.shape)}")
    return batch, heads, seq, head_dim


def _check_runnable(q: torch.Tensor) -> None:
    """CPU tensors only where the kernel is interpreted (a compiled Triton kernel needs a GPU)."""
    if q.device.type == "cpu" and isinstance(_attn_fwd, triton.runtime.JITFunction):
        raise ValueError("Q, K and V are on the CPU, where the kernel runs only in Triton's interpreter "
                         "(TRITON_INTERPRET=1 before triton is imported)")


def _check_out(out: torch.Tensor, q: torch.Tensor) -> None:
    if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(f"out must be {list(q.shape)} {q.dtype} on {q.device}, got {list(out.shape)} {out.dtype} "
                         f"on {out.device}")


def _lse_buffer(lse: torch.Tensor | None, q: torch.Tensor) -> torch.Tensor:
    """The row log-sum-exp output [batch, heads, seq] fp32 (contiguous), or a one-element stand-in
    that keeps the kernel's signature, and so its binary, the same with and without it."""
    if lse is None:
        return torch.empty((1,), dtype=torch.float32, device=q.device)
    if lse.shape != q.shape[:3] or lse.dtype != torch.float32 or lse.device != q.device or not lse.is_contiguous():
        raise ValueError(f"lse must be a contiguous {list(q.shape[:3])} float32 tensor on {q.device}, "
                         f"got {list(lse.shape)} {lse.dtype} on {lse.device}")
    return lse


def _scale(scale: float | None, head_dim: int) -> float:
    """The softmax scale, 1/sqrt(head_dim) by default."""
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def _launch_fn(config: Mapping[str, int], batch: int, heads: int, seq: int, head_dim: int, causal: bool,
               scale: float, store_lse: bool = False) -> Callable:
    """A function (q, k, v, out, lse) -> None that launches the attention forward."""
    bm = config["BLOCK_M"]
    kernel = _attn_fwd[(triton.cdiv(seq, bm) * batch * heads,)]
    constexprs = dict(HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=config["BLOCK_N"], ORDER=config["ORDER"],
                      CAUSAL=causal, STORE_LSE=store_lse,
                      num_warps=config["num_warps"], num_stages=config["num_stages"])
    qk_scale = scale * LOG2E

    def launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor) -> None:
        kernel(q, k, v, out, lse, *q.stride(), *k.stride(), *v.stride(), *out.stride(), heads, seq, qk_scale,
               **constexprs)

    return launch


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: Mapping[str, int], causal: bool = True,
              out: torch.Tensor | None = None, scale: float | None = None,
              lse: torch.Tensor | None = None) -> torch.Tensor:
    """O [batch, heads, seq, head_dim] = softmax(Q Kᵀ · scale) V in Q's dtype (fp32 accumulation),
    key j visible to query i only where j <= i when `causal`; scale defaults to 1/sqrt(head_dim).
    Any strides work (e.g. a [batch, seq, heads, head_dim] tensor transposed). When `lse` (fp32
    [batch, heads, seq]) is given, the row log-sum-exp of the scaled scores is written there too."""
    batch, heads, seq, head_dim = _dims(q, k, v)
    _check_runnable(q)
    if out is None:
        out = torch.empty_like(q)
    _check_out(out, q)
    run = _launch_fn(config, batch, heads, seq, head_dim, causal, _scale(scale, head_dim), store_lse=lse is not None)
    run(q, k, v, out, _lse_buffer(lse, q))
    return out


def make_launcher(config: Mapping[str, int], shape: AttentionShape, inputs: list[QKV], out: torch.Tensor,
                  scale: float | None = None) -> Callable[[int], None]:
    """`launch(i)` runs the attention of `shape` (its `causal`) on inputs[i % len(inputs)] into `out`.
    Everything is allocated here, so a launch neither allocates nor syncs the host (it can be captured
    in a CUDA graph); rotating input sets keeps memory-bound shapes from being timed out of L2."""
    if not inputs:
        raise ValueError("make_launcher needs at least one (q, k, v) input set")
    dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    for q, k, v in inputs:
        if _dims(q, k, v) != dims:
            raise ValueError(f"every input set must be {list(dims)} for {shape}, got {list(q.shape)}")
        _check_out(out, q)
    _check_runnable(out)
    lse = _lse_buffer(None, out)
    run = _launch_fn(config, *dims, shape.causal, _scale(scale, shape.head_dim))
    sets = list(inputs)

    def launch(i: int) -> None:
        q, k, v = sets[i % len(sets)]
        run(q, k, v, out, lse)

    return launch


def _shape_strides(shape: AttentionShape) -> tuple[int, int, int, int]:
    """Strides (batch, heads, seq, head_dim) of a contiguous [batch, heads, seq, head_dim] tensor."""
    return (shape.heads * shape.seq * shape.head_dim, shape.seq * shape.head_dim, shape.head_dim, 1)


def specialization_key(shape: AttentionShape) -> tuple:
    """Shapes with equal keys share compiled binaries (for one config). batch, heads and seq are not
    specialized; contiguous strides are 1 (head_dim) or multiples of head_dim, so they are divisible
    by 16 in every shape, and what selects a binary is: dtype, head_dim, causal, and which strides
    (or seq) reach 2**31 and are passed as int64."""
    stride_b, stride_h, _, _ = _shape_strides(shape)
    return (shape.dtype, shape.head_dim, shape.causal, stride_b >= 2**31, stride_h >= 2**31, shape.seq >= 2**31)


def warmup(shape: AttentionShape, config: Mapping[str, int], device: str = "cuda") -> float:
    """Compile, without launching, the kernel `config` needs for `shape`'s specialization; returns the
    seconds spent. Uses Triton's MockTensor (a dtype passed where a tensor goes), so it allocates nothing."""
    start = time.perf_counter()
    with torch.cuda.device(torch.device(device)):
        compile_kernels(shape, config)
    return time.perf_counter() - start


def compile_kernels(shape: AttentionShape, config: Mapping[str, int]) -> list:
    """[the one CompiledKernel] (`.asm`, `.metadata.shared`) a launch of `config` on contiguous Q, K, V of
    `shape` runs on the current device: `_launch_fn`'s arguments, with dtypes standing in for tensors
    and no log-sum-exp output (STORE_LSE=False, as in `make_launcher`)."""
    dtype = TORCH_DTYPES[shape.dtype]
    strides = _shape_strides(shape) * 4
    qk_scale = _scale(None, shape.head_dim) * LOG2E
    return [_attn_fwd.warmup(dtype, dtype, dtype, dtype, torch.float32, *strides, shape.heads, shape.seq, qk_scale,
                             HEAD_DIM=shape.head_dim, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"],
                             ORDER=config["ORDER"], CAUSAL=shape.causal, STORE_LSE=False,
                             num_warps=config["num_warps"], num_stages=config["num_stages"], grid=(1,))]


def make_inputs(shape: AttentionShape, device: str | torch.device, seed: int,
                dtype: torch.dtype | None = None) -> QKV:
    """Fresh standard-normal Q, K, V [batch, heads, seq, head_dim]."""
    dtype = dtype or TORCH_DTYPES[shape.dtype]
    gen = torch.Generator(device=device).manual_seed(seed)
    dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    q, k, v = (torch.randn(dims, generator=gen, device=device, dtype=dtype) for _ in range(3))
    return q, k, v


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
              scale: float | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ · scale) V computed in fp64 (immune to TF32 settings), returned as fp32
    [batch, heads, seq, head_dim]; the fp64 score tile is chunked over heads and query rows."""
    batch, heads, seq, head_dim = _dims(q, k, v)
    scale = _scale(scale, head_dim)
    qf, kf, vf = (t.reshape(batch * heads, seq, head_dim) for t in (q, k, v))
    out = torch.empty((batch * heads, seq, head_dim), dtype=torch.float32, device=q.device)
    rows = max(1, min(seq, REFERENCE_CHUNK_ELEMS // seq))
    group = max(1, REFERENCE_CHUNK_ELEMS // (rows * seq))
    keys = torch.arange(seq, device=q.device)
    for h0 in range(0, batch * heads, group):
        k64, v64 = kf[h0:h0 + group].double(), vf[h0:h0 + group].double()
        for r0 in range(0, seq, rows):
            r1 = min(seq, r0 + rows)
            stop = r1 if causal else seq  # under the mask no row of the chunk sees a key past r1
            s = (qf[h0:h0 + group, r0:r1].double() @ k64[:, :stop].transpose(1, 2)) * scale
            if causal:
                s = s.masked_fill(keys[None, :stop] > keys[r0:r1, None], float("-inf"))
            out[h0:h0 + group, r0:r1] = (torch.softmax(s, dim=-1) @ v64[:, :stop]).float()
    return out.reshape(batch, heads, seq, head_dim)
