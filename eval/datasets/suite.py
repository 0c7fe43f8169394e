"""A suite dataset: every config of every kernel of a kernel suite timed at each of its shapes on one GPU, with what
the generic model reads of each config (its `KernelCounts`), so a fit re-costs it without compiling: the ground truth
of the generic model (roofline/generic.py) and of its residual (tuner/generic_fitting.py).

    DIR/manifest.json   {"format": SUITE_DATASET_FORMAT, "profile": <HardwareProfile name>, "triton": "3.6.0",
                         "device": {...}, "kernels": {name: {"split": "train" | "heldout", ...}}}
    DIR/<kernel>.jsonl  one line per (shape, config): {"shape": {"M": 4096, ...}, "config": {"BLOCK": 64, ...,
                        "num_warps": 4, "num_stages": 3}, "time_us": 12.3 | null, "error": "..." | null,
                        "counts": KernelCounts.to_dict() | null (null: the model could not read the config)}

Each kernel's split is recorded when its first row is written, from the suite's own split; a reader asks for the
kernels it reads by name, and a kernel's file is opened only when asked for (a fit never opens a held-out one).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rooftune.candidates.kernel_counts import KernelCounts, counts_from_dict
from rooftune.inputs import check_input, read_json, read_text
from rooftune.outputs import write_atomic

SUITE_DATASET_FORMAT = "rooftune-suite-dataset-1"
MANIFEST = "manifest.json"
SPLITS = ("train", "heldout")


class SuiteDatasetError(ValueError):
    """A folder that is not a suite dataset, or a line of one that cannot be read."""


@dataclass(frozen=True)
class SuiteRow:
    """One config of one kernel at one shape: its time (µs) or error, and its counts (None: not read)."""

    shape: dict
    config: dict
    time_us: float | None
    error: str | None
    counts: KernelCounts | None

    def to_json(self) -> str:
        return json.dumps({"shape": self.shape, "config": self.config, "time_us": self.time_us, "error": self.error,
                           "counts": None if self.counts is None else self.counts.to_dict()})


@dataclass(frozen=True)
class SuiteCall:
    """Every recorded config of one kernel at one shape: their labels, times (NaN where failed) and counts."""

    kernel: str
    shape: tuple[tuple[str, int], ...]
    configs: tuple[str, ...]
    time_us: np.ndarray
    counts: tuple[KernelCounts | None, ...]


def config_text(config: dict) -> str:
    """'BLOCK=64,num_warps=4,num_stages=3': a config's one text form (its keys in the order recorded)."""
    return ",".join(f"{k}={v}" for k, v in config.items())


def read_suite_manifest(folder: str | os.PathLike) -> dict:
    """The manifest of the suite dataset `folder` (SuiteDatasetError where it is not one)."""
    path = Path(folder) / MANIFEST
    manifest = read_json(path, SuiteDatasetError, f"missing; {folder} is not a suite dataset")
    if not isinstance(manifest, dict) or manifest.get("format") != SUITE_DATASET_FORMAT \
            or not isinstance(manifest.get("kernels"), dict):
        raise SuiteDatasetError(f"{path}: not a suite dataset (expected format {SUITE_DATASET_FORMAT!r})")
    for name, entry in manifest["kernels"].items():
        if not isinstance(entry, dict) or entry.get("split") not in SPLITS:
            raise SuiteDatasetError(f"{path}: kernel {name!r} has no split ('train' or 'heldout')")
    return manifest


def kernels_in(manifest: dict, split: str) -> list[str]:
    """The kernels of `split` ('train' or 'heldout') the manifest records, sorted."""
    return sorted(n for n, e in manifest["kernels"].items() if e["split"] == split)


def _row(line: str, where: str) -> SuiteRow:
    try:
        data = json.loads(line)
        counts = data.get("counts")
        return SuiteRow(dict(data["shape"]), dict(data["config"]), data.get("time_us"), data.get("error"),
                        None if counts is None else counts_from_dict(counts))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise SuiteDatasetError(f"{where}: unreadable row ({type(exc).__name__}: {exc})") from None


def read_kernel_rows(folder: str | os.PathLike, kernel: str) -> list[SuiteRow]:
    """Every row of `kernel` in the dataset `folder` ([] where none is recorded yet)."""
    path = check_input(Path(folder) / f"{kernel}.jsonl")
    if not path.is_file():
        return []
    return [_row(line, f"{path}:{i}") for i, line in enumerate(read_text(path).splitlines(), start=1) if line.strip()]


def calls_of(kernel: str, rows: list[SuiteRow]) -> list[SuiteCall]:
    """`rows` of `kernel` grouped by shape, in the order first recorded."""
    grouped: dict[tuple, list[SuiteRow]] = {}
    for row in rows:
        grouped.setdefault(tuple(row.shape.items()), []).append(row)
    return [SuiteCall(kernel, shape, tuple(config_text(r.config) for r in group),
                      np.array([r.time_us if r.time_us is not None else np.nan for r in group], dtype=float),
                      tuple(r.counts for r in group)) for shape, group in grouped.items()]


def read_suite_calls(folder: str | os.PathLike, kernels: list[str]) -> list[SuiteCall]:
    """The recorded calls of `kernels` (and only theirs: no other kernel's file is opened)."""
    return [call for kernel in kernels for call in calls_of(kernel, read_kernel_rows(folder, kernel))]


def write_suite_manifest(folder: str | os.PathLike, manifest: dict) -> None:
    """The manifest, written whole (rooftune/outputs.py)."""
    write_atomic(Path(folder) / MANIFEST, json.dumps({**manifest, "format": SUITE_DATASET_FORMAT}, indent=1) + "\n")


def write_kernel_rows(folder: str | os.PathLike, kernel: str, rows: list[SuiteRow]) -> None:
    """`kernel`'s rows, the file written whole (a kernel's file is written once its every shape is measured)."""
    write_atomic(Path(folder) / f"{kernel}.jsonl", "".join(r.to_json() + "\n" for r in rows))
