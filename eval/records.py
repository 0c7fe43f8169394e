"""Recorded timings of one shape: the unit that datasets hold and replay evaluation consumes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType

from rooftune.candidates import AttentionShape, Config, GemmShape, Trial


@dataclass(frozen=True)
class ShapeRecords:
    """Every recorded trial of one shape. `baselines_us` holds non-candidate references timed
    beside them (e.g. {'cublas': 18.4}); `meta` holds per-shape facts (space version, noise, ...).

    `candidates`: the configs a strategy chooses from (the published space), where the trials also
    hold configs outside it (a baseline's configs timed beside the space); None: every trial.
    `aliases`: config -> recorded config that runs the same kernel (e.g. a tutorial config whose
    GROUP_M has no effect on this shape -> its GROUP_M=1 twin in the space), for `lookup`."""

    shape: GemmShape | AttentionShape
    trials: tuple[Trial, ...]
    baselines_us: dict[str, float] = field(default_factory=dict)
    meta: dict[str, object] = field(default_factory=dict)
    candidates: tuple[Config, ...] | None = None
    aliases: dict[Config, Config] = field(default_factory=dict)

    @property
    def best_us(self) -> float | None:
        """Fastest successful recorded time (any trial, in the space or not), or None when every config failed."""
        times = [t.time_us for t in self.trials if t.ok]
        return min(times) if times else None

    @cached_property  # replay asks once per shape per strategy run; the records never change
    def best_candidate_us(self) -> float | None:
        """Fastest successful time among the candidates (the best config of the space), or None."""
        allowed = None if self.candidates is None else set(self.candidates)
        times = [t.time_us for t in self.trials if t.ok and (allowed is None or t.config in allowed)]
        return min(times) if times else None

    def candidate_configs(self) -> list[Config]:
        """The configs a strategy may choose from, in recorded order."""
        return list(self.candidates) if self.candidates is not None else [t.config for t in self.trials]

    def lookup(self) -> Mapping[Config, Trial]:
        """Config -> Trial for every recorded config and every alias (as a Trial of the alias's config);
        read-only, built once (replay asks for it once per shape per strategy run)."""
        return self._table

    @cached_property
    def _table(self) -> Mapping[Config, Trial]:
        table = {t.config: t for t in self.trials}
        for alias, target in self.aliases.items():
            if alias not in table and target in table:
                table[alias] = replace(table[target], config=alias)
        return MappingProxyType(table)
