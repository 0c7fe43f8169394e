"""The fakes and checks several test files share: a sweep's compile-then-measure device on the CPU, the steady
repeatability it reports, a kill mid-shape, a stand-in for a jitted Triton kernel, a copy of the committed held-out
data, a dataset as format 1 wrote it, and the check of a refused command. Imported by name (tests/conftest.py puts this folder on sys.path; a
spawned worker inherits it); a standalone script loads it by path (tests/scripts/fake_rooftune.py). The tuner's
synthetic GPU is a fixture of tests/tuner/conftest.py."""

import gzip
import json
import shutil
import time
from pathlib import Path

from rooftune.candidates import Trial
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.format import (
    GZIP_SUFFIX,
    MANIFEST,
    SHAPE_SUFFIX,
    compress_text,
    read_shape_text,
    shape_file_id,
    shape_files,
)

# The committed held-out GEMM data of the current space.
HELDOUT = Path(__file__).parents[1] / "datasets" / "h200" / "gemm" / "heldout"
# What a sweep's noise check of a steady GPU records (eval/sweeping/sweep.py reads it into the manifest).
REPEATABILITY = {"abs_median": 0.004, "abs_p90": 0.01, "ratio_median": 0.003, "ratio_p90": 0.01,
                 "best_within_1pct": True}


class Killed(Exception):
    """Stands in for the process being killed mid-shape."""


def steady_records(shape, trials, baselines: dict) -> ShapeRecords:
    """A shape's records as a sweep on a steady GPU writes them: `trials` beside the library's `baselines`."""
    return ShapeRecords(shape, tuple(trials), baselines, {"repeatability": REPEATABILITY})


def gemm_layout(shape):
    return shape.layout


class QuickMeasurer:
    """A sweep's device: every config compiles (0.1 s) and takes a time fixed by its parameters, or
    `times(shape, configs)`; a shape takes `shape_s` to measure; binaries are grouped by `group_key`."""

    def __init__(self, shape_s=0.02, times=None, baselines=None, group_key=gemm_layout):
        self.shape_s, self.times, self.group_key = shape_s, times, group_key
        self.baselines = {"cublas": 1.0} if baselines is None else baselines

    def compile(self, jobs, timeout_s=None):
        return {c: 0.1 for _, c in jobs}

    def measure(self, shape, configs, compiled):
        time.sleep(self.shape_s)
        times = self.times(shape, configs) if self.times else [float(c["BLOCK_M"] + c["num_stages"]) for c in configs]
        return steady_records(shape, (Trial(c, t, None, 0.1, 7) for c, t in zip(configs, times)), self.baselines)


class KernelRecorder:
    """Stands in for a jitted Triton kernel: records ("warmup" or "launch", args, kwargs) of each call."""

    def __init__(self):
        self.calls = []

    def warmup(self, *args, grid, **kwargs):
        self.calls.append(("warmup", args, kwargs))

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append(("launch", args, kwargs))


def heldout_copy(folder: Path, shapes: int = 1, name: str = "ds", order=None) -> Path:
    """folder/name: the committed held-out GEMM data's manifest and its first `shapes` shape files (by name, or by
    the sort key `order`)."""
    root = folder / name
    (root / "shapes").mkdir(parents=True)
    shutil.copy(HELDOUT / "manifest.json", root / "manifest.json")
    for path in sorted(shape_files(HELDOUT), key=order)[:shapes]:
        shutil.copy(path, root / "shapes" / path.name)
    return root


def rewrite_text(path: Path, text: str) -> None:
    """Replace the text of the shape file at `path`, compressed as its name says (xz, or format 1's gzip)."""
    path.write_bytes(gzip.compress(text.encode(), mtime=0) if path.name.endswith(GZIP_SUFFIX) else compress_text(text))


def as_format_1(root: Path) -> dict[str, str]:
    """Make the dataset folder `root` one that format 1 wrote: each `<id>.csv.xz` rewritten as `<id>.csv.gz` (gzip
    with no time stamp, the same text), the manifest's format `rooftune-dataset-1`. Returns shape id -> its text."""
    texts = {}
    for path in sorted((root / "shapes").glob(f"*{SHAPE_SUFFIX}")):
        texts[shape_file_id(path)] = read_shape_text(path)
        rewrite_text(root / "shapes" / f"{shape_file_id(path)}{GZIP_SUFFIX}", texts[shape_file_id(path)])
        path.unlink()
    if (root / MANIFEST).is_file():
        manifest = json.loads((root / MANIFEST).read_text())
        (root / MANIFEST).write_text(json.dumps({**manifest, "format": "rooftune-dataset-1"}, indent=2, sort_keys=True))
    return texts


def cli_error(result, *words: str) -> str:
    """A CLI run (typer's CliRunner) that refused its input or could not write an output: exit 2, `error:` with
    every one of `words`, no traceback. Returns its output on one line."""
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "error:" in text and "Traceback" not in text, text
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    for word in words:
        assert word in text, text
    return text
