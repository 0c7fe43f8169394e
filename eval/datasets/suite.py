"""The suite's ground truth on disk: one JSON file per (kernel, shape), `<folder>/<kernel>/<shape id>.json`, each a
`ShapeRecords` written whole (rooftune/outputs.py); the folder's `suite.json` names the GPU and Triton it holds, and
`quarantine.json` the configs that killed the CUDA context. No torch or Triton here: replay reads it on any machine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from rooftune.candidates.config import parse_config
from rooftune.candidates.records import ShapeRecords, Trial
from rooftune.outputs import json_text, write_atomic

FORMAT = 1
MANIFEST = "suite.json"
QUARANTINE = "quarantine.json"
SAME_FOLDER = ("gpu", "triton")  # what every shape file of one folder shares with its manifest


class SuiteDataError(ValueError):
    """A suite folder that is not this run's (another GPU or Triton), or a file that is not a suite record."""


@dataclass(frozen=True)
class SuiteShape:
    """A suite kernel's shape: the kernel's name and its sizes, in order (hashable, unlike the registry's dicts)."""

    kernel: str
    sizes: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, kernel: str, sizes: Mapping[str, int]) -> SuiteShape:
        return cls(kernel, tuple((k, int(v)) for k, v in sizes.items()))

    @property
    def dims(self) -> dict[str, int]:
        return dict(self.sizes)

    @property
    def id(self) -> str:
        """The file-name form, kernels/suite/record.py `shape_id`'s: 'M4096-N4096'."""
        return "-".join(f"{k}{v}" for k, v in self.sizes)


def shape_path(folder: str | Path, shape: SuiteShape) -> Path:
    return Path(folder) / shape.kernel / f"{shape.id}.json"


def records_to_dict(records: ShapeRecords) -> dict:
    """A shape's JSON form: its trials in list order, a config as its one text form, None fields left out (but
    `time_us`, null where the trial is an error)."""
    trials = [{k: v for k, v in {**asdict(t), "config": str(t.config)}.items() if v is not None or k == "time_us"}
              for t in records.trials]
    return {"format": FORMAT, "kernel": records.shape.kernel, "shape": records.shape.dims, "shape_id": records.shape.id,
            "trials": trials, "baselines_us": dict(records.baselines_us), "meta": dict(records.meta)}


def records_from_dict(d: Mapping, origin: str = "<dict>") -> ShapeRecords:
    if d.get("format") != FORMAT:
        raise SuiteDataError(f"{origin}: not a suite shape file of format {FORMAT} (format {d.get('format')!r})")
    try:
        trials = tuple(Trial(**{**t, "config": parse_config(t["config"])}) for t in d["trials"])
        return ShapeRecords(shape=SuiteShape.of(d["kernel"], d["shape"]), trials=trials,
                            baselines_us=dict(d.get("baselines_us", {})), meta=dict(d.get("meta", {})))
    except (KeyError, TypeError, ValueError) as exc:
        raise SuiteDataError(f"{origin}: malformed suite shape file ({exc})") from exc


def write_shape(folder: str | Path, records: ShapeRecords) -> Path:
    """Write one shape's records whole (a killed run leaves the old file or none, never part of one)."""
    return write_atomic(shape_path(folder, records.shape), json_text(records_to_dict(records)))


def read_shape(path: str | Path) -> ShapeRecords:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SuiteDataError(f"{path}: cannot be read as JSON ({exc})") from exc
    return records_from_dict(data, str(path))


def read_suite(folder: str | Path, kernel: str | None = None) -> list[ShapeRecords]:
    """Every shape file of the folder (of one kernel), sorted by kernel and file name."""
    pattern = f"{kernel}/*.json" if kernel else "*/*.json"
    return [read_shape(p) for p in sorted(Path(folder).glob(pattern))]


def finished(folder: str | Path) -> set[tuple[str, str]]:
    """(kernel, shape id) of every shape file in the folder: what a resumed run skips."""
    return {(p.parent.name, p.stem) for p in Path(folder).glob("*/*.json")}


def open_folder(folder: str | Path, facts: Mapping[str, object]) -> dict:
    """The folder's manifest, written from `facts` where there is none; SuiteDataError where the folder holds another
    GPU's or another Triton's measurements (their times would mix with this run's)."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        manifest = {"format": FORMAT, **facts}
        write_atomic(path, json_text(manifest))
        return manifest
    manifest = json.loads(path.read_text())
    for key in SAME_FOLDER:
        if manifest.get(key) != facts.get(key):
            raise SuiteDataError(f"{folder} holds {key} {manifest.get(key)!r}, this run is on {facts.get(key)!r}: "
                                 f"write into a folder of its own")
    return manifest


def quarantined(folder: str | Path) -> dict[str, list[str]]:
    """'<kernel>/<shape id>' -> the configs (text form; '*' the whole shape) that killed the CUDA context there."""
    path = Path(folder) / QUARANTINE
    return json.loads(path.read_text()) if path.exists() else {}


def quarantine(folder: str | Path, shape: SuiteShape, config: str) -> None:
    """Record that `config` ('*': something in the shape's interleaved rounds) killed the CUDA context on `shape`."""
    entries = quarantined(folder)
    key = f"{shape.kernel}/{shape.id}"
    entries[key] = sorted({*entries.get(key, []), config})
    write_atomic(Path(folder) / QUARANTINE, json_text(entries))
