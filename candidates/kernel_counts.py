"""A config of any Triton kernel on one call, as its compiled binary and its IR describe it: plain data that
kernels/introspect fills and roofline/generic.py costs (neither imports the other).

Counts are over the whole launch (every program of the grid) unless a name says "per program"; bytes are bytes,
FLOPs count a multiply-add as two. `to_dict` / `counts_from_dict` are the JSON form a suite dataset stores
(eval/datasets/suite.py), so a fit re-costs recorded configs without compiling them again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class CompiledFacts:
    """What the compiler decided for one config: warps and pipeline stages, registers per thread, shared memory
    per program (bytes, as the launch allocates it), local memory per thread (bytes: the stack frame ptxas
    spills registers to, Triton's `n_spills`), and whether its dots became Hopper's warpgroup MMA (wgmma)."""

    num_warps: int
    num_stages: int
    regs_per_thread: int
    smem_bytes: int
    local_bytes_per_thread: int = 0
    wgmma: bool = False


@dataclass(frozen=True)
class TensorTraffic:
    """Bytes the grid's loads and stores move through one argument (a tensor, or a tensor descriptor's tensor),
    and the tensor's own size (0: unknown, e.g. an argument the IR reaches through no named pointer). `sharing`:
    ((programs in flight, share), ...), the share of the loaded bytes of that many consecutive programs that are
    distinct tiles (empty: where a load's tiles lie is not the programs' to say, e.g. gathered rows)."""

    name: str
    tensor_bytes: int
    load_bytes: float
    store_bytes: float
    sharing: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class KernelCounts:
    """One config on one call: the grid's programs, what the compiler decided, and the work of the grid.

    `mma_flops`: (dtype, FLOPs) of the matrix instructions (each tt.dot's 2·M·N·K per execution), by operand
    dtype ('bf16', 'fp16', 'tf32', 'fp32', 'fp8e4m3', ...); `dot_operand_bytes`: the dots' A and B tiles (what the
    matrix instructions read from shared memory); `tensors`: loads and stores by argument (masked tiles counted
    whole); `vector_ops`: elementwise results of tensor arithmetic (one per element per op), `sfu_ops`: those on
    the special-function units (exp, log, sqrt, ...); `loop_iterations`: mean per program of the iterations of
    loops that load (what a pipeline overlaps); `dot_executions`: mean per program of the dots run that wait for
    their matrix instructions' results (not those accumulating straight into a loop's accumulator); `loop_loads`: mean per program of the loads run inside loops (what a loop
    without prefetch waits on, one after another); `work_runs`: each program's work relative to the mean, in launch
    order, as (value, run length) pairs (one run: every program alike); `notes`: the stated rules the counts
    applied (a loop the arguments cannot bound, a data-dependent branch)."""

    programs: int
    compiled: CompiledFacts
    mma_flops: tuple[tuple[str, float], ...] = ()
    dot_operand_bytes: float = 0.0
    tensors: tuple[TensorTraffic, ...] = ()
    vector_ops: float = 0.0
    sfu_ops: float = 0.0
    loop_iterations: float = 0.0
    dot_executions: float = 0.0
    loop_loads: float = 0.0
    work_runs: tuple[tuple[float, int], ...] = ((1.0, 1),)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total_mma_flops(self) -> float:
        return sum(flops for _, flops in self.mma_flops)

    @property
    def load_bytes(self) -> float:
        return sum(t.load_bytes for t in self.tensors)

    @property
    def store_bytes(self) -> float:
        return sum(t.store_bytes for t in self.tensors)

    def to_dict(self) -> dict:
        return asdict(self)


def counts_from_dict(data: dict) -> KernelCounts:
    """The KernelCounts `KernelCounts.to_dict` wrote (JSON lists back into tuples)."""
    return KernelCounts(
        programs=int(data["programs"]), compiled=CompiledFacts(**data["compiled"]),
        mma_flops=tuple((str(d), float(f)) for d, f in data.get("mma_flops", ())),
        dot_operand_bytes=float(data.get("dot_operand_bytes", 0.0)),
        tensors=tuple(TensorTraffic(**{**t, "sharing": tuple(tuple(p) for p in t.get("sharing", ()))})
                      for t in data.get("tensors", ())),
        vector_ops=float(data.get("vector_ops", 0.0)), sfu_ops=float(data.get("sfu_ops", 0.0)),
        loop_iterations=float(data.get("loop_iterations", 0.0)),
        dot_executions=float(data.get("dot_executions", 0.0)), loop_loads=float(data.get("loop_loads", 0.0)),
        work_runs=tuple((float(v), int(n)) for v, n in data.get("work_runs", ((1.0, 1),))),
        notes=tuple(data.get("notes", ())))
