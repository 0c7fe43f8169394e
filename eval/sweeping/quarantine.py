"""Configs that killed the CUDA context: kept per shape in DIR/quarantine.json and never run again.

An illegal memory access is sticky: after it, every CUDA call of the process fails, so the config
that caused it (`ContextLost` from the measurer, kernels/harness/context.py) is written here, atomically,
with its shape, and the run stops with `ContextQuarantined`. The next run records it as an error row
(`QUARANTINED`) without running it, so the shape completes. File: {shape id: [{"config", "reason"}]}.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from rooftune.candidates import Config, GemmShape, parse_config
from rooftune.eval.datasets.format import DatasetError, ShapeRecords, Trial, dataset_lock, shape_id
from rooftune.kernels.harness.context import ContextLost
from rooftune.outputs import write_atomic

QUARANTINE = "quarantine.json"
QUARANTINED = "quarantined: killed the CUDA context"


class ContextQuarantined(RuntimeError):
    """A config killed the CUDA context and is now quarantined; this process can measure no more."""


class ContextLostUnattributed(RuntimeError):
    """The CUDA context died under something that is not one config (the baseline, or an interleaved
    round of many): nothing could be quarantined, so running the same command again repeats it."""


def read_quarantine(root: str | Path) -> dict[str, dict[Config, str]]:
    """shape id -> {config: the error it left}; empty without a quarantine file."""
    path = Path(root) / QUARANTINE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        return {sid: {parse_config(e["config"]): e["reason"] for e in entries} for sid, entries in data.items()}
    except (json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"{path}: not a quarantine file ({exc})") from exc


def quarantine(root: str | Path, shape: GemmShape, config: Config, reason: str) -> Path:
    """Add `config` of `shape` to the quarantine file of the dataset at `root` (under the dataset's
    lock: sweeps on other GPUs may add theirs at the same time); returns its path."""
    path = Path(root) / QUARANTINE
    with dataset_lock(root):
        entries = read_quarantine(root)
        entries.setdefault(shape_id(shape), {})[config] = reason
        data = {sid: [{"config": str(c), "reason": r} for c, r in configs.items()] for sid, configs in entries.items()}
        write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode())
    return path


def quarantining(root: str | Path, work: Callable[[GemmShape, dict], None]) -> Callable[[GemmShape, dict], None]:
    """`work(shape, compiled)` whose ContextLost puts the culprit config in the quarantine of the dataset
    at `root` and ends the run with ContextQuarantined."""

    def guarded(shape: GemmShape, compiled: dict) -> None:
        try:
            work(shape, compiled)
        except ContextLost as exc:
            if not isinstance(exc.culprit, Config):  # e.g. cuBLAS: nothing to leave out next time
                raise ContextLostUnattributed(
                    f"{shape_id(shape)}: the CUDA context died while running {exc.culprit!r} ({exc.reason}); "
                    "no single config is to blame, so nothing is quarantined and running the same command "
                    "again would repeat it: take the shape out of the list, or report it") from exc
            path = quarantine(root, shape, exc.culprit, exc.reason)
            raise ContextQuarantined(
                f"{shape_id(shape)}: config {exc.culprit} killed the CUDA context ({exc.reason}); it is "
                f"quarantined in {path}. Run the same command again: the shape then completes with it as "
                "an error row.") from exc

    return guarded


def with_quarantined(result: ShapeRecords, configs: Sequence[Config], quarantined: Mapping[Config, str]) -> ShapeRecords:
    """`result` (measured without the `quarantined` configs) with an error row for each of them, rows
    in the order of `configs`; the shape's meta counts them (`quarantined`)."""
    if not quarantined:
        return result
    rows = {r.config: r for r in result.trials}
    rows.update((c, Trial(c, None, QUARANTINED)) for c in configs if c in quarantined)
    return replace(result, trials=tuple(rows[c] for c in configs),
                   meta={**result.meta, "quarantined": sum(c in quarantined for c in configs)})
