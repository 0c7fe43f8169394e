"""The GEMM's v2 variants: TMA loads, persistent tiles and a data-parallel + stream-K hybrid (the experiments
behind the space's TMA and PERSISTENT parameters, which kernels/gemm.py runs; stream-K is not in the space).

Two config keys select the variant on top of kernels/gemm.py's (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
SPLIT_K, num_warps, num_stages):

- `TMA` 0: pointer tiles as in kernels/gemm.py (rows past the edge wrap inside the tile, K masked,
  ALIGN_N/ALIGN_K hints). 1: A and B through host-built tensor descriptors (Hopper's copy engine;
  rows and columns past the edge read as zeros, so no masks); C is stored through pointers either way.
- `SCHEDULE` 0 (DATA_PARALLEL): one program per output tile (and K split), as today.
  1 (PERSISTENT): min(tiles, P) programs, P = SMs × resident CTAs per SM; program p walks tiles
  p, p + P, ... in GROUP_M order, the tile loop flattened with the K loop (`tl.range(flatten=True)`)
  so the next tile's loads are in flight during this tile's epilogue.
  2 (STREAM_K): P programs. The tiles of the full waves, tiles - tiles % P, run as in 1; the K
  iterations of the rest (tiles % P tiles, all of them when tiles < P) are split evenly over the P
  programs, each taking a contiguous run that may start and end inside a tile. A run that covers a
  tile whole stores it; a partial tile is fixed up without any waiting: each contributor writes its
  fp32 partial to its own workspace slot and bumps the tile's arrival counter (barrier, then an
  acq_rel atomic), and the contributor that arrives last sums the slots in program order, stores
  C and resets the counter to 0 for the next launch. The sum's order is fixed, so results are
  deterministic (bitwise equal run to run, though rounded differently from schedules 0 and 1), and
  no program waits for another, so there is no co-residency assumption and no deadlock.
  SPLIT_K > 1 only with SCHEDULE 0 (a split-K workspace and kernels/gemm.py's reduction).

`v2_legal` is the legality rule set (a pure function); `gemm_v2` runs one GEMM, `make_launcher`
builds a launch(i) for kernels/timing.py, `compile_kernels`/`warmup` compile without launching (for a
CompilePool, or for sm_90 on a machine without a GPU through kernels/prebuild.py `offline_target`).
First H200 run (datasets/h200/gemm/v2/bench_v2.py, 9 tiles a family: trial_run_bench_v2.json there):
every variant passed the reference check on 12 shapes; TMA persistent reached 0.98-1.02x cuBLAS on
the large shapes, stream-K did not lift the few-wave ones (1024x4608x3584: 0.69x, as persistent).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import torch
import triton
import triton.language as tl
from triton.runtime.jit import MockTensor
from triton.tools.tensor_descriptor import TensorDescriptor

from rooftune.candidates.attention_space import TMA_BARRIER_BYTES, TMA_MIN_CAPABILITY
from rooftune.candidates.gemm_space import TMA_STRIDE_BYTES, gemm_smem_bytes, persistent_epilogue_bytes
from rooftune.candidates.shapes import GemmShape
from rooftune.kernels.gemm import (
    REDUCE_BLOCK_M,
    REDUCE_BLOCK_N,
    REDUCE_NUM_WARPS,
    TORCH_DTYPES,
    _b_strides,
    _check_out,
    _dims,
    _multiple_of,
    _shape_strides,
    _splitk_reduce_kernel,
    alignments,
    resident_ctas,
    tma_ready,
)

DATA_PARALLEL, PERSISTENT, STREAM_K = 0, 1, 2
SCHEDULES = {DATA_PARALLEL: "data-parallel", PERSISTENT: "persistent", STREAM_K: "stream-K hybrid"}
V2_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K", "TMA", "SCHEDULE", "num_warps", "num_stages")


# --- the kernel ---------------------------------------------------------------------------------------

@triton.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M):
    # Grouped order (as kernels/gemm.py): GROUP_M tile rows sweep the tile columns together, so a
    # group's B tiles stay in L2; the last group may have fewer rows.
    group = tile // (GROUP_M * num_pid_n)
    first_m = group * GROUP_M
    rows = min(num_pid_m - first_m, GROUP_M)
    in_group = tile - group * GROUP_M * num_pid_n
    return first_m + in_group % rows, in_group // rows


@triton.jit
def _hint(x, ALIGN: tl.constexpr):
    # kernels/gemm.py's alignment hint: x, known to Triton as a multiple of ALIGN (1: nothing to say;
    # 16: Triton's own specialization says it already).
    if ALIGN > 1 and ALIGN < 16:
        x = _multiple_of(x, ALIGN)
    return x


@triton.jit
def _tile_acc(a_src, b_src, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, rm0, rn0, kb_lo, kb_hi,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B_NK: tl.constexpr,
              TMA: tl.constexpr):
    """fp32 A[rm0:, kb_lo·BLOCK_K : kb_hi·BLOCK_K] @ B[same K, rn0:] as a [BLOCK_M, BLOCK_N] tile."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TMA:
        # Descriptors A [M, K], B [N, K] or [K, N]: the copy engine zero-fills past M, N and K.
        for kb in range(kb_lo, kb_hi):
            a = a_src.load([rm0, kb * BLOCK_K])                                          # [BLOCK_M, BLOCK_K]
            if B_NK:
                acc = tl.dot(a, b_src.load([rn0, kb * BLOCK_K]).T, acc)
            else:
                acc = tl.dot(a, b_src.load([kb * BLOCK_K, rn0]), acc)
    else:
        # Pointer tiles as in kernels/gemm.py: rows (of A) and columns (of B) past the edge wrap inside
        # the tile, modulo the valid count, so only K is masked; the tile's origin and first K block
        # go into 64-bit base pointers, offsets inside the tile stay 32-bit, and the tile pointers
        # advance by one K block per step (which Triton's pipeliner multi-buffers).
        k0 = tl.cast(kb_lo, tl.int64) * BLOCK_K
        offs_k = tl.arange(0, BLOCK_K)
        wrap_m = tl.arange(0, BLOCK_M) % (M - rm0)
        wrap_n = tl.arange(0, BLOCK_N) % (N - rn0)
        a_tile = a_src + rm0.to(tl.int64) * stride_am + k0 * stride_ak \
            + (wrap_m * stride_am)[:, None] + (offs_k * stride_ak)[None, :]              # [BLOCK_M, BLOCK_K]
        b_origin = b_src + rn0.to(tl.int64) * stride_bn + k0 * stride_bk
        if B_NK:
            b_tile = b_origin + (wrap_n * stride_bn)[:, None] + (offs_k * stride_bk)[None, :]  # [BLOCK_N, BLOCK_K]
        else:
            b_tile = b_origin + (offs_k * stride_bk)[:, None] + (wrap_n * stride_bn)[None, :]  # [BLOCK_K, BLOCK_N]
        for kb in range(kb_lo, kb_hi):
            k_in = offs_k < K - kb * BLOCK_K
            a = tl.load(a_tile, mask=k_in[None, :], other=0.0)
            if B_NK:
                b = tl.trans(tl.load(b_tile, mask=k_in[None, :], other=0.0))
            else:
                b = tl.load(b_tile, mask=k_in[:, None], other=0.0)
            acc = tl.dot(a, b, acc)
            a_tile += BLOCK_K * stride_ak
            b_tile += BLOCK_K * stride_bk
    return acc


@triton.jit
def _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, rm0, rn0, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    sm = tl.arange(0, BLOCK_M)
    sn = tl.arange(0, BLOCK_N)
    mask = ((rm0 + sm) < M)[:, None] & ((rn0 + sn) < N)[None, :]
    c_ptrs = c_ptr + rm0.to(tl.int64) * stride_cm + rn0 * stride_cn + sm[:, None] * stride_cm + sn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _run_start(p, base, extra):
    # Stream-K: program p's first iteration when `base`·P + `extra` iterations are split evenly
    # (the first `extra` programs take one more).
    return p * base + min(p, extra)


@triton.jit
def _run_owner(it, base, extra):
    # The program whose run holds stream-K iteration `it` (the inverse of _run_start).
    long_runs = extra * (base + 1)
    return tl.where(it < long_runs, it // (base + 1), extra + (it - long_runs) // tl.maximum(base, 1))


@triton.jit
def _fix_up(c_ptr, ws_ptr, counts_ptr, acc, slot, t_rel, iters, base, extra, M, N, stride_cm, stride_cn,
            rm0, rn0, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Hand in a partial tile (slot `slot` of the workspace); the last of the tile's contributors to
    arrive sums them all in program order and stores C."""
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tile_elems = BLOCK_M * BLOCK_N
    tl.store(ws_ptr + slot.to(tl.int64) * tile_elems + offs, acc)
    # Every thread's partial is written before one thread's release bumps the counter.
    tl.debug_barrier()
    arrived = tl.atomic_add(counts_ptr + t_rel, 1, sem="acq_rel", scope="gpu")
    first_it = t_rel * iters
    first = _run_owner(first_it, base, extra)
    last = _run_owner(first_it + iters - 1, base, extra)
    if arrived == last - first:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for q in range(first, last + 1):
            # Program q's piece of this tile is its first (slot 2q) unless its run began in an earlier tile.
            q_slot = 2 * q + (_run_start(q, base, extra) < first_it).to(tl.int32)
            # .cg: read from L2, where the other SMs' writes are, never from a stale L1 line.
            total += tl.load(ws_ptr + q_slot.to(tl.int64) * tile_elems + offs, cache_modifier=".cg")
        _store_tile(c_ptr, total, M, N, stride_cm, stride_cn, rm0, rn0, BLOCK_M, BLOCK_N)
        tl.store(counts_ptr + t_rel, 0)  # ready for the next launch


@triton.jit(do_not_specialize=["M", "GROUP_M", "SPLIT_K"])
def _gemm_v2_kernel(
    a_src, b_src, c_ptr, ws_ptr, counts_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    GROUP_M, SPLIT_K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B_NK: tl.constexpr,
    ALIGN_N: tl.constexpr, ALIGN_K: tl.constexpr, TMA: tl.constexpr, SCHEDULE: tl.constexpr,
):
    # a_src, b_src: A and B, or with TMA their tensor descriptors (then the A and B strides are unused).
    # Alignment hints as in kernels/gemm.py: the host guarantees what ALIGN_K and ALIGN_N claim of
    # K, N and the row strides along them (A's and, for 'nk', B's along K; C's and, for 'kn', B's along N).
    K = _hint(K, ALIGN_K)
    N = _hint(N, ALIGN_N)
    stride_am = _hint(stride_am, ALIGN_K)
    stride_cm = _hint(stride_cm, ALIGN_N)
    stride_bn = _hint(stride_bn, ALIGN_K if B_NK else 1)
    stride_bk = _hint(stride_bk, 1 if B_NK else ALIGN_N)
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_blocks = tl.cdiv(K, BLOCK_K)
    if SCHEDULE == 0:
        # One tile per program; split pid_k's contiguous run of K blocks (the last splits may get none).
        pid_k = tl.program_id(1)
        pid_m, pid_n = _tile_coords(pid, num_pid_m, num_pid_n, GROUP_M)
        blocks_per_split = tl.cdiv(k_blocks, SPLIT_K)
        kb_lo = pid_k * blocks_per_split
        kb_hi = min(kb_lo + blocks_per_split, k_blocks)
        acc = _tile_acc(a_src, b_src, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m * BLOCK_M,
                        pid_n * BLOCK_N, kb_lo, kb_hi, BLOCK_M, BLOCK_N, BLOCK_K, B_NK, TMA)
        if SPLIT_K == 1:
            _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
        else:
            # Workspace [SPLIT_K, M, N] fp32, contiguous; kernels/gemm.py's reduction sums it.
            _store_tile(ws_ptr + pid_k.to(tl.int64) * M * N, acc, M, N, N, 1, pid_m * BLOCK_M, pid_n * BLOCK_N,
                        BLOCK_M, BLOCK_N)
    else:
        programs = tl.num_programs(0)
        tiles = num_pid_m * num_pid_n
        # Persistent: every tile here. Stream-K: the full waves here, the rest below.
        dp_tiles = tiles if SCHEDULE == 1 else tiles - tiles % programs
        for tile in tl.range(pid, dp_tiles, programs, flatten=True):
            pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
            acc = _tile_acc(a_src, b_src, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m * BLOCK_M,
                            pid_n * BLOCK_N, 0, k_blocks, BLOCK_M, BLOCK_N, BLOCK_K, B_NK, TMA)
            _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
        if SCHEDULE == 2:
            # This program's even share [it_lo, it_hi) of the remaining tiles' K iterations.
            total = (tiles - dp_tiles) * k_blocks
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
                acc = _tile_acc(a_src, b_src, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m * BLOCK_M,
                                pid_n * BLOCK_N, kb_lo, kb_hi, BLOCK_M, BLOCK_N, BLOCK_K, B_NK, TMA)
                if (kb_lo == 0) & (kb_hi == k_blocks):
                    _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N,
                                BLOCK_M, BLOCK_N)
                else:
                    slot = 2 * pid + (it != it_lo).to(tl.int32)  # this run's first or last piece
                    _fix_up(c_ptr, ws_ptr, counts_ptr, acc, slot, t_rel, k_blocks, base, extra, M, N,
                            stride_cm, stride_cn, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
                it += kb_hi - kb_lo


# --- legality -----------------------------------------------------------------------------------------

def v2_smem_bytes(config: Mapping[str, int], n: int, elem_bytes: int = 2) -> int:
    """Shared memory of a config for N columns, bytes (an upper bound; Triton 3.6, sm_90, compiled on the
    CPU in tests/kernels/test_gemm_v2.py): kernels/gemm.py's pipelined operand tiles (`gemm_smem_bytes`),
    plus TMA_BARRIER_BYTES with TMA, plus for persistent and stream-K launches the epilogue's
    conversion of the C tile through shared memory, which there comes on top because the flattened
    loop keeps the next tile's operand buffers live through it (the space's
    `persistent_epilogue_bytes`: at most the whole tile, and when C's rows are 16-byte aligned at most
    2,048 elements per warp; the largest seen: 32 KiB at 8 warps, 16 KiB at 4)."""
    operands = int(gemm_smem_bytes({**config, "TMA": 0}, elem_bytes))  # the barriers are counted below
    epilogue = int(persistent_epilogue_bytes({**config, "PERSISTENT": int(config["SCHEDULE"] != DATA_PARALLEL)},
                                             elem_bytes, n, tma_store=False))
    return operands + epilogue + TMA_BARRIER_BYTES * config["TMA"]


def tma_rows_aligned(n: int, k: int, layout: str, elem_bytes: int = 2) -> bool:
    """Whether descriptors can address contiguous A [M, K] and B ([K, N] or [N, K]): their row strides,
    K and (for 'kn') N elements, are multiples of TMA_STRIDE_BYTES."""
    rows = (k, n) if layout == "kn" else (k,)
    return all(r * elem_bytes % TMA_STRIDE_BYTES == 0 for r in rows)


def v2_legal(m: int, n: int, k: int, layout: str, config: Mapping[str, int], smem_limit_bytes: int, *,
             capability: tuple[int, int] = TMA_MIN_CAPABILITY, elem_bytes: int = 2) -> str | None:
    """Why `config` cannot run C[M, N] = A @ B (B stored `layout`) on a GPU of compute `capability`
    with `smem_limit_bytes` of shared memory per block, or None when it can. bf16 by default."""
    missing = [key for key in V2_KEYS if key not in config]
    if missing:
        return f"config lacks {', '.join(missing)}"
    if min(m, n, k) < 1:
        return f"M, N and K must be >= 1, got {m}x{n}x{k}"
    if layout not in ("kn", "nk"):
        return f"layout must be 'kn' or 'nk', got {layout!r}"
    if config["TMA"] not in (0, 1):
        return f"TMA must be 0 or 1, got {config['TMA']}"
    if config["SCHEDULE"] not in SCHEDULES:
        return f"SCHEDULE must be one of {sorted(SCHEDULES)}, got {config['SCHEDULE']}"
    blocks = [config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K")]
    if any(b < 16 or b & (b - 1) for b in blocks):
        return f"block sizes must be powers of two >= 16, got {'x'.join(map(str, blocks))}"
    if config["SPLIT_K"] < 1 or (config["SPLIT_K"] > 1 and config["SCHEDULE"] != DATA_PARALLEL):
        return "SPLIT_K > 1 needs SCHEDULE 0 (data-parallel)"
    if config["TMA"] and tuple(capability) < TMA_MIN_CAPABILITY:
        return "TMA needs compute capability 9.0"
    if config["TMA"] and not tma_rows_aligned(n, k, layout, elem_bytes):
        return f"TMA needs {TMA_STRIDE_BYTES}-byte aligned rows: K{' and N' if layout == 'kn' else ''} " \
               f"a multiple of {TMA_STRIDE_BYTES // elem_bytes}"
    smem = v2_smem_bytes(config, n, elem_bytes)
    if smem > smem_limit_bytes:
        return f"shared memory {smem} B over the {smem_limit_bytes} B per-block limit"
    return None


# --- launching ----------------------------------------------------------------------------------------

def _constexprs(config: Mapping[str, int], layout: str, align_n: int, align_k: int) -> dict:
    return dict(BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], BLOCK_K=config["BLOCK_K"], B_NK=layout == "nk",
                ALIGN_N=align_n, ALIGN_K=align_k, TMA=bool(config["TMA"]), SCHEDULE=config["SCHEDULE"],
                num_warps=config["num_warps"], num_stages=config["num_stages"])


def _descriptors(a, b, layout: str, dims: tuple[int, int, int], config: Mapping[str, int]) -> tuple:
    """Tensor descriptors of A [M, K] and B ([K, N] or [N, K]) with one tile per block; a and b may be
    Triton MockTensors (for a compile without tensors), so the row strides come from `dims`."""
    m, n, k = dims
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    b_desc = TensorDescriptor(b, [k, n], [n, 1], [bk, bn]) if layout == "kn" else \
        TensorDescriptor(b, [n, k], [k, 1], [bn, bk])
    return TensorDescriptor(a, [m, k], [k, 1], [bm, bk]), b_desc


def _operands(a: torch.Tensor, b: torch.Tensor, layout: str, dims: tuple[int, int, int],
              config: Mapping[str, int]) -> tuple:
    """The kernel's (a_src, b_src): the tensors, or with TMA their descriptors."""
    if not config["TMA"]:
        return a, b
    if not (a.is_contiguous() and b.is_contiguous() and tma_ready(a, b)):
        raise ValueError("a TMA config needs contiguous A and B with 16-byte aligned rows (v2_legal)")
    return _descriptors(a, b, layout, dims, config)


def tiles(m: int, n: int, config: Mapping[str, int]) -> int:
    """Output tiles of C [M, N]."""
    return triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"])


def grid_of(config: Mapping[str, int], m: int, n: int, k: int, programs: int) -> tuple[int, ...]:
    """The launch grid: (tiles, SPLIT_K) for data-parallel; for persistent min(tiles, programs); for
    stream-K `programs`, but never more than there are K iterations in all."""
    if config["SCHEDULE"] == DATA_PARALLEL:
        return tiles(m, n, config), config["SPLIT_K"]
    if config["SCHEDULE"] == PERSISTENT:
        return (min(tiles(m, n, config), programs),)
    return (min(programs, tiles(m, n, config) * triton.cdiv(k, config["BLOCK_K"])),)


def _buffers(config: Mapping[str, int], m: int, n: int, grid: tuple[int, ...],
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(fp32 workspace, int32 arrival counters): [SPLIT_K, M, N] for split-K; for stream-K two partial
    tiles per program and one counter per stream-K tile (zeroed once: the kernel leaves them at 0);
    else one-element stand-ins, so that the kernel's signature stays the same."""
    ws_shape, counts = (1,), 1
    if config["SCHEDULE"] == DATA_PARALLEL and config["SPLIT_K"] > 1:
        ws_shape = (config["SPLIT_K"], m, n)
    elif config["SCHEDULE"] == STREAM_K:
        ws_shape = (2 * grid[0], config["BLOCK_M"], config["BLOCK_N"])
        counts = max(1, tiles(m, n, config) % grid[0])
    return (torch.empty(ws_shape, dtype=torch.float32, device=device),
            torch.zeros(counts, dtype=torch.int32, device=device))


def _programs(config: Mapping[str, int], num_sms: int | None, device: torch.device, compile_one: Callable) -> int:
    """P, the programs a persistent or stream-K launch keeps resident: num_sms (default: the GPU's)
    × the compiled kernel's CTAs per SM; in the interpreter (no binary) num_sms, which must be given."""
    if config["SCHEDULE"] == DATA_PARALLEL:
        return 0
    if device.type != "cuda":
        if num_sms is None:
            raise ValueError("num_sms is needed for a persistent or stream-K launch without a GPU")
        return num_sms
    sms = num_sms if num_sms is not None else torch.cuda.get_device_properties(device).multi_processor_count
    return sms * resident_ctas(compile_one(), device)


def _prepare(config: Mapping[str, int], layout: str, inputs: list[tuple[torch.Tensor, torch.Tensor]],
             out: torch.Tensor, num_sms: int | None) -> Callable[[int], None]:
    """launch(i) on inputs[i % len(inputs)] (see make_launcher)."""
    if config["SPLIT_K"] > 1 and config["SCHEDULE"] != DATA_PARALLEL:
        raise ValueError("SPLIT_K > 1 needs SCHEDULE 0 (data-parallel)")
    # One binary and one grid serve every pair: one shape, dtype, device and set of strides.
    kinds = {(_dims(a, b, layout), a.dtype, a.device, a.stride(), _b_strides(b, layout)) for a, b in inputs}
    if len(kinds) != 1:
        raise ValueError(f"all input pairs must have one shape, dtype and strides, got {sorted(map(str, kinds))}")
    (m, n, k), _, _, a_strides, b_strides = kinds.pop()
    _check_out(out, inputs[0][0], m, n)
    strides = (*a_strides, *b_strides, *out.stride())
    align_n, align_k = alignments(layout, n, k, strides)
    constexprs = _constexprs(config, layout, align_n, align_k)
    tail = (m, n, k, *strides, config["GROUP_M"], config["SPLIT_K"])
    sets = [_operands(a, b, layout, (m, n, k), config) for a, b in inputs]

    def compile_one():  # the binary (buffers of any size select the same one), for its occupancy
        ws_any, counts_any = torch.empty(1, dtype=torch.float32, device=out.device), torch.zeros(1, dtype=torch.int32,
                                                                                                device=out.device)
        return _gemm_v2_kernel.warmup(*sets[0], out, ws_any, counts_any, *tail, grid=(1,), **constexprs)

    grid = grid_of(config, m, n, k, _programs(config, num_sms, out.device, compile_one))
    ws, counts = _buffers(config, m, n, grid, out.device)
    kernel = _gemm_v2_kernel[grid]
    split = config["SPLIT_K"]
    reduce_kernel = _splitk_reduce_kernel[(triton.cdiv(m, REDUCE_BLOCK_M), triton.cdiv(n, REDUCE_BLOCK_N))]

    def launch(i: int) -> None:
        kernel(*sets[i % len(sets)], out, ws, counts, *tail, **constexprs)
        if split > 1:
            reduce_kernel(ws, out, m, n, out.stride(0), out.stride(1), split, BLOCK_M=REDUCE_BLOCK_M,
                          BLOCK_N=REDUCE_BLOCK_N, ALIGN_N=align_n, num_warps=REDUCE_NUM_WARPS)

    return launch


def gemm_v2(a: torch.Tensor, b: torch.Tensor, config: Mapping[str, int], layout: str = "kn",
            num_sms: int | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """C[M, N] = A[M, K] @ B in A's dtype (fp32 accumulation); B is [K, N] ('kn') or [N, K] ('nk').
    Persistent and stream-K launches keep num_sms (default: the GPU's SMs) × resident CTAs programs."""
    m, n, _ = _dims(a, b, layout)
    if out is None:
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    _prepare(config, layout, [(a, b)], out, num_sms)(0)
    return out


def make_launcher(config: Mapping[str, int], layout: str, inputs: list[tuple[torch.Tensor, torch.Tensor]],
                  out: torch.Tensor, num_sms: int | None = None) -> Callable[[int], None]:
    """`launch(i)` runs the GEMM on inputs[i % len(inputs)] into `out`, as kernels/gemm.py's. Buffers,
    descriptors (built once per input set) and the grid are made here, so a launch neither allocates
    nor syncs the host and can be captured in a CUDA graph (the stream-K counters reset themselves)."""
    if not inputs:
        raise ValueError("make_launcher needs at least one (a, b) input pair")
    return _prepare(config, layout, list(inputs), out, num_sms)


# --- compiling without launching ----------------------------------------------------------------------

def compile_kernels(shape: GemmShape, config: Mapping[str, int]) -> list:
    """The compiled kernels (`.asm`, `.metadata.shared`) a launch of `config` on contiguous inputs of
    `shape` uses, on the current device (or an `offline_target`), with Triton's MockTensor for tensors."""
    dtype = TORCH_DTYPES[shape.dtype]
    m, n, k = shape.m, shape.n, shape.k
    strides = _shape_strides(shape)
    align_n, align_k = alignments(shape.layout, n, k, strides)
    a, b = MockTensor(dtype, [m, k]), MockTensor(dtype, [k, n] if shape.layout == "kn" else [n, k])
    srcs = _descriptors(a, b, shape.layout, (m, n, k), config) if config["TMA"] else (a, b)
    kernels = [_gemm_v2_kernel.warmup(*srcs, dtype, torch.float32, torch.int32, m, n, k, *strides,
                                      config["GROUP_M"], config["SPLIT_K"], grid=(1,),
                                      **_constexprs(config, shape.layout, align_n, align_k))]
    if config["SPLIT_K"] > 1:
        kernels.append(_splitk_reduce_kernel.warmup(torch.float32, dtype, m, n, *strides[4:], config["SPLIT_K"],
                                                    BLOCK_M=REDUCE_BLOCK_M, BLOCK_N=REDUCE_BLOCK_N, ALIGN_N=align_n,
                                                    num_warps=REDUCE_NUM_WARPS, grid=(1,)))
    return kernels


def warmup(shape: GemmShape, config: Mapping[str, int], device: str = "cuda") -> float:
    """Compile, without launching, what `config` needs for `shape` (a CompilePool warmup); seconds spent."""
    start = time.perf_counter()
    with torch.cuda.device(torch.device(device)):
        compile_kernels(shape, config)
    return time.perf_counter() - start
