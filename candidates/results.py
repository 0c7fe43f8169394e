"""What measuring a shape records: one row per config with how it was timed, and the shape's baselines and facts.

A `Trial` (candidates/trial.py) is what a strategy sees of a measured config; a `ConfigResult` is the
dataset's row of it, with the timing details a sweep keeps (rounds, spread, the final passes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rooftune.candidates.config import Config
from rooftune.candidates.shapes import AttentionShape, GemmShape


@dataclass(frozen=True)
class ConfigResult:
    """One config of one shape: a time (µs per launch) or an error, plus how it was measured."""

    config: Config
    time_us: float | None
    error: str | None = None
    compile_s: float | None = None
    rounds: int = 0
    spread: float | None = None
    screen_us: float | None = None
    retime_us: float | None = None
    retime2_us: float | None = None
    retime_rounds: int | None = None
    in_space: bool = True


@dataclass(frozen=True)
class ShapeResult:
    """Everything measured for one shape: per-config rows, baselines (e.g. {'cublas': µs}), facts."""

    shape: GemmShape | AttentionShape
    rows: tuple[ConfigResult, ...]
    baselines_us: dict[str, float] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)
