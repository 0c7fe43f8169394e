"""Rewrite the gzip shape files of dataset folders (format 1's `<id>.csv.gz`) as xz (`<id>.csv.xz`), the same text.

    python -m rooftune.eval.datasets.recompress DIR...

Each DIR is a dataset folder (its manifest.json is upgraded to the current format first: format.py says why). Each
`.csv.gz` is decoded, compressed as `write_shape` would (`compress_text`), written atomically, read back and compared
with the text it came from, and only then removed; so a run killed at any point loses nothing. It is idempotent and
resumable: a folder without `.csv.gz` files is left as it is, and where a run stopped between writing a `.csv.xz` and
removing its `.csv.gz`, the next run finds both with the same text and removes the `.csv.gz` (both with different
text: refused, naming them). Not while a sweep or backfill writes into the same folder.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rooftune.eval.datasets.format import (
    GZIP_SUFFIX,
    SHAPE_SUFFIX,
    SHAPES_DIR,
    DatasetError,
    compress_text,
    read_manifest,
    read_shape_text,
    shape_file_id,
    shape_files,
    upgrade_format,
)
from rooftune.outputs import OutputError, write_atomic


@dataclass(frozen=True)
class Recompressed:
    """One folder's conversion: `converted` .csv.gz files rewritten as .csv.xz (`gz_bytes` before, `xz_bytes`
    after), `already` shapes that were .csv.xz before this run."""

    folder: Path
    converted: int
    already: int
    gz_bytes: int
    xz_bytes: int


def recompress_file(gz: Path) -> Path:
    """Rewrite the shape file `gz` (`<id>.csv.gz`) as `<id>.csv.xz` holding the same text, then remove `gz`; returns
    the new file. Where the `.csv.xz` is already there (a run stopped before removing `gz`) it is kept if it holds the
    same text; a DatasetError naming both if not. A `.csv.xz` just written that does not decode to the text is
    removed again, `gz` kept, and a DatasetError raised."""
    text = read_shape_text(gz)
    xz = gz.with_name(f"{shape_file_id(gz)}{SHAPE_SUFFIX}")
    written = not xz.exists()
    if written:
        write_atomic(xz, compress_text(text))
    if read_shape_text(xz) != text:
        if written:
            xz.unlink()
            raise DatasetError(f"{xz}: does not decode to the text of {gz}; removed it, {gz} kept")
        raise DatasetError(f"shape {shape_file_id(gz)} has two files of different text, {xz} and {gz}: keep one "
                           f"(the {SHAPE_SUFFIX}, where a rewrite of the shape stopped before removing the {GZIP_SUFFIX})")
    gz.unlink()
    return xz


def recompress_folder(root: str | Path, done: Callable[[Path], None] | None = None,
                      started: Callable[[int], None] | None = None) -> Recompressed:
    """Convert every `.csv.gz` of the dataset folder `root` (`recompress_file`, in name order), the manifest upgraded
    first; `started(n)` once with the number to convert, `done(path)` after each. A DatasetError for a folder that is
    not a dataset, or a file that cannot be converted (those before it stay converted)."""
    read_manifest(root)  # a dataset folder, of a format this version reads
    upgrade_format(root)
    folder = Path(root) / SHAPES_DIR
    todo = sorted(folder.glob(f"*{GZIP_SUFFIX}")) if folder.is_dir() else []
    already = len({shape_file_id(p) for p in folder.glob(f"*{SHAPE_SUFFIX}")} - {shape_file_id(p) for p in todo})
    if started is not None:
        started(len(todo))
    gz_bytes = xz_bytes = 0
    for gz in todo:
        gz_bytes += gz.stat().st_size
        xz = recompress_file(gz)
        xz_bytes += xz.stat().st_size
        if done is not None:
            done(xz)
    shape_files(root)  # no shape left with two files
    return Recompressed(Path(root), len(todo), already, gz_bytes, xz_bytes)


def summary_line(result: Recompressed) -> str:
    """One folder's result in words."""
    if not result.converted:
        return f"{result.folder}: nothing to convert ({result.already} shapes already {SHAPE_SUFFIX})"
    return (f"{result.folder}: {result.converted} shapes {GZIP_SUFFIX} -> {SHAPE_SUFFIX}, {result.gz_bytes:,} -> "
            f"{result.xz_bytes:,} bytes ({result.xz_bytes / result.gz_bytes:.3f}); {result.already} already "
            f"{SHAPE_SUFFIX}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, metavar="DIR", help="a dataset folder (with manifest.json)")
    args = parser.parse_args(argv)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        for root in args.folders:
            task = progress.add_task(str(root), total=None)
            try:
                result = recompress_folder(root, done=lambda _: progress.advance(task),
                                           started=lambda n: progress.update(task, total=n))
            except (DatasetError, OutputError) as exc:
                progress.stop()
                print(f"error: {exc}", file=sys.stderr)
                return 2
            progress.remove_task(task)
            print(summary_line(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
