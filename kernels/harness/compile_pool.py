"""Parallel pre-compilation: every candidate compiled once, on all CPU cores, before any is timed.

Compiling is CPU work (Triton -> PTX -> cubin) and lands in Triton's on-disk cache, so compiling in
spawned worker processes and then launching in the parent costs the parent only a cache load. A
config that fails to compile (e.g. out of resources) is recorded with its error string, never
fatal; when a worker dies, the configs in flight run again one at a time, so the crash names its culprit.
Compile seconds are reported separately from run time.

A `CompilePool` keeps its spawn workers for the life of a sweep: starting one (interpreter, torch,
triton and a CUDA context in each worker) costs seconds, and a sweep compiles dozens of batches. A
batch may get a timeout: configs unfinished by then (a hung worker) are recorded as
"compile timeout" and the workers are killed, so the next batch starts a fresh pool. Workers exit
on their own when the process that started them dies (`_watch_parent`): a sweep killed by a signal
leaves none behind. A worker's `__main__` is kernels/harness/compile_worker.py, never the program that started
the pool (`WorkerContext`): a script without an `if __name__ == "__main__":` guard, a `python -c` program or one
read from stdin all start the same workers.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import multiprocessing.context
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool

from rooftune.hwprofiles import hwprobe
from rooftune.kernels.harness import compile_worker
from rooftune.kernels.harness.context import error_text

# warmup(shape, config, device) -> compile seconds; a module-level function (picklable by reference)
Warmup = Callable[..., float]
CompileResult = float | str | object  # seconds, or the error (or what a warmup that returns data returns)
TIMEOUT = "compile timeout"
DIED = "worker process died while compiling"


class CompileStalled(RuntimeError):
    """No job of a batch finished before its timeout: the pool, not one config, is stuck."""


def _compile_one(warmup: Warmup, shape, config, device: str) -> CompileResult:
    """The warmup's seconds (its own count, else the wall time), its error text, or what else it returns
    (kernels/introspect/binary.py `compile_job`: what the compiler decided)."""
    started = time.perf_counter()
    try:
        result = warmup(shape, config, device)
    except Exception as exc:
        return error_text(exc)
    if result is None:
        return time.perf_counter() - started
    return float(result) if isinstance(result, (int, float)) else result


def _load_module(name: str) -> None:
    """Import `name` in a worker (the kernel module: torch, triton and the kernel's source)."""

    importlib.import_module(name)


def _warmup_of(module: str, shape, config, device: str) -> float:
    return importlib.import_module(module).warmup(shape, config, device)


def warmup_by_name(module: str) -> Warmup:
    """`module`'s `warmup`, referred to by name: a pool can start (and its workers import the kernel)
    before this process has imported torch or triton."""

    warmup = functools.partial(_warmup_of, module)
    warmup.__module__ = module  # what `start` loads in each worker
    return warmup


def _offline_warmup_of(module: str, arch: int, shape, config, device: str) -> float:
    """`module.compile_kernels(shape, config)` for compute capability `arch` with no CUDA context
    (kernels/harness/offline.py): the binary lands in Triton's cache under the key that a
    launch on such a GPU looks up, and the worker neither creates a context nor takes GPU memory."""

    from rooftune.kernels.harness.offline import offline_target

    kernels = importlib.import_module(module)
    started = time.perf_counter()
    with offline_target(arch):
        kernels.compile_kernels(shape, config)
    return time.perf_counter() - started


def offline_warmup_by_name(module: str, arch: int) -> Warmup:
    """Like `warmup_by_name`, compiling for `arch` (e.g. 90) without a GPU context in the workers, and
    without torch there (`_forgo_torch`)."""

    warmup = functools.partial(_offline_warmup_of, module, arch)
    warmup.__module__ = module
    warmup.needs_torch = False
    return warmup


class _NoTorch(types.ModuleType):
    """What an offline compile worker finds as `torch`: a `Tensor` class nothing is an instance of (all
    Triton's argument specializer asks of torch), and an ImportError for anything else."""

    Tensor = type("Tensor", (), {})

    def __getattr__(self, name: str):
        raise ImportError(f"torch.{name}: an offline compile worker runs without torch (kernels/harness/compile_pool.py)")


def _forgo_torch() -> None:
    """Start a worker whose warmup needs no torch (an offline one: Triton's MockTensors and dtypes).
    Triton's argument specializer imports torch on its first call, only to recognise torch.Tensor
    arguments (python/src/specialize.cc): a worker would otherwise load torch on its first compile,
    seconds of CPU in every worker while the parent is starting CUDA. Triton 3.6 goes on without torch
    where the import fails; 3.9 needs the module, so the worker gets a stand-in whose Tensor class no
    argument is an instance of: MockTensors are specialized as they are without torch, and the binaries
    and their cache keys are the same either way."""
    sys.modules.setdefault("torch", _NoTorch("torch"))


# How often a worker checks that the process that started it is still alive.
PARENT_WATCH_S = 0.5


def _watch_parent(interval_s: float = PARENT_WATCH_S) -> None:
    """Exit this worker once the process that started it is gone. A parent ended by a signal (`timeout`'s
    SIGTERM, a scheduler's) never closes its pool, and its workers would otherwise go on: compiling what
    was queued, then waiting on a pipe nobody writes, each holding its memory (and, where the warmup loads
    torch, a CUDA context). Orphans are re-parented, so a changed parent pid means the parent died."""

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, name="rooftune-parent-watch", daemon=True).start()


def _init_worker(forgo_torch: bool) -> None:
    """Each pool worker's start: watch the parent; and without torch where the warmup needs none."""
    _watch_parent()
    if forgo_torch:
        _forgo_torch()


# One spawn at a time names the worker's module as `__main__` (two pools starting workers from two threads).
_SPAWN_LOCK = threading.Lock()


@contextlib.contextmanager
def _worker_main():
    """`sys.modules['__main__']` is the compile worker's module while a worker spawns: multiprocessing reads
    the preparation data it sends the child (which module to run as the child's `__main__`) from it, and then
    the child runs kernels/harness/compile_worker.py, which does nothing on import, in place of the parent's
    program. For the milliseconds of a spawn, another thread of this process that looks up `__main__` finds
    that module."""
    with _SPAWN_LOCK:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = compile_worker
        try:
            yield
        finally:
            sys.modules["__main__"] = main


class WorkerProcess(multiprocessing.context.SpawnProcess):
    """A spawned process that starts from kernels/harness/compile_worker.py, not by re-running `__main__`."""

    @staticmethod
    def _Popen(process_obj):
        with _worker_main():
            return multiprocessing.context.SpawnProcess._Popen(process_obj)


class WorkerContext(multiprocessing.context.SpawnContext):
    """The spawn context of a compile pool's workers (`WorkerProcess`)."""

    Process = WorkerProcess


def usable_cpus() -> int:
    """The cores this process may run on (its affinity mask under taskset or a container's cpuset), else
    the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class CompilePool:
    """`warmup` in a spawn pool of `workers` processes (default `usable_cpus()`; 0 = in this process),
    kept across `compile` calls until `close` (or the end of a `with` block)."""

    def __init__(self, warmup: Warmup, *, workers: int | None = None, device: str = "cuda"):
        self.warmup, self.device = warmup, device
        self.workers = usable_cpus() if workers is None else workers
        self._pool: ProcessPoolExecutor | None = None
        self.pools_started = 0
        self.started_at: float | None = None  # perf_counter at `start`, and as each worker had loaded the module
        self.loaded_at: list[float] = []
        self.spawned = 0

    def __enter__(self) -> CompilePool:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(kill=exc_type is not None)  # leaving on an error: a worker may be mid-compile

    def close(self, kill: bool = False) -> None:
        if kill:
            self._kill()
        elif self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _kill(self) -> None:
        """Stop the workers now, even one stuck in a compile (shutdown alone would wait for it)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list((pool._processes or {}).values()):  # no public way before Python 3.14
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:  # workers start on demand, up to `workers`, and stay
            context = WorkerContext()
            forgo_torch = not getattr(self.warmup, "needs_torch", True)
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context, initializer=_init_worker,
                                             initargs=(forgo_torch,))
            self.pools_started += 1
        return self._pool

    def start(self, workers: int | None = None) -> None:
        """Spawn up to `workers` worker processes now and load the kernel's module in each, without
        waiting: a caller with start-up work of its own (a CUDA context) overlaps the two."""
        if self.workers == 0:
            return
        pool = self._executor()
        self.started_at, self.loaded_at = time.perf_counter(), []
        self.spawned = min(workers or self.workers, self.workers)
        for _ in range(self.spawned):
            pool.submit(_load_module, self.warmup.__module__).add_done_callback(
                lambda _: self.loaded_at.append(time.perf_counter()))

    def ready_seconds(self) -> float | None:
        """Seconds from `start` until every worker it spawned had loaded the module (None before then)."""
        if self.started_at is None or len(self.loaded_at) < max(self.spawned, 1):
            return None
        return max(self.loaded_at) - self.started_at

    def submit(self, shape, config) -> Future:
        """Compile one config in the background (a Future of seconds or the error text), e.g. configs a
        search is likely to ask for next. A worker crash surfaces as BrokenProcessPool from the Future."""
        if self.workers == 0:
            done: Future = Future()
            done.set_result(_compile_one(self.warmup, shape, config, self.device))
            return done
        return self._executor().submit(_compile_one, self.warmup, shape, config, self.device)

    def compile(self, jobs: Sequence[tuple[object, Hashable]], *, timeout_s: float | None = None,
                on_done: Callable[[int], None] | None = None) -> dict[Hashable, CompileResult]:
        """Compile `jobs` (shape, config) pairs; returns config -> seconds or error string.
        `timeout_s`: the batch's wall-clock limit (pool workers only); `on_done(k)` is called after
        each finished job (for a progress bar). Raises CompileStalled when a batch of several jobs
        times out with none finished."""
        stream = self.stream()
        for shape, config in jobs:
            stream.add(shape, config)
        return stream.results(timeout_s=timeout_s, on_done=on_done)

    def stream(self) -> CompileStream:
        """A batch whose jobs are handed to the workers one by one as the caller has them ready (`add`), collected
        together by `results`, as `compile` collects a batch: a caller still preparing later jobs keeps the
        workers busy with the earlier ones."""
        return CompileStream(self)


class CompileStream:
    """Jobs of one batch, each compiling in the workers from the moment it is `add`ed (where the pool has none, in
    this process when `results` is asked); `results` waits for them all (`CompilePool.compile`'s timeout and crash
    rules)."""

    def __init__(self, pool: CompilePool):
        self.pool = pool
        self.jobs: list[tuple[object, Hashable]] = []
        self.started_at: float | None = None  # perf_counter at the first `add`
        self._futures: dict[Future, tuple[object, Hashable]] = {}
        self._crashed: list[tuple[object, Hashable]] = []  # refused by a pool already broken

    def add(self, shape, config) -> None:
        pool = self.pool
        if self.started_at is None:
            self.started_at = time.perf_counter()
        self.jobs.append((shape, config))
        if pool.workers == 0:
            return
        try:
            future = pool._executor().submit(_compile_one, pool.warmup, shape, config, pool.device)
        except BrokenProcessPool:  # a worker died meanwhile: `results` runs it again
            self._crashed.append((shape, config))
            return
        self._futures[future] = (shape, config)

    def results(self, *, timeout_s: float | None = None, on_done: Callable[[int], None] | None = None
                ) -> dict[Hashable, CompileResult]:
        """config -> seconds or error string, for every job added (`CompilePool.compile`'s docstring)."""
        pool, results = self.pool, {}
        if pool.workers == 0:
            for shape, config in self.jobs:
                results[config] = _compile_one(pool.warmup, shape, config, pool.device)
                if on_done:
                    on_done(1)
            return results
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        # A dying worker breaks the whole pool, so every job in flight fails with it. After such a
        # crash the failed jobs run one at a time, each alone in its pool: a crash then names its culprit.
        futures, pending, crashed = self._futures, [], list(self._crashed)
        while True:
            left_s = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                for future in as_completed(futures, left_s):
                    shape, config = futures[future]
                    try:
                        results[config] = future.result()
                    except BrokenProcessPool:
                        crashed.append((shape, config))
                        continue
                    except Exception as exc:  # e.g. the result could not be pickled back
                        results[config] = error_text(exc)
                    if on_done:
                        on_done(1)
            except FuturesTimeout:
                pool._kill()
                unfinished = [config for _, config in [*futures.values(), *pending, *crashed] if config not in results]
                if len(unfinished) == len(self.jobs) > 1:
                    raise CompileStalled(f"no compile of a batch of {len(self.jobs)} finished in {timeout_s:.0f} s; "
                                         "the compile workers look hung") from None
                results.update((config, TIMEOUT) for config in unfinished)
                if on_done:
                    on_done(len(unfinished))
                return results
            if crashed:
                pool._kill()
                if len(futures) == 1 and crashed == list(futures.values()):  # alone in its pool: the culprit
                    results[crashed[0][1]] = DIED
                    if on_done:
                        on_done(1)
                    crashed = []
            pending = crashed + pending
            if not pending:
                return results
            (shape, config), pending, crashed = pending[0], pending[1:], []
            futures = {pool._executor().submit(_compile_one, pool.warmup, shape, config, pool.device): (shape, config)}


def gpu_pool(module: str, workers: int | None = None) -> CompilePool:
    """A CompilePool for `module`'s kernels on this machine's GPU, its workers already starting: they
    compile for the compute capability NVML reports, without torch or a CUDA context of their own
    (`offline_warmup_by_name`: quicker to start and to stop, no GPU memory), or with them where NVML
    cannot tell (`warmup_by_name`). The caller loads torch and its CUDA context meanwhile. Raises
    NoGpuError, before any worker starts, where neither NVML nor CUDA sees a GPU."""

    capability = hwprobe.nvml_compute_capability()  # None: no GPU, or NVML cannot tell
    if capability is None and not hwprobe.gpu_visible():
        hwprobe.require_cuda()  # the clear error
    warmup = offline_warmup_by_name(module, 10 * capability[0] + capability[1]) if capability else warmup_by_name(module)
    pool = CompilePool(warmup, workers=workers)
    pool.start()
    return pool
