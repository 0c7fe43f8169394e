"""Stream-K with its partial tiles handed in first and summed last ("SK first, fix-up last"), on
kernels/gemm_v2.py's TMA tile loop.

v2/streamk/skexp.py runs the data-parallel tiles first and the stream-K iterations last, so every partial
tile's fix-up (the last contributor to arrive reads the others' fp32 partials and stores C) lies on the
critical path at the very end, with all SMs reading partials at once. Here each program runs three phases:

1. its even share of the stream-K tiles' K iterations: a piece that covers a whole tile is stored as C; a
   partial piece goes to the workspace (slot 2p, or 2p + 1 for a piece after the run's first), and the
   tile's arrival counter is bumped (release);
2. its data-parallel tiles, as the persistent schedule runs them;
3. the fix-up of each partial tile whose first piece it computed: wait for the tile's other contributors
   (acquire; they finished phase 1 a data-parallel tile ago, so the wait is normally already over), sum
   the pieces in program order, store C, reset the counter for the next launch.

The grid is the SMs times the CTAs that fit on one (every program resident, so a wait always ends).
PHASES (a bit mask of 1, 2, 4) lets Triton's interpreter, which runs programs one after another, check
phases 1-2 and phase 3 as two launches; the GPU runs all three in one (PHASES 7).
"""

import triton
import triton.language as tl

from rooftune.kernels import gemm_v2
from rooftune.kernels.gemm_v2 import _run_owner, _run_start, _store_tile, _tile_acc, _tile_coords


@triton.jit
def _slot(q, base, extra, first_it):
    # Program q's piece of the tile starting at iteration first_it: its first (slot 2q) unless its run
    # began in an earlier tile.
    return 2 * q + (_run_start(q, base, extra) < first_it).to(tl.int32)


@triton.jit(do_not_specialize=["M", "GROUP_M"])
def skf_kernel(a_src, b_src, c_ptr, ws_ptr, counts_ptr, M, N, K, stride_cm, stride_cn, GROUP_M,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B_NK: tl.constexpr,
               SK_WAVE: tl.constexpr, PHASES: tl.constexpr, FIX: tl.constexpr = 0, PIECE: tl.constexpr = 0,
               CHUNK: tl.constexpr = 16):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_blocks = tl.cdiv(K, BLOCK_K)
    tiles = num_pid_m * num_pid_n
    sk_tiles = tiles % programs
    if SK_WAVE:
        if sk_tiles > 0 and tiles - sk_tiles >= programs:
            sk_tiles += programs
    dp_tiles = tiles - sk_tiles
    total = sk_tiles * k_blocks
    base = total // programs
    extra = total % programs
    it_lo = _run_start(pid, base, extra)
    it_hi = it_lo + base + (pid < extra).to(tl.int32)
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tile_elems = BLOCK_M * BLOCK_N
    if PHASES & 1:
        it = it_lo
        while it < it_hi:
            t_rel = it // k_blocks
            kb_lo = it - t_rel * k_blocks
            kb_hi = min(k_blocks, kb_lo + it_hi - it)
            pid_m, pid_n = _tile_coords(dp_tiles + t_rel, num_pid_m, num_pid_n, GROUP_M)
            acc = _tile_acc(a_src, b_src, M, N, K, 0, 0, 0, 0, pid_m * BLOCK_M, pid_n * BLOCK_N, kb_lo, kb_hi,
                            BLOCK_M, BLOCK_N, BLOCK_K, B_NK, True)
            if (kb_lo == 0) & (kb_hi == k_blocks):
                _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N,
                            BLOCK_M, BLOCK_N)
            else:
                slot = 2 * pid + (it != it_lo).to(tl.int32)
                if PIECE == 0:
                    tl.store(ws_ptr + slot.to(tl.int64) * tile_elems + offs, acc)
                    # Every thread's piece is written before one thread's release bumps the counter.
                    tl.debug_barrier()
                    tl.atomic_add(counts_ptr + t_rel, 1, sem="release", scope="gpu")
                elif PIECE == 1:  # diagnostics (C wrong): the piece's sum only, so its loads and dots stay
                    tl.store(ws_ptr + slot.to(tl.int64) * tile_elems, tl.sum(acc))
                elif PIECE == 2:  # the fp32 store, no counter
                    tl.store(ws_ptr + slot.to(tl.int64) * tile_elems + offs, acc)
                else:  # a bf16 store, half the bytes, no counter
                    tl.store(ws_ptr.to(tl.pointer_type(tl.bfloat16)) + slot.to(tl.int64) * tile_elems + offs,
                             acc.to(tl.bfloat16))
            it += kb_hi - kb_lo
    if PHASES & 2:
        for tile in tl.range(pid, dp_tiles, programs, flatten=True):
            pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
            acc = _tile_acc(a_src, b_src, M, N, K, 0, 0, 0, 0, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, k_blocks,
                            BLOCK_M, BLOCK_N, BLOCK_K, B_NK, True)
            _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
    if (PHASES & 4) and FIX == 1:
        # Every contributor sums its share of the partial tile's row chunks (contributor j of n: chunks j,
        # j + n, ...); the last to leave resets both counters.
        it = it_lo
        while it < it_hi:
            t_rel = it // k_blocks
            kb_lo = it - t_rel * k_blocks
            kb_hi = min(k_blocks, kb_lo + it_hi - it)
            if (kb_lo > 0) | (kb_hi < k_blocks):
                first_it = t_rel * k_blocks
                first = _run_owner(first_it, base, extra)
                last = _run_owner(first_it + k_blocks - 1, base, extra)
                n = last - first + 1
                seen = tl.atomic_add(counts_ptr + t_rel, 0, sem="acquire", scope="gpu")
                while seen < n:
                    seen = tl.atomic_add(counts_ptr + t_rel, 0, sem="acquire", scope="gpu")
                pid_m, pid_n = _tile_coords(dp_tiles + t_rel, num_pid_m, num_pid_n, GROUP_M)
                rows = tl.arange(0, CHUNK)
                cols = tl.arange(0, BLOCK_N)
                for c in range(pid - first, BLOCK_M // CHUNK, n):
                    coffs = (c * CHUNK + rows)[:, None] * BLOCK_N + cols[None, :]
                    csum = tl.zeros((CHUNK, BLOCK_N), dtype=tl.float32)
                    for q in range(first, last + 1):
                        q_slot = _slot(q, base, extra, first_it)
                        csum += tl.load(ws_ptr + q_slot.to(tl.int64) * tile_elems + coffs, cache_modifier=".cg")
                    _store_tile(c_ptr, csum, M, N, stride_cm, stride_cn, pid_m * BLOCK_M + c * CHUNK,
                                pid_n * BLOCK_N, CHUNK, BLOCK_N)
                gone = tl.atomic_add(counts_ptr + tiles + t_rel, 1, sem="acq_rel", scope="gpu")
                if gone == n - 1:
                    tl.atomic_xchg(counts_ptr + t_rel, 0, sem="relaxed", scope="gpu")
                    tl.atomic_xchg(counts_ptr + tiles + t_rel, 0, sem="relaxed", scope="gpu")
            it += kb_hi - kb_lo
    if (PHASES & 4) and FIX == 0:
        # The partial tiles whose first iteration this run holds: the tile starting at or after it_lo,
        # and any later ones that start before it_hi, unless the run holds the whole tile.
        t_rel = tl.cdiv(it_lo, k_blocks)
        while t_rel * k_blocks < it_hi:
            first_it = t_rel * k_blocks
            if first_it + k_blocks > it_hi:
                last = _run_owner(first_it + k_blocks - 1, base, extra)
                n = last - pid + 1
                seen = tl.atomic_add(counts_ptr + t_rel, 0, sem="acquire", scope="gpu")
                while seen < n:
                    seen = tl.atomic_add(counts_ptr + t_rel, 0, sem="acquire", scope="gpu")
                tsum = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for q in range(pid, last + 1):
                    q_slot = _slot(q, base, extra, first_it)
                    # .cg: from L2, where the other SMs' pieces are, never a stale L1 line.
                    tsum += tl.load(ws_ptr + q_slot.to(tl.int64) * tile_elems + offs, cache_modifier=".cg")
                pid_m, pid_n = _tile_coords(dp_tiles + t_rel, num_pid_m, num_pid_n, GROUP_M)
                _store_tile(c_ptr, tsum, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N,
                            BLOCK_M, BLOCK_N)
                tl.atomic_xchg(counts_ptr + t_rel, 0, sem="relaxed", scope="gpu")
            t_rel += 1


def make_launcher(cfg, inputs, out, sk_wave, programs=None, phases=7, fix=0, piece=0):
    """launch(i) on input set i, and the program count: SMs × resident CTAs unless `programs` is given.
    `phases` other than 7 leave C wrong: they time a part of the schedule (diag.py)."""
    import torch
    a0, b0 = inputs[0]
    m, k = a0.shape
    n = b0.shape[0]
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    descs = [gemm_v2._descriptors(a, b, "nk", (m, n, k), cfg) for a, b in inputs]
    consts = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, B_NK=True, SK_WAVE=sk_wave, PHASES=phases, FIX=fix, PIECE=piece,
                  CHUNK=max(16, bm // 8),
                  num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    if programs is None:
        ws1 = torch.empty(1, dtype=torch.float32, device=out.device)
        c1 = torch.zeros(2, dtype=torch.int32, device=out.device)
        kern = skf_kernel.warmup(*descs[0], out, ws1, c1, m, n, k, out.stride(0), out.stride(1), cfg["GROUP_M"],
                                 grid=(1,), **consts)
        programs = torch.cuda.get_device_properties(out.device).multi_processor_count \
            * gemm_v2.resident_ctas(kern, out.device)
    programs = max(1, min(programs, tiles * triton.cdiv(k, bk)))
    ws = torch.empty((2 * programs, bm, bn), dtype=torch.float32, device=out.device)
    counts = torch.zeros(2 * tiles, dtype=torch.int32, device=out.device)
    g = skf_kernel[(programs,)]

    def launch(i):
        g(*descs[i % len(descs)], out, ws, counts, m, n, k, out.stride(0), out.stride(1), cfg["GROUP_M"], **consts)
    return launch, programs
