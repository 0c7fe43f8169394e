"""Triton's own Autotuner with two things injected by the tuner (tuner/pytorch/autotune.py): the order in which
a new key's configs are benchmarked (and how many), and a persistent cache of the choice per key.

Everything else is Triton 3.6's `triton.runtime.autotuner.Autotuner` unchanged: the key (the `key`
arguments' values plus every tensor argument's dtype), `prune_configs_by`, `reset_to_zero`,
`restore_value`, the pre/post hooks, `do_bench`, the in-memory choice per key (`self.cache`). The
persistent cache is consulted before the order (`prune_configs`, which `Autotuner.run` calls for a key it has not
chosen for in this process): a key chosen for before, in any process, costs a file read, not the order's compiles;
the configs it names is then the only one `Autotuner.run` passes to Triton's seam for a persistent cache,
`check_disk_cache`, which keeps it without benchmarking. A new key's choice is stored there after the benchmark.
"""

from __future__ import annotations

import hashlib
import inspect
import time
from collections.abc import Callable
from functools import cached_property
from typing import Any

import torch
import triton
from triton.runtime.autotuner import Autotuner

# order(configs, args) -> the configs to benchmark, in that order (args: the call's arguments by name)
ConfigOrder = Callable[[list[triton.Config], dict[str, Any]], list[triton.Config]]
# recall(kernel_id, key, candidates, args) -> the stored choice for this key among `candidates` (the user's configs
# after their own pruning, before the order), or None
Recall = Callable[[str, tuple, list[triton.Config], dict[str, Any]], "triton.Config | None"]
# remember(kernel_id, key, candidates, args, choice, timings) stores Triton's choice among `candidates`
# (timings: each benchmarked config -> do_bench's result)
Remember = Callable[[str, tuple, list[triton.Config], dict[str, Any], triton.Config, dict], None]
# Timed calls per config in Triton's interpreter, after one untimed call.
INTERPRETER_REPS = 2


def interpreter_bench(kernel_call: Callable[[], None], quantiles=(0.5, 0.2, 0.8)) -> list[float]:
    """Wall-clock ms per call at `quantiles` over INTERPRETER_REPS calls: a stand-in for do_bench in
    Triton's interpreter, which has no GPU driver to time with (triton.autotune itself fails there)."""
    kernel_call()
    times_ms = []
    for _ in range(INTERPRETER_REPS):
        start = time.perf_counter()
        kernel_call()
        times_ms.append((time.perf_counter() - start) * 1e3)
    return torch.tensor(times_ms, dtype=torch.float64).quantile(torch.tensor(quantiles, dtype=torch.float64)).tolist()


class OrderedAutotuner(Autotuner):
    """`Autotuner` that benchmarks `order(...)`'s configs (after the user's own pruning) and keeps the
    choice through `recall` / `remember`."""

    def __init__(self, fn, configs, key, *, order: ConfigOrder, recall: Recall, remember: Remember, **triton_kwargs):
        super().__init__(fn, fn.arg_names, configs, key, **triton_kwargs)
        self.order, self.recall, self.remember = order, recall, remember
        # Autotuner.run consults check_disk_cache only with cache_results on (Triton turns it off in
        # the interpreter); ours is always on.
        self.cache_results = True
        self._call_args: dict[str, Any] = {}
        self._key: tuple = ()  # the new key being tuned (`tuning_key`), recalled by it and remembered under it
        self._candidates: list[triton.Config] = []  # its configs before the order
        self._recalled: triton.Config | None = None  # the new key's stored choice, where there is one
        # the last new key's tune in seconds: "order" (the user's pruning and `order`: compiling and reading the
        # configs) and "bench" (timing the ones kept); what a first call spends beyond its launch
        self.tune_seconds: dict[str, float] = {}

    @cached_property
    def do_bench(self):
        """The user's do_bench, else Triton's benchmarker; `interpreter_bench` in the interpreter."""
        if self._do_bench is None and triton.knobs.runtime.interpret:
            return interpreter_bench
        return Autotuner.do_bench.func(self)

    @property
    def kernel_id(self) -> str:
        """name@digest of the kernel's source: a stored choice is for this kernel as written, wherever it
        is imported from (a script's __main__ or a module)."""
        try:
            source = inspect.getsource(self.base_fn)
        except (OSError, TypeError):  # defined where no source file exists (exec, a REPL)
            source = self.base_fn.__code__.co_code.hex()
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        return f"{self.base_fn.__qualname__}@{digest}"

    def run(self, *args, **kwargs):
        self._call_args = {**dict(zip(self.arg_names, args)), **kwargs}
        try:
            return super().run(*args, **kwargs)
        finally:
            self._call_args = {}

    def tuning_key(self, kwargs) -> tuple:
        """Triton's key of a call (Autotuner.run's): the `key` arguments' values, then each tensor's dtype."""
        args = {k: v for k, v in {**(self.nargs or {}), **kwargs}.items() if k in self.arg_names}
        return tuple([args[k] for k in self.keys if k in args] + [str(v.dtype) for v in args.values()
                                                                   if hasattr(v, "dtype")])

    def prune_configs(self, kwargs):
        """The user's `prune_configs_by` first (Triton's); then the stored choice for the key where `recall` has one
        (alone: nothing to order or time), else `order`: the configs to benchmark."""
        started = time.perf_counter()
        try:
            self._key, self._candidates = self.tuning_key(kwargs), super().prune_configs(kwargs)
            self._recalled = self.recall(self.kernel_id, self._key, self._candidates, self._call_args)
            if self._recalled is not None:
                return [self._recalled]
            return self.order(self._candidates, {**(self.nargs or {}), **kwargs})
        finally:
            self.tune_seconds = {"order": time.perf_counter() - started}

    def check_disk_cache(self, tuning_key, configs, bench_fn):
        """True (nothing benchmarked) where the key's choice was recalled; else benchmark and `remember`."""
        if self._recalled is not None:
            self.cache[tuning_key], self._recalled = self._recalled, None
            return True
        started = time.perf_counter()
        bench_fn()
        self.tune_seconds["bench"] = time.perf_counter() - started
        self.remember(self.kernel_id, self._key, self._candidates, self._call_args, self.cache[tuning_key],
                      self.configs_timings)
        return False
