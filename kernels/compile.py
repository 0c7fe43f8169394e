"""Parallel pre-compilation: every candidate compiled once, on all CPU cores, before any is timed.

Compiling is CPU work (Triton -> PTX -> cubin) and lands in Triton's on-disk cache, so compiling in
spawned worker processes and then launching in the parent costs the parent only a cache load. A
config that fails to compile (e.g. out of resources) is recorded with its error string, never
fatal; when a worker dies, the unfinished configs are retried in a fresh pool (a few times).
Compile seconds are reported separately from run time.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

# warmup(shape, config, device) -> compile seconds; a module-level function (picklable by reference)
Warmup = Callable[..., float]
CompileResult = float | str  # seconds, or the error


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]


def _compile_one(warmup: Warmup, shape, config, device: str) -> CompileResult:
    started = time.perf_counter()
    try:
        seconds = warmup(shape, config, device)
    except Exception as exc:
        return _error_text(exc)
    return float(seconds) if seconds is not None else time.perf_counter() - started


def precompile(warmup: Warmup, jobs: Sequence[tuple[object, Hashable]], *, device: str = "cuda",
               workers: int | None = None, on_done: Callable[[int], None] | None = None,
               max_pool_restarts: int = 3) -> dict[Hashable, CompileResult]:
    """Compile `jobs` (shape, config) pairs with `warmup` in a spawn pool of `workers` processes
    (default os.cpu_count(); 0 = in this process). Returns config -> seconds or error string.
    `on_done(k)` is called after each finished job (for a progress bar)."""
    results: dict[Hashable, CompileResult] = {}
    pending = list(jobs)
    workers = (os.cpu_count() or 1) if workers is None else workers
    if workers == 0:
        for shape, config in pending:
            results[config] = _compile_one(warmup, shape, config, device)
            if on_done:
                on_done(1)
        return results
    restarts = 0
    while pending:
        crashed = []
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=context) as pool:
            futures = {pool.submit(_compile_one, warmup, shape, config, device): (shape, config)
                       for shape, config in pending}
            for future in as_completed(futures):
                shape, config = futures[future]
                try:
                    results[config] = future.result()
                except BrokenProcessPool:
                    crashed.append((shape, config))
                    continue
                except Exception as exc:  # e.g. the result could not be pickled back
                    results[config] = _error_text(exc)
                if on_done:
                    on_done(1)
        restarts += 1
        # A crash breaks the whole pool: retry everything unfinished in a fresh one; a config that
        # is alone, or still unfinished after `max_pool_restarts` pools, is recorded as the culprit.
        if crashed and (restarts > max_pool_restarts or len(crashed) == 1):
            for _, config in crashed:
                results[config] = "worker process died while compiling"
                if on_done:
                    on_done(1)
            crashed = []
        pending = crashed
    return results
