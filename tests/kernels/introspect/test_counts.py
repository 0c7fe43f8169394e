"""The IR's counts on small kernels whose FLOPs and bytes are known by hand, compiled for sm_90 on the CPU (in this
process: Triton's interpreter runs the tests, and kernels/introspect lowers its kernels all the same)."""

import numpy as np
import torch
import triton
import triton.language as tl

from rooftune.kernels.introspect.analyze import AnalysisError, ConfigAnalysis, analyze
from rooftune.kernels.introspect.expressions import Env
from rooftune.kernels.introspect.tally import program_ids, tally


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_n, pid_m = tl.program_id(0) % tl.cdiv(N, BN), tl.program_id(0) // tl.cdiv(N, BN)
    rm, rn, rk = pid_m * BM + tl.arange(0, BM), pid_n * BN + tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def ragged_kernel(x_ptr, lens_ptr, y_ptr, stride, BLOCK: tl.constexpr):
    # each row sums its own length, which only the call's data say
    row = tl.program_id(0)
    n = tl.load(lens_ptr + row)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def early_exit_kernel(x_ptr, y_ptr, total_ptr, BLOCK: tl.constexpr):
    # programs past the data's own total return at once (fused MoE's padded rows)
    start = tl.program_id(0) * BLOCK
    if start >= tl.load(total_ptr):
        return
    offs = start + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2.0)


@triton.jit
def while_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = 0
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    while i < n:  # a counter advanced by a fixed step: counted as a for loop
        acc += tl.load(x_ptr + i + tl.arange(0, BLOCK))
        i += BLOCK
    j = 1
    while j < n:  # doubling: the call cannot count it
        j = j * 2
    tl.store(y_ptr + tl.arange(0, BLOCK), acc + j)


@triton.jit
def grouped_kernel(x_ptr, y_ptr, offsets, G, NUM_PROGRAMS: tl.constexpr, BLOCK: tl.constexpr):
    # a persistent walk over groups of their own sizes (the grouped GEMM's loop): tiles pid, pid + NUM_PROGRAMS, ...
    tile = tl.program_id(0)
    last = 0
    for g in range(G):
        start = tl.load(offsets + g)
        g_tiles = tl.cdiv(tl.load(offsets + g + 1) - start, BLOCK)
        while tile >= last and tile < last + g_tiles:
            offs = start + (tile - last) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs))
            tile += NUM_PROGRAMS
        last += g_tiles


def _one(kernel, args, grid, **config):
    warps = config.pop("num_warps", 4)
    (result,) = analyze(kernel, [triton.Config(config, num_warps=warps, num_stages=2)], args, grid)
    assert isinstance(result, ConfigAnalysis), result
    return result


def _traffic(counts):
    return {t.name: (t.tensor_bytes, t.load_bytes, t.store_bytes) for t in counts.tensors}


def test_a_copy_moves_each_tile_once_counted_whole_under_its_mask():
    x, y = torch.zeros(1000, dtype=torch.float16), torch.zeros(1000, dtype=torch.float16)
    a = _one(copy_kernel, {"x_ptr": x, "y_ptr": y, "n": 1000}, lambda m: (triton.cdiv(m["n"], m["BLOCK"]),), BLOCK=128)
    c = a.counts
    assert a.grid == (8, 1, 1) and c.programs == 8
    assert _traffic(c) == {"x_ptr": (2000, 8 * 128 * 2, 0.0), "y_ptr": (2000, 0.0, 8 * 128 * 2)}
    assert c.mma_flops == () and c.loop_iterations == 0 and c.work_runs == ((1.0, 8),)
    assert any("masked" in note for note in c.notes)
    assert c.compiled.num_warps == 4 and 0 < c.compiled.regs_per_thread <= 255


def test_a_reduction_loops_over_its_columns():
    x, y = torch.zeros(6, 300), torch.zeros(6)
    a = _one(row_sum_kernel, {"x_ptr": x, "y_ptr": y, "n_cols": 300, "stride": 300}, (6,), BLOCK=128)
    (loop,) = a.work.loops
    assert loop.describe() == "for loop 0: 0 .. n_cols step 128" and a.loop_trips == (3.0,)
    assert _traffic(a.counts) == {"x_ptr": (7200, 6 * 3 * 128 * 4, 0.0), "y_ptr": (24, 0.0, 6 * 4)}
    assert a.counts.loop_iterations == 3.0
    assert a.counts.vector_ops >= 6 * 3 * 128 * 2  # each trip adds its tile (and forms its addresses)


def test_a_dot_in_a_loop_counts_2mnk_and_its_tiles():
    m, n, k = 64, 64, 96
    a_, b_, c_ = torch.zeros(m, k, dtype=torch.float16), torch.zeros(k, n, dtype=torch.float16), \
        torch.zeros(m, n, dtype=torch.float16)
    args = {"a_ptr": a_, "b_ptr": b_, "c_ptr": c_, "M": m, "N": n, "K": k}
    a = _one(matmul_kernel, args, lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),),
             BM=32, BN=32, BK=32)
    c = a.counts
    assert c.programs == 4 and a.loop_trips == (3.0,)
    assert c.mma_flops == (("fp16", 2.0 * m * n * k),)
    assert c.dot_operand_bytes == 4 * 3 * (32 * 32 + 32 * 32) * 2
    tiles = 4 * 3 * 32 * 32 * 2  # every program's K loop reads a 32x32 fp16 tile of A and of B per trip
    assert _traffic(c) == {"a_ptr": (m * k * 2, tiles, 0.0), "b_ptr": (k * n * 2, tiles, 0.0),
                           "c_ptr": (m * n * 2, 0.0, m * n * 2)}
    # programs 0, 1 read A's first row of tiles and B's two columns; 2, 3 the second row and the same columns
    sharing = {t.name: t.sharing for t in c.tensors}
    assert sharing["a_ptr"] == ((1.0, 1.0), (2.0, 0.5), (4.0, 0.5))
    assert sharing["b_ptr"] == ((1.0, 1.0), (2.0, 1.0), (4.0, 0.5))


def test_a_loop_bounded_by_the_calls_data_is_counted_from_it_or_by_the_stated_rule():
    lens = torch.tensor([100, 300, 0, 1000], dtype=torch.int32)
    args = {"x_ptr": torch.zeros(4, 1000), "lens_ptr": lens, "y_ptr": torch.zeros(4), "stride": 1000}
    a = _one(ragged_kernel, args, (4,), BLOCK=128)
    (loop,) = a.work.loops
    assert str(loop.upper) == "lens_ptr[program_id(0)]"
    trips = 1 + 3 + 0 + 8
    assert a.loop_trips == (trips / 4,)
    assert _traffic(a.counts)["x_ptr"][1] == trips * 128 * 4
    # the same work where the data cannot be read: (the call's largest size, 1000) / 128 trips per program
    pids, stands_for = program_ids(a.grid)
    unread = tally(a.work, Env({"stride": 1000.0}, a.grid, pids, read=lambda name, offsets: None), stands_for)
    assert unread.loop_trips == (8.0,) and unread.loads["x_ptr"] == 4 * 8 * 128 * 4
    assert any("counted as 8 trips" in note for note in unread.notes)
    # on the meta device (a dtype and a shape, no values: a call's signature) the data cannot be read either
    meta = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    assert _one(ragged_kernel, meta, (4,), BLOCK=128).loop_trips == (8.0,)


def test_an_early_return_on_the_calls_data_weighs_the_programs_that_go_on():
    args = {"x_ptr": torch.zeros(1024), "y_ptr": torch.zeros(1024), "total_ptr": torch.tensor([300])}
    a = _one(early_exit_kernel, args, (8,), BLOCK=128)
    assert _traffic(a.counts)["x_ptr"][1] == 3 * 128 * 4  # 3 of the 8 programs start below 300
    (busy, working), (idle, exiting) = a.counts.work_runs  # each program's bytes relative to the mean
    assert (working, exiting) == (3, 5) and idle < 0.05 * busy  # an exiting program reads the total alone


def test_a_counted_while_loop_and_one_that_cannot_be_counted():
    args = {"x_ptr": torch.zeros(1024), "y_ptr": torch.zeros(64), "n": 1000}
    a = _one(while_kernel, args, (1,), BLOCK=64)
    counted, doubling = a.work.loops
    assert counted.kind == "while" and counted.known and a.loop_trips[0] == 16  # ceil(1000 / 64)
    assert not doubling.known and a.loop_trips[1] == 1
    assert _traffic(a.counts)["x_ptr"][1] == 16 * 64 * 4
    assert any("counted as one trip" in note for note in a.counts.notes)


def test_a_config_that_cannot_compile_is_an_error_not_an_exception():
    x, y = torch.zeros(1000), torch.zeros(1000)
    bad = triton.Config({"BLOCK": 100}, num_warps=4)  # tl.arange needs a power of two
    good = triton.Config({"BLOCK": 128}, num_warps=4)
    results = analyze(copy_kernel, [bad, good], {"x_ptr": x, "y_ptr": y, "n": 1000}, (8,))
    assert isinstance(results[0], AnalysisError) and results[0].stage == "lowering"
    assert "power of 2" in results[0].error or "arange" in results[0].error
    assert isinstance(results[1], ConfigAnalysis)
    grid_error = analyze(copy_kernel, [good], {"x_ptr": x, "y_ptr": y, "n": 1000}, lambda meta: meta["NOPE"])
    assert grid_error[0].stage == "grid"
    np.testing.assert_equal(results[1].counts.programs, 8)


def test_a_persistent_walk_over_groups_counts_each_groups_tiles():
    offsets = torch.tensor([0, 300, 300, 1000], dtype=torch.int32)  # groups of 300, 0 and 700 rows: 3 + 0 + 6 tiles
    args = {"x_ptr": torch.zeros(1024), "y_ptr": torch.zeros(1024), "offsets": offsets, "G": 3, "NUM_PROGRAMS": 2}
    a = _one(grouped_kernel, args, (2,), BLOCK=128)
    _, tiles = a.work.loops
    assert tiles.kind == "while" and str(tiles.upper) == "(((offsets[(1 + i0)] - offsets[i0]) + 127) / 128)"
    assert a.loop_trips == (3.0, 4.5 / 3)  # per group, each of the 2 programs takes half of the group's tiles
    assert _traffic(a.counts)["x_ptr"][1] == 9 * 128 * 4
