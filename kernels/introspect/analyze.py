"""A user kernel's configs on one call, read without running them: each config's grid, lowered IR, compiled binary
(in parallel compile workers that never import the user's program) and per-program work, as `KernelCounts`.

The ingredients are what any Triton kernel has and what `@triton.autotune` users write: the kernel (a
JITFunction), its `triton.Config`s, the call's arguments by parameter name (tensors, tensor descriptors, ints;
no meta-parameters) and the launch grid (a tuple, or a callable of the meta-parameters, as `kernel[grid]` takes).
Errors are data: a config whose grid, lowering, compile or IR cannot be read becomes an `AnalysisError` saying
which and why, never an exception out of `analyze`.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from rooftune.candidates.kernel_counts import CompiledFacts, KernelCounts, TensorTraffic
from rooftune.kernels.harness.compile_pool import CompilePool
from rooftune.kernels.harness.context import error_text
from rooftune.kernels.introspect.binary import compile_job, compile_lowered
from rooftune.kernels.introspect.expressions import Env
from rooftune.kernels.introspect.lowering import (
    LoweredConfig,
    jit_function,
    lower_ir,
    prefetch_triton_key,
    triton_key_ready,
    warm_launchers,
    with_launch_key,
)
from rooftune.kernels.introspect.tally import Tally, program_ids, tally
from rooftune.kernels.introspect.ttir import parse_ttir
from rooftune.kernels.introspect.work import KernelWork, read_work
from rooftune.kernels.lazy import torch

# Elements of a tensor read back to evaluate the scalars a kernel loads for its control flow: at most this many
# distinct ones per tensor (a bound a control-flow read never approaches; a larger read is left unknown).
MAX_READ_ELEMENTS = 1 << 20
UNTRACED = "(untraced)"  # loads and stores whose pointer the IR does not trace to an argument


@dataclass(frozen=True)
class ConfigAnalysis:
    """One config read on one call: its grid, what it does (`counts`, for the generic model), its IR's loops and
    ops (`work`) with each loop's mean trips per program, and the seconds its lowering and compile took."""

    config: Any
    grid: tuple[int, int, int]
    counts: KernelCounts
    work: KernelWork
    loop_trips: tuple[float, ...]
    seconds: float


@dataclass(frozen=True)
class AnalysisError:
    """A config that could not be read: `stage` 'grid', 'lowering', 'compile' or 'ir', and why."""

    config: Any
    stage: str
    error: str


Analysis = ConfigAnalysis | AnalysisError


def launch_meta(kernel, config, args: dict, copy=None) -> dict:
    """The meta-parameters a grid callable sees for `config` on `args`: every parameter with its default, the
    call's arguments and the config's values (Triton passes the launch's bound arguments). `copy`: as `lower`'s."""
    fn, _ = copy if copy is not None else jit_function(kernel)
    defaults = {p.name: p.default for p in inspect.signature(fn.fn).parameters.values()
                if p.default is not inspect.Parameter.empty}
    return {**defaults, **args, **config.all_kwargs()}


def evaluate_grid(grid, meta: dict) -> tuple[int, int, int]:
    """(x, y, z) programs of `grid` (a tuple, or a callable of the meta-parameters)."""
    dims = tuple(grid(meta) if callable(grid) else grid)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"a grid has 1 to 3 dimensions, got {dims!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))


def _tensor(value):
    """The torch tensor behind an argument (a tensor descriptor's base), else None."""
    base = getattr(value, "base", value)
    return base if hasattr(base, "element_size") and hasattr(base, "untyped_storage") else None


def tensor_bytes(value) -> int:
    """Bytes of the tensor an argument is (0 where it is none: an int, a MockTensor)."""
    t = _tensor(value)
    return int(t.numel() * t.element_size()) if t is not None else 0


def reader(args: dict) -> Callable[[str, np.ndarray], np.ndarray | None]:
    """`read(name, offsets)`: the call's tensor `name` at element offsets from its data pointer (the storage
    after the tensor's offset, as the kernel addresses it), as float64; None where it cannot be read (no tensor,
    or one on the meta device: a dtype and a shape, no values)."""

    def read(name: str, offsets: np.ndarray) -> np.ndarray | None:
        t = _tensor(args.get(name))
        if t is None or t.device.type == "meta":
            return None
        wanted, where = np.unique(offsets, return_inverse=True)
        size = t.untyped_storage().nbytes() // t.element_size() - t.storage_offset()
        if len(wanted) > MAX_READ_ELEMENTS or wanted.min() < 0 or wanted.max() >= size:
            return None
        flat = torch.as_strided(t, (size,), (1,), t.storage_offset())
        picked = flat[torch.from_numpy(wanted).to(flat.device)].double().cpu().numpy()
        return picked[where]

    return read


def call_integers(args: dict) -> dict[str, float]:
    """The call's integer (and boolean, float) arguments by name."""
    return {k: float(v) for k, v in args.items() if isinstance(v, (int, float, np.integer, np.floating))}


def counts_of(tallied: Tally, compiled: CompiledFacts, args: dict, notes: tuple[str, ...]) -> KernelCounts:
    """The KernelCounts of a tallied call with what the compiler decided and the arguments' sizes."""
    names = sorted(set(tallied.loads) | set(tallied.stores), key=lambda n: (n is None, n or ""))
    tensors = tuple(TensorTraffic(n or UNTRACED, tensor_bytes(args.get(n)) if n else 0, tallied.loads.get(n, 0.0),
                                  tallied.stores.get(n, 0.0), (tallied.sharing or {}).get(n, ())) for n in names)
    return KernelCounts(
        programs=tallied.programs, compiled=compiled, mma_flops=tuple(sorted(tallied.mma_flops.items())),
        dot_operand_bytes=tallied.dot_operand_bytes, tensors=tensors, vector_ops=tallied.vector_ops,
        sfu_ops=tallied.sfu_ops, loop_iterations=tallied.loop_iterations, dot_executions=tallied.dot_executions,
        loop_loads=tallied.loop_loads, work_runs=tallied.work_runs,
        notes=tuple(dict.fromkeys(notes + tallied.notes)))


@functools.lru_cache(maxsize=256)
def kernel_work(ttir: str) -> KernelWork:
    """The per-program work a TTIR text states, read once per process: it holds no call's values, so a further key
    of a kernel (the same TTIR, other sizes) puts its values into the same reading (`tally`)."""
    return read_work(parse_ttir(ttir))


def ir_reading(lowered: LoweredConfig, grid: tuple[int, int, int], args: dict, read: dict | None = None) -> tuple:
    """(KernelWork, Tally): `lowered`'s IR read and tallied over `grid` on the call `args`. `read`, where given,
    keeps each (TTIR, grid, arguments)'s reading for the call's other configs: those differing only in warps or
    stages share it."""
    read = {} if read is None else read
    key = (lowered.ttir, grid, id(args))
    if key not in read:
        work = kernel_work(lowered.ttir)
        pids, stands_for = program_ids(grid)
        read[key] = work, tally(work, Env(args=call_integers(args), grid=grid, pids=pids, read=reader(args)),
                                stands_for)
    return read[key]


def _lowered(calls: Sequence[tuple], arch: int, on_source: Callable[[dict], Any] | None = None,
             on_keyed: Callable[[int, LoweredConfig], Any] | None = None) -> list:
    """Per call (kernel, config, args, grid): (grid, LoweredConfig, seconds) or an AnalysisError. The TTIRs are made
    while Triton's key of its own files is computed in a thread (lowering.py `prefetch_triton_key`); once it is
    known, each config lowered gets its launch key and is handed to `on_keyed(index, lowered)` (a compile pool's
    stream: the first configs compile while the rest lower). `on_source({key: source})` is called with each launch
    source of a new signature as the lowering meets it (`lower`'s `sources`)."""
    prefetch_triton_key()
    sources: dict = {}
    out: list = []
    copies: dict[int, tuple] = {}  # id(kernel) -> its JITFunction copy, made once for the calls (lowering.lower)
    keyed = 0  # out[:keyed] have their launch keys

    def key_up_to(end: int) -> None:
        nonlocal keyed
        for i in range(keyed, end):
            item = out[i]
            if isinstance(item, AnalysisError):
                continue
            started = time.perf_counter()
            try:
                out[i] = (item[0], with_launch_key(item[1]), item[2] + time.perf_counter() - started)
            except Exception as exc:
                out[i] = AnalysisError(calls[i][1], "lowering", error_text(exc))
                continue
            if on_keyed is not None:
                on_keyed(i, out[i][1])
        keyed = max(keyed, end)

    for kernel, config, args, grid in calls:
        started = time.perf_counter()
        try:
            if id(kernel) not in copies:
                copies[id(kernel)] = jit_function(kernel)
            copy = copies[id(kernel)]
            dims = evaluate_grid(grid, launch_meta(kernel, config, args, copy))
        except Exception as exc:
            out.append(AnalysisError(config, "grid", error_text(exc)))
            continue
        known = set(sources)
        try:
            out.append((dims, lower_ir(kernel, config, args, arch, copy=copy, sources=sources),
                        time.perf_counter() - started))
        except Exception as exc:
            out.append(AnalysisError(config, "lowering", error_text(exc)))
        if on_source is not None and len(sources) > len(known):
            on_source({k: v for k, v in sources.items() if k not in known})
        if on_keyed is not None and triton_key_ready():
            key_up_to(len(out))
    key_up_to(len(out))
    return out


def analyze_calls(calls: Sequence[tuple], *, arch: int = 90, pool: CompilePool | None = None,
                  timeout_s: float | None = None, phases: dict | None = None) -> list[Analysis]:
    """Each (kernel, config, args, grid) of `calls` read as `analyze` reads a config, their compiles batched in
    `pool`'s workers (None: in this process); one result per call, in order. While the workers compile, this process
    reads the IR; from the first config lowered on, a side thread builds the launchers the configs' launches will
    load (lowering.py `warm_launchers`: C compiles, outside the GIL). `phases`, where given, gets the seconds each
    step took here: "lower", "read" (the IR read and tallied), then what was left to wait for: "launcher" and
    "compile"."""
    phases = {} if phases is None else phases
    # one thread waits for the pool's compiles, another builds launchers: a launcher never delays the compiles' start
    with ThreadPoolExecutor(1) as side, ThreadPoolExecutor(1) as builder:
        started = time.perf_counter()
        launching: list = []
        on_source = (lambda new: launching.append(builder.submit(warm_launchers, new))) if pool is not None else None
        stream = pool.stream() if pool is not None else None
        lowered = _lowered(calls, arch, on_source, (lambda i, job: stream.add(job, i)) if stream is not None else None)
        jobs = [(item[1], i) for i, item in enumerate(lowered) if not isinstance(item, AnalysisError)]
        phases["lower"] = time.perf_counter() - started
        compile_started = stream.started_at if stream is not None and stream.started_at else time.perf_counter()
        compiling = side.submit(stream.results, timeout_s=timeout_s) if stream is not None and jobs else None
        started = time.perf_counter()
        read: dict = {}  # (TTIR, grid, arguments) -> its reading
        readings: dict[int, tuple | str] = {}
        for i, item in enumerate(lowered):
            if not isinstance(item, AnalysisError):
                try:
                    readings[i] = ir_reading(item[1], item[0], calls[i][2], read)
                except Exception as exc:
                    readings[i] = error_text(exc)
        phases["read"] = time.perf_counter() - started
        started = time.perf_counter()
        for built in launching:
            built.result()
        phases["launcher"] = time.perf_counter() - started
        started = time.perf_counter()
        if compiling is not None:
            compiled = compiling.result()
        else:
            compile_started = time.perf_counter()
            compiled = {i: _compile_here(job) for job, i in jobs}
        phases["compile"] = time.perf_counter() - started
    per_job = (time.perf_counter() - compile_started) / max(len(jobs), 1)
    results: list[Analysis] = []
    for i, ((_, config, args, _), item) in enumerate(zip(calls, lowered)):
        if isinstance(item, AnalysisError):
            results.append(item)
        elif not isinstance(compiled.get(i), CompiledFacts):
            results.append(AnalysisError(config, "compile", str(compiled.get(i, "not compiled"))))
        elif isinstance(readings[i], str):
            results.append(AnalysisError(config, "ir", readings[i]))
        else:
            work, tallied = readings[i]
            try:
                results.append(ConfigAnalysis(config, item[0], counts_of(tallied, compiled[i], args, work.notes),
                                              work, tallied.loop_trips, item[2] + per_job))
            except Exception as exc:
                results.append(AnalysisError(config, "ir", error_text(exc)))
    return results


def analyze(kernel, configs: Sequence, args: dict, grid, *, arch: int = 90, pool: CompilePool | None = None,
            timeout_s: float | None = None, phases: dict | None = None) -> list[Analysis]:
    """Each of `configs` of `kernel` on the call `args` with launch `grid`, compiled for compute capability `arch`
    in `pool`'s workers (None: in this process), read (module docstring); one result per config, in order
    (`phases`: as `analyze_calls` fills it)."""
    return analyze_calls([(kernel, c, args, grid) for c in configs], arch=arch, pool=pool, timeout_s=timeout_s,
                         phases=phases)


def _compile_here(lowered: LoweredConfig) -> CompiledFacts | str:
    try:
        return compile_lowered(lowered)
    except Exception as exc:
        return error_text(exc)


def analysis_pool(workers: int | None = None) -> CompilePool:
    """A compile pool whose workers compile lowered configs (`compile_job`), started now."""
    pool = CompilePool(compile_job, workers=workers)
    pool.start()
    return pool
