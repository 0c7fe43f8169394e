"""Per kernel, what measuring it on the GPU takes: inputs, launchers, the reference check, the baseline.

The kernel's registry entry (candidates/families.py) is the GPU-free part (the sweep and the manifest
read it); a bench (`GemmBench`, `AttentionBench`) is what `KernelMeasurer` (kernels/harness/measure.py) asks of
the kernel while it measures:
everything else (checking every config, the interleaved passes, the final re-timing, repeatability,
clock ranges) is the same code for every kernel. torch and the Triton kernels are imported inside
the benches, so this module loads without them.

Baselines: GEMM is timed beside cuBLAS (`torch.mm`, key "cublas"); attention beside PyTorch's
`scaled_dot_product_attention` with `is_causal` as the shape says and `enable_gqa` where kv_heads < heads
(key "sdpa", whatever backend PyTorch picks: with torch 2.11 on an H200, cuDNN for bf16, the fastest
backend there; datasets/h200/attention/README.md). A shape's `baselines_us` and its meta's
`<key>_first_us` (the screening pass) carry the key. A sweep also times the library's other routes
beside them (`extra_baselines`): for attention, SDPA held to each backend that runs the shape
("sdpa:cudnn", "sdpa:flash", "sdpa:efficient"; meta `baseline_errors` says why one is absent). A fused-MoE
GEMM is timed beside torch's grouped GEMM (key "grouped_mm", `MoeBench`) doing the same work: gather the routed
rows, one GEMM per expert, the routing weight, scatter; and, as the route "grouped_mm:gemm", the grouped GEMM
alone on rows already sorted by expert.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Protocol

from rooftune.candidates import KERNELS, Config, KernelSpec, MoeShape, Shape, kernel_spec, load_implementation
from rooftune.candidates.routing import expert_rows
from rooftune.candidates.shapes import DTYPE_BYTES


class Bench(Protocol):
    """The kernel-specific steps of a measurement. `module` is the Triton kernel's module, imported at
    its first use (a live tune submits its first compiles before this process loads triton): its
    `warmup` compiles for the CompilePool, its `specialization_key` groups shapes that share binaries."""

    kernel: KernelSpec
    module: ModuleType

    def check(self, config: Config, shape: Shape, device: str, seed: int) -> str | None: ...

    def bytes_per_set(self, shape: Shape) -> int: ...

    def inputs(self, shape: Shape, device: str, seed: int) -> tuple: ...

    def output(self, shape: Shape, device: str): ...

    def launcher(self, config: Config, shape: Shape, inputs: list[tuple], out) -> Callable[[int], None]: ...

    def baseline(self, shape: Shape, inputs: list[tuple], out) -> Callable[[int], None]: ...

    def extra_baselines(self, shape: Shape, inputs: list[tuple], out) -> tuple[dict, dict]: ...


class GemmBench:
    """C = A @ B with kernels/gemm.py; baseline cuBLAS (`torch.mm` into the same output)."""

    kernel = KERNELS["gemm"]

    @property
    def module(self) -> ModuleType:
        return load_implementation(self.kernel.module)

    def check(self, config, shape, device, seed):
        from rooftune.kernels.harness.check import check_gemm

        return check_gemm(config, shape, shape.layout, device, seed)

    def bytes_per_set(self, shape):
        """A and B: dtype bytes · (M·K + K·N)."""
        return DTYPE_BYTES[shape.dtype] * (shape.m * shape.k + shape.k * shape.n)

    def inputs(self, shape, device, seed):
        return self.module.make_inputs(shape, device, seed)

    def output(self, shape, device):
        import torch

        return torch.empty(shape.m, shape.n, device=device, dtype=self.module.TORCH_DTYPES[shape.dtype])

    def launcher(self, config, shape, inputs, out):
        return self.module.make_launcher(config, shape.layout, inputs, out)

    def baseline(self, shape, inputs, out):
        import torch

        operands = [(a, b.t() if shape.layout == "nk" else b) for a, b in inputs]
        return lambda i: torch.mm(*operands[i % len(operands)], out=out)

    def extra_baselines(self, shape, inputs, out):
        return {}, {}


# The SDPA backends an attention sweep times one at a time beside SDPA's own choice.
SDPA_ROUTES = ("sdpa:cudnn", "sdpa:flash", "sdpa:efficient")


class AttentionBench:
    """softmax(Q Kᵀ / √d) V with kernels/attention.py; baseline PyTorch's SDPA (same scale and mask)."""

    kernel = KERNELS["attention"]

    @property
    def module(self) -> ModuleType:
        return load_implementation(self.kernel.module)

    def check(self, config, shape, device, seed):
        from rooftune.kernels.harness.check import check_attention

        return check_attention(config, shape, device, seed)

    def bytes_per_set(self, shape):
        """Q, K and V: dtype bytes · batch·(heads + 2·kv_heads)·seq·head_dim."""
        return (DTYPE_BYTES[shape.dtype] * shape.batch * (shape.heads + 2 * shape.kv_heads) * shape.seq
                * shape.head_dim)

    def inputs(self, shape, device, seed):
        return self.module.make_inputs(shape, device, seed)

    def output(self, shape, device):
        import torch

        dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
        return torch.empty(dims, device=device, dtype=self.module.TORCH_DTYPES[shape.dtype])

    def launcher(self, config, shape, inputs, out):
        return self.module.make_launcher(config, shape, inputs, out)

    def baseline(self, shape, inputs, out):
        # SDPA has no out= argument: it allocates its output, which a CUDA graph capture serves from
        # the graph's private pool, so the launch still neither syncs nor allocates at replay.
        from torch.nn.functional import scaled_dot_product_attention

        gqa = shape.kv_heads != shape.heads
        return lambda i: scaled_dot_product_attention(*inputs[i % len(inputs)], is_causal=shape.causal,
                                                      enable_gqa=gqa)

    def extra_baselines(self, shape, inputs, out):
        """({"sdpa:<backend>": launcher} for each SDPA backend that runs the shape and agrees with SDPA's
        own choice, {"sdpa:<backend>": why not} for the others)."""
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                    "efficient": SDPBackend.EFFICIENT_ATTENTION}
        routes = {key: backends[key.split(":")[1]] for key in SDPA_ROUTES}
        default = self.baseline(shape, inputs, out)

        def held_to(backend):
            def launch(i: int) -> None:
                with sdpa_kernel([backend]):
                    default(i)
            return launch

        launchers, errors = {}, {}
        with torch.no_grad():
            want = default(0).float()
            for key, backend in routes.items():
                try:
                    with sdpa_kernel([backend]):
                        got = default(0).float()
                    if got.is_cuda:
                        torch.cuda.synchronize()
                except Exception as exc:  # a backend that refuses the shape is a finding, not a failure
                    errors[key] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
                    continue
                rel = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
                if rel > 2e-2:
                    errors[key] = f"differs from SDPA's choice: rel err {rel:.3g}"
                    continue
                launchers[key] = held_to(backend)
        return launchers, errors


class MoeBench:
    """One GEMM of a fused MoE layer with kernels/moe.py; baseline torch's grouped GEMM over the same routed rows
    (`torch._grouped_mm`; where this torch lacks it, one `torch.mm` per expert with rows)."""

    kernel = KERNELS["moe"]

    @property
    def module(self) -> ModuleType:
        return load_implementation(self.kernel.module)

    def check(self, config, shape, device, seed):
        from rooftune.kernels.harness.check import check_moe

        return check_moe(config, shape, device, seed)

    def bytes_per_set(self, shape):
        """What one launch reads: dtype bytes · (A's rows · K + the routed experts' weights, experts with rows · N · K)."""
        a_rows = shape.tokens if shape.gemm == "gate_up" else shape.rows
        used = int((expert_rows(shape) > 0).sum())
        return DTYPE_BYTES[shape.dtype] * (a_rows + used * shape.n) * shape.k

    def inputs(self, shape, device, seed):
        return self.module.make_inputs(shape, device, seed)

    def output(self, shape, device):
        import torch

        return torch.empty(shape.rows, shape.n, device=device, dtype=self.module.TORCH_DTYPES[shape.dtype])

    def launcher(self, config, shape, inputs, out):
        return self.module.make_launcher(config, shape, inputs, out)

    def baseline(self, shape, inputs, out):
        return grouped_mm_launcher(shape, inputs, out, gemm_only=False)

    def extra_baselines(self, shape, inputs, out):
        return {"grouped_mm:gemm": grouped_mm_launcher(shape, inputs, out, gemm_only=True)}, {}


class MoeFp8Bench(MoeBench):
    """One GEMM of an FP8 fused MoE layer with kernels/moe_fp8.py, its activation quantization included;
    baseline torch's grouped GEMM (`grouped_mm_launcher`) on the bf16 activations and the dequantized bf16 weights
    (torch 2.13 has `torch._scaled_grouped_mm`, but with row-wise scales only, not 128×128 blocks: it is timed
    beside the baseline as "scaled_grouped_mm" for per-tensor scales, where it runs)."""

    kernel = KERNELS["moe-fp8"]

    def check(self, config, shape, device, seed):
        from rooftune.kernels.harness.check import check_moe_fp8

        return check_moe_fp8(config, shape, device, seed)

    def bytes_per_set(self, shape):
        """What one launch reads: A in bf16 (quantized first) and in FP8, the routed experts' FP8 weights."""
        a_rows = shape.tokens if shape.gemm == "gate_up" else shape.rows
        used = int((expert_rows(shape) > 0).sum())
        return (DTYPE_BYTES[shape.out_dtype] + DTYPE_BYTES[shape.dtype]) * a_rows * shape.k \
            + DTYPE_BYTES[shape.dtype] * used * shape.n * shape.k

    def output(self, shape, device):
        import torch

        return torch.empty(shape.rows, shape.n, device=device, dtype=torch.bfloat16)

    def baseline(self, shape, inputs, out):
        return grouped_mm_launcher(shape, self._dequantized(shape, inputs), out, gemm_only=False)

    def extra_baselines(self, shape, inputs, out):
        launchers, errors = {"grouped_mm:gemm": grouped_mm_launcher(shape, self._dequantized(shape, inputs), out,
                                                                    gemm_only=True)}, {}
        if shape.block_shape is None:
            try:
                launchers["scaled_grouped_mm"] = scaled_grouped_mm_launcher(shape, inputs, out)
            except (RuntimeError, NotImplementedError, AttributeError) as exc:
                errors["scaled_grouped_mm"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return launchers, errors

    def _dequantized(self, shape, inputs):
        """kernels/moe.py's input sets of the same GEMM: the bf16 activations, the weights dequantized to bf16."""
        import torch

        return [(a, self.module.dequantize(w, w_scale, shape.block_shape).to(torch.bfloat16), ids, weights)
                for a, w, w_scale, _, ids, weights in inputs]


def scaled_grouped_mm_launcher(shape, inputs: list[tuple], out) -> Callable[[int], None]:
    """`launch(i)`: a per-tensor FP8 GEMM through `torch._scaled_grouped_mm` on rows sorted by expert: A quantized with
    its static scale (torch), the grouped FP8 GEMM with row-wise scales (A's broadcast over its rows, each expert's
    over its columns), the routing weight on down, the rows scattered back. Raises where this torch or GPU lacks it."""
    import torch

    module = load_implementation(KERNELS["moe-fp8"].module)
    sets = []
    for a, w, w_scale, a_scale, ids, weights in inputs:
        flat = ids.reshape(-1).to(torch.int64)
        order = torch.argsort(flat, stable=True)
        a_index = order // shape.topk if shape.gemm == "gate_up" else order
        ends = torch.cumsum(torch.bincount(flat, minlength=shape.experts), 0).to(torch.int32)
        scale = weights.reshape(-1)[order].to(torch.bfloat16)[:, None] if shape.gemm == "down" else None
        b_scale = w_scale.float()[:, None].expand(shape.experts, shape.n).contiguous()
        sets.append((a, w.transpose(-2, -1), a_scale, b_scale, order, a_index, ends, scale))

    def launch(i: int) -> None:
        a, w_t, a_scale, b_scale, order, a_index, ends, scale = sets[i % len(sets)]
        a_q, _ = module.quantize_reference(a.index_select(0, a_index), False, a_scale)
        y = torch._scaled_grouped_mm(a_q, w_t, a_scale.expand(a_q.shape[0]).contiguous(), b_scale, offs=ends,
                                     out_dtype=torch.bfloat16)
        out.index_copy_(0, order, y if scale is None else y * scale)

    launch(0)  # where this torch or GPU cannot run it, the error is the caller's to record
    return launch


def grouped_mm_launcher(shape: MoeShape, inputs: list[tuple], out, gemm_only: bool) -> Callable[[int], None]:
    """`launch(i)`: `shape`'s MoE GEMM through torch on inputs[i % len(inputs)] into `out`: A's routed rows gathered
    in expert order, one grouped GEMM (`torch._grouped_mm` with each expert's row offsets, else a `torch.mm` per
    expert with rows), the routing weight on the down GEMM, the rows scattered to their places. `gemm_only`: the
    grouped GEMM alone, on rows gathered beforehand (its output stays in expert order). Row order and offsets are
    worked out here, once, so a launch neither syncs nor (but for the grouped GEMM's output) allocates."""
    import torch

    sets = []
    for a, w, ids, weights in inputs:
        flat = ids.reshape(-1).to(torch.int64)
        order = torch.argsort(flat, stable=True)                                   # routed rows by expert
        counts = torch.bincount(flat, minlength=shape.experts)
        a_index = order // shape.topk if shape.gemm == "gate_up" else order
        scale = weights.reshape(-1)[order].to(a.dtype)[:, None] if shape.gemm == "down" else None
        ends = torch.cumsum(counts, 0).to(torch.int32)
        spans = [(e, int(s), int(t)) for e, (s, t) in enumerate(zip([0, *ends[:-1].tolist()], ends.tolist())) if t > s]
        sets.append((a, w, order, a_index, scale, ends, spans, a.index_select(0, a_index)))

    grouped = getattr(torch, "_grouped_mm", None)
    try:  # where this build's grouped GEMM refuses the dtype or the GPU, the per-expert loop
        if grouped is not None:
            grouped(sets[0][7], sets[0][1].transpose(-2, -1), offs=sets[0][5])
    except (RuntimeError, NotImplementedError):
        grouped = None

    def gemm(a_sorted, w, ends, spans):
        if grouped is not None:
            return grouped(a_sorted, w.transpose(-2, -1), offs=ends)
        y = torch.empty((a_sorted.shape[0], w.shape[1]), dtype=a_sorted.dtype, device=a_sorted.device)
        for e, s, t in spans:
            torch.mm(a_sorted[s:t], w[e].T, out=y[s:t])
        return y

    def launch(i: int) -> None:
        a, w, order, a_index, scale, ends, spans, presorted = sets[i % len(sets)]
        if gemm_only:
            gemm(presorted, w, ends, spans)
            return
        y = gemm(a.index_select(0, a_index), w, ends, spans)
        out.index_copy_(0, order, y if scale is None else y * scale)

    return launch


def bench_of(kernel: str) -> Bench:
    """The GPU side of the registered kernel `kernel` (its registry entry's `bench`), a new instance."""
    return load_implementation(kernel_spec(kernel).bench)()
