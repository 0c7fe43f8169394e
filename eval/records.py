"""Recorded timings of one shape: the unit that datasets hold and replay evaluation consumes."""

from __future__ import annotations

from dataclasses import dataclass, field

from rooftune.candidates import AttentionShape, Config, GemmShape, Trial


@dataclass(frozen=True)
class ShapeRecords:
    """Every recorded trial of one shape. `baselines_us` holds non-candidate references timed
    beside them (e.g. {'cublas': 18.4}); `meta` holds per-shape facts (space version, noise, ...)."""

    shape: GemmShape | AttentionShape
    trials: tuple[Trial, ...]
    baselines_us: dict[str, float] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def best_us(self) -> float | None:
        """Fastest successful recorded time, or None when every config failed."""
        times = [t.time_us for t in self.trials if t.ok]
        return min(times) if times else None

    def lookup(self) -> dict[Config, Trial]:
        """Config -> Trial, for a replay `measure`."""
        return {t.config: t for t in self.trials}
