"""Stream-K diagnostics: the v2 kernel's stream-K with knobs.

SK_WAVE 0: SK covers tiles % P tiles (today). 1: also one full wave more (the "two-tile SK + DP" hybrid),
  so each SK tile has 2-3 contributors instead of up to P / (tiles % P).
FIXUP 0: today's (last arriver sums every partial). 1: partial pieces stored, no sum (wrong result: cost
  of the reduce). 2: partial pieces dropped (wrong result). 3: wait-based parallel reduce: every
  contributor stores, arrives, spins until all have, then sums its share of row chunks and stores C.
"""
import os
import sys
import json
import time
import torch
import triton
import triton.language as tl

from rooftune.kernels import gemm_v2
from rooftune.kernels.gemm_v2 import _tile_coords, _tile_acc, _store_tile, _run_start, _run_owner, _fix_up


@triton.jit
def _reduce_wait(c_ptr, ws_ptr, counts_ptr, n_counts, acc, slot, t_rel, pid, iters, base, extra, M, N,
                 stride_cm, stride_cn, rm0, rn0, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 CHUNK: tl.constexpr):
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tile_elems = BLOCK_M * BLOCK_N
    tl.store(ws_ptr + slot.to(tl.int64) * tile_elems + offs, acc)
    tl.debug_barrier()
    first_it = t_rel * iters
    first = _run_owner(first_it, base, extra)
    last = _run_owner(first_it + iters - 1, base, extra)
    n = last - first + 1
    seen = tl.atomic_add(counts_ptr + t_rel, 1, sem="acq_rel", scope="gpu") + 1
    while seen < n:
        seen = tl.atomic_add(counts_ptr + t_rel, 0, sem="acq_rel", scope="gpu")
    j = pid - first
    rows = tl.arange(0, CHUNK)
    cols = tl.arange(0, BLOCK_N)
    for c in range(j, BLOCK_M // CHUNK, n):
        coffs = (c * CHUNK + rows)[:, None] * BLOCK_N + cols[None, :]
        total = tl.zeros((CHUNK, BLOCK_N), dtype=tl.float32)
        for q in range(first, last + 1):
            q_slot = 2 * q + (_run_start(q, base, extra) < first_it).to(tl.int32)
            total += tl.load(ws_ptr + q_slot.to(tl.int64) * tile_elems + coffs, cache_modifier=".cg")
        _store_tile(c_ptr, total, M, N, stride_cm, stride_cn, rm0 + c * CHUNK, rn0, CHUNK, BLOCK_N)
    gone = tl.atomic_add(counts_ptr + n_counts + t_rel, 1, sem="acq_rel", scope="gpu")
    if gone == n - 1:
        tl.atomic_xchg(counts_ptr + t_rel, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(counts_ptr + n_counts + t_rel, 0, sem="relaxed", scope="gpu")


@triton.jit(do_not_specialize=["M", "GROUP_M"])
def _sk_kernel(a_src, b_src, c_ptr, ws_ptr, counts_ptr, n_counts, M, N, K, stride_cm, stride_cn, GROUP_M,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B_NK: tl.constexpr,
               SK_WAVE: tl.constexpr, FIXUP: tl.constexpr, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_blocks = tl.cdiv(K, BLOCK_K)
    programs = tl.num_programs(0)
    tiles = num_pid_m * num_pid_n
    sk_tiles = tiles % programs
    if SK_WAVE:
        if sk_tiles > 0 and tiles - sk_tiles >= programs:
            sk_tiles += programs
    dp_tiles = tiles - sk_tiles
    for tile in tl.range(pid, dp_tiles, programs, flatten=True):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = _tile_acc(a_src, b_src, M, N, K, 0, 0, 0, 0, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_blocks,
                        BLOCK_M, BLOCK_N, BLOCK_K, B_NK, True)
        _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
    total = sk_tiles * k_blocks
    base = total // programs
    extra = total % programs
    it_lo = _run_start(pid, base, extra)
    it_hi = it_lo + base + (pid < extra).to(tl.int32)
    it = it_lo
    while it < it_hi:
        t_rel = it // k_blocks
        kb_lo = it - t_rel * k_blocks
        kb_hi = min(k_blocks, kb_lo + it_hi - it)
        pid_m, pid_n = _tile_coords(dp_tiles + t_rel, num_pid_m, num_pid_n, GROUP_M)
        acc = _tile_acc(a_src, b_src, M, N, K, 0, 0, 0, 0, pid_m * BLOCK_M, pid_n * BLOCK_N, kb_lo, kb_hi,
                        BLOCK_M, BLOCK_N, BLOCK_K, B_NK, True)
        if (kb_lo == 0) & (kb_hi == k_blocks):
            _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
        else:
            slot = 2 * pid + (it != it_lo).to(tl.int32)
            if FIXUP == 0:
                _fix_up(c_ptr, ws_ptr, counts_ptr, acc, slot, t_rel, k_blocks, base, extra, M, N,
                        stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
            elif FIXUP == 1:
                offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
                tl.store(ws_ptr + slot.to(tl.int64) * BLOCK_M * BLOCK_N + offs, acc)
            elif FIXUP == 3:
                _reduce_wait(c_ptr, ws_ptr, counts_ptr, n_counts, acc, slot, t_rel, pid, k_blocks, base, extra,
                             M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N, CHUNK)
        it += kb_hi - kb_lo


def make_launcher(cfg, inputs, out, sk_wave, fixup):
    a0, b0 = inputs[0]
    m, k = a0.shape
    n = b0.shape[0]
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    descs = [gemm_v2._descriptors(a, b, "nk", (m, n, k), cfg) for a, b in inputs]
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, B_NK=True, SK_WAVE=sk_wave, FIXUP=fixup,
                  CHUNK=max(16, bm // 8), num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    ws1 = torch.empty(1, dtype=torch.float32, device="cuda")
    c1 = torch.zeros(2, dtype=torch.int32, device="cuda")
    kern = _sk_kernel.warmup(*descs[0], out, ws1, c1, 1, m, n, k, out.stride(0), out.stride(1), cfg["GROUP_M"],
                             grid=(1,), **consts)
    p = torch.cuda.get_device_properties(0).multi_processor_count * gemm_v2.resident_ctas(kern, out.device)
    p = min(p, tiles * triton.cdiv(k, bk))
    ws = torch.empty((2 * p, bm, bn), dtype=torch.float32, device="cuda")
    counts = torch.zeros(2 * tiles, dtype=torch.int32, device="cuda")
    g = _sk_kernel[(p,)]

    def launch(i):
        g(*descs[i % len(descs)], out, ws, counts, tiles, m, n, k, out.stride(0), out.stride(1), cfg["GROUP_M"],
          **consts)
    return launch, p
