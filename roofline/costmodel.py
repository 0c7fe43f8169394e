"""A kernel family's cost model as the roofline layer exposes it (a family's `model` names one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CostModel:
    """`predict(shape, columns, profile)` -> the family's breakdown (one array per term over the configs; every
    breakdown has `time_us`, `fits` (the config fits the GPU) and `dominant` (an index into `terms`)), its type, the names of its dominant terms, and
    `note(shape, breakdown, i)`: a line on config `i` the breakdown's table does not show (None: no line)."""

    predict: Callable
    breakdown: type
    terms: tuple[str, ...]
    note: Callable[..., str] | None = None
