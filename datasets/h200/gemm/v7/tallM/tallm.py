"""Tall tiles of any multiple-of-8 height, the shape of cuBLAS's own Hopper tiles, from Triton's power-of-two
blocks.

cuBLAS runs the shapes where space 7 trails it most with tiles like 128x208, 128x216 or 128x272 on a 2x1 cluster
(`cublas_kernels.py` in ../skfirst). In row-major terms, a C tile 208 rows (along M) by 128 columns (along N): a
tile count that fills the SMs' waves (5311x1280: 26 x 10 = 260 tiles on 2 x 132 slots), where 128 or 256 rows
leave a wave part-empty. wgmma's N can be any multiple of 8 while its M is 64 per warpgroup, so the odd extent
goes in wgmma's N. This kernel therefore computes C's transpose, tile by tile: rows of the tile are C's columns
(BLOCK_R of N, B's rows, wgmma's M) and its columns are C's rows, in up to three parts W1 + W2 + W3 (each a power
of two; W1 ≥ W2 ≥ W3, e.g. 128 + 64 + 16 = 208), one fp32 accumulator and one A tile per part per K step, all fed
by the same B tile. The accumulators are stored into C through swapped strides. TMA loads (host descriptors),
one tile per program, SPLIT_K 1, B as [N, K], A as [M, K]. No cluster: Triton 3.6 has no multicast copy on sm_90,
so the tile pays its own operand traffic, about 8% more bytes per FLOP than 128x256.
"""

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from rooftune.hwprofiles import load_profile
from rooftune.kernels.gemm import _grouped_tile, _store_tile

SMS = load_profile("h200").sm_count  # the GPU these experiments ran on
PARTS = ((256, 16, 0), (256, 0, 0), (128, 64, 32), (128, 64, 16), (128, 64, 8), (128, 64, 0), (128, 32, 16),
         (128, 32, 8), (128, 32, 0), (128, 16, 0), (128, 128, 16), (128, 128, 0))


@triton.jit(do_not_specialize=["M", "GROUP"])
def tall_kernel(b_desc, a1_desc, a2_desc, a3_desc, c_ptr, M, N, K, stride_cm, stride_cn, GROUP,
                BLOCK_R: tl.constexpr, W1: tl.constexpr, W2: tl.constexpr, W3: tl.constexpr,
                BLOCK_K: tl.constexpr):
    # Tile (pid_r, pid_c) of C's transpose: rows r0 .. r0 + BLOCK_R of N, columns c0 .. c0 + W1 + W2 + W3 of M,
    # in the grouped order over (N, M).
    pid_r, pid_c = _grouped_tile(tl.program_id(0), N, M, GROUP, BLOCK_R, W1 + W2 + W3)
    r0 = pid_r * BLOCK_R
    c0 = pid_c * (W1 + W2 + W3)
    acc1 = tl.zeros((BLOCK_R, W1), dtype=tl.float32)
    if W2 > 0:
        acc2 = tl.zeros((BLOCK_R, W2), dtype=tl.float32)
    if W3 > 0:
        acc3 = tl.zeros((BLOCK_R, W3), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        b = b_desc.load([r0, kb * BLOCK_K])                                          # [BLOCK_R, BLOCK_K]
        acc1 = tl.dot(b, a1_desc.load([c0, kb * BLOCK_K]).T, acc1)                  # A rows [W1, BLOCK_K]
        if W2 > 0:
            acc2 = tl.dot(b, a2_desc.load([c0 + W1, kb * BLOCK_K]).T, acc2)
        if W3 > 0:
            acc3 = tl.dot(b, a3_desc.load([c0 + W1 + W2, kb * BLOCK_K]).T, acc3)
    # acc[i, j] is C[c0 + j, r0 + i]: stored with C's strides swapped, masked at N (rows) and M (columns).
    sr = tl.arange(0, BLOCK_R)
    rows_in = ((r0 + sr) < N)[:, None]
    s1 = tl.arange(0, W1)
    _store_tile(c_ptr, acc1, sr, s1, rows_in & ((c0 + s1) < M)[None, :], stride_cn, stride_cm, r0, c0)
    if W2 > 0:
        s2 = tl.arange(0, W2)
        _store_tile(c_ptr, acc2, sr, s2, rows_in & ((c0 + W1 + s2) < M)[None, :], stride_cn, stride_cm, r0,
                    c0 + W1)
    if W3 > 0:
        s3 = tl.arange(0, W3)
        _store_tile(c_ptr, acc3, sr, s3, rows_in & ((c0 + W1 + W2 + s3) < M)[None, :], stride_cn, stride_cm, r0,
                    c0 + W1 + W2)


def useful_share(m, n, w, block_r=128, slots=SMS):
    """C's elements over the waves' tile area (one CTA an SM): how well a height fills the SMs."""
    tiles = -(-n // block_r) * -(-m // w)
    return m * n / (-(-tiles // slots) * slots * block_r * w), tiles


def plans(m, n, count=4, block_r=128):
    """The `count` part splits whose heights best fill the waves (ties: the taller), with their tile counts."""
    scored = sorted(((useful_share(m, n, sum(p), block_r)[0], sum(p), p) for p in PARTS
                     if sum(p) <= max(64, -(-m // 8) * 8)), reverse=True)
    out, seen = [], set()
    for share, w, parts in scored:
        if w not in seen:
            seen.add(w)
            out.append(parts)
        if len(out) == count:
            break
    return out


def make_launcher(cfg, inputs, out):
    """launch(i) on input set i (A [M, K], B [N, K]); cfg: W1, W2, W3, BLOCK_R, BLOCK_K, GROUP, warps, stages."""
    a0, b0 = inputs[0]
    m, k = a0.shape
    n = b0.shape[0]
    br, bk = cfg["BLOCK_R"], cfg["BLOCK_K"]
    w1, w2, w3 = cfg["W1"], cfg["W2"], cfg["W3"]

    def descs(a, b):
        part = lambda w: TensorDescriptor(a, [m, k], [a.stride(0), 1], [max(w, 8), bk])
        return (TensorDescriptor(b, [n, k], [b.stride(0), 1], [br, bk]), part(w1), part(w2), part(w3))

    all_descs = [descs(a, b) for a, b in inputs]
    grid = (triton.cdiv(n, br) * triton.cdiv(m, w1 + w2 + w3),)
    consts = dict(BLOCK_R=br, W1=w1, W2=w2, W3=w3, BLOCK_K=bk, num_warps=cfg["num_warps"],
                  num_stages=cfg["num_stages"])
    g = tall_kernel[grid]

    def launch(i):
        g(*all_descs[i % len(all_descs)], out, m, n, k, out.stride(0), out.stride(1), cfg["GROUP"], **consts)
    return launch
