"""Splitting a sweep's shape list into shards of about equal GPU time: across machines (`--shard I/N`)
and across the GPUs of one machine (`--gpus`).

The split is a function of the set of shapes alone (not of the list's order): shapes, each once by
its id, sorted by estimated cost (most expensive first, ties by shape id), are dealt to the shards
like cards in a snake (0, 1, .., N-1, N-1, .., 0, 0, 1, ..). Every shape lands in exactly one shard,
shard sizes differ by at most one, and the long shapes are spread over all shards (each shard takes
one of every N consecutive shapes in cost order), with the snake evening out who gets the larger of
each N. Every machine computes the same split from the same shape list, profile and rooftune version.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from rooftune.candidates import Shape, configs_to_columns, kernel_of, legal_configs, shape_id
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline import predict


def sweep_cost_us(shape: Shape, profile: HardwareProfile, replay_us: float) -> float:
    """A shape's estimated sweep cost (µs per timing round): Σ over its legal configs of
    max(predicted time, replay_us), since the harness replays each config's CUDA graph for about
    `replay_us` (SweepSettings.target_ms) per round, or one launch of a kernel longer than that
    (kernels/harness/timing.py). On the H200 datasets it ranks the shapes' recorded measuring times with
    Spearman 0.97 (GEMM, 320 shapes) and 0.86 (attention, 318); FLOPs alone: 0.54 and 0.68."""
    configs = legal_configs(kernel_of(shape).space, shape, profile).configs
    if not configs:
        return 0.0
    predicted_us = predict(shape, configs_to_columns(configs), profile).time_us
    return float(np.maximum(predicted_us, replay_us).sum())


def shard_numbers(shapes: Sequence[Shape], count: int, cost: Callable[[Shape], float]) -> dict[str, int]:
    """shape id -> its shard (0 .. count-1), for each distinct shape of `shapes`. Costs are rounded to
    3 significant digits first, so that a last-bit difference between machines' floating point
    cannot reorder two shapes (a tie is broken by shape id)."""
    if count < 1:
        raise ValueError(f"shard count must be at least 1, got {count}")
    unique = {shape_id(s): s for s in shapes}
    ranked = sorted(unique, key=lambda sid: (-float(f"{cost(unique[sid]):.3g}"), sid))
    snake = [*range(count), *reversed(range(count))]
    return {sid: snake[position % (2 * count)] for position, sid in enumerate(ranked)}


def shard_of(shapes: Sequence[Shape], index: int, count: int, cost: Callable[[Shape], float]) -> list[Shape]:
    """The shapes of shard `index` of `count` (see `shard_numbers`), each once, in list order."""
    if not 0 <= index < count:
        raise ValueError(f"shard {index} of {count} does not exist (0 .. {count - 1})")
    numbers = shard_numbers(shapes, count, cost)
    picked = {shape_id(s): s for s in shapes if numbers[shape_id(s)] == index}
    return list(picked.values())
