"""Reports on an exhaustive dataset: best config vs the kernel's library baseline per shape (GEMM: cuBLAS;
attention: SDPA; fused MoE: torch's grouped GEMM), repeatability, errors. One row type and one reading for every
kernel; what differs (the shape list's keys, the summary's groups and sentences) is the kernel's `ReportKind`
(GEMM_REPORT, ATTENTION_REPORT, MOE_REPORT), which its registry entry names (`report_kind`)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

from rooftune.candidates import KERNELS, load_implementation
from rooftune.candidates.records import nearest_rank
from rooftune.candidates.shapes import DTYPE_BYTES, ShapeListError
from rooftune.eval.datasets.format import ShapeRecords, read_manifest, read_shape, shape_files, to_records


@dataclass(frozen=True)
class ShapeRow:
    """One shape: `vs_baseline` = the library baseline's time / time of the space's best config (above
    1: the space beats it); `legal` and `errors` count configs of the space only; `aligned` (GEMM): N
    and K are multiples of 16 bytes' worth of elements, so every row of A, B and C starts on 16 bytes.
    Without that cuBLAS falls back to slow kernels (up to 6x slower on the H200), which flatters the
    space's side. `tags`: the groups the kernel's summary splits by (attention: head_dim, seq band)."""

    shape: str
    source: str
    aligned: bool
    legal: int
    errors: int
    best_us: float | None
    baseline_us: float | None
    vs_baseline: float | None
    ratio_median: float | None  # repeatability: |Δ ratio to fastest| between the two final passes
    ratio_p90: float | None
    best_within_1pct: bool | None
    tags: tuple[str, ...] = ()
    # The library's other routes timed beside it (attention: SDPA held to each backend, "sdpa:cudnn"...)
    # and the fastest of all of them, baseline included, / best (where any were timed).
    routes_us: dict[str, float] | None = None
    vs_fastest: float | None = None


def _sources(dataset: Path, kernel: str, kind: ReportKind) -> dict[Hashable, str]:
    """Shape key -> the shape list's `source` label, from the list the manifest names: beside the
    dataset's folder, or one level up (where datasets of several spaces share the lists)."""
    try:
        listed = read_manifest(dataset).get("shapes_file")
    except Exception:
        return {}
    path = next((p for p in (dataset.parent / str(listed), dataset.parent.parent / str(listed)) if p.is_file()), None)
    if not listed or path is None:
        return {}
    try:
        shapes = KERNELS[kernel].load_list(path)
    except ShapeListError:
        return {}
    return {kind.key(shape): str(e.get("source", "")) for shape, e in zip(shapes, json.loads(path.read_text()))}


def read_results(dataset: str | Path) -> list[ShapeRecords]:
    """Every finished shape of a rooftune dataset folder, read once for all of a report's figures."""
    read_manifest(dataset)  # a dataset folder, or a DatasetError that says why not
    return [read_shape(path) for path in shape_files(dataset)]


def shape_rows(dataset: str | Path, results: list[ShapeRecords] | None = None, kernel: str = "gemm") -> list[ShapeRow]:
    """One row per shape of the `kernel`'s dataset at `dataset` (`results`: its shapes, already read)."""
    dataset = Path(dataset)
    kind = report_kind(kernel)
    sources = _sources(dataset, kernel, kind)
    rows = []
    for rec in map(to_records, read_results(dataset) if results is None else results):
        s = rec.shape
        name = KERNELS[kernel].baseline
        best, baseline = rec.best_candidate_us, rec.baselines_us.get(name)
        routes = {k: v for k, v in rec.baselines_us.items() if k.startswith(f"{name}:") and v}
        fastest = min([*routes.values(), *([baseline] if baseline else [])], default=None)
        rep = rec.meta.get("repeatability") or {}
        space = set(rec.candidate_configs())
        rows.append(ShapeRow(
            shape=str(s), source=sources.get(kind.key(s), ""), aligned=kind.aligned(s), legal=len(space),
            errors=sum(not t.ok for t in rec.trials if t.config in space), best_us=best, baseline_us=baseline,
            vs_baseline=baseline / best if best and baseline else None,
            ratio_median=rep.get("ratio_median"), ratio_p90=rep.get("ratio_p90"),
            best_within_1pct=rep.get("best_within_1pct"), tags=kind.tags(s),
            routes_us=routes or None, vs_fastest=fastest / best if routes and best else None))
    return rows


def row_class(row: ShapeRow, kernel: str) -> str:
    """The class a report's picture colours a row by, as its summary splits them (the kernel's `ReportKind`
    `row_class`): GEMM 'decode', 'prefill' or 'random' by the shape list's source ('other' without one);
    attention its seq band; fused MoE its tokens band."""
    return report_kind(kernel).row_class(row)


def _tagged(prefix: str) -> Callable[[ShapeRow], str]:
    """A row's first tag that starts with `prefix`, else 'other'."""
    return lambda row: next((t for t in row.tags if t.startswith(prefix)), "other")


def _source_class(row: ShapeRow) -> str:
    if row.source.startswith("random"):
        return "random"
    return next((p for p in ("decode", "prefill") if p in row.source.split()), "other")


def geomean(values) -> float:
    values = [v for v in values if v]
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else math.nan


def noise_summary(rows: list[ShapeRow]) -> dict[str, float | int]:
    """The final passes' agreement over the shapes that have them, and the errors of the space."""
    reps = [r for r in rows if r.ratio_median is not None]
    return {
        "repeat_ratio_median": statistics.median(r.ratio_median for r in reps) if reps else math.nan,
        "repeat_ratio_p90_median": statistics.median(r.ratio_p90 for r in reps) if reps else math.nan,
        "repeat_ratio_p90_worst": max((r.ratio_p90 for r in reps), default=math.nan),
        "best_within_1pct_fraction": (sum(bool(r.best_within_1pct) for r in reps) / len(reps)) if reps else math.nan,
        "errors": sum(r.errors for r in rows),
    }


def summary(rows: list[ShapeRow]) -> dict[str, float | int]:
    """Geometric-mean best/cuBLAS throughput (all shapes, LLM layers, random shapes) and noise."""
    llm = [r.vs_baseline for r in rows if r.source and not r.source.startswith("random")]
    llm_aligned = [r for r in rows if r.aligned and r.source and not r.source.startswith("random")]
    phase = {p: [r.vs_baseline for r in llm_aligned if p in r.source.split()] for p in ("decode", "prefill")}
    rnd = [r.vs_baseline for r in rows if r.source.startswith("random")]
    return {
        "shapes": len(rows),
        "vs_cublas_geomean": geomean(r.vs_baseline for r in rows),
        "vs_cublas_geomean_llm": geomean(llm), "llm_shapes": len(llm),
        "vs_cublas_geomean_llm_aligned": geomean(r.vs_baseline for r in llm_aligned),
        "llm_aligned_shapes": len(llm_aligned),
        **{f"vs_cublas_geomean_{p}_aligned": geomean(v) for p, v in phase.items()},
        **{f"{p}_aligned_shapes": len(v) for p, v in phase.items()},
        "vs_cublas_geomean_random": geomean(rnd), "random_shapes": len(rnd),
        **noise_summary(rows),
    }


def attention_summary(rows: list[ShapeRow]) -> dict:
    """Geometric-mean SDPA / best time over all shapes and per tag (head_dim, seq band), and noise."""
    tags = sorted({t for r in rows for t in r.tags})
    timed = [r for r in rows if r.vs_fastest]
    routes = sorted({k for r in timed for k in r.routes_us})
    return {
        "shapes": len(rows),
        "vs_sdpa_geomean": geomean(r.vs_baseline for r in rows),
        "by_tag": {t: {"vs_sdpa_geomean": geomean(r.vs_baseline for r in rows if t in r.tags),
                       "vs_fastest_geomean": geomean(r.vs_fastest for r in timed if t in r.tags),
                       "shapes": sum(t in r.tags for r in rows)} for t in tags},
        # Where each SDPA backend was timed (a sweep does): the fastest route per shape, and each backend.
        "backends_timed": len(timed),
        "vs_fastest_geomean": geomean(r.vs_fastest for r in timed),
        "by_backend": {k: {"vs_geomean": geomean(r.routes_us[k] / r.best_us for r in timed if k in r.routes_us),
                           "fastest_on": sum(min(r.routes_us, key=r.routes_us.get) == k for r in timed),
                           "shapes": sum(k in r.routes_us for r in timed)} for k in routes},
        **noise_summary(rows),
    }


# The grouped GEMM alone on rows already sorted by expert (`MoeBench`'s route): a bound on what torch's route
# could reach with the gather, weighting and scatter fused away.
MOE_GEMM_ONLY = "grouped_mm:gemm"
# Token counts up to here are decode-sized batches (vLLM's tuner's 1 to 64); above, prefill-sized ones.
MOE_DECODE_TOKENS = 64


def _moe_tags(shape) -> tuple[str, ...]:
    band = "<=" if shape.tokens <= MOE_DECODE_TOKENS else ">"
    return shape.gemm, f"tokens {band} {MOE_DECODE_TOKENS}"


def _moe_group(rows: list[ShapeRow]) -> dict:
    return {"vs_grouped_mm_geomean": geomean(r.vs_baseline for r in rows),
            "vs_gemm_only_geomean": geomean((r.routes_us or {}).get(MOE_GEMM_ONLY, 0) / r.best_us
                                            for r in rows if r.best_us),
            "shapes": len(rows)}


def moe_summary(rows: list[ShapeRow]) -> dict:
    """Geometric-mean grouped-GEMM time / best time (torch's whole route, and its grouped GEMM alone where timed)
    over all shapes, per tag (the GEMM, decode- or prefill-sized token counts) and per layer (the list's source)."""
    tags = sorted({t for r in rows for t in r.tags})
    layers = sorted({r.source for r in rows if r.source})
    return {**_moe_group(rows),
            "by_tag": {t: _moe_group([r for r in rows if t in r.tags]) for t in tags},
            "by_layer": {src: _moe_group([r for r in rows if r.source == src]) for src in layers},
            **noise_summary(rows)}


def _moe_groups(groups: dict) -> str:
    return ", ".join(f"{name} {figure(g['vs_grouped_mm_geomean'])} ({g['shapes']})" for name, g in groups.items())


def _moe_text(t: dict, route: str) -> str:
    return (f"{route} / best time, geometric mean: all {figure(t['vs_grouped_mm_geomean'])} ({t['shapes']} shapes; "
            f"the grouped GEMM alone on rows already sorted by expert: {figure(t['vs_gemm_only_geomean'])}); "
            f"{_moe_groups(t['by_tag'])}; by layer: {_moe_groups(t['by_layer'])}")


def moe_line(totals: dict) -> str:
    """The fused-MoE summary as `rooftune report` prints it."""
    return f"{_moe_text(totals, 'torch._grouped_mm route time')}; errors {totals['errors']}"


def moe_sentence(totals: dict) -> str:
    """The fused-MoE summary as the Markdown table's opening sentence."""
    return _moe_text(totals, "torch._grouped_mm time (gather, grouped GEMM, routing weight, scatter)") + "."


def figure(value: float | None, spec: str = ".3f") -> str:
    """A summary figure as printed: `value` in `spec`, or "none" where it is undefined (None or NaN: a
    geometric mean over no shapes, a correlation over too few configs)."""
    return "none" if value is None or math.isnan(value) else format(value, spec)


def gemm_line(totals: dict) -> str:
    """The GEMM summary as `rooftune report` prints it ("none" for a group without shapes)."""
    t = totals
    return (f"{t['shapes']} shapes; best/cuBLAS throughput, geometric mean: all {figure(t['vs_cublas_geomean'])}, "
            f"LLM layers {figure(t['vs_cublas_geomean_llm'])} ({t['llm_shapes']}; aligned rows "
            f"{figure(t['vs_cublas_geomean_llm_aligned'])} ({t['llm_aligned_shapes']}): decode "
            f"{figure(t['vs_cublas_geomean_decode_aligned'])} ({t['decode_aligned_shapes']}), prefill "
            f"{figure(t['vs_cublas_geomean_prefill_aligned'])} ({t['prefill_aligned_shapes']})), "
            f"random {figure(t['vs_cublas_geomean_random'])} ({t['random_shapes']}); errors {t['errors']}")


def gemm_sentence(totals: dict) -> str:
    """The GEMM summary as the Markdown table's opening sentence."""
    t = totals
    return (f"Geometric mean of cuBLAS time / best time: all {figure(t['vs_cublas_geomean'])}, "
            f"LLM layers {figure(t['vs_cublas_geomean_llm'])} ({t['llm_shapes']} shapes; "
            f"{figure(t['vs_cublas_geomean_llm_aligned'])} over the {t['llm_aligned_shapes']} whose N and K "
            f"rows are 16-byte aligned, where cuBLAS runs its fast kernels: decode "
            f"{figure(t['vs_cublas_geomean_decode_aligned'])} ({t['decode_aligned_shapes']}), prefill "
            f"{figure(t['vs_cublas_geomean_prefill_aligned'])} ({t['prefill_aligned_shapes']})), random "
            f"{figure(t['vs_cublas_geomean_random'])} ({t['random_shapes']} shapes).")


def _by_tag(totals: dict) -> str:
    return ", ".join(f"{t} {figure(g['vs_sdpa_geomean'])} ({g['shapes']})" for t, g in totals["by_tag"].items())


def _backends(totals: dict) -> str:
    """Against the fastest SDPA backend per shape, where the sweep timed each backend."""
    if not totals.get("backends_timed"):
        return ""
    tags = ", ".join(f"{t} {figure(g['vs_fastest_geomean'])}" for t, g in totals["by_tag"].items())
    each = ", ".join(f"{k.split(':', 1)[1]} {figure(b['vs_geomean'])} ({b['shapes']}, fastest on {b['fastest_on']})"
                     for k, b in totals["by_backend"].items())
    return (f"; fastest SDPA backend time / best time: all {figure(totals['vs_fastest_geomean'])} "
            f"({totals['backends_timed']} shapes), {tags}; each backend: {each}")


def attention_line(totals: dict) -> str:
    """The attention summary as `rooftune report` prints it."""
    return (f"{totals['shapes']} shapes; SDPA time / best time, geometric mean: all "
            f"{figure(totals['vs_sdpa_geomean'])}; "
            f"{_by_tag(totals)}{_backends(totals)}; errors {totals['errors']}")


def attention_sentence(totals: dict) -> str:
    """The attention summary as the Markdown table's opening sentence."""
    return (f"Geometric mean of SDPA time / best time: all {figure(totals['vs_sdpa_geomean'])} "
            f"({totals['shapes']} shapes); {_by_tag(totals)}{_backends(totals)}.")


def _attention_tags(shape) -> tuple[str, ...]:
    # Below ~1K tokens SDPA's launches and setup dominate its time, which flatters the space's side.
    return f"head_dim {shape.head_dim}", "seq >= 1024" if shape.seq >= 1024 else "seq < 1024"


@dataclass(frozen=True)
class ReportKind:
    """What a kernel's report does its own way: key a shape of its list (`key`), a row's `aligned` and `tags`,
    the `summary` of the rows and its console `line` and Markdown `sentence`, the class a picture colours a
    row by (`row_class`); `baseline_call` names the baseline in the table's title."""

    key: Callable[[object], Hashable]
    aligned: Callable[[object], bool]
    tags: Callable[[object], tuple[str, ...]]
    summary: Callable[[list[ShapeRow]], dict]
    line: Callable[[dict], str]
    sentence: Callable[[dict], str]
    row_class: Callable[[ShapeRow], str]
    baseline_call: str


def _rows_aligned(shape) -> bool:
    return all(d * DTYPE_BYTES[shape.dtype] % 16 == 0 for d in (shape.n, shape.k))


GEMM_REPORT = ReportKind(lambda s: (s.m, s.n, s.k, s.layout), _rows_aligned, lambda s: (), summary, gemm_line,
                         gemm_sentence, _source_class, "torch.mm")
# head_dim is a power of two from 16: every row is 16-byte aligned.
ATTENTION_REPORT = ReportKind(lambda s: s, lambda s: True, _attention_tags, attention_summary, attention_line,
                              attention_sentence, _tagged("seq"), "SDPA's own choice of backend")
MOE_REPORT = ReportKind(lambda s: s, _rows_aligned, _moe_tags, moe_summary, moe_line, moe_sentence, _tagged("tokens"),
                        "gather, grouped GEMM, routing weight, scatter")


def report_kind(kernel: str) -> ReportKind:
    """The registered kernel's report (its registry entry's `report`)."""
    return load_implementation(KERNELS[kernel].report)


def pooled_repeatability(dataset: str | Path, results: list[ShapeRecords] | None = None) -> dict[str, float | int]:
    """Agreement of the two final passes, pooled over every (shape, config) they timed: median and
    p90 of |Δ| of each config's time ratio to its pass's fastest (and of its raw time), and the
    fraction of shapes whose fastest config in either pass is within 1% of the fastest in the other."""
    d_ratio, d_abs, agree, shapes = [], [], 0, 0
    for result in read_results(dataset) if results is None else results:
        pairs = [(r.retime_us, r.retime2_us) for r in result.trials if r.retime_us and r.retime2_us]
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


def markdown_table(rows: list[ShapeRow], totals: dict, title: str, kernel: str = "gemm") -> str:
    """The per-shape table and the summary line as Markdown (for dataset cards and the README)."""
    def f(value, spec):
        return "-" if value is None else format(value, spec)

    label = KERNELS[kernel].baseline_label
    lines = [f"# Best config of the space vs {label}, per shape ({title})", "",
             report_kind(kernel).sentence(totals), "",
             f"| shape | source | legal configs | errors | best µs | {label} µs | {label} / best | Δratio median | Δratio p90 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r.vs_baseline is None, r.vs_baseline or 0)):
        lines.append(f"| {r.shape} | {r.source} | {r.legal} | {r.errors} | {f(r.best_us, '.2f')} | "
                     f"{f(r.baseline_us, '.2f')} | {f(r.vs_baseline, '.3f')} | {f(r.ratio_median, '.2%')} | "
                     f"{f(r.ratio_p90, '.2%')} |")
    return "\n".join(lines) + "\n"
