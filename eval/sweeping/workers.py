"""One worker process per GPU of this machine, each running a task on its part of the work with only
its GPU visible, their progress relayed to one reporter and their failures to the caller.

Each worker is a fresh (spawn) process whose CUDA_VISIBLE_DEVICES is set to its GPU before anything
in it touches CUDA, so its GPU is CUDA device 0 there. Workers run independently: one that fails does
not stop the others, which finish their parts; the caller then gets the failures, re-raised.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from rooftune.hwprofiles.hwprobe import NoGpuError, nvml_gpu_count


class WorkerError(RuntimeError):
    """A GPU's worker ended without a result: killed, crashed, or its error could not be passed on."""


class RemoteTraceback(Exception):
    """The traceback of a worker's exception, as text: the cause of the exception re-raised here."""

    def __str__(self) -> str:
        return self.args[0]


def visible_devices(gpus: Sequence[int]) -> list[str]:
    """The CUDA_VISIBLE_DEVICES value of each of `gpus`, numbered as CUDA numbers this process's GPUs:
    the entries of CUDA_VISIBLE_DEVICES where it is set, else every GPU NVML sees. NoGpuError for a
    GPU that is not there (or named twice)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = ([e.strip() for e in listed.split(",") if e.strip()] if listed is not None
               else [str(i) for i in range(nvml_gpu_count())])
    if len(set(gpus)) != len(gpus):
        raise NoGpuError(f"--gpus names a GPU twice: {','.join(map(str, gpus))}")
    missing = [g for g in gpus if not 0 <= g < len(entries)]
    if missing:
        seen = f"GPUs 0-{len(entries) - 1}" if entries else "no GPU"
        where = " (CUDA_VISIBLE_DEVICES)" if listed is not None else ""
        raise NoGpuError(f"--gpus names GPU {', '.join(map(str, missing))}, but this machine shows {seen}{where}")
    return [entries[g] for g in gpus]


class QueueReporter:
    """A sweep reporter in a worker: each call sent to the parent as (event, gpu, ...)."""

    def __init__(self, events, gpu: int):
        self.events, self.gpu = events, gpu

    def start(self, total, done):
        pass  # the parent knows the totals before the workers start

    def phase(self, shape, text):
        self.events.put(("phase", self.gpu, shape, text))

    def finished(self, shape, seconds):
        self.events.put(("finished", self.gpu, shape, seconds))


def _passable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling both ways (to re-raise it as itself in the parent), else a
    WorkerError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return WorkerError(f"{type(exc).__name__}: {exc}")


def _worker(task: Callable, part: Any, gpu: int, visible: str, events) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = visible  # before torch or CUDA start in this process
    try:
        events.put(("done", gpu, task(part, QueueReporter(events, gpu))))
    except BaseException as exc:
        events.put(("failed", gpu, _passable(exc), traceback.format_exc()))


def run_on_gpus(task: Callable[[Any, Any], Any], parts: Sequence[Any], gpus: Sequence[int], reporter,
                *, poll_s: float = 1.0) -> dict[int, Any]:
    """`task(part, reporter)` for each (part, gpu) pair, each in its own process that sees only that
    GPU (as CUDA device 0); returns gpu -> the task's result. `task` and the parts must pickle (a module-level
    function, e.g. a functools.partial of one). Progress (`phase`, `finished`) goes to `reporter`
    with the shape labelled by its GPU. When any worker fails, the others are still waited for, then
    the first failure is re-raised (as its own class where it can be rebuilt from a message) with
    every worker's outcome in its message and the worker's traceback as its cause."""
    visible = visible_devices(gpus)
    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    # Not daemons: a worker starts its own compile processes.
    workers = {g: context.Process(target=_worker, args=(task, part, g, v, events), name=f"rooftune-gpu{g}")
               for part, g, v in zip(parts, gpus, visible)}
    results: dict[int, Any] = {}
    failures: dict[int, tuple[BaseException, str]] = {}
    try:
        for w in workers.values():
            w.start()
        while len(results) + len(failures) < len(workers):
            # A worker that has exited has flushed its events: drain them before calling it lost.
            exited = [g for g, w in workers.items() if not w.is_alive()]
            try:
                event = events.get(timeout=poll_s)
            except queue.Empty:
                for g in exited:
                    if g not in results and g not in failures:
                        failures[g] = (WorkerError(f"its process ended with exit code {workers[g].exitcode} "
                                                   "and no result (killed?)"), "")
                continue
            kind, g, *rest = event
            if kind == "phase":
                reporter.phase(f"gpu {g}: {rest[0]}", rest[1])
            elif kind == "finished":
                reporter.finished(f"gpu {g}: {rest[0]}", rest[1])
            elif kind == "done":
                results[g] = rest[0]
            else:
                failures[g] = (rest[0], rest[1])
    finally:
        for w in workers.values():
            if w.is_alive() and (len(results) + len(failures) < len(workers)):
                w.terminate()  # the parent was interrupted: take the workers down with it
            w.join()
    if failures:
        raise _combined(failures, results)
    return results


def _combined(failures: dict[int, tuple[BaseException, str]], results: dict[int, Any]) -> BaseException:
    """The first failure, its message listing every GPU's outcome, its cause the remote traceback."""
    lines = [f"gpu {g}: {exc}" for g, (exc, _) in sorted(failures.items())]
    lines += [f"gpu {g}: finished its part ({summary})" for g, summary in sorted(results.items())]
    first, trace = failures[min(failures)]
    message = "\n".join(lines)
    try:
        combined = type(first)(message)
    except Exception:
        combined = WorkerError(message)
    combined.__cause__ = RemoteTraceback(trace) if trace else None
    return combined
