"""The kernel suite's ground truth on disk (issue 58, docs/suite.md): every config of every suite kernel timed at each
of its shapes on one GPU, beside what the generic model reads of the config (its `KernelCounts`), so that a fit
re-costs a recorded config without compiling it. scripts/device/suite_sweep.py writes it; the generic fit and
evaluation (tuner/generic_fitting.py) and the suite's tests read it, on any machine (no torch or Triton here).

    DIR/manifest.json                 {"format": FORMAT, "gpu": the driver's name, "profile": the profile swept with
                                       (a shipped name), "gpu_profile": that profile's name (every dataset
                                       manifest's field), "triton", "torch", "dtype", "timing",
                                       "kernels": {name: {"split": "train" | "heldout", "kind", "shapes", "configs"}}}
    DIR/<kernel>/<shape id>.json.xz   one `ShapeRecords`, written whole as soon as the shape is measured (a resumed
                                       sweep skips it): its trials in list order, each with its config's counts
                                       (null: the model could not read it), the eager baseline, the shape's facts
    DIR/quarantine.json               '<kernel>/<shape id>' -> the configs that killed the CUDA context there

A reader names the kernels it reads and opens only their folders: a fit reads the training kernels the manifest lists,
never a held-out kernel's files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from rooftune.candidates.config import Config, parse_config
from rooftune.candidates.kernel_counts import KernelCounts, counts_from_dict
from rooftune.candidates.records import ShapeRecords, Trial, check_time_us
from rooftune.eval.datasets.format import DatasetError, compress_text, read_shape_text
from rooftune.inputs import read_json
from rooftune.outputs import json_text, write_atomic

# 2: the two halves of issue 58 wrote two formats (1) before they merged; no dataset of either exists.
FORMAT = "rooftune-suite-dataset-2"
MANIFEST = "manifest.json"
QUARANTINE = "quarantine.json"
SUFFIX = ".json.xz"
SPLITS = ("train", "heldout")
# what every shape of one folder shares: their times (and the configs legal under the profile) would not mix otherwise
SAME_FOLDER = ("gpu", "gpu_profile", "triton")


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


@dataclass(frozen=True)
class SuiteRecords:
    """One kernel at one shape: its `ShapeRecords` (trials in list order) and each trial's counts (None where the
    model could not read the config), in the same order."""

    records: ShapeRecords
    counts: tuple[KernelCounts | None, ...]

    def __post_init__(self):
        if len(self.counts) != len(self.records.trials):
            raise ValueError(f"{len(self.counts)} counts for {len(self.records.trials)} trials")

    @property
    def shape(self) -> SuiteShape:
        return self.records.shape

    @property
    def kernel(self) -> str:
        return self.records.shape.kernel

    @property
    def configs(self) -> tuple[Config, ...]:
        return tuple(t.config for t in self.records.trials)

    @property
    def time_us(self) -> np.ndarray:
        """Each trial's time, NaN where it is an error."""
        return np.array([t.time_us if t.ok else np.nan for t in self.records.trials], dtype=float)


def shape_path(folder: str | os.PathLike, shape: SuiteShape) -> Path:
    return Path(folder) / shape.kernel / f"{shape.id}{SUFFIX}"


def records_to_dict(rec: SuiteRecords) -> dict:
    """A shape's JSON form: its trials in list order, a config as its one text form, None fields left out (but
    `time_us`, null where the trial is an error, and `counts`, null where the model could not read the config)."""
    trials = []
    for t, counts in zip(rec.records.trials, rec.counts):
        fields = {k: v for k, v in {**asdict(t), "config": str(t.config)}.items() if v is not None or k == "time_us"}
        trials.append({**fields, "counts": None if counts is None else counts.to_dict()})
    r = rec.records
    return {"format": FORMAT, "kernel": rec.kernel, "shape": rec.shape.dims, "shape_id": rec.shape.id,
            "trials": trials, "baselines_us": dict(r.baselines_us), "meta": dict(r.meta)}


def _trial(t: dict) -> Trial:
    fields = {k: v for k, v in t.items() if k != "counts"}
    if fields.get("time_us") is not None:
        check_time_us(fields["time_us"], "time_us")
    return Trial(**{**fields, "config": parse_config(fields["config"])})


def records_from_dict(d: Mapping, origin: str = "<dict>") -> SuiteRecords:
    if not isinstance(d, Mapping) or d.get("format") != FORMAT:
        raise DatasetError(f"{origin}: not a suite shape file of format {FORMAT!r}")
    try:
        records = ShapeRecords(shape=SuiteShape.of(d["kernel"], d["shape"]), trials=tuple(map(_trial, d["trials"])),
                               baselines_us=dict(d.get("baselines_us", {})), meta=dict(d.get("meta", {})))
        counts = tuple(None if t.get("counts") is None else counts_from_dict(t["counts"]) for t in d["trials"])
        return SuiteRecords(records, counts)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"{origin}: malformed suite shape file ({type(exc).__name__}: {exc})") from None


def write_shape(folder: str | os.PathLike, rec: SuiteRecords) -> Path:
    """Write one shape's records whole, xz-compressed (a killed run leaves the old file or none, never part of one)."""
    return write_atomic(shape_path(folder, rec.shape), compress_text(json_text(records_to_dict(rec), indent=None)))


def read_shape(path: str | os.PathLike) -> SuiteRecords:
    try:
        data = json.loads(read_shape_text(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from None
    return records_from_dict(data, str(path))


def read_kernel(folder: str | os.PathLike, kernel: str) -> list[SuiteRecords]:
    """Every shape of `kernel` recorded in `folder`, by file name ([] where none is yet); no other kernel's file
    is opened."""
    return [read_shape(p) for p in sorted((Path(folder) / kernel).glob(f"*{SUFFIX}"))]


def read_suite(folder: str | os.PathLike, kernels: Iterable[str] | None = None) -> list[SuiteRecords]:
    """The recorded shapes of `kernels` (default: every kernel the manifest lists), kernel by kernel."""
    names = read_manifest(folder)["kernels"] if kernels is None else kernels
    return [rec for kernel in names for rec in read_kernel(folder, kernel)]


def finished(folder: str | os.PathLike) -> set[tuple[str, str]]:
    """(kernel, shape id) of every shape file in the folder (listed, not opened): what a resumed sweep skips."""
    return {(p.parent.name, p.name.removesuffix(SUFFIX)) for p in Path(folder).glob(f"*/*{SUFFIX}")}


def read_manifest(folder: str | os.PathLike) -> dict:
    """The manifest of the suite dataset `folder`, each kernel with its split (DatasetError where it is not one)."""
    path = Path(folder) / MANIFEST
    manifest = read_json(path, DatasetError, f"missing; {folder} is not a suite dataset")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("kernels"),
                                                                                            dict):
        raise DatasetError(f"{path}: not a suite dataset (expected format {FORMAT!r})")
    for name, entry in manifest["kernels"].items():
        if not isinstance(entry, dict) or entry.get("split") not in SPLITS:
            raise DatasetError(f"{path}: kernel {name!r} has no split ('train' or 'heldout')")
    return manifest


def kernels_in(manifest: Mapping, split: str) -> list[str]:
    """The kernels of `split` ('train' or 'heldout') the manifest lists, sorted."""
    return sorted(n for n, e in manifest["kernels"].items() if e["split"] == split)


def open_folder(folder: str | os.PathLike, facts: Mapping[str, object],
                kernels: Mapping[str, Mapping[str, object]]) -> dict:
    """The folder's manifest with `kernels` (name -> {"split", ...}) added, written from `facts` where there is none.
    DatasetError where the folder holds another GPU's or Triton's measurements (their times would mix with this
    run's), or gives a kernel another split."""
    path = Path(folder) / MANIFEST
    manifest = read_manifest(folder) if path.exists() else {"format": FORMAT, **facts, "kernels": {}}
    for key in SAME_FOLDER:
        if manifest.get(key) != facts.get(key):
            raise DatasetError(f"{folder} holds {key} {manifest.get(key)!r}, this run is on {facts.get(key)!r}: "
                               f"write into a folder of its own")
    for name, entry in kernels.items():
        split = manifest["kernels"].get(name, entry)["split"]
        if split != entry["split"]:
            raise DatasetError(f"{path}: {name} is recorded as {split}, the suite's split says {entry['split']}")
    manifest["kernels"] = {**manifest["kernels"], **{n: dict(e) for n, e in kernels.items()}}
    write_atomic(path, json_text(manifest))
    return manifest


def quarantined(folder: str | os.PathLike) -> dict[str, list[str]]:
    """'<kernel>/<shape id>' -> the configs (text form; '*' the whole shape) that killed the CUDA context there."""
    path = Path(folder) / QUARANTINE
    return read_json(path, DatasetError) if path.exists() else {}


def quarantine(folder: str | os.PathLike, shape: SuiteShape, config: str) -> None:
    """Record that `config` ('*': something in the shape's interleaved rounds) killed the CUDA context on `shape`."""
    entries = quarantined(folder)
    key = f"{shape.kernel}/{shape.id}"
    entries[key] = sorted({*entries.get(key, []), config})
    write_atomic(Path(folder) / QUARANTINE, json_text(entries))
