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

Loads (constexpr TMA): pointer tiles, or host-built tensor descriptors [batch, heads, seq, head_dim]
for Q, K, V and O whose blocks the copy engine moves (Hopper's TMA; rows past seq read as zeros and
are not stored, so any seq works unmasked at the loads). Measured on an H200 (datasets/h200/attention/
README.md), TMA took the space's best from 0.81x to 0.92x the fastest SDPA backend. Grouped-query
attention: K and V have kv_heads heads, and query head h reads K/V head h // (heads // kv_heads).
The unmasked loop scales and subtracts the row max in one multiply-add (scale > 0 is required).

Compile reuse: `seq`, `heads` and the group size are runtime integers Triton does not specialize on
(nor the descriptors' shapes and strides), so one binary per (dtype, HEAD_DIM, CAUSAL, BLOCK_M,
BLOCK_N, ORDER, TMA, num_warps, num_stages) serves every batch, heads and sequence length of a
`specialization_key`. Masks along keys and queries are per row, constant along
the contiguous head_dim, so an unspecialized seq costs the loads no vectorization. The strides keep
Triton's default specialization: for contiguous tensors the head_dim stride is 1 (a constant) and
every other stride is a multiple of head_dim >= 16, so the row starts are known 16-element aligned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

import triton
import triton.language as tl
from triton.runtime.jit import MockTensor
from triton.tools.tensor_descriptor import TensorDescriptor

from rooftune.candidates.shapes import AttentionShape
from rooftune.kernels.gemm import TORCH_DTYPES, tma_ready
from rooftune.kernels.lazy import TRITON_DTYPES, torch

HEAD_DIMS = (16, 32, 64, 128, 256)
DTYPES = ("bf16", "fp16", "fp32")  # of the inputs; torch's names: TORCH_DTYPES
LOG2E = math.log2(math.e)
# The reference's fp64 score tile stays near this many elements (128 MiB).
REFERENCE_CHUNK_ELEMS = 1 << 24
QKV = tuple  # (Q, K, V): three torch tensors (an alias for annotations; torch loads on first use)


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
def _softmax_pv(acc, l_i, m_i, qk, v, offs_m, start_n, seq, qk_scale, BLOCK_N: tl.constexpr,
                MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """One key block's online-softmax update: raw scores qk [BLOCK_M, BLOCK_N] of keys start_n.., V rows."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    if MASKED:
        if CAUSAL:
            # A query row sees keys up to itself; a valid row's own key is < seq, so this bounds it too.
            visible = offs_m[:, None] >= offs_n[None, :]
        else:
            visible = (offs_n < seq)[None, :]
        qk = tl.where(visible, qk * qk_scale, float("-inf"))                          # log2 units
        # Every row sees key start_n or an earlier block before its first fully masked one: m_new is finite.
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
    else:
        # qk_scale > 0, so the row max of the raw scores scales to that of the scaled ones, and
        # scaling and subtracting the max is one fused multiply-add per score.
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def _attn_blocks(acc, l_i, m_i, q, k_src, v_src, b, hk, offs_m, start, stop, seq, qk_scale,
                 stride_kn, stride_kd, stride_vn, stride_vd,
                 HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                 TMA: tl.constexpr):
    # Key blocks [start, stop) in steps of BLOCK_N. With TMA, k_src and v_src are [batch, kv_heads, seq,
    # head_dim] tensor descriptors read at (b, hk, start_n, 0): the copy engine fills rows past seq with
    # zeros. Else they point at key `start` of the head, and each loop builds its own pointer tiles:
    # pointer tensors carried from one loop into the next came out in another layout, and converting
    # them (8 bytes an element) took a scratch buffer that pushed the second loop's K/V buffers past
    # the first's: shared memory over attention_smem_bytes (sm_90).
    offs_n = tl.arange(0, BLOCK_N)
    if not TMA:
        offs_d = tl.arange(0, HEAD_DIM)
        k_ptrs = k_src + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd          # [BLOCK_N, HEAD_DIM]
        v_ptrs = v_src + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
    for start_n in range(start, stop, BLOCK_N):
        in_seq = (start_n + offs_n) < seq
        if TMA:
            k = k_src.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        elif MASKED:
            k = tl.load(k_ptrs, mask=in_seq[:, None], other=0.0)                          # [BLOCK_N, HEAD_DIM]
        else:
            k = tl.load(k_ptrs)
        qk = tl.dot(q, tl.trans(k))                                                      # [BLOCK_M, BLOCK_N]
        if TMA:
            v = v_src.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        elif MASKED:
            v = tl.load(v_ptrs, mask=in_seq[:, None], other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc, l_i, m_i = _softmax_pv(acc, l_i, m_i, qk, v, offs_m, start_n, seq, qk_scale, BLOCK_N, MASKED, CAUSAL)
        if not TMA:
            k_ptrs += BLOCK_N * stride_kn
            v_ptrs += BLOCK_N * stride_vn
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["heads", "kv_group", "seq"])
def _attn_fwd(
    q_src, k_src, v_src, o_src, lse_ptr,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    heads, kv_group, seq, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ORDER: tl.constexpr,
    CAUSAL: tl.constexpr, STORE_LSE: tl.constexpr, TMA: tl.constexpr,
):
    # q_src, k_src, v_src, o_src: tensors, or with TMA [batch, heads (K, V: kv_heads), seq, head_dim]
    # tensor descriptors (then the strides are unused). Query head h reads K/V head h // kv_group.
    n_qblocks = tl.cdiv(seq, BLOCK_M)
    bh, qb = _program_order(tl.program_id(0), n_qblocks, tl.num_programs(0) // n_qblocks, ORDER)
    b = bh // heads
    h = bh % heads
    hk = h // kv_group
    m0 = qb * BLOCK_M
    sm = tl.arange(0, BLOCK_M)
    offs_m = m0 + sm
    offs_d = tl.arange(0, HEAD_DIM)
    in_seq = offs_m < seq
    if TMA:
        q = q_src.load([b, h, m0, 0]).reshape(BLOCK_M, HEAD_DIM)
        k_head = k_src
        v_head = v_src
    else:
        # Block origins go into 64-bit base pointers; offsets inside a block stay 32-bit.
        b64, h64, hk64 = b.to(tl.int64), h.to(tl.int64), hk.to(tl.int64)
        q_ptrs = (q_src + b64 * stride_qb + h64 * stride_qh + m0.to(tl.int64) * stride_qm
                  + sm[:, None] * stride_qm + offs_d[None, :] * stride_qd)              # [BLOCK_M, HEAD_DIM]
        k_head = k_src + b64 * stride_kb + hk64 * stride_kh
        v_head = v_src + b64 * stride_vb + hk64 * stride_vh
        q = tl.load(q_ptrs, mask=in_seq[:, None], other=0.0)

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
    acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_head, v_head, b, hk, offs_m, 0, full_end, seq, qk_scale,
                                 stride_kn, stride_kd, stride_vn, stride_vd, HEAD_DIM, BLOCK_N, False, CAUSAL, TMA)
    if not TMA:
        rest = full_end.to(tl.int64)
        k_head += rest * stride_kn
        v_head += rest * stride_vn
    acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_head, v_head, b, hk, offs_m, full_end, end, seq, qk_scale,
                                 stride_kn, stride_kd, stride_vn, stride_vd, HEAD_DIM, BLOCK_N, True, CAUSAL, TMA)

    o = (acc / l_i[:, None]).to(q.dtype)
    if TMA:
        o_src.store([b, h, m0, 0], o.reshape(1, 1, BLOCK_M, HEAD_DIM))  # rows past seq are not written
    else:
        o_ptrs = (o_src + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh + m0.to(tl.int64) * stride_om
                  + sm[:, None] * stride_om + offs_d[None, :] * stride_od)
        tl.store(o_ptrs, o, mask=in_seq[:, None])
    if STORE_LSE:
        # Natural-log log-sum-exp of the row's scaled scores: m_i and log2(l_i) are in log2 units.
        lse_ptrs = lse_ptr + bh.to(tl.int64) * seq + offs_m
        tl.store(lse_ptrs, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=in_seq)  # · ln(2)


def attention_dims(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int, int]:
    """(batch, heads, kv_heads, seq, head_dim) of Q [batch, heads, seq, head_dim] and K, V [batch, kv_heads,
    seq, head_dim] (grouped-query attention when kv_heads < heads); raises on anything the kernel cannot run."""
    for name, t in (("Q", q), ("K", k), ("V", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D [batch, heads, seq, head_dim], got {tuple(t.shape)}")
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    if not k.shape == v.shape or (k.shape[0], k.shape[2], k.shape[3]) != (batch, seq, head_dim):
        raise ValueError(f"Q, K and V shapes differ: {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"Q, K and V dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype not in [TORCH_DTYPES[d] for d in DTYPES]:
        raise ValueError(f"attention dtype must be one of {[TORCH_DTYPES[d] for d in DTYPES]}, got {q.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"Q, K and V devices differ: {q.device}, {k.device}, {v.device}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if min(batch, heads, seq) < 1:
        raise ValueError(f"batch, heads and seq must be >= 1, got {tuple(q.shape)}")
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"K and V heads ({kv_heads}) must divide Q's heads ({heads})")
    return batch, heads, kv_heads, seq, head_dim


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


def softmax_scale(scale: float | None, head_dim: int) -> float:
    """The softmax scale, 1/sqrt(head_dim) by default; it must be > 0 (the kernel scales row maxima)."""
    if scale is not None and not float(scale) > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def _descriptor(t, dims: tuple[int, ...], strides: tuple[int, ...], rows: int) -> TensorDescriptor:
    """A [batch, heads, seq, head_dim] descriptor whose block is `rows` rows of one head."""
    return TensorDescriptor(t, list(dims), list(strides), [1, 1, rows, dims[3]])


def _launch_fn(config: Mapping[str, int], dims: tuple[int, int, int, int, int], causal: bool, scale: float,
               store_lse: bool = False) -> tuple[Callable, Callable]:
    """(operands, launch) for the attention forward of `dims` (batch, heads, kv_heads, seq, head_dim):
    `operands(q, k, v, out)` -> the kernel's tensor arguments (with TMA: descriptors, built once per set),
    `launch(operands, lse)` runs the kernel."""
    batch, heads, kv_heads, seq, head_dim = dims
    bm, bn = config["BLOCK_M"], config["BLOCK_N"]
    tma = bool(config.get("TMA", 0))
    kernel = _attn_fwd[(triton.cdiv(seq, bm) * batch * heads,)]
    constexprs = dict(HEAD_DIM=head_dim, BLOCK_M=bm, BLOCK_N=bn, ORDER=config["ORDER"], CAUSAL=causal,
                      STORE_LSE=store_lse, TMA=tma,
                      num_warps=config["num_warps"], num_stages=config["num_stages"])
    tail = (heads, heads // kv_heads, seq, scale * LOG2E)

    def operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> tuple:
        tensors = (q, k, v, out)
        srcs = tuple(_descriptor(t, t.shape, t.stride(), rows) for t, rows in zip(tensors, (bm, bn, bn, bm))) \
            if tma else tensors
        return srcs, tuple(st for t in tensors for st in t.stride())

    def launch(args: tuple, lse: torch.Tensor) -> None:
        srcs, strides = args
        kernel(*srcs, lse, *strides, *tail, **constexprs)

    return operands, launch


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: Mapping[str, int], causal: bool = True,
              out: torch.Tensor | None = None, scale: float | None = None,
              lse: torch.Tensor | None = None) -> torch.Tensor:
    """O [batch, heads, seq, head_dim] = softmax(Q Kᵀ · scale) V in Q's dtype (fp32 accumulation),
    key j visible to query i only where j <= i when `causal`; scale (> 0) defaults to 1/sqrt(head_dim).
    K and V may have fewer heads (grouped-query attention): query head h reads K/V head
    h // (heads // kv_heads). Any strides work (e.g. a [batch, seq, heads, head_dim] tensor
    transposed); a TMA config on tensors descriptors cannot address (`tma_ready`) runs its pointer
    twin. When `lse` (fp32 [batch, heads, seq]) is given, the row log-sum-exp of the scaled scores is
    written there too."""
    dims = attention_dims(q, k, v)
    _check_runnable(q)
    if out is None:
        out = torch.empty_like(q)
    _check_out(out, q)
    scale = softmax_scale(scale, dims[4])
    if config.get("TMA", 0) and not tma_ready(q, k, v, out):
        config = {**config, "TMA": 0}
    operands, launch = _launch_fn(config, dims, causal, scale, store_lse=lse is not None)
    launch(operands(q, k, v, out), _lse_buffer(lse, q))
    return out


def make_launcher(config: Mapping[str, int], shape: AttentionShape, inputs: list[QKV], out: torch.Tensor,
                  scale: float | None = None) -> Callable[[int], None]:
    """`launch(i)` runs the attention of `shape` (its `causal`) on inputs[i % len(inputs)] into `out`.
    Everything is allocated here, so a launch neither allocates nor syncs the host (it can be captured
    in a CUDA graph); rotating input sets keeps memory-bound shapes from being timed out of L2."""
    if not inputs:
        raise ValueError("make_launcher needs at least one (q, k, v) input set")
    dims = _shape_dims(shape)
    for q, k, v in inputs:
        if attention_dims(q, k, v) != dims:
            raise ValueError(f"every input set must be Q {list(q.shape)} with {shape.kv_heads} K/V heads for "
                             f"{shape}, got Q {list(q.shape)}, K {list(k.shape)}")
        _check_out(out, q)
    _check_runnable(out)
    if config.get("TMA", 0) and not all(tma_ready(*qkv, out) for qkv in inputs):
        raise ValueError("a TMA config needs 16-byte aligned, row-contiguous Q, K, V and out")
    lse = _lse_buffer(None, out)
    operands, run = _launch_fn(config, dims, shape.causal, softmax_scale(scale, shape.head_dim))
    sets = [operands(q, k, v, out) for q, k, v in inputs]

    def launch(i: int) -> None:
        run(sets[i % len(sets)], lse)

    return launch


def _shape_dims(shape: AttentionShape) -> tuple[int, int, int, int, int]:
    return shape.batch, shape.heads, shape.kv_heads, shape.seq, shape.head_dim


def _shape_strides(shape: AttentionShape, heads: int) -> tuple[int, int, int, int]:
    """Strides (batch, heads, seq, head_dim) of a contiguous [batch, heads, seq, head_dim] tensor."""
    return (heads * shape.seq * shape.head_dim, shape.seq * shape.head_dim, shape.head_dim, 1)


def specialization_key(shape: AttentionShape) -> tuple:
    """Shapes with equal keys share compiled binaries (for one config). batch, heads, kv_heads and seq
    are not specialized (nor, with TMA, the descriptors' shapes and strides); contiguous strides are 1
    (head_dim) or multiples of head_dim, so they are divisible by 16 in every shape, and what selects a
    binary is: dtype, head_dim, causal, and which strides (or seq) reach 2**31 and are passed as int64."""
    q_b, q_h, _, _ = _shape_strides(shape, shape.heads)
    kv_b = _shape_strides(shape, shape.kv_heads)[0]
    return (shape.dtype, shape.head_dim, shape.causal, q_b >= 2**31, kv_b >= 2**31, q_h >= 2**31, shape.seq >= 2**31)


def warmup(shape: AttentionShape, config: Mapping[str, int], device: str = "cuda") -> float:
    """Compile, without launching, the kernel `config` needs for `shape`'s specialization; returns the
    seconds spent. Uses Triton's MockTensor (a dtype passed where a tensor goes), so it allocates nothing."""
    start = time.perf_counter()
    with torch.cuda.device(torch.device(device)):
        compile_kernels(shape, config)
    return time.perf_counter() - start


def compile_kernels(shape: AttentionShape, config: Mapping[str, int]) -> list:
    """[the one CompiledKernel] (`.asm`, `.metadata.shared`) a launch of `config` on contiguous Q, K, V of
    `shape` runs on the current device: `_launch_fn`'s arguments, with Triton's MockTensor (a dtype and
    a shape) standing in for tensors and no log-sum-exp output (STORE_LSE=False, as in `make_launcher`);
    Triton's dtypes, so that a compile worker never loads torch (kernels/lazy.py)."""
    dtype = TRITON_DTYPES[shape.dtype]
    bm, bn = config["BLOCK_M"], config["BLOCK_N"]
    q_dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    kv_dims = (shape.batch, shape.kv_heads, shape.seq, shape.head_dim)
    q_st, kv_st = _shape_strides(shape, shape.heads), _shape_strides(shape, shape.kv_heads)
    mocks = [(MockTensor(dtype, list(d)), d, st, rows)
             for d, st, rows in ((q_dims, q_st, bm), (kv_dims, kv_st, bn), (kv_dims, kv_st, bn), (q_dims, q_st, bm))]
    tma = bool(config.get("TMA", 0))
    srcs = [_descriptor(*m) if tma else m[0] for m in mocks]
    return [_attn_fwd.warmup(*srcs, MockTensor(tl.float32), *q_st, *kv_st, *kv_st, *q_st,
                             shape.heads, shape.heads // shape.kv_heads, shape.seq, softmax_scale(None, shape.head_dim) * LOG2E,
                             HEAD_DIM=shape.head_dim, BLOCK_M=bm, BLOCK_N=bn, ORDER=config["ORDER"],
                             CAUSAL=shape.causal, STORE_LSE=False, TMA=tma,
                             num_warps=config["num_warps"], num_stages=config["num_stages"], grid=(1,))]


def make_inputs(shape: AttentionShape, device: str | torch.device, seed: int,
                dtype: torch.dtype | None = None) -> QKV:
    """Fresh standard-normal Q [batch, heads, seq, head_dim] and K, V [batch, kv_heads, seq, head_dim]."""
    dtype = dtype or TORCH_DTYPES[shape.dtype]
    gen = torch.Generator(device=device).manual_seed(seed)
    return tuple(torch.randn((shape.batch, h, shape.seq, shape.head_dim), generator=gen, device=device, dtype=dtype)
                 for h in (shape.heads, shape.kv_heads, shape.kv_heads))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
              scale: float | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ · scale) V computed in fp64 (immune to TF32 settings), returned as fp32
    [batch, heads, seq, head_dim]; the fp64 score tile is chunked over heads and query rows. With fewer
    K/V heads (grouped-query attention), each K/V head is repeated for its group of query heads."""
    batch, heads, kv_heads, seq, head_dim = attention_dims(q, k, v)
    scale = softmax_scale(scale, head_dim)
    k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
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
