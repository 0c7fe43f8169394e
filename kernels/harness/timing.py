"""The timing harness: interleaved CUDA-graph replays, medians over shuffled rounds, pruning, clock checks.

Method (ANCHORS.md, "Timing noise on the H200"): each candidate is captured once as a CUDA graph of
n back-to-back launches (n sized so one replay takes about `target_ms`; a long kernel gets n = 1);
the launches rotate over several input sets so memory-bound shapes are not timed from L2 (the caller
sizes them with `input_sets_needed`). After one untimed warm-up replay each, `rounds` rounds follow in
which every surviving candidate replays its graph once, in a fresh shuffled order, timed by CUDA
events; time per launch = replay time / n, and a candidate's time is the median over its rounds.
Interleaving makes power and thermal drift hit all candidates of a round alike, so ratios between
candidates stay comparable even when the absolute clock moves.

Progressive pruning: after each round a candidate's median is compared with the best median so far.
At >= `prune_ratio` (3x) it gets no more rounds (it keeps what it has, usually one timing); between
`mid_ratio` (1.3x) and `prune_ratio` it gets `mid_rounds` (3) rounds, enough for a median that is not
one sample, while the full `rounds` go to the candidates that can be the best. Budgets only shrink
as a candidate's own median is re-read, so a finished candidate never comes back. `baseline_keys`
(the sweep's 'cublas') are timed and pruned like any candidate but do not set the pace: "best so far"
is over the other keys, so a baseline much faster than every config does not cut all of them to
`mid_rounds` (it counts only when nothing else has a time).

SM clock and throttle reasons are read through pynvml while a round runs; a round whose clock moved
more than `clock_tolerance` (relative) is run again, at most `max_repeats` times, and each Timing
records the clock range of the rounds it took part in (None where pynvml is unavailable).

The scheduling and aggregation (`run_rounds`) is pure Python over a `replay_round` callable, so it is
tested on the CPU with a fake timer; `time_candidates` wires it to CUDA graphs and events. A launcher
that fails to capture, or whose graph fails its warm-up replay (each synchronized on its own), is an
error Timing, unless the CUDA context died with it: then `ContextLost` (kernels/harness/context.py) names it,
since no later candidate could run. A fault in the interleaved rounds cannot be pinned on one
candidate; its ContextLost names the round.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, replace

import torch

from rooftune.hwprofiles.hwprobe import nvml_index
from rooftune.kernels.harness.context import ContextLost, context_error, error_text

Launch = Callable[[int], None]


@dataclass(frozen=True)
class ClockSample:
    """One pynvml reading: SM clock (MHz) and the throttle-reason bitmask; None where unreadable."""

    sm_mhz: float | None
    throttle_reasons: int | None = None


@dataclass(frozen=True)
class Timing:
    """A candidate's measured time per launch. `spread` = (max − min) / median over its rounds
    (0 with one round); `launches` = launches per graph replay; `repeats` = rounds of its pass that
    were run again because the clock moved. `error` is set (and `median_us` None) when the candidate
    could not be launched or captured."""

    median_us: float | None
    rounds: int
    spread: float | None
    times_us: tuple[float, ...] = ()
    launches: int = 1
    clock_mhz_min: float | None = None
    clock_mhz_max: float | None = None
    throttle_reasons: int | None = None
    repeats: int = 0
    error: str | None = None


# replay_round(order) -> ({key: time per launch in µs}, clock samples taken while the round ran)
ReplayRound = Callable[[list[Hashable]], tuple[dict[Hashable, float], list[ClockSample]]]


def round_budget(ratio: float, rounds: int, prune_ratio: float, mid_ratio: float | None,
                 mid_rounds: int) -> int:
    """Rounds a candidate at `ratio` × the best median so far deserves."""
    if ratio >= prune_ratio:
        return 1
    if mid_ratio is not None and ratio >= mid_ratio:
        return min(mid_rounds, rounds)
    return rounds


def clock_moved(samples: Sequence[ClockSample], tolerance: float) -> bool:
    """True when the SM clock readings of a round span more than `tolerance` of their maximum."""
    mhz = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    return len(mhz) >= 2 and (max(mhz) - min(mhz)) / max(mhz) > tolerance


def summarize(times_us: Sequence[float], samples: Sequence[ClockSample], repeats: int = 0,
              launches: int = 1) -> Timing:
    """Median, spread and clock range of one candidate's rounds."""
    median = statistics.median(times_us)
    spread = (max(times_us) - min(times_us)) / median if median > 0 else 0.0
    mhz = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    reasons = [s.throttle_reasons for s in samples if s.throttle_reasons is not None]
    throttle = 0 if reasons else None
    for r in reasons:
        throttle |= r
    return Timing(median_us=median, rounds=len(times_us), spread=spread, times_us=tuple(times_us),
                  launches=launches, clock_mhz_min=min(mhz) if mhz else None,
                  clock_mhz_max=max(mhz) if mhz else None, throttle_reasons=throttle, repeats=repeats)


def run_rounds(keys: Sequence[Hashable], replay_round: ReplayRound, *, rounds: int = 7,
               prune_ratio: float = 3.0, mid_ratio: float | None = 1.3, mid_rounds: int = 3,
               clock_tolerance: float = 0.05, max_repeats: int = 2, baseline_keys: Collection[Hashable] = (),
               rng: random.Random | None = None) -> dict[Hashable, Timing]:
    """Schedule interleaved rounds over `keys` (see the module docstring) and aggregate them;
    `baseline_keys` are timed but do not set the pruning pace."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    rng = rng or random.Random(0)
    times: dict[Hashable, list[float]] = {k: [] for k in keys}
    clocks: dict[Hashable, list[ClockSample]] = {k: [] for k in keys}
    done: set[Hashable] = set()
    repeats = 0
    while True:
        active = [k for k in keys if k not in done]
        if not active:
            break
        for attempt in range(max_repeats + 1):
            order = list(active)
            rng.shuffle(order)
            measured, samples = replay_round(order)
            if not clock_moved(samples, clock_tolerance) or attempt == max_repeats:
                break
            repeats += 1
        for k in active:
            times[k].append(float(measured[k]))
            clocks[k].extend(samples)
        pace = [t for k, t in times.items() if t and k not in baseline_keys] or [t for t in times.values() if t]
        best = min(statistics.median(t) for t in pace)
        for k in active:
            ratio = statistics.median(times[k]) / best if best > 0 else 1.0
            if len(times[k]) >= round_budget(ratio, rounds, prune_ratio, mid_ratio, mid_rounds):
                done.add(k)
    return {k: summarize(times[k], clocks[k], repeats) for k in keys}


def input_sets_needed(bytes_per_set: int, l2_bytes: int, factor: float = 3.0, max_sets: int = 64,
                      max_total_bytes: int = 8 << 30) -> int:
    """Input sets to rotate over so the bytes touched between two uses of one set exceed
    `factor` × L2: ceil(factor · l2_bytes / bytes_per_set), at least 1, at most `max_sets` and
    `max_total_bytes` in all (tiny shapes stay L2-resident whatever we do; that is their real case)."""
    want = math.ceil(factor * l2_bytes / max(bytes_per_set, 1))
    fit = max(1, max_total_bytes // max(bytes_per_set, 1))
    return int(max(1, min(want, max_sets, fit)))


def launches_per_replay(launch_us: float, target_ms: float, max_launches: int = 1000) -> int:
    """n such that n launches take about `target_ms`: round(target / launch time), in [1, max_launches]."""
    if launch_us <= 0:
        return max_launches
    return int(min(max_launches, max(1, round(target_ms * 1000.0 / launch_us))))


class NvmlClock:
    """Reads the SM clock and throttle reasons of one GPU through pynvml; every failure gives None."""

    def __init__(self, index: int = 0):
        self._handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # no driver, no library, no permission: clocks become None
            self._handle = None

    def __call__(self) -> ClockSample:
        if self._handle is None:
            return ClockSample(None, None)
        nvml = self._nvml
        try:
            mhz = float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM))
        except Exception:
            mhz = None
        reasons = None
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(nvml, name, None)
            if fn is not None:
                try:
                    reasons = int(fn(self._handle))
                    break
                except Exception:
                    continue
        return ClockSample(mhz, reasons)


def _graph_of(launch: Launch, n: int, first: int = 0) -> "torch.cuda.CUDAGraph":
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in range(n):
            launch(first + j)
    return graph


def _time_replay_us(graph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0


def _capture(launch: Launch, target_ms: float, max_launches: int) -> tuple[object, int]:
    """Warm the launcher, size n from one event-timed launch, capture; re-size once from the graph
    itself when the single launch was dominated by launch overhead (tiny kernels)."""
    launch(0)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    launch(1)
    end.record()
    end.synchronize()
    n = launches_per_replay(start.elapsed_time(end) * 1000.0, target_ms, max_launches)
    graph = _graph_of(launch, n)
    if n > 1:
        per_launch_us = _time_replay_us(graph) / n
        better = launches_per_replay(per_launch_us, target_ms, max_launches)
        if better > 1.5 * n:
            n, graph = better, _graph_of(launch, better)
    return graph, n


def _warm_up(graphs: dict[Hashable, object], order: Sequence[Hashable]) -> dict[Hashable, Timing]:
    """Replay each graph of `order` once, synchronizing after each: a graph that fails on replay (its
    launches read other input sets than the eager runs of the capture) becomes an error Timing and
    leaves `graphs`, or raises ContextLost naming it when it killed the CUDA context, instead of
    failing the whole pass unnamed. Returns the failed keys' Timings."""
    failed: dict[Hashable, Timing] = {}
    for key in order:
        try:
            graphs[key].replay()
            torch.cuda.synchronize()
        except Exception as exc:
            dead = context_error()
            if dead:
                raise ContextLost(key, dead) from exc
            failed[key] = Timing(None, 0, None, error=error_text(exc))
            del graphs[key]
    return failed


def time_candidates(launchers: dict[Hashable, Launch], *, rounds: int = 7, target_ms: float = 0.5,
                    prune_ratio: float = 3.0, mid_ratio: float | None = 1.3, mid_rounds: int = 3,
                    clock_tolerance: float = 0.05, max_repeats: int = 2, max_launches: int = 1000,
                    clock: Callable[[], ClockSample] | None = None, poll_s: float = 0.002,
                    baseline_keys: Collection[Hashable] = (), seed: int = 0) -> dict[Hashable, Timing]:
    """Time every launcher on the current CUDA device by interleaved graph replay (module docstring).

    A launcher that fails to run or to be captured gets a Timing with `error`; the others go on.
    Raises ContextLost when that failure killed the CUDA context.
    """
    clock = clock or NvmlClock(nvml_index(torch.cuda.current_device()))
    graphs: dict[Hashable, object] = {}
    launches: dict[Hashable, int] = {}
    failed: dict[Hashable, Timing] = {}
    for key, launch in launchers.items():
        try:
            graphs[key], launches[key] = _capture(launch, target_ms, max_launches)
        except Exception as exc:  # a kernel that cannot run is data, not the end of the pass
            failed[key] = Timing(None, 0, None, error=error_text(exc))
            dead = context_error()
            if dead:
                raise ContextLost(key, dead) from exc
    rng = random.Random(seed)
    warm = list(graphs)
    rng.shuffle(warm)
    failed.update(_warm_up(graphs, warm))
    keys = list(graphs)
    events = {k: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for k in keys}

    def replay_round(order):
        for key in order:
            start, end = events[key]
            start.record()
            graphs[key].replay()
            end.record()
        samples = [clock()]
        last = events[order[-1]][1]
        while not last.query():  # read the clock while the round runs, not while the GPU idles
            time.sleep(poll_s)
            samples.append(clock())
        last.synchronize()
        return {k: events[k][0].elapsed_time(events[k][1]) * 1000.0 / launches[k] for k in order}, samples

    try:
        timed = run_rounds(keys, replay_round, rounds=rounds, prune_ratio=prune_ratio, mid_ratio=mid_ratio,
                           mid_rounds=mid_rounds, clock_tolerance=clock_tolerance, max_repeats=max_repeats,
                           baseline_keys=baseline_keys, rng=rng) if keys else {}
    except Exception as exc:  # every graph ran once in the warm-up: a fault now cannot be pinned on one
        dead = context_error()
        if dead:
            raise ContextLost(f"one of {len(keys)} candidates in an interleaved round", dead) from exc
        raise
    result = {k: replace(t, launches=launches[k]) for k, t in timed.items()}
    result.update(failed)
    return {k: result[k] for k in launchers}
