"""Rewrite the shape files of dataset folders: format 1's gzip ones (`<id>.csv.gz`) as xz (`<id>.csv.xz`), the same
text; with `--slim`, then every full one in slim form (format.py: without the four screening columns).

    python -m rooftune.eval.datasets.recompress [--slim] DIR...

Each DIR is a dataset folder (its manifest.json is upgraded to the current format first: format.py says why). Each
`.csv.gz` is decoded, compressed as `write_shape` would (`compress_text`), written atomically, read back and compared
with the text it came from, and only then removed; so a run killed at any point loses nothing. It is idempotent and
resumable: a folder without `.csv.gz` files is left as it is, and where a run stopped between writing a `.csv.xz` and
removing its `.csv.gz`, the next run finds both with the same text and removes the `.csv.gz` (both with different
text: refused, naming them). With `--slim`, each full `.csv.xz` is encoded in slim form, the new bytes decoded and
parsed, and only where every trial, the shape, its baselines and its meta read as the full file's less the screening
columns (`slim_records`) is the file replaced (atomically); a slim file is left as it is, so a second run changes
nothing and a killed run is finished by the next. Not while a sweep or backfill writes into the same folder.
"""

from __future__ import annotations

import argparse
import lzma
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
    is_slim_text,
    parse_shape_text,
    read_manifest,
    read_shape_text,
    shape_file_id,
    shape_files,
    shape_text,
    slim_records,
    upgrade_format,
)
from rooftune.outputs import OutputError, write_atomic


@dataclass(frozen=True)
class Recompressed:
    """One folder's conversion: `converted` .csv.gz files rewritten as .csv.xz (`gz_bytes` before, `xz_bytes`
    after), `already` shapes that were .csv.xz before this run; with `--slim`, `slimmed` full files rewritten in
    slim form (`full_bytes` before, `slim_bytes` after) and `already_slim` files that were slim before."""

    folder: Path
    converted: int
    already: int
    gz_bytes: int
    xz_bytes: int
    slim: bool = False
    slimmed: int = 0
    already_slim: int = 0
    full_bytes: int = 0
    slim_bytes: int = 0


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


def slim_file(path: Path) -> bool:
    """Rewrite the full shape file `path` (`<id>.csv.xz`) in slim form; False where it is slim already (left as it
    is). The slim bytes are decoded and parsed before they replace the file: where they do not read as the full
    file's records less the screening columns (`slim_records`), a DatasetError, and the file is left as it was."""
    text = read_shape_text(path)
    if is_slim_text(text):
        return False
    expected = slim_records(parse_shape_text(path, text))
    data = compress_text(shape_text(expected, slim=True))
    if parse_shape_text(path, lzma.decompress(data, format=lzma.FORMAT_XZ).decode()) != expected:
        raise DatasetError(f"{path}: its slim form does not read as the same records; left as it was")
    write_atomic(path, data)
    return True


def _to_xz(todo: list[Path], done: Callable[[Path], None] | None) -> tuple[int, int]:
    """`recompress_file` each of `todo`; their bytes before and after."""
    gz_bytes = xz_bytes = 0
    for gz in todo:
        gz_bytes += gz.stat().st_size
        xz = recompress_file(gz)
        xz_bytes += xz.stat().st_size
        if done is not None:
            done(xz)
    return gz_bytes, xz_bytes


def _to_slim(files: list[Path], done: Callable[[Path], None] | None) -> tuple[int, int, int]:
    """`slim_file` each of `files`: how many were rewritten, their bytes before and after."""
    slimmed = full_bytes = slim_bytes = 0
    for path in files:
        size = path.stat().st_size
        if slim_file(path):
            slimmed, full_bytes, slim_bytes = slimmed + 1, full_bytes + size, slim_bytes + path.stat().st_size
        if done is not None:
            done(path)
    return slimmed, full_bytes, slim_bytes


def recompress_folder(root: str | Path, done: Callable[[Path], None] | None = None,
                      started: Callable[[int], None] | None = None, slim: bool = False) -> Recompressed:
    """Convert every `.csv.gz` of the dataset folder `root` (`recompress_file`, in name order), the manifest upgraded
    first; with `slim`, then rewrite every shape file in slim form (`slim_file`). `started(n)` once with the number of
    files to go through, `done(path)` after each. A DatasetError for a folder that is not a dataset, or a file that
    cannot be converted (those before it stay converted)."""
    read_manifest(root)  # a dataset folder, of a format this version reads
    upgrade_format(root)
    folder = Path(root) / SHAPES_DIR
    todo = sorted(folder.glob(f"*{GZIP_SUFFIX}")) if folder.is_dir() else []
    xz_ids = {shape_file_id(p) for p in folder.glob(f"*{SHAPE_SUFFIX}")}
    already = len(xz_ids - {shape_file_id(p) for p in todo})
    if started is not None:
        started(len(todo) + (len(xz_ids | {shape_file_id(p) for p in todo}) if slim else 0))
    gz_bytes, xz_bytes = _to_xz(todo, done)
    files = shape_files(root)  # no shape left with two files
    if not slim:
        return Recompressed(Path(root), len(todo), already, gz_bytes, xz_bytes)
    slimmed, full_bytes, slim_bytes = _to_slim(files, done)
    return Recompressed(Path(root), len(todo), already, gz_bytes, xz_bytes, True, slimmed, len(files) - slimmed,
                        full_bytes, slim_bytes)


def summary_line(result: Recompressed) -> str:
    """One folder's result in words."""
    if not result.converted:
        line = f"{result.folder}: nothing to convert ({result.already} shapes already {SHAPE_SUFFIX})"
    else:
        line = (f"{result.folder}: {result.converted} shapes {GZIP_SUFFIX} -> {SHAPE_SUFFIX}, {result.gz_bytes:,} -> "
                f"{result.xz_bytes:,} bytes ({result.xz_bytes / result.gz_bytes:.3f}); {result.already} already "
                f"{SHAPE_SUFFIX}")
    if not result.slim:
        return line
    if not result.slimmed:
        return f"{line}; none to make slim ({result.already_slim} already slim)"
    return (f"{line}; {result.slimmed} made slim, {result.full_bytes:,} -> {result.slim_bytes:,} bytes "
            f"({result.slim_bytes / result.full_bytes:.3f}); {result.already_slim} already slim")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, metavar="DIR", help="a dataset folder (with manifest.json)")
    parser.add_argument("--slim", action="store_true",
                        help="also rewrite each full shape file without the screening columns (the committed form)")
    args = parser.parse_args(argv)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        for root in args.folders:
            task = progress.add_task(str(root), total=None)
            try:
                result = recompress_folder(root, done=lambda _: progress.advance(task),
                                           started=lambda n: progress.update(task, total=n), slim=args.slim)
            except (DatasetError, OutputError) as exc:
                progress.stop()
                print(f"error: {exc}", file=sys.stderr)
                return 2
            progress.remove_task(task)
            print(summary_line(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
