"""The exhaustive-dataset format: a folder with manifest.json and one xz-compressed CSV per finished shape.

    DIR/manifest.json            dataset card data: GPU, software versions, space version, timing
                                 method, measured noise, shape list and generator seed
    DIR/shapes/<id>.csv.xz       one per finished shape, written atomically (temp file + os.replace);
                                 `<id>.csv.gz` (gzip, the same text) where format 1 wrote it: still read
    DIR/.manifest.lock           taken (flock) around every read-modify-write of the manifest and the
                                 quarantine, so that several sweeps (one per GPU) can share the folder

A shape file starts with one comment line `# rooftune-shape {json}` (the shape: GEMM {m, n, k, layout,
dtype}, attention {batch, heads, seq, head_dim, causal, dtype} or fused MoE {experts, topk, hidden,
intermediate, tokens, gemm, dtype, seed}; its baselines in µs, e.g. cuBLAS
or SDPA; and per-shape facts such as repeatability), then a CSV header and one row per legal config: the
config's parameters, `time_us` (the dataset's time, below) or `error`, `compile_s`, `rounds` and
`spread` of the screening pass, `screen_us` (the screening pass's raw median), for the fastest
configs `retime_us` / `retime2_us` / `retime_rounds`: two independent final passes, and `in_space`:
1 for a config of the published space, 0 for a baseline's config timed beside it (the Triton
tutorial's configs outside the space; candidates/tutorial.py). Files written before that column
existed read as all in the space. Columns are read by name.

A slim shape file (`shape_text(..., slim=True)`) leaves out the four `SCREEN_COLUMNS` (`compile_s`, `rounds`,
`spread`, `screen_us`): how the screening pass ran, which nothing that replays, fits or scores reads. The committed
datasets are slim (`python -m rooftune.eval.datasets.recompress --slim`); sweeps and backfills write full files.
A slim file's trials read with `compile_s`, `spread` and `screen_us` None and `rounds` 0 (`slim_records`); a file
with some of the four columns and not the others is refused.

`time_us` of a config in the final passes is the median over both passes' rounds; every other
config's `time_us` is its screening median times the shape's `screen_scale` (meta), the median
ratio final / screening over the final configs, so that all times of a shape share one scale.
The xz stream carries no time stamp or name and is written with fixed settings (`XZ_FILTERS`), so the same results
give the same bytes (clean git diffs). Format 2 differs from format 1 only there: format 1 wrote gzip
(`<id>.csv.gz`, the same text), and its readers list `*.csv.gz` only, so they would read a format-2 folder as one
with fewer shapes (or none); the new name makes them refuse it instead. Format 3 (`FORMAT`) differs from format 2
only in that a shape file may be slim: format 2's readers require the four columns, so they would stop at the first
slim file with "no 'compile_s' column", as if it were damaged; the new name makes them refuse the folder for its
format instead. All three are read (`READ_FORMATS`); a folder with both files for one shape is refused, naming them.
`write_shape` and `recompress.py` upgrade the manifest before they write a shape file, and `write_shape` removes the
shape's `.csv.gz` once its `.csv.xz` is in place.

`read_shape` refuses a damaged file whole, naming it, the row and the column: a time that is not a time (NaN, an
infinity, zero, negative, or below MIN_TIME_US, the least a GPU kernel takes: candidates/records.py), a compile time
or spread below zero, a baseline that is not a time, a row of more or fewer cells than the header, a config recorded
twice. The commands that read datasets (eval, report, fit, explain) then stop with exit 2 rather than leave the shape
out: a score, report or fit over the rest would be of other data than the folder
holds, and a dropped row could be the shape's best.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import lzma
import math
import os
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from rooftune.candidates import (
    Config,
    ConfigError,
    Trial,
    check_in_grid,
    header_shape,
    kernel_of,
    shape_header,
    shape_id,
)
from rooftune.candidates.records import ShapeRecords, check_time_us
from rooftune.hwprofiles.hwprobe import triton_release
from rooftune.inputs import check_input, read_text
from rooftune.outputs import file_lock, write_atomic

FORMAT = "rooftune-dataset-3"
# The formats a reader takes: format 1's shape files are gzip, format 2's xz, format 3's may be slim (the module
# docstring).
READ_FORMATS = ("rooftune-dataset-1", "rooftune-dataset-2", FORMAT)
MANIFEST = "manifest.json"
LOCK = ".manifest.lock"
SHAPES_DIR = "shapes"
SHAPE_SUFFIX = ".csv.xz"
GZIP_SUFFIX = ".csv.gz"  # format 1's shape files
SHAPE_SUFFIXES = (SHAPE_SUFFIX, GZIP_SUFFIX)
# LZMA2 at preset 9 | PRESET_EXTREME with its dictionary cut from 64 MiB to 4 MiB, 13x the largest shape file's text
# (314 KB): every file compresses to the same size as at 64 MiB, the encoder runs 3x faster and a reader allocates
# 4 MiB per file. Fixed settings: the same text gives the same bytes.
XZ_FILTERS = ({"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 4 << 20},)
STAT_COLUMNS = ("time_us", "error", "compile_s", "rounds", "spread", "screen_us", "retime_us", "retime2_us",
                "retime_rounds", "in_space")
# How the screening pass ran: context, not ground truth. A slim file (the committed datasets) leaves them out.
SCREEN_COLUMNS = ("compile_s", "rounds", "spread", "screen_us")
SLIM_COLUMNS = tuple(c for c in STAT_COLUMNS if c not in SCREEN_COLUMNS)
_PREFIX = "# rooftune-shape "


class DatasetError(ValueError):
    """A dataset folder or file that cannot be read, or a resume into an incompatible dataset."""


# Significant digits a shape file keeps: times to 5 (a rounding of at most 0.005%, under a fortieth of the
# final passes' median noise of about 0.2%: docs/datasets.md), compile seconds and the spread to 2 (context, not
# ground truth). Fewer digits compress smaller: the ground truth of several kernels fits the repository's budget.
TIME_DIGITS, AUX_DIGITS = 5, 2


def _num(value: float | int | None, digits: int = TIME_DIGITS) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.{digits}g}"


def _cells(r: Trial) -> dict[str, object]:
    """A trial's STAT_COLUMNS cells, by column."""
    return {"time_us": _num(r.time_us), "error": r.error or "", "compile_s": _num(r.compile_s, AUX_DIGITS),
            "rounds": r.rounds, "spread": _num(r.spread, AUX_DIGITS), "screen_us": _num(r.screen_us),
            "retime_us": _num(r.retime_us), "retime2_us": _num(r.retime2_us), "retime_rounds": _num(r.retime_rounds),
            "in_space": int(r.in_space)}


def shape_text(result: ShapeRecords, slim: bool = False) -> str:
    """The text of one shape's file (before compression); `slim`: without the SCREEN_COLUMNS."""
    header = {"shape": shape_header(result.shape), "baselines_us": result.baselines_us, "meta": result.meta}
    text = io.StringIO()
    text.write(_PREFIX + json.dumps(header, sort_keys=True) + "\n")
    names = list(result.trials[0].config) if result.trials else []
    columns = SLIM_COLUMNS if slim else STAT_COLUMNS
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow([*names, *columns])
    for r in result.trials:
        cells = _cells(r)
        writer.writerow([*(r.config[n] for n in names), *(cells[c] for c in columns)])
    return text.getvalue()


def is_slim_text(text: str) -> bool:
    """Whether the shape file of text `text` is slim: its CSV header (the second line) has none of the
    SCREEN_COLUMNS."""
    lines = text.split("\n", 2)
    columns = next(csv.reader([lines[1]])) if len(lines) > 1 else []
    return not set(SCREEN_COLUMNS) & set(columns)


def slim_records(result: ShapeRecords) -> ShapeRecords:
    """`result` as a slim file of it reads: each trial without what the SCREEN_COLUMNS held (`compile_s`,
    `spread`, `screen_us` None, `rounds` 0)."""
    return replace(result, trials=tuple(replace(t, compile_s=None, rounds=0, spread=None, screen_us=None)
                                        for t in result.trials))


def compress_text(text: str) -> bytes:
    """A shape file's bytes for its text: xz with the fixed `XZ_FILTERS` (the same text, the same bytes)."""
    return lzma.compress(text.encode(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, filters=XZ_FILTERS)


def encode_shape(result: ShapeRecords) -> bytes:
    """The bytes of one shape's file (`<id>.csv.xz`)."""
    return compress_text(shape_text(result))


def write_shape(root: str | os.PathLike, result: ShapeRecords) -> Path:
    """Write one finished shape atomically, as `<id>.csv.xz` (the dataset's manifest, where there is one, upgraded
    to FORMAT first; the shape's `<id>.csv.gz`, where there was one, removed after); returns its path."""
    upgrade_format(root)
    path = Path(root) / SHAPES_DIR / f"{shape_id(result.shape)}{SHAPE_SUFFIX}"
    write_atomic(path, encode_shape(result))
    path.with_name(f"{shape_id(result.shape)}{GZIP_SUFFIX}").unlink(missing_ok=True)
    return path


# A shape file's measured columns: times in µs must be finite and at least MIN_TIME_US (candidates/records.py);
# compile seconds and the spread finite and >= 0. NaN, an infinity, a negative, zero or sub-launch time is a damaged
# record, never data.
POSITIVE_COLUMNS = ("time_us", "screen_us", "retime_us", "retime2_us")
NONNEGATIVE_COLUMNS = ("compile_s", "spread")


def check_measured(value: float, what: str, positive: bool = True, unit: str = "µs") -> float:
    """`value` where it is a time in `unit` (candidates/records.py `check_time_us`: finite, at least MIN_TIME_US;
    with `positive` False: a finite figure >= 0); else a ValueError saying which (`what`) and what it should be."""
    if positive:
        return check_time_us(value, what, unit)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    raise ValueError(f"{what} = {value!r} is not finite and >= 0")


def _measured(stats: dict[str, str], column: str) -> float | None:
    text = stats[column]
    return check_measured(float(text), column, column in POSITIVE_COLUMNS) if text else None


def read_shape_text(path: str | os.PathLike) -> str:
    """The text of the shape file at `path`: xz where its name ends in `.xz`, else gzip (format 1's `.csv.gz`); a
    DatasetError naming it where it does not decode."""
    check_input(path)  # a pipe or device: never opened (it would block)
    xz = str(path).endswith(".xz")
    try:
        data = Path(path).read_bytes()
        return (lzma.decompress(data, format=lzma.FORMAT_XZ) if xz else gzip.decompress(data)).decode()
    except (OSError, EOFError, UnicodeDecodeError, lzma.LZMAError) as exc:
        raise DatasetError(f"{path}: not a readable {'xz' if xz else 'gzip'} file ({exc})") from exc


def read_shape(path: str | os.PathLike) -> ShapeRecords:
    """Parse one shape file written by `write_shape` (full or slim); a damaged or foreign file is a DatasetError
    naming it (and the row, where one row is: a bad value, or a time that is not finite and positive)."""
    return parse_shape_text(path, read_shape_text(path))


def parse_shape_text(path: str | os.PathLike, text: str) -> ShapeRecords:
    """Parse `text`, a shape file's text (`read_shape`; `path` names it in errors)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(_PREFIX):
        raise DatasetError(f"{path}: missing the '{_PREFIX.strip()}' header line")
    try:
        return _parse_shape(path, lines)
    except DatasetError:
        raise
    except KeyError as exc:
        raise DatasetError(f"{path}: no {exc} column or header field") from None
    except (ValueError, TypeError, IndexError, csv.Error) as exc:  # a bad value, header or shape
        raise DatasetError(f"{path}: malformed shape file ({exc})") from None


def check_cells(cells: int, columns: int) -> None:
    """A ValueError where a CSV row has `cells` cells and its header `columns` columns: a row cut short or run on
    (a damaged write, a hand edit), whose cells would otherwise be read under the wrong columns or dropped."""
    if cells != columns:
        raise ValueError(f"{cells} cells where the header has {columns} columns (a cut or damaged row)")


def _parse_trial(names: list[str], columns: list[str], row: list[str]) -> Trial:
    # A slim file's SCREEN_COLUMNS read as empty cells.
    check_cells(len(row), len(columns))
    params = row[: len(names)]
    stats = {**dict.fromkeys(SCREEN_COLUMNS, ""), **dict(zip(columns[len(names):], row[len(names):]))}
    values = dict(zip(names, map(int, params)))
    config = Config(tuple((n, values[n]) for n in names if n not in ("num_warps", "num_stages")),
                    values["num_warps"], values["num_stages"])
    return Trial(
        config=config, time_us=_measured(stats, "time_us"), error=stats["error"] or None,
        compile_s=_measured(stats, "compile_s"), rounds=int(stats["rounds"] or 0),
        spread=_measured(stats, "spread"), screen_us=_measured(stats, "screen_us"),
        retime_us=_measured(stats, "retime_us"), retime2_us=_measured(stats, "retime2_us"),
        retime_rounds=int(stats["retime_rounds"]) if stats["retime_rounds"] else None,
        in_space=stats.get("in_space", "1") != "0")


# The header line's fields and the JSON type each must have (a list or null there broke the readers).
_HEADER_TYPES = {"shape": dict, "baselines_us": dict, "meta": dict}


def _parse_shape(path: str | os.PathLike, lines: list[str]) -> ShapeRecords:
    header = json.loads(lines[0][len(_PREFIX):])
    if not isinstance(header, dict):
        raise DatasetError(f"{path}: header line: expected a JSON object, got {type(header).__name__}")
    for key, kind in _HEADER_TYPES.items():
        if not isinstance(header.get(key), kind):
            raise DatasetError(f"{path}: header line: {key!r} must be a JSON object, got {header.get(key)!r}")
    for name, value in header["baselines_us"].items():
        try:
            check_measured(value, f"baseline {name}")
        except ValueError as exc:
            raise DatasetError(f"{path}: header line: {exc}") from None
    rows = list(csv.reader(lines[1:]))
    columns = rows[0]
    if "time_us" not in columns:
        raise DatasetError(f"{path}: no time_us column")
    names = columns[: columns.index("time_us")]
    present = [c for c in SCREEN_COLUMNS if c in columns]
    if 0 < len(present) < len(SCREEN_COLUMNS):
        missing = [c for c in SCREEN_COLUMNS if c not in present]
        raise DatasetError(f"{path}: has the columns {', '.join(present)} but not {', '.join(missing)}: a shape file "
                           f"has all of {', '.join(SCREEN_COLUMNS)} (full) or none (slim)")
    shape = header_shape(header["shape"])
    results, seen = [], {}
    for number, row in enumerate(rows[1:], start=1):
        try:
            results.append(_parse_trial(names, columns, row))
            first = seen.setdefault(results[-1].config, number)
            if first != number:  # a sweep times each config once: two records of one config, and which is it?
                raise ValueError(f"its config {results[-1].config} is row {first}'s too")
        except ValueError as exc:  # the header comment and the CSV header are lines 1 and 2
            raise DatasetError(f"{path}: row {number} (line {number + 2}): {exc}; a damaged record: fix the row, "
                               f"or remove the file (a resumed sweep measures its shape again)") from None
    return ShapeRecords(shape=shape, trials=_of_the_space(path, kernel_of(shape).space, results),
                        baselines_us=header["baselines_us"], meta=header["meta"])


class DatasetWarning(UserWarning):
    """Rows of a dataset file left out (configs outside its space), the rest read."""


def _of_the_space(path: str | os.PathLike, space, trials: list[Trial]) -> tuple[Trial, ...]:
    """`trials` less the rows outside `space`, with one DatasetWarning naming the file, how many and the first: a
    row of the space (`in_space` 1) whose config is not a point of its grid (BLOCK_M=17: no sweep times one, and
    replay would pick it, or a report call it the space's best), or a baseline's row (`in_space` 0) with a
    parameter the space does not have. A config of an earlier space may lack a later parameter (its grid held
    none); what it has must be the grid's."""
    kept, left_out = [], []
    for number, trial in enumerate(trials, start=1):
        try:
            if trial.in_space:
                check_in_grid(space, trial.config, complete=False)
            else:
                check_in_grid(space, {n: v for n, v in trial.config.items() if n not in space.names}, complete=False)
            kept.append(trial)
        except ConfigError as exc:
            left_out.append(f"row {number} (line {number + 2}): {exc}")
    if left_out:
        warnings.warn(f"{path}: {len(left_out)} of {len(trials)} rows left out, their configs outside the "
                      f"{space.kernel} space (first: {left_out[0]})", DatasetWarning, stacklevel=2)
    return tuple(kept)


def shape_file_id(path: str | os.PathLike) -> str:
    """The shape id a shape file's name gives: `<id>.csv.xz` or `<id>.csv.gz` -> `<id>`."""
    name = Path(path).name
    for suffix in SHAPE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    raise DatasetError(f"{path}: not a shape file (its name ends in neither {' nor '.join(SHAPE_SUFFIXES)})")


def shape_files(root: str | os.PathLike) -> list[Path]:
    """The finished shape files of a dataset folder (`.csv.xz`, and format 1's `.csv.gz`), sorted by name (temp
    files excluded); a DatasetError naming both where one shape has a file of each."""
    folder = Path(root) / SHAPES_DIR
    if not folder.is_dir():
        return []
    files = sorted(p for suffix in SHAPE_SUFFIXES for p in folder.glob(f"*{suffix}"))
    seen: dict[str, Path] = {}
    for path in files:
        sid = shape_file_id(path)
        if sid in seen:
            raise DatasetError(f"shape {sid} has two files, {seen[sid]} and {path}: keep one (a rewrite stopped before "
                               f"removing the {GZIP_SUFFIX} leaves the newer {SHAPE_SUFFIX}; `python -m "
                               f"rooftune.eval.datasets.recompress {root}` removes a {GZIP_SUFFIX} of the same text)")
        seen[sid] = path
    return files


def finished_ids(root: str | os.PathLike) -> set[str]:
    """Shape ids already written (either suffix): what a resumed sweep skips."""
    return {shape_file_id(p) for p in shape_files(root)}


def shape_path(root: str | os.PathLike, sid: str) -> Path:
    """The file of the finished shape `sid` in the dataset folder `root` (either suffix); a DatasetError where it
    has none, or one of each."""
    found = [p for p in (Path(root) / SHAPES_DIR / f"{sid}{suffix}" for suffix in SHAPE_SUFFIXES) if p.is_file()]
    if not found:
        raise DatasetError(f"{Path(root) / SHAPES_DIR}: no file of shape {sid}")
    if len(found) > 1:
        raise DatasetError(f"shape {sid} has two files, {found[0]} and {found[1]}: keep one")
    return found[0]


def to_records(result: ShapeRecords) -> ShapeRecords:
    """A shape file's records made ready for replay: the first final-pass times in meta["retime_us"],
    candidates the in-space trials (None when all are), and tutorial configs that are the same kernel as a
    recorded config (GROUP_M without effect) aliases of it (GEMM shapes only)."""
    retime = {t.config: t.retime_us for t in result.trials if t.retime_us is not None}
    in_space = tuple(t.config for t in result.trials if t.in_space)
    candidates = None if len(in_space) == len(result.trials) else in_space
    return replace(result, baselines_us=dict(result.baselines_us), meta={**result.meta, "retime_us": retime},
                   candidates=candidates, aliases=kernel_of(result.shape).aliases(result.shape, (t.config for t in result.trials)))


# Manifest fields the readers use, and the JSON type each must have where present (null: not recorded).
MANIFEST_TYPES = {"kernel": str, "space_version": str, "gpu_profile": str, "shapes_file": str, "sms": int,
                  "device": dict, "shapes_files": list}


def read_manifest(root: str | os.PathLike) -> dict:
    """The manifest of the dataset folder `root`, its format and the types of the fields readers use checked;
    DatasetError naming the file and field otherwise."""
    check_input(root, folder=True)
    path = check_input(Path(root) / MANIFEST)  # a pipe or device: never opened (it would block)
    if not path.is_file():
        what = "a file, not a folder" if Path(root).is_file() else f"no {MANIFEST}"
        raise DatasetError(f"{root}: {what}; not a rooftune dataset folder")
    try:
        manifest = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict):
        raise DatasetError(f"{path}: expected a JSON object, got {type(manifest).__name__}")
    if manifest.get("format") not in READ_FORMATS:
        raise DatasetError(f"{path}: format {manifest.get('format')!r}, expected one of {', '.join(READ_FORMATS)}")
    for key, kind in MANIFEST_TYPES.items():
        value = manifest.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise DatasetError(f"{path}: {key!r} must be a JSON {_JSON_NAMES[kind]} (or null), got {value!r}")
    triton = (manifest.get("device") or {}).get("triton")
    if triton is not None and not isinstance(triton, str):
        raise DatasetError(f"{path}: device.triton must be a version string, got {triton!r}")
    return manifest


_JSON_NAMES = {str: "string", int: "integer", dict: "object", list: "array"}


def write_manifest(root: str | os.PathLike, manifest: dict) -> None:
    """Write `manifest` (one as `read_manifest` returned it, or without its format) atomically, in FORMAT."""
    data = json.dumps({**manifest, "format": FORMAT}, indent=2, sort_keys=True) + "\n"
    write_atomic(Path(root) / MANIFEST, data)


def upgrade_format(root: str | os.PathLike) -> None:
    """Rewrite the manifest of the dataset folder `root` in FORMAT where it is of an earlier format (nothing where it
    is current or there is no manifest): done before a shape file is written there, so that an earlier format's
    readers refuse the folder rather than miss that shape (format 1) or stop at a slim file as if it were damaged."""
    if (Path(root) / MANIFEST).is_file() and read_manifest(root)["format"] != FORMAT:
        update_manifest(root, lambda manifest: manifest)


# Manifest keys that must agree for a resumed sweep to add shapes to an existing dataset; so must the Triton
# release (`manifest_release`) where both record one: a dataset holds one compiler's measurements.
COMPATIBLE_KEYS = ("kernel", "space_version", "gpu_profile", "sms")


def manifest_release(manifest: dict) -> str | None:
    """The Triton release (major.minor) a dataset was measured under, from its manifest's device.triton; None
    where it records none."""
    triton = (manifest.get("device") or {}).get("triton")
    return triton_release(triton) if triton else None


# A folder of the release-keyed layout (docs/datasets.md): datasets/h200/releases/triton-3.9/gemm/train holds
# Triton 3.9's measurements only.
RELEASE_FOLDER = re.compile(r"^triton-(\d+\.\d+)$")


def layout_release(root: str | os.PathLike) -> str | None:
    """The Triton release a dataset folder's path names (its innermost `triton-<major.minor>` folder), or None."""
    names = [m.group(1) for part in Path(root).resolve().parts if (m := RELEASE_FOLDER.match(part))]
    return names[-1] if names else None


def check_layout(root: str | os.PathLike, manifest: dict) -> None:
    """A DatasetError where `root` sits in a release's folder and `manifest` records another release (or none): a
    sweep under the wrong Triton (a packed one that did not load, say) must not file its times as that release's."""
    named, recorded = layout_release(root), manifest_release(manifest)
    if named is not None and recorded != named:
        raise DatasetError(f"{root} is in the folder of Triton {named}, and its measurements are "
                           f"{f'of Triton {recorded}' if recorded else 'of no recorded Triton version'}: "
                           f"sweep under Triton {named}, or into that release's folder")


def check_compatible(root: str | os.PathLike, manifest: dict) -> dict | None:
    """The manifest at `root` if it agrees with `manifest` on COMPATIBLE_KEYS and the Triton release (None: no
    dataset there yet); a DatasetError naming the clashes otherwise."""
    if not (Path(root) / MANIFEST).is_file():
        return None
    existing = read_manifest(root)
    clashes = [f"{k}: {existing.get(k)!r} there, {manifest.get(k)!r} now"
               for k in COMPATIBLE_KEYS if existing.get(k) != manifest.get(k)]
    there, now = manifest_release(existing), manifest_release(manifest)
    if there and now and there != now:
        clashes.append(f"Triton release: {there} there, {now} now (one dataset per release: datasets.md)")
    if clashes:
        raise DatasetError(f"{root} holds a different dataset ({'; '.join(clashes)}); use another --out folder")
    return existing


@contextmanager
def dataset_lock(root: str | os.PathLike) -> Iterator[None]:
    """Hold the dataset folder's lock (rooftune/outputs.py `file_lock` on DIR/.manifest.lock, released when the
    process dies) for a read-modify-write of a file that several writers share."""
    with file_lock(Path(root) / LOCK):
        yield


def update_manifest(root: str | os.PathLike, change: Callable[[dict], dict]) -> dict:
    """Replace the manifest by `change(manifest)` under the dataset's lock, so that no other writer's
    update between the read and the write is lost; returns the new manifest."""
    with dataset_lock(root):
        manifest = change(read_manifest(root))
        write_manifest(root, manifest)
    return manifest


def is_held_out_list(name: object) -> bool:
    """A held-out shape list is named shapes_heldout*.json (the spelling of "held-out" aside): fitting never
    reads a folder swept from one."""
    return "heldout" in str(name).replace("-", "").replace("_", "").lower()


def swept_lists(manifest: dict) -> list[str]:
    """Every shape list a dataset folder was swept from: its first (`shapes_file`) and the lists later sweeps
    resumed it with (`shapes_files`, where one did)."""
    first = manifest.get("shapes_file")
    return list(dict.fromkeys([*([first] if first else []), *manifest.get("shapes_files", [])]))


def _add_list(root: str | os.PathLike, existing: dict, listed: str | None) -> dict:
    """`existing` with the list `listed` recorded among the folder's lists (`swept_lists`); DatasetError where it
    would mix held-out and training lists in one folder (a fit of the folder would then read held-out shapes)."""
    lists = swept_lists(existing)
    if not listed or not lists or listed in lists:
        return existing
    if is_held_out_list(listed) != is_held_out_list(lists[0]):
        kinds = {True: "held-out", False: "training"}
        raise DatasetError(f"{root} holds shapes of {kinds[is_held_out_list(lists[0])]} list {lists[0]}; a sweep "
                           f"of {kinds[is_held_out_list(listed)]} list {listed} into it would mix the two: use "
                           "another --out folder")
    updated = {**existing, "shapes_files": lists[1:] + [listed]}
    write_manifest(root, updated)
    return updated


def open_dataset(root: str | os.PathLike, manifest: dict) -> dict:
    """Create the dataset folder with `manifest` (in a release's folder only with that release's measurements:
    `check_layout`), or check that an existing one is compatible (same kernel, space version, GPU profile, SM
    partition and Triton release), record the list this sweep reads among the folder's (`swept_lists`; never a
    held-out list beside training ones) and return its manifest. Several sweeps may open one folder at once: the
    first creates it, the others find it."""
    with dataset_lock(root):
        existing = check_compatible(root, manifest)
        if existing is None:
            check_layout(root, manifest)
            write_manifest(root, manifest)
        else:
            existing = _add_list(root, existing, manifest.get("shapes_file"))
    return existing if existing is not None else read_manifest(root)


def read_dataset(root: str | os.PathLike) -> list[ShapeRecords]:
    """Every finished shape of a dataset folder, as ShapeRecords (the replay evaluation's input), each
    shape's meta with the Triton version it was measured under (`triton`: its own where its file records one,
    else the manifest's). A DatasetError where they are of more than one Triton release (a fit or a score over
    them would mix two compilers' rankings), or one is of another kernel than the manifest names."""
    manifest = read_manifest(root)
    check_layout(root, manifest)
    triton = (manifest.get("device") or {}).get("triton")
    files = shape_files(root)
    records = [to_records(read_shape(p)) for p in files]
    kernel = manifest.get("kernel", "gemm")
    for path, record in zip(files, records):
        if kernel_of(record.shape).name != kernel:
            raise DatasetError(f"{path}: holds a {kernel_of(record.shape).name} shape ({record.shape}), but the "
                               f"manifest of {root} says its measurements are of {kernel}")
    records = [replace(r, meta={"triton": triton, **r.meta}) for r in records] if triton else records
    releases = {triton_release(r.meta["triton"]): shape_id(r.shape) for r in records if r.meta.get("triton")}
    if len(releases) > 1:
        named = ", ".join(f"{release} ({sid}, ...)" for release, sid in sorted(releases.items()))
        raise DatasetError(f"{root}: shapes measured under more than one Triton release: {named}; a dataset "
                           f"holds one release's measurements (docs/datasets.md)")
    return records
