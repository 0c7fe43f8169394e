"""A Trial: the outcome of measuring one config, from a live GPU timer or a recorded dataset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rooftune.candidates.config import Config


@dataclass(frozen=True)
class Trial:
    """`time_us` is the kernel time; `error` is set instead when the config failed (compile error,
    out of resources, failed reference check). Errors are data, never an inf sentinel."""

    config: Config
    time_us: float | None
    error: str | None = None
    compile_s: float | None = None
    predicted_us: float | None = None  # the model's (corrected) prediction, where a tuner attached it

    def __post_init__(self):
        if (self.time_us is None) == (self.error is None):
            raise ValueError("a Trial has exactly one of time_us and error")

    @property
    def ok(self) -> bool:
        return self.error is None


class Measurer(Protocol):
    """The one measurement seam: a batch of configs of one shape in, one Trial per config out, in order
    (a live GPU measurer compiles the batch in parallel, checks each config against the reference and
    times them together; a recorded measurer looks them up in a dataset). A config may be asked for
    again: a live measurer re-times it beside the others, a recorded one returns the same record."""

    def measure(self, shape, configs: list[Config]) -> list[Trial]: ...
