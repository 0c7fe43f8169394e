"""A Trial: the outcome of measuring one config, from a live GPU timer or a recorded dataset."""

from __future__ import annotations

from dataclasses import dataclass

from rooftune.candidates.config import Config


@dataclass(frozen=True)
class Trial:
    """`time_us` is the kernel time; `error` is set instead when the config failed (compile error,
    out of resources, failed reference check). Errors are data, never an inf sentinel."""

    config: Config
    time_us: float | None
    error: str | None = None
    compile_s: float | None = None

    def __post_init__(self):
        if (self.time_us is None) == (self.error is None):
            raise ValueError("a Trial has exactly one of time_us and error")

    @property
    def ok(self) -> bool:
        return self.error is None
