"""Reports on an exhaustive dataset: best config vs cuBLAS per shape, repeatability, errors."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from rooftune.candidates.shapes import DTYPE_BYTES
from rooftune.eval.dataset import ShapeResult, read_manifest, read_shape, shape_files, to_records
from rooftune.kernels.measure import nearest_rank


@dataclass(frozen=True)
class ShapeRow:
    """One shape: `vs_cublas` = cuBLAS time / time of the space's best config (above 1: the space beats
    cuBLAS); `legal` and `errors` count configs of the space only; `aligned`: N and K are multiples of
    16 bytes' worth of elements, so every row of A, B and C starts on 16 bytes. Without that cuBLAS
    falls back to slow kernels (up to 6x slower on the H200), which flatters the space's side."""

    shape: str
    source: str
    aligned: bool
    legal: int
    errors: int
    best_us: float | None
    cublas_us: float | None
    vs_cublas: float | None
    ratio_median: float | None  # repeatability: |Δ ratio to fastest| between the two final passes
    ratio_p90: float | None
    best_within_1pct: bool | None


def _sources(dataset: Path) -> dict[tuple, str]:
    """(m, n, k, layout) -> the shape list's `source` label, from the list the manifest names."""
    try:
        listed = read_manifest(dataset).get("shapes_file")
    except Exception:
        return {}
    path = dataset.parent / str(listed)
    if not listed or not path.is_file():
        return {}
    return {(e["m"], e["n"], e["k"], e.get("layout", "kn")): str(e.get("source", ""))
            for e in json.loads(path.read_text())}


def read_results(dataset: str | Path) -> list[ShapeResult]:
    """Every finished shape of a rooftune dataset folder, read once for all of a report's figures."""
    read_manifest(dataset)  # a dataset folder, or a DatasetError that says why not
    return [read_shape(path) for path in shape_files(dataset)]


def shape_rows(dataset: str | Path, results: list[ShapeResult] | None = None) -> list[ShapeRow]:
    """One row per shape of the dataset at `dataset` (`results`: its shapes, already read)."""
    dataset = Path(dataset)
    sources = _sources(dataset)
    rows = []
    for rec in map(to_records, read_results(dataset) if results is None else results):
        s = rec.shape
        best, cublas = rec.best_candidate_us, rec.baselines_us.get("cublas")
        rep = rec.meta.get("repeatability") or {}
        space = set(rec.candidate_configs())
        rows.append(ShapeRow(
            shape=str(s), source=sources.get((s.m, s.n, s.k, s.layout), ""),
            aligned=all(d * DTYPE_BYTES[s.dtype] % 16 == 0 for d in (s.n, s.k)), legal=len(space),
            errors=sum(not t.ok for t in rec.trials if t.config in space), best_us=best, cublas_us=cublas,
            vs_cublas=cublas / best if best and cublas else None,
            ratio_median=rep.get("ratio_median"), ratio_p90=rep.get("ratio_p90"),
            best_within_1pct=rep.get("best_within_1pct")))
    return rows


def geomean(values) -> float:
    values = [v for v in values if v]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def summary(rows: list[ShapeRow]) -> dict[str, float | int]:
    """Geometric-mean best/cuBLAS throughput (all shapes, LLM layers, random shapes) and noise."""
    llm = [r.vs_cublas for r in rows if r.source and not r.source.startswith("random")]
    llm_aligned = [r for r in rows if r.aligned and r.source and not r.source.startswith("random")]
    phase = {p: [r.vs_cublas for r in llm_aligned if p in r.source.split()] for p in ("decode", "prefill")}
    rnd = [r.vs_cublas for r in rows if r.source.startswith("random")]
    reps = [r for r in rows if r.ratio_median is not None]
    return {
        "shapes": len(rows),
        "vs_cublas_geomean": geomean(r.vs_cublas for r in rows),
        "vs_cublas_geomean_llm": geomean(llm), "llm_shapes": len(llm),
        "vs_cublas_geomean_llm_aligned": geomean(r.vs_cublas for r in llm_aligned),
        "llm_aligned_shapes": len(llm_aligned),
        **{f"vs_cublas_geomean_{p}_aligned": geomean(v) for p, v in phase.items()},
        **{f"{p}_aligned_shapes": len(v) for p, v in phase.items()},
        "vs_cublas_geomean_random": geomean(rnd), "random_shapes": len(rnd),
        "repeat_ratio_median": statistics.median(r.ratio_median for r in reps) if reps else math.nan,
        "repeat_ratio_p90_median": statistics.median(r.ratio_p90 for r in reps) if reps else math.nan,
        "repeat_ratio_p90_worst": max((r.ratio_p90 for r in reps), default=math.nan),
        "best_within_1pct_fraction": (sum(bool(r.best_within_1pct) for r in reps) / len(reps)) if reps else math.nan,
        "errors": sum(r.errors for r in rows),
    }


def pooled_repeatability(dataset: str | Path, results: list[ShapeResult] | None = None) -> dict[str, float | int]:
    """Agreement of the two final passes, pooled over every (shape, config) they timed: median and
    p90 of |Δ| of each config's time ratio to its pass's fastest (and of its raw time), and the
    fraction of shapes whose fastest config in either pass is within 1% of the fastest in the other."""
    d_ratio, d_abs, agree, shapes = [], [], 0, 0
    for result in read_results(dataset) if results is None else results:
        pairs = [(r.retime_us, r.retime2_us) for r in result.rows if r.retime_us and r.retime2_us]
        if len(pairs) < 2:
            continue
        shapes += 1
        best_a, best_b = min(a for a, _ in pairs), min(b for _, b in pairs)
        for a, b in pairs:
            d_ratio.append(abs(b / best_b - a / best_a) / (a / best_a))
            d_abs.append(abs(b - a) / a)
        fastest_a = min(pairs, key=lambda p: p[0])
        fastest_b = min(pairs, key=lambda p: p[1])
        agree += fastest_a[1] <= 1.01 * best_b and fastest_b[0] <= 1.01 * best_a
    if not shapes:
        return {"shapes": 0}
    return {"shapes": shapes, "configs": len(d_ratio),
            "ratio_median": nearest_rank(d_ratio, 0.5), "ratio_p90": nearest_rank(d_ratio, 0.9),
            "abs_median": nearest_rank(d_abs, 0.5), "abs_p90": nearest_rank(d_abs, 0.9),
            "fastest_within_1pct_both": agree / shapes}


def markdown_table(rows: list[ShapeRow], totals: dict, title: str) -> str:
    """The per-shape table and the summary line as Markdown (for dataset cards and the README)."""
    def f(value, spec):
        return "-" if value is None else format(value, spec)

    lines = [f"# Best config of the space vs cuBLAS, per shape ({title})", "",
             f"Geometric mean of cuBLAS time / best time: all {totals['vs_cublas_geomean']:.3f}, "
             f"LLM layers {totals['vs_cublas_geomean_llm']:.3f} ({totals['llm_shapes']} shapes; "
             f"{totals['vs_cublas_geomean_llm_aligned']:.3f} over the {totals['llm_aligned_shapes']} whose N and K "
             f"rows are 16-byte aligned, where cuBLAS runs its fast kernels: decode "
             f"{totals['vs_cublas_geomean_decode_aligned']:.3f} ({totals['decode_aligned_shapes']}), prefill "
             f"{totals['vs_cublas_geomean_prefill_aligned']:.3f} ({totals['prefill_aligned_shapes']})), random {totals['vs_cublas_geomean_random']:.3f} ({totals['random_shapes']} shapes).", "",
             "| shape | source | legal configs | errors | best µs | cuBLAS µs | cuBLAS / best | Δratio median | Δratio p90 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r.vs_cublas is None, r.vs_cublas or 0)):
        lines.append(f"| {r.shape} | {r.source} | {r.legal} | {r.errors} | {f(r.best_us, '.2f')} | "
                     f"{f(r.cublas_us, '.2f')} | {f(r.vs_cublas, '.3f')} | {f(r.ratio_median, '.2%')} | "
                     f"{f(r.ratio_p90, '.2%')} |")
    return "\n".join(lines) + "\n"
