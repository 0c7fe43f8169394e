"""A fused-MoE layer's score as an engine runs it: both GEMMs of a token count timed with the configs a table
serves them, against the best one config for both and the best pair under one BLOCK_SIZE_M, on recorded data.

An engine runs one table entry on both GEMMs of a layer (vLLM), or an up entry and a down entry that share
BLOCK_SIZE_M (SGLang: the align step runs once a layer), so what a user gets is the sum of the two GEMMs' times.
A config runs on each GEMM as its twin there (the family's `twin`: the GROUP_SIZE_M twin, the same binary in the same
program order; FP8 block scales' BLOCK_SIZE_K 256 too, launched as 128), which is what the dataset records. bf16 and
FP8 layers (`moe`, `moe-fp8`) are scored alike; a layer is told apart by its engine-table dtype. Scores: the best summed time ÷ the entry's summed time (0 where the entry
failed or is not recorded on a GEMM).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rooftune.candidates import Config, kernel_of
from rooftune.candidates.families import table_dtype_of
from rooftune.candidates.records import ShapeRecords
from rooftune.candidates.shapes import MOE_GEMMS

# experts, topk, hidden, the shard's intermediate (vLLM's N), the table dtype's label ('bf16', 'fp8_w8a8',
# 'fp8_w8a8,block_shape=[128,128]': candidates/families.py TableDtype)
LayerKey = tuple[int, int, int, int, str]


def layer_key(shape) -> LayerKey:
    """The layer a fused-MoE GEMM shape belongs to."""
    return shape.experts, shape.topk, shape.hidden, shape.intermediate, table_dtype_of(shape).label


def layer_label(key: LayerKey) -> str:
    """'E=128,topk=8,H=2048,N=192' (the dtype where it is not bf16: ',fp8_w8a8,block_shape=[128,128]')."""
    e, k, h, n, dtype = key
    return f"E={e},topk={k},H={h},N={n}" + ("" if dtype == "bf16" else f",{dtype}")


def layer_records(records: Iterable[ShapeRecords]) -> dict[LayerKey, dict[int, dict[str, ShapeRecords]]]:
    """Layer -> token count -> GEMM -> its records, keeping only token counts with both GEMMs recorded (and a
    successful config on each), layers and token counts in increasing order."""
    grouped: dict[LayerKey, dict[int, dict[str, ShapeRecords]]] = {}
    for r in records:
        if getattr(r.shape, "gemm", None) in MOE_GEMMS and r.best_candidate_us is not None:
            grouped.setdefault(layer_key(r.shape), {}).setdefault(r.shape.tokens, {})[r.shape.gemm] = r
    return {key: {m: pair for m, pair in sorted(by_m.items()) if len(pair) == len(MOE_GEMMS)}
            for key, by_m in sorted(grouped.items())}


def recorded_us(records: ShapeRecords, config: Config) -> float | None:
    """The recorded time of `config` on the records' shape, run as its twin there (None: it failed or was not
    recorded)."""
    trial = records.lookup().get(kernel_of(records.shape).twin(records.shape, config))
    return trial.time_us if trial is not None and trial.ok else None


def pair_us(pair: dict[str, ShapeRecords], configs: dict[str, Config]) -> float | None:
    """The layer's recorded time with `configs[gemm]` on each GEMM: the sum (None where one has no time)."""
    times = [recorded_us(pair[g], configs[g]) for g in MOE_GEMMS]
    return None if None in times else sum(times)


def best_single(pair: dict[str, ShapeRecords]) -> tuple[Config, float] | None:
    """The one config whose recorded times on both GEMMs sum least (over every config recorded on either GEMM,
    each run as its twin on the other), with that sum; None where no config ran on both."""
    best = None
    for g in MOE_GEMMS:
        for config in pair[g].candidate_configs():
            total = pair_us(pair, {gemm: config for gemm in MOE_GEMMS})
            if total is not None and (best is None or total < best[1]):
                best = (config, total)
    return best


def best_split(pair: dict[str, ShapeRecords]) -> tuple[dict[str, Config], float] | None:
    """The pair of configs, one per GEMM sharing BLOCK_SIZE_M, whose recorded times sum least, with that sum."""
    fastest: dict[str, dict[int, tuple[float, Config]]] = {g: {} for g in MOE_GEMMS}
    for g in MOE_GEMMS:
        for config in pair[g].candidate_configs():
            us, bm = recorded_us(pair[g], config), config["BLOCK_SIZE_M"]
            if us is not None and (bm not in fastest[g] or us < fastest[g][bm][0]):
                fastest[g][bm] = (us, config)
    shared = set(fastest["gate_up"]) & set(fastest["down"])
    if not shared:
        return None
    bm = min(shared, key=lambda b: fastest["gate_up"][b][0] + fastest["down"][b][0])
    return ({g: fastest[g][bm][1] for g in MOE_GEMMS}, fastest["gate_up"][bm][0] + fastest["down"][bm][0])


@dataclass(frozen=True)
class EntryScore:
    """One token count of a layer: the entry's summed time and its scores against the best single config and
    the best pair under one BLOCK_SIZE_M (0 where the entry has no time)."""

    tokens: int
    time_us: float | None
    single: float
    split: float


@dataclass(frozen=True)
class LayerScore:
    """A table's entries scored on one layer's recorded token counts."""

    layer: LayerKey
    entries: tuple[EntryScore, ...]

    @property
    def mean(self) -> float:
        return sum(e.single for e in self.entries) / len(self.entries) if self.entries else math.nan

    @property
    def worst(self) -> float:
        return min((e.single for e in self.entries), default=math.nan)

    @property
    def split_mean(self) -> float:
        return sum(e.split for e in self.entries) / len(self.entries) if self.entries else math.nan

    @property
    def split_worst(self) -> float:
        return min((e.split for e in self.entries), default=math.nan)

    @property
    def time_us(self) -> float:
        """The layer's summed time over its token counts (inf where an entry has none)."""
        return sum(e.time_us if e.time_us is not None else math.inf for e in self.entries)


EntryConfigs = Callable[[int], "dict[str, Config] | None"]  # token count -> the config each GEMM runs


def score_layer(layer: LayerKey, by_m: dict[int, dict[str, ShapeRecords]], entry: EntryConfigs) -> LayerScore:
    """Score the configs `entry(M)` serves each GEMM at every recorded token count of one layer (`layer_records`'s
    value): best single config's summed time ÷ the entry's, and the best shared-BLOCK_SIZE_M pair's ÷ the entry's."""
    scores = []
    for m, pair in by_m.items():
        configs = entry(m)
        total = pair_us(pair, configs) if configs is not None else None
        single, split = best_single(pair), best_split(pair)
        scores.append(EntryScore(m, total, single[1] / total if total and single else 0.0,
                                 split[1] / total if total and split else 0.0))
    return LayerScore(layer, tuple(scores))


def split_gain(by_m: dict[int, dict[str, ShapeRecords]]) -> float:
    """What separate configs under one BLOCK_SIZE_M can gain on a layer: the best single configs' summed time
    over its token counts ÷ the best pairs' (1 where one config is best for both GEMMs everywhere)."""
    bests = [(best_single(pair), best_split(pair)) for pair in by_m.values()]
    if not bests or any(single is None or split is None for single, split in bests):
        return math.nan
    return sum(single[1] for single, _ in bests) / sum(split[1] for _, split in bests)
