"""Readers that turn a recorded dataset (probe CSV, AutoHeuristic log, rooftune dataset) into ShapeRecords."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import statistics
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rooftune.candidates import AttentionShape, Config, GemmShape, Trial, kernel_spec
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.format import MANIFEST, check_cells, check_measured, read_dataset, read_manifest
from rooftune.inputs import check_input

PROBE_BASELINE = "cublas"
# Torch SDPA rows of the attention probe carry the backend in the BM column.
PROBE_SDPA_PREFIX = "sdpa_"
AH_BASELINE = "extern_mm"
# Inductor's mm template visits tiles in groups of 8 tile rows (GROUP_M=8) for every config it logs.
AH_GROUP_M = 8

_AH_DTYPES = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}
_AH_CHOICE = re.compile(r"^type=triton_BLOCK-M=(\d+)_BLOCK-K=(\d+)_BLOCK-N=(\d+)_numstages=(\d+)_numwarps=(\d+)$")


class DatasetFormatError(ValueError):
    """A path whose content is not a dataset format rooftune recognises."""


def gemm_config(block_m: int, block_n: int, block_k: int, group_m: int, num_warps: int, num_stages: int,
                split_k: int = 1) -> Config:
    """A GEMM Config with the parameter order of the published GEMM space."""
    return Config.make(num_warps, num_stages, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                       GROUP_M=group_m, SPLIT_K=split_k)


def attention_config(block_m: int, block_n: int, order: int, num_warps: int, num_stages: int) -> Config:
    """An attention Config with the parameter order of the published attention space."""
    return Config.make(num_warps, num_stages, BLOCK_M=block_m, BLOCK_N=block_n, ORDER=order)


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


@contextmanager
def _line(path: Path, reader: csv.DictReader, first_line: int = 1) -> Iterator[None]:
    """Around one row of `reader`: a value error there (a bad number, a time that is not finite and
    positive) becomes a DatasetFormatError naming the file and the line (`first_line`: the file's line
    of the CSV header)."""
    try:
        yield
    except ValueError as exc:
        raise DatasetFormatError(f"{path}: line {reader.line_num + first_line - 1}: {exc}") from None


def read_probe_gemm(path: str | Path) -> list[ShapeRecords]:
    """The H200 probe sweep: columns M,N,K,BM,BN,BK,stages,warps,GM,us,err (B stored [K, N], bf16)."""
    path = Path(path)
    trials: dict[tuple[int, int, int], list[Trial]] = defaultdict(list)
    baselines: dict[tuple[int, int, int], dict[str, float]] = defaultdict(dict)
    with _open_text(path) as f:
        reader = csv.DictReader(f)
        for row in reader:
            with _line(path, reader):
                _whole_row(row, reader.fieldnames)
                key = (int(row["M"]), int(row["N"]), int(row["K"]))
                if row["BM"] == PROBE_BASELINE:
                    baselines[key][PROBE_BASELINE] = check_measured(float(row["us"]), "us")
                    continue
                config = gemm_config(int(row["BM"]), int(row["BN"]), int(row["BK"]), int(row["GM"]),
                                     int(row["warps"]), int(row["stages"]))
                if row.get("err"):
                    trials[key].append(Trial(config, None, error=row["err"]))
                else:
                    trials[key].append(Trial(config, check_measured(float(row["us"]), "us")))
    return [ShapeRecords(GemmShape(m, n, k, layout="kn", dtype="bf16"), tuple(ts),
                         baselines_us=baselines.get((m, n, k), {}), meta={"source": str(path)})
            for (m, n, k), ts in trials.items()]


def read_probe_attention(path: str | Path) -> list[ShapeRecords]:
    """The H200 attention probe: columns B,H,S,D,BM,BN,stages,warps,rev,us,err (causal, bf16,
    [B, H, S, D]). `rev` 1 visits query blocks heaviest first: ORDER 1, else ORDER 0 (both per head).
    `sdpa_*` rows are torch SDPA backends, kept as baselines; every other row is a candidate."""
    path = Path(path)
    trials: dict[tuple[int, int, int, int], list[Trial]] = defaultdict(list)
    baselines: dict[tuple[int, int, int, int], dict[str, float]] = defaultdict(dict)
    with _open_text(path) as f:
        reader = csv.DictReader(f)
        for row in reader:
            with _line(path, reader):
                _whole_row(row, reader.fieldnames)
                key = (int(row["B"]), int(row["H"]), int(row["S"]), int(row["D"]))
                if row["BM"].startswith(PROBE_SDPA_PREFIX):
                    if row["us"]:
                        baselines[key][row["BM"]] = check_measured(float(row["us"]), "us")
                    continue
                config = attention_config(int(row["BM"]), int(row["BN"]), int(row["rev"]), int(row["warps"]),
                                          int(row["stages"]))
                if row.get("err"):
                    trials[key].append(Trial(config, None, error=row["err"]))
                else:
                    trials[key].append(Trial(config, check_measured(float(row["us"]), "us")))
    return [ShapeRecords(AttentionShape(b, h, s, d, causal=True, dtype="bf16"), tuple(ts),
                         baselines_us=baselines.get((b, h, s, d), {}), meta={"source": str(path)})
            for (b, h, s, d), ts in trials.items()]


def _ah_dtype(row: dict[str, str]) -> str:
    if row["mat1_dtype"] not in _AH_DTYPES:
        raise ValueError(f"mat1_dtype {row['mat1_dtype']!r}: rooftune's GEMM takes "
                         f"{', '.join(_AH_DTYPES)} operands only")
    dtype = _AH_DTYPES[row["mat1_dtype"]]
    if dtype == "fp32" and row.get("using_tf32") == "True":
        return "tf32"
    return dtype


def _ah_layout(row: dict[str, str]) -> str:
    """B = mat2 [K, N]: unit stride along N is 'kn'; unit stride along K (a transposed weight) is 'nk'."""
    return "nk" if int(row["mat2_stride_0"]) == 1 and int(row["n"]) > 1 else "kn"


def _ah_a_layout(row: dict[str, str]) -> str:
    """A = mat1 [M, K]: unit stride along K is 'mk'; unit stride along M only (A stored [K, M],
    the transpose of a row-major tensor) is 'km'. A single row or column has no orientation: 'mk'."""
    along_m, along_k = int(row["mat1_stride_0"]), int(row["mat1_stride_1"])
    return "km" if along_m == 1 and along_k != 1 and int(row["m"]) > 1 and int(row["k"]) > 1 else "mk"


def _whole_row(row: dict, columns: list[str]) -> None:
    """A ValueError where a CSV row has fewer or more cells than the header has columns (format.py `check_cells`;
    csv fills the missing ones with None, which no reader may see)."""
    if None in row or None in row.values():
        check_cells(len(columns) - sum(v is None for v in row.values()) + len(row.get(None) or ()), len(columns))


def read_autoheuristic_mm(path: str | Path) -> list[ShapeRecords]:
    """A PyTorch AutoHeuristic mm log: JSON metadata line, then CSV with `choice` and `feedback` (ms).

    One ShapeRecords per input (shape, dtype, strides); repeated (input, choice) rows are reduced
    to their median; `inf` feedback is a failed trial; `extern_mm` goes to the baselines."""
    path = Path(path)
    times: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    rows_of: dict[tuple, dict[str, str]] = {}
    with _open_text(path) as f:
        meta = json.loads(f.readline())
        if not isinstance(meta, dict):
            raise DatasetFormatError(f"{path}: line 1: expected the JSON object of AutoHeuristic's metadata")
        reader = csv.DictReader(f)
        for row in reader:
            with _line(path, reader, first_line=2):
                _whole_row(row, reader.fieldnames)
                key = (row["m"], row["k"], row["n"], row["mat1_dtype"], row["using_tf32"], row["mat1_stride_0"],
                       row["mat1_stride_1"], row["mat2_stride_0"], row["mat2_stride_1"])
                rows_of.setdefault(key, row)
                feedback = float(row["feedback"])
                if feedback != float("inf"):  # inf: the choice failed
                    check_measured(feedback, "feedback", unit="ms")
                times[key][row["choice"]].append(feedback * 1000.0)
    records = []
    for key, by_choice in times.items():
        row = rows_of[key]
        shape = GemmShape(int(row["m"]), int(row["n"]), int(row["k"]), layout=_ah_layout(row), dtype=_ah_dtype(row),
                          a_layout=_ah_a_layout(row))
        trials, baselines = [], {}
        for choice, values in by_choice.items():
            median = statistics.median(values)
            if choice == AH_BASELINE:
                if median != float("inf"):
                    baselines["extern_mm"] = median
                continue
            match = _AH_CHOICE.match(choice)
            if match is None:
                continue  # a choice kind this reader does not model (not a plain Triton mm template)
            bm, bk, bn, stages, warps = (int(g) for g in match.groups())
            config = gemm_config(bm, bn, bk, AH_GROUP_M, warps, stages)
            if median == float("inf"):
                trials.append(Trial(config, None, error="failed (inf feedback)"))
            else:
                trials.append(Trial(config, median))
        records.append(ShapeRecords(shape, tuple(trials), baselines_us=baselines,
                                    meta={"source": str(path), "device_capa": meta.get("device_capa"),
                                          "a_transposed": shape.a_layout == "km"}))
    return records


def _sniff(path: Path) -> str:
    with _open_text(path) as f:
        first = f.readline().strip()
        second = f.readline().strip()
    if first.startswith("M,N,K,BM,BN,BK"):
        return "probe"
    if first.startswith("B,H,S,D,BM,BN"):
        return "probe-attention"
    if first.startswith("{") and "choice" in second and "feedback" in second:
        return "autoheuristic-mm"
    raise DatasetFormatError(f"{path}: not a recognised dataset (probe CSV, attention probe CSV or AutoHeuristic mm log)")


def load_records(path: str | Path, kernel: str = "gemm") -> list[ShapeRecords]:
    """Read any dataset rooftune recognises: a rooftune dataset folder (manifest.json), the H200
    probe folder (its CSV for `kernel`: 'gemm' or 'attention'), one probe CSV (GEMM or attention,
    told apart by the header), or an AutoHeuristic mm log. `kernel` only picks the file inside a
    probe folder; callers keep the shapes of the kernel they evaluate."""
    path = check_input(path, folder=True)  # a pipe or device: never opened (it would block)
    if not path.exists():
        raise DatasetFormatError(f"{path}: no such file or folder")
    if path.is_dir():
        if (path / "manifest.json").is_file():
            return read_dataset(path)
        probe_file = kernel_spec(kernel).probe_file
        if probe_file is not None and (path / probe_file).is_file():
            return _read_file(path / probe_file)
        raise DatasetFormatError(f"{path}: folder holds neither manifest.json nor {probe_file or 'a probe CSV'}")
    return _read_file(path)


def _read_file(path: Path) -> list[ShapeRecords]:
    """The records of one file in whichever format its first lines say; what a damaged or foreign
    file raises (a truncated or non-gzip file, a missing column, a bad value or shape) becomes a
    DatasetFormatError naming the file."""
    check_input(path)
    try:
        return _READERS[_sniff(path)](path)
    except DatasetFormatError:
        raise
    except KeyError as exc:
        raise DatasetFormatError(f"{path}: no {exc} column") from None
    except (OSError, EOFError, UnicodeDecodeError, ValueError, csv.Error) as exc:
        raise DatasetFormatError(f"{path}: cannot be read ({exc})") from None


def recorded_gpu(path: str | Path) -> str | None:
    """The GPU (the profile's name) a dataset was recorded on, where it says: a rooftune dataset
    folder's manifest `gpu_profile`; None for the other formats, which do not record it."""

    if not (Path(path) / MANIFEST).is_file():
        return None
    return read_manifest(path).get("gpu_profile")


def recorded_device(path: str | Path) -> dict | None:
    """What a dataset says about its GPU: {"name": the profile's name} for a rooftune dataset folder,
    {"compute_capability": (major, minor), "smem_per_block_bytes": n} for an AutoHeuristic log (its
    metadata line); None where it says nothing (the probe files) or cannot be read (load_records says why)."""
    name = recorded_gpu(path)
    if name:
        return {"name": name}
    path = Path(path)
    try:
        if not path.is_file() or _sniff(path) != "autoheuristic-mm":
            return None
        with _open_text(path) as f:
            meta = json.loads(f.readline())
        major, minor = meta["device_capa"]
        return {"compute_capability": (int(major), int(minor)), "smem_per_block_bytes": int(meta["shared_memory"])}
    except (OSError, EOFError, UnicodeDecodeError, ValueError, KeyError, TypeError, csv.Error):
        return None  # DatasetFormatError is a ValueError: load_records names the problem


_READERS = {"probe": read_probe_gemm, "probe-attention": read_probe_attention,
            "autoheuristic-mm": read_autoheuristic_mm}
