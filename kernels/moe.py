"""The Triton fused-MoE GEMM of the published space, in the form serving engines run it (vLLM's
`fused_moe_kernel`): one GEMM of an MoE layer over every expert at once, on tokens routed to their top-k
experts.

The align step (`align`, torch, on the device, no host sync) sorts the routed rows (token t's j-th choice is
row t·topk + j) by expert and pads each expert's rows to a multiple of BLOCK_SIZE_M with a sentinel row id
(`rows`, never a real row), so that every tile of BLOCK_SIZE_M rows belongs to one expert; it records each
tile's expert and the padded total. The kernel runs one program per (BLOCK_SIZE_M rows of one expert,
BLOCK_SIZE_N columns), in the GEMM's grouped order (`grouped_tile` of kernels/gemm.py: GROUP_SIZE_M tile rows
sweep the tile columns together); a program gathers its rows of A, multiplies them by its expert's weights
W[e] (stored [N, K], as vLLM's w1 [E, 2·intermediate, hidden] and w2 [E, hidden, intermediate]) and scatters the
result to the rows' places in C [tokens·topk, N] (vLLM's [tokens, topk, N] cache). Both GEMMs of a layer:
- gate_up: A is the hidden states [tokens, hidden]; a routed row reads A's row t = row // topk.
- down: A is the activations [tokens·topk, intermediate], one row per routed row; the output row is scaled by
  its routing weight, where vLLM applies it (MUL_ROUTED_WEIGHT on the second GEMM).
The grid covers the padded rows' bound for any routing (`candidates.routing.padded_rows_bound`, the bound vLLM's
`moe_align_block_size` sizes its sorted list by, so the grid and its grouped order are vLLM's); programs past
the real padded total return at once, so a launch needs no device-to-host copy (a CUDA graph captures it).
Rows past the tile's real ones are masked (loads read zeros, stores skip them); columns past N wrap inside
the tile for the loads (no mask along N) and are masked at the store.

Compile reuse: the padded-rows bound, the routed rows and GROUP_SIZE_M are run-time integers Triton does not
specialize on, so one binary per (BLOCK_SIZE_M, N, K, warps, stages) serves every token count and routing of
a `specialization_key`; N, K and the strides keep Triton's default specialization.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import lru_cache

import triton
import triton.language as tl
from triton.runtime.jit import MockTensor

from rooftune.candidates.routing import padded_rows_bound, routing
from rooftune.candidates.shapes import MoeShape
from rooftune.kernels.gemm import grouped_tile, int_class
from rooftune.kernels.lazy import TRITON_DTYPES, TorchDtypes, torch

TORCH_DTYPES = TorchDtypes()
MoeInputs = tuple  # (a, w, topk_ids, topk_weights): torch tensors (an alias for annotations)


@triton.jit(do_not_specialize=["EM", "num_rows", "GROUP_SIZE_M"])
def _moe_kernel(
    a_ptr, b_ptr, c_ptr, weights_ptr, row_ids_ptr, tile_experts_ptr, padded_ptr,
    N, K, EM, num_rows,
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    GROUP_SIZE_M,
    A_ROW_DIV: tl.constexpr, MUL_WEIGHT: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
):
    # EM: the sorted row list's length (the padded-rows bound); row_ids [EM] int32, tile_experts [EM / BM]
    # int32, padded_ptr: the real padded total (one int32). A_ROW_DIV: routed rows per row of A (topk for
    # gate_up, 1 for down). B is [E, N, K] (any strides), C [num_rows, N].
    pid_m, pid_n = grouped_tile(tl.program_id(0), EM, N, GROUP_SIZE_M, BLOCK_SIZE_M, BLOCK_SIZE_N)
    if pid_m * BLOCK_SIZE_M >= tl.load(padded_ptr):
        return
    rows = tl.load(row_ids_ptr + pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M))   # [BLOCK_SIZE_M]
    valid = rows < num_rows
    expert = tl.load(tile_experts_ptr + pid_m).to(tl.int64)
    rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    # Row origins in 64-bit; the sentinel's A row lies past A's end, masked.
    a_ptrs = a_ptr + (rows // A_ROW_DIV).to(tl.int64)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = (b_ptr + expert * stride_be + (rn % N)[None, :] * stride_bn
              + offs_k[:, None] * stride_bk)                                            # [BLOCK_SIZE_K, BLOCK_SIZE_N]
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - kb * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=valid[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if MUL_WEIGHT:
        acc = acc * tl.load(weights_ptr + rows, mask=valid, other=0.0)[:, None]
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & (rn < N)[None, :])


def align(topk_ids: torch.Tensor, experts: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row_ids [bound] int32, tile_experts [bound / BLOCK_SIZE_M] int32, padded [1] int32) of the routed rows
    `topk_ids` [tokens, topk]: row ids sorted by expert (stable: by row within an expert), each expert's run
    padded to a multiple of `block_m` with the sentinel tokens·topk; each tile's expert (tiles past the real
    ones name the last expert); the padded total. `bound` is `padded_rows_bound`, a function of the sizes
    alone, so nothing here waits for the device."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    rows, device = flat.numel(), flat.device
    counts = torch.bincount(flat, minlength=experts)                                    # [experts]
    tiles = (counts + block_m - 1) // block_m
    starts = torch.cumsum(tiles * block_m, 0) - tiles * block_m                         # each expert's first slot
    order = torch.argsort(flat, stable=True)                                            # row ids by expert
    first = torch.cumsum(counts, 0) - counts                                            # their first rank
    by_expert = flat[order]
    slots = starts[by_expert] + torch.arange(rows, device=device) - first[by_expert]
    bound = int(padded_rows_bound(rows, experts, block_m))
    row_ids = torch.full((bound,), rows, dtype=torch.int32, device=device)
    row_ids[slots] = order.to(torch.int32)
    tile_index = torch.arange(triton.cdiv(bound, block_m), device=device)
    tile_experts = torch.searchsorted(torch.cumsum(tiles, 0), tile_index, right=True).clamp_(max=experts - 1)
    padded = (tiles.sum() * block_m).to(torch.int32).reshape(1)
    return row_ids, tile_experts.to(torch.int32), padded


def _dims(a: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor
          ) -> tuple[int, int, int, int, int, int]:
    """(experts, tokens, topk, N, K, routed rows per row of A) of A [tokens or tokens·topk, K], W [E, N, K],
    routing [tokens, topk]; raises on anything the kernel cannot run."""
    if a.dim() != 2 or w.dim() != 3 or topk_ids.dim() != 2:
        raise ValueError(f"A must be 2-D, W 3-D [E, N, K], topk_ids 2-D [tokens, topk]; got {tuple(a.shape)}, "
                         f"{tuple(w.shape)}, {tuple(topk_ids.shape)}")
    experts, n, k = w.shape
    tokens, topk = topk_ids.shape
    if topk_weights.shape != topk_ids.shape:
        raise ValueError(f"topk_weights {tuple(topk_weights.shape)} differ from topk_ids {tuple(topk_ids.shape)}")
    if a.shape[1] != k or a.shape[0] not in (tokens, tokens * topk):
        raise ValueError(f"A must be [tokens ({tokens}) or tokens·topk ({tokens * topk}), K ({k})], got {tuple(a.shape)}")
    if a.dtype != w.dtype:
        raise ValueError(f"A and W dtypes differ: {a.dtype} and {w.dtype}")
    return experts, tokens, topk, n, k, topk if a.shape[0] == tokens else 1


def _check_out(out: torch.Tensor, a: torch.Tensor, rows: int, n: int) -> None:
    if tuple(out.shape) != (rows, n) or out.dtype != a.dtype or out.device != a.device:
        raise ValueError(f"out must be [{rows}, {n}] {a.dtype} on {a.device}, got {tuple(out.shape)} {out.dtype} "
                         f"on {out.device}")


def _launch_fn(config: Mapping[str, int], dims: tuple[int, ...], mul_weight: bool) -> Callable:
    """A function (a, w, weights, aligned, out) -> None that launches the kernel for `dims` (`_dims`) with
    `aligned` = `align(topk_ids, experts, BLOCK_SIZE_M)`."""
    experts, tokens, topk, n, k, a_row_div = dims
    bm, bn = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"]
    rows = tokens * topk
    em = int(padded_rows_bound(rows, experts, bm))
    kernel = _moe_kernel[(triton.cdiv(em, bm) * triton.cdiv(n, bn),)]
    constexprs = dict(A_ROW_DIV=a_row_div, MUL_WEIGHT=mul_weight, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn,
                      BLOCK_SIZE_K=config["BLOCK_SIZE_K"], num_warps=config["num_warps"],
                      num_stages=config["num_stages"])

    def launch(a, w, weights, aligned, out) -> None:
        row_ids, tile_experts, padded = aligned
        kernel(a, w, out, weights, row_ids, tile_experts, padded, n, k, em, rows,
               a.stride(0), a.stride(1), w.stride(0), w.stride(1), w.stride(2), out.stride(0), out.stride(1),
               config["GROUP_SIZE_M"], **constexprs)

    return launch


def _check_runnable(t: torch.Tensor) -> None:
    """CPU tensors only where the kernel is interpreted (a compiled Triton kernel needs a GPU)."""
    if t.device.type == "cpu" and isinstance(_moe_kernel, triton.runtime.JITFunction):
        raise ValueError("the inputs are on the CPU, where the kernel runs only in Triton's interpreter "
                         "(TRITON_INTERPRET=1 before triton is imported)")


def moe_gemm(a: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
             config: Mapping[str, int], mul_weight: bool = False, out: torch.Tensor | None = None) -> torch.Tensor:
    """C [tokens·topk, N] in A's dtype (fp32 accumulation): row t·topk + j is A's row for that routed row
    (row t where A is [tokens, K], the gate_up GEMM; row t·topk + j where A is [tokens·topk, K], the down GEMM)
    times W[topk_ids[t, j]]ᵀ (W [E, N, K]), scaled by topk_weights[t, j] where `mul_weight`."""
    dims = _dims(a, w, topk_ids, topk_weights)
    _check_runnable(a)
    rows = dims[1] * dims[2]
    if out is None:
        out = torch.empty((rows, dims[3]), dtype=a.dtype, device=a.device)
    _check_out(out, a, rows, dims[3])
    aligned = align(topk_ids, dims[0], config["BLOCK_SIZE_M"])
    _launch_fn(config, dims, mul_weight)(a, w, topk_weights.reshape(-1).float(), aligned, out)
    return out


def make_launcher(config: Mapping[str, int], shape: MoeShape, inputs: list[MoeInputs],
                  out: torch.Tensor) -> Callable[[int], None]:
    """`launch(i)` runs `shape`'s GEMM on inputs[i % len(inputs)] into `out`. The align step runs here, once
    per input set (it is not timed, as the weights' layout is not: the launch is the GEMM alone), so a launch
    neither allocates nor syncs the host (a CUDA graph captures it)."""
    if not inputs:
        raise ValueError("make_launcher needs at least one (a, w, topk_ids, topk_weights) input set")
    dims = _shape_dims(shape)
    for a, w, ids, weights in inputs:
        if _dims(a, w, ids, weights) != dims:
            raise ValueError(f"every input set must be of {shape}: A {tuple(a.shape)}, W {tuple(w.shape)}, "
                             f"topk_ids {tuple(ids.shape)}")
        _check_out(out, a, shape.rows, shape.n)
    _check_runnable(out)
    run = _launch_fn(config, dims, shape.gemm == "down")
    routed = {}  # the input sets of one shape share its routing tensors (`make_inputs`): aligned once
    for _, _, ids, weights in inputs:
        if (id(ids), id(weights)) not in routed:
            routed[id(ids), id(weights)] = (weights.reshape(-1).float(), align(ids, shape.experts, config["BLOCK_SIZE_M"]))
    sets = [(a, w, *routed[id(ids), id(weights)]) for a, w, ids, weights in inputs]

    def launch(i: int) -> None:
        run(*sets[i % len(sets)], out)

    return launch


def _shape_dims(shape: MoeShape) -> tuple[int, int, int, int, int, int]:
    return (shape.experts, shape.tokens, shape.topk, shape.n, shape.k, shape.topk if shape.gemm == "gate_up" else 1)


def _shape_strides(shape: MoeShape) -> tuple[int, ...]:
    """(stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn) of contiguous A, W, C."""
    return (shape.k, 1, shape.n * shape.k, shape.k, 1, shape.n, 1)


def specialization_key(shape: MoeShape) -> tuple:
    """Shapes with equal keys share compiled binaries (for one config). Tokens, routing and GROUP_SIZE_M are
    not specialized; contiguous strides are 1, K, N or N·K, so what selects a binary is: dtype, routed rows per
    row of A (topk for gate_up, 1 for down), the routing weight's multiply (down), and how Triton types N, K
    and N·K (1, divisible by 16 or not, 64-bit)."""
    n, k = shape.n, shape.k
    return (shape.dtype, _shape_dims(shape)[5], shape.gemm == "down", int_class(n), int_class(k), int_class(n * k),
            n % 16 == 0, k % 16 == 0, n * k % 16 == 0)


def warmup(shape: MoeShape, config: Mapping[str, int], device: str = "cuda") -> float:
    """Compile, without launching, the kernel `config` needs for `shape`'s specialization; returns the
    seconds spent (Triton's MockTensor: nothing is allocated)."""
    start = time.perf_counter()
    with torch.cuda.device(torch.device(device)):
        compile_kernels(shape, config)
    return time.perf_counter() - start


def compile_kernels(shape: MoeShape, config: Mapping[str, int]) -> list:
    """[the one CompiledKernel] a launch of `config` on contiguous inputs of `shape` runs on the current device,
    with `_launch_fn`'s arguments; Triton's MockTensor and dtypes stand in for tensors, so that a compile worker
    never loads torch (kernels/lazy.py)."""
    dtype = MockTensor(TRITON_DTYPES[shape.dtype])
    i32 = MockTensor(tl.int32)
    em = int(padded_rows_bound(shape.rows, shape.experts, config["BLOCK_SIZE_M"]))
    return [_moe_kernel.warmup(dtype, dtype, dtype, MockTensor(tl.float32), i32, i32, i32, shape.n, shape.k, em,
                               shape.rows, *_shape_strides(shape), config["GROUP_SIZE_M"],
                               A_ROW_DIV=_shape_dims(shape)[5], MUL_WEIGHT=shape.gemm == "down",
                               BLOCK_SIZE_M=config["BLOCK_SIZE_M"], BLOCK_SIZE_N=config["BLOCK_SIZE_N"],
                               BLOCK_SIZE_K=config["BLOCK_SIZE_K"], num_warps=config["num_warps"],
                               num_stages=config["num_stages"], grid=(1,))]


def make_inputs(shape: MoeShape, device: str | torch.device, seed: int, dtype: torch.dtype | None = None) -> MoeInputs:
    """(A, W, topk_ids, topk_weights): fresh standard-normal A ([tokens, hidden] for gate_up, [tokens·topk,
    intermediate] for down) and W [E, N, K] scaled by 1/√K (so that outputs stay O(1), as trained weights keep
    them), drawn from `seed`; the shape's own routing (candidates/routing.py, `routing_tensors`), whatever the seed."""
    dtype = dtype or TORCH_DTYPES[shape.dtype]
    gen = torch.Generator(device=device).manual_seed(seed)
    a_rows = shape.tokens if shape.gemm == "gate_up" else shape.rows
    a = torch.randn((a_rows, shape.k), generator=gen, device=device, dtype=dtype)
    w = torch.randn((shape.experts, shape.n, shape.k), generator=gen, device=device, dtype=dtype) * shape.k ** -0.5
    return (a, w, *routing_tensors(shape, str(device)))


@lru_cache(maxsize=4)
def routing_tensors(shape: MoeShape, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """`shape`'s routing (candidates/routing.py) on `device`: topk_ids int32 and topk_weights fp32 [tokens, topk],
    made once, so every input set of a shape shares them (its launchers align once); nothing writes to them."""
    ids, weights = routing(shape)
    return torch.from_numpy(ids.copy()).to(device), torch.from_numpy(weights.copy()).to(device)


def reference(a: torch.Tensor, w: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
              mul_weight: bool = False) -> torch.Tensor:
    """`moe_gemm`'s result by a plain loop over the experts in fp64 (immune to TF32 settings, as the GEMM's
    reference), returned as fp32 [tokens·topk, N]."""
    experts, tokens, topk, n, _, a_row_div = _dims(a, w, topk_ids, topk_weights)
    flat = topk_ids.reshape(-1).to(torch.int64)
    out = torch.zeros((tokens * topk, n), dtype=torch.float64, device=a.device)
    for e in range(experts):
        rows = torch.nonzero(flat == e).flatten()
        if rows.numel():
            out[rows] = a[rows // a_row_div].double() @ w[e].double().T
    if mul_weight:
        out *= topk_weights.reshape(-1, 1).double()
    return out.float()
