"""Tuning a fused-MoE layer's tables: each token count's entry chosen by the layer's time (cached, resumable), as
vLLM runs one table for both GEMMs and SGLang an up table and a `_down` table that share BLOCK_SIZE_M.

`--gemm both` (vLLM's table: one entry per M serves the gate_up and the down GEMM): one search over configs legal
on both GEMMs, ranked by the sum of the two GEMMs' predicted times, each trial timing the config on both, at most
`budget` configs (2 × budget timings) a token count (tuner/llm/moe_joint.py). So an entry exists wherever one
config can serve the layer; a token count where every config measured failed on a GEMM is an entry without a
config that says why, and the CLI writes no table that lacks it.

`--gemm split` (SGLang's two tables): the gate_up GEMM tuned on its own (the same cache entry as `--gemm
gate_up`), then the down GEMM searched among its configs with the up entry's BLOCK_SIZE_M (`down_under`), so
the `_down` table never pairs a BLOCK_SIZE_M nobody timed; where no down config runs under it, that token count
falls back to one config legal on both (the joint search, timed) for both tables, and says so.

`--gemm gate_up`: that GEMM's own winners, written to vLLM's file name (vLLM would serve the down GEMM with it
too). `--gemm down`: the down GEMM under the BLOCK_SIZE_M of an up table already written (`up_table`).

The layer's weights choose the family (candidates/families.py `layer_family`): bf16 or fp16 the fused MoE (`moe`),
`fp8_w8a8` the FP8 one (`moe-fp8`: per-tensor scales, or `block_shape` (128, 128)); everything here reads the
family's space, twin, residual and measurer from the registry, and the tables are named as vLLM names that dtype
(`..,dtype=fp8_w8a8[,block_shape=[128,128]].json`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from rooftune.candidates import Config, MoeShape, Trial, kernel_of, legal_configs
from rooftune.candidates.families import TableDtype, layer_family
from rooftune.candidates.shapes import MOE_GEMMS, ShapeError
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.tuner.cache import TuneCache, tune_key
from rooftune.tuner.live_tune import tune_shape
from rooftune.tuner.llm.moe_joint import cached_joint, down_under
from rooftune.tuner.llm.moe_tables import layer_table_name, read_table, table_folder, write_table
from rooftune.tuner.llm.tables import TableError
from rooftune.tuner.llm.tune import NO_LEGAL_CONFIG, MeasurerFactory, Reporter, live_measurers
from rooftune.tuner.residual_choice import ranking_residual
from rooftune.tuner.tune import TuneError, TuneResult

TABLE_GEMMS = ("both", "split", *MOE_GEMMS)


@dataclass(frozen=True)
class MoeEntry:
    """One token count of the table: its config (None where `skipped` says why there is none; the up table's with
    --gemm split), the down table's (`down_config`, --gemm split and down), its time on each GEMM it serves (the
    confirming pass's), each GEMM's tune, with both each GEMM's fastest among the search's trials (`separate_us`),
    and `note` where the entry came from a fallback."""

    tokens: int
    config: Config | None
    times_us: dict[str, float] = field(default_factory=dict)
    tunes: dict[str, TuneResult] = field(default_factory=dict)
    separate_us: dict[str, float] | None = None
    skipped: str | None = None
    down_config: Config | None = None
    note: str | None = None

    @property
    def time_us(self) -> float:
        """The layer's time with this entry: the sum over the GEMMs it serves."""
        return sum(self.times_us.values())

    @property
    def baseline_us(self) -> float | None:
        """torch's grouped GEMM over the same GEMMs, where every tune timed it."""
        times = [t.baseline_us for t in self.tunes.values()]
        return sum(times) if times and all(t is not None for t in times) else None

    @property
    def pair_cost(self) -> float | None:
        """--gemm both: the shared config's summed time ÷ the sum of each GEMM's fastest trial in the search: what
        serving both GEMMs with one config costs among the configs timed (1 where one config was fastest on both)."""
        return self.time_us / sum(self.separate_us.values()) if self.separate_us else None


@dataclass(frozen=True)
class MoeTableTune:
    """The outcome of `tune_moe_table`: one entry per token count, in the order given."""

    experts: int
    topk: int
    hidden: int
    intermediate: int            # per tensor-parallel shard: vLLM's N
    gemm: str                    # 'both', 'split', 'gate_up' or 'down'
    profile: str
    budget: int
    entries: tuple[MoeEntry, ...]
    tuned: int                   # GEMM searches measured in this run (a joint search counts one a GEMM)
    cached: int                  # found in the cache
    residual_note: str | None = None  # which residual ranked, and why (`ranking_residual`'s line; None: as given)
    table_dtype: TableDtype | None = None  # the weights' (candidates/families.py); None: unquantized

    def table(self) -> dict[int, Config]:
        """Token count -> config, for the entries that have one (--gemm split: the up table; down: the down table)."""
        if self.gemm == "down":
            return self.down_table()
        return {e.tokens: e.config for e in self.entries if e.config is not None}

    def down_table(self) -> dict[int, Config]:
        """Token count -> the down table's config (--gemm split and down)."""
        return {e.tokens: e.down_config for e in self.entries if e.down_config is not None}

    @property
    def missing(self) -> list[MoeEntry]:
        """The entries without a config: the token counts the table cannot serve."""
        return [e for e in self.entries if e.skipped]

    @property
    def file_name(self) -> str:
        """vLLM's file name for the layer on this GPU; SGLang's `_down` table with --gemm down."""
        return layer_table_name(self.experts, self.intermediate, self.profile, self.table_dtype, self.gemm == "down")

    @property
    def file_names(self) -> dict[str, str]:
        """The tables this tune writes, by what they hold ('up', 'down'): --gemm split writes both."""
        up = layer_table_name(self.experts, self.intermediate, self.profile, self.table_dtype)
        down = layer_table_name(self.experts, self.intermediate, self.profile, self.table_dtype, down=True)
        return {"both": {"up": up}, "gate_up": {"up": up}, "down": {"down": down},
                "split": {"up": up, "down": down}}[self.gemm]


def shard_intermediate(intermediate: int, tp: int) -> int:
    """The intermediate size one tensor-parallel shard holds, vLLM's N: intermediate / tp (a ShapeError where tp
    does not divide it)."""
    if tp < 1 or intermediate % tp:
        raise ShapeError(f"--tp {tp} must be at least 1 and divide the intermediate size {intermediate}")
    return intermediate // tp


def moe_shapes(experts: int, topk: int, hidden: int, intermediate: int, tokens: int, gemm: str,
               dtype: str | None = None, block_shape: tuple[int, int] | None = None) -> dict[str, MoeShape]:
    """The GEMM shapes one table entry serves (`gemm` 'both': gate_up and down), by GEMM name, of the family and
    shape options the weights' `dtype` and `block_shape` name (`layer_family`: a ShapeError for one not tuned)."""
    if gemm not in TABLE_GEMMS:
        raise ShapeError(f"--gemm must be one of {', '.join(TABLE_GEMMS)}, got {gemm!r}")
    spec, table_dtype = layer_family(dtype, block_shape)
    names = MOE_GEMMS if gemm in ("both", "split") else (gemm,)
    return {g: spec.shape_type(experts=experts, topk=topk, hidden=hidden, intermediate=intermediate, tokens=tokens,
                               gemm=g, **dict(table_dtype.options)) for g in names}


class _OnDemand:
    """The `kernel`'s measurer from `factory`, opened at its first use (a table whose tunes are all cached needs no
    GPU) and closed with `close`."""

    def __init__(self, factory: MeasurerFactory, kernel: str):
        self.factory, self.kernel, self.stack, self.inner = factory, kernel, ExitStack(), None

    def _open(self):
        if self.inner is None:
            self.inner = self.stack.enter_context(self.factory(self.kernel))
        return self.inner

    @property
    def opened(self) -> bool:
        return self.inner is not None

    def measure(self, shape, configs: list[Config]) -> list[Trial]:
        return self._open().measure(shape, configs)

    def prefetch(self, shape, configs: list[Config]) -> None:
        ahead = getattr(self._open(), "prefetch", None)
        if ahead is not None:
            ahead(shape, configs)

    def baseline_us(self) -> float | None:
        baseline = getattr(self._open(), "baseline_us", None)
        return baseline() if baseline is not None else None

    def close(self) -> None:
        self.stack.close()


def tune_moe_table(experts: int, topk: int, hidden: int, intermediate: int, tokens: list[int],
                   profile: HardwareProfile, budget: int = 20, *, gemm: str = "both", tp: int = 1,
                   measurer_for: MeasurerFactory | None = None, cache: str | Path | None = None,
                   sms: int | None = None, reporter: Reporter | None = None, dtype: str | None = None,
                   block_shape: tuple[int, int] | None = None, residual="shipped",
                   up_table: Mapping[int, Config] | None = None) -> MoeTableTune:
    """Tune the fused-MoE tables of a layer (`intermediate` the whole layer's, split over `tp` shards) for each
    token count as the module docstring says for `gemm`; with `cache`, searches already there are not measured.
    The kernel's measurer is opened by `measurer_for` (default: the live GPU one) only where something is measured.
    A token count whose GEMM has no legal config, or whose measured configs all failed, is an entry without a
    config that says why. `residual`: "shipped" (the one fitted for this GPU, if any), "none" or None (the model
    alone), or a Residual. `up_table` (--gemm down): the up table the down table must share BLOCK_SIZE_M with.
    `dtype` and `block_shape`: the weights' (`layer_family`; default bf16), which pick the family and name the tables.
    Raises ShapeError (the sizes), TableError (--gemm down without an up entry for each token count), ValueError
    (budget, residual), and what a live measurer raises."""
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    shard = shard_intermediate(intermediate, tp)
    spec, table_dtype = layer_family(dtype, block_shape)
    plans = [(m, moe_shapes(experts, topk, hidden, shard, m, gemm, dtype, block_shape)) for m in tokens]  # checked
    up_block_m = up_block_sizes(up_table, tokens) if gemm == "down" else {}
    residual, note = ranking_residual(residual, spec, profile, installed_triton())
    measurer = _OnDemand(measurer_for or live_measurers(profile, sms), spec.name)
    run = _Run(profile, budget, measurer, Path(cache) if cache is not None else None, sms, residual)
    if reporter is not None:
        reporter.start(len(plans), 0)
    entries, tuned, cached = [], 0, 0
    try:
        for m, shapes in plans:
            t0 = time.perf_counter()
            if reporter is not None:
                reporter.phase(f"M={m}", f"tuning {' and '.join(shapes)} ({budget} configs at most each)")
            entry, measured, hits = _tune_entry(m, shapes, gemm, run, up_block_m.get(m))
            entries.append(entry)
            tuned, cached = tuned + measured, cached + hits
            if reporter is not None:
                reporter.finished(f"M={m}", time.perf_counter() - t0)
    finally:
        measurer.close()
    return MoeTableTune(experts, topk, hidden, shard, gemm, profile.name, budget, tuple(entries), tuned, cached,
                        note, table_dtype)


def up_block_sizes(up_table: Mapping[int, Config] | None, tokens: list[int]) -> dict[int, int]:
    """Token count -> the up table's BLOCK_SIZE_M there, which a down table must share (the align step runs once a
    layer). A TableError where there is no up table, or it lacks one of `tokens` as a key (SGLang looks both tables
    up at the nearest key, so the down table's keys must be the up table's)."""
    if not up_table:
        raise TableError("--gemm down writes a table SGLang runs beside the up table, whose BLOCK_SIZE_M it must "
                         "share: write the up table first into the same --out (--gemm gate_up), or tune both with "
                         "--gemm split")
    lacking = [m for m in tokens if m not in up_table]
    if lacking:
        raise TableError(f"the up table has no entry for M = {', '.join(map(str, lacking))}: the down table's token "
                         "counts must be the up table's (tune them with --gemm split, or pass its --batch)")
    return {m: up_table[m]["BLOCK_SIZE_M"] for m in tokens}


@dataclass(frozen=True)
class _Run:
    """What every token count's search shares."""

    profile: HardwareProfile
    budget: int
    measurer: _OnDemand
    cache: Path | None
    sms: int | None
    residual: object


def _tune_entry(tokens: int, shapes: dict[str, MoeShape], gemm: str, run: _Run, up_block_m: int | None
                ) -> tuple[MoeEntry, int, int]:
    """One token count's entry, and how many GEMM searches were measured and found in the cache for it."""
    for g, shape in shapes.items():
        if not legal_configs(kernel_of(shape).space, shape, run.profile).configs:
            return MoeEntry(tokens, None, skipped=f"{g}: {NO_LEGAL_CONFIG}"), 0, 0
    try:
        if gemm == "both":
            return _joint_entry(tokens, shapes, run)
        if gemm == "down":
            result, hit = down_under(shapes["down"], up_block_m, run.profile, run.budget, run.measurer, run.residual,
                                     run.cache, run.sms)
            return MoeEntry(tokens, None, {"down": result.time_us}, {"down": result}, down_config=result.winner), \
                int(not hit), int(hit)
        up, hit = _own_tune(shapes["gate_up"], run)
    except TuneError as exc:
        return MoeEntry(tokens, None, skipped=str(exc)), 0, 0
    if gemm == "gate_up":
        return MoeEntry(tokens, up.winner, {"gate_up": up.time_us}, {"gate_up": up}), int(not hit), int(hit)
    return _split_entry(tokens, shapes, run, up, hit)


def _own_tune(shape: MoeShape, run: _Run) -> tuple[TuneResult, bool]:
    """`shape` tuned on its own by `tune_shape` (the cache entry `--gemm gate_up` and replay share), and whether it
    was cached. Raises TuneError (its message naming the GEMM) where every config measured failed."""
    key = tune_key(shape, run.profile, run.budget, run.residual, run.sms)
    hit = run.cache is not None and TuneCache(run.cache).get(key) is not None
    try:
        return tune_shape(shape, run.profile, run.budget, measurer=run.measurer, cache=run.cache, sms=run.sms,
                          residual=run.residual), hit
    except TuneError as exc:
        raise TuneError(f"{shape.gemm}: {exc}") from None


def _joint_entry(tokens: int, shapes: dict[str, MoeShape], run: _Run, note: str | None = None
                 ) -> tuple[MoeEntry, int, int]:
    """--gemm both: one config for both GEMMs by their summed time (moe_joint.py)."""
    winner, results, hit = cached_joint(shapes, run.profile, run.budget, run.measurer, run.residual, run.cache,
                                        run.sms)
    separate = {g: min(t.time_us for t in r.trials if t.ok) for g, r in results.items()}
    entry = MoeEntry(tokens, winner, {g: r.time_us for g, r in results.items()}, results, separate, note=note)
    return entry, 2 * (not hit), 2 * hit


def _split_entry(tokens: int, shapes: dict[str, MoeShape], run: _Run, up: TuneResult, up_hit: bool
                 ) -> tuple[MoeEntry, int, int]:
    """--gemm split: the down GEMM under the up entry's BLOCK_SIZE_M; where none of its configs runs there, one
    config legal on both for both tables (the joint search), with a note saying so."""
    block_m = up.winner["BLOCK_SIZE_M"]
    try:
        down, hit = down_under(shapes["down"], block_m, run.profile, run.budget, run.measurer, run.residual,
                               run.cache, run.sms)
    except TuneError as exc:
        note = f"no down config ran under the up entry's BLOCK_SIZE_M {block_m} ({exc}): one config for both"
        try:
            entry, measured, hits = _joint_entry(tokens, shapes, run, note)
        except TuneError as again:
            return MoeEntry(tokens, None, skipped=f"{note}; {again}"), int(not up_hit), int(up_hit)
        return replace(entry, down_config=entry.config), measured + (not up_hit), hits + up_hit
    tunes = {"gate_up": up, "down": down}
    return (MoeEntry(tokens, up.winner, {g: r.time_us for g, r in tunes.items()}, tunes, down_config=down.winner),
            (not up_hit) + (not hit), up_hit + hit)


def planned_tables(out: str | Path, experts: int, n: int, gpu_name: str, gemm: str, layout: str = "vllm",
                   triton: str | None = None, table_dtype: TableDtype | None = None) -> dict[str, Path]:
    """The files a `gemm` tune writes under `out` in `layout`, by what they hold ('up', 'down'), and with --gemm down
    the up table it reads ('up'), named for the weights' `table_dtype` (None: unquantized). A table already there
    that is no table is a TableError (never overwritten)."""
    folder = table_folder(out, layout, triton)
    names = {what: layer_table_name(experts, n, gpu_name, table_dtype, down=what == "down") for what in ("up", "down")}
    wanted = {"both": ("up",), "gate_up": ("up",), "split": ("up", "down"), "down": ("up", "down")}[gemm]
    paths = {what: folder / names[what] for what in wanted}
    for path in paths.values():
        if path.exists():
            read_table(path)
    return paths


def write_tables(tuned: MoeTableTune, paths: dict[str, Path], layout: str = "vllm", triton: str | None = None
                 ) -> list[Path]:
    """Write the tune's tables to `planned_tables`' paths (merged with what is there; vLLM's layout carries
    "triton_version"). A TableError naming the token counts without an entry, before anything is written: a
    shorter table would serve them with another M's entry."""
    if tuned.missing:
        raise TableError("no table written: no config can serve " + "; ".join(
            f"M={e.tokens} ({e.skipped})" for e in tuned.missing))
    key = triton if layout == "vllm" else None
    tables = {"up": tuned.table() if tuned.gemm != "down" else None, "down": tuned.down_table()}
    return [write_table(paths[what], tables[what], triton=key) for what in ("up", "down")
            if what in paths and tables[what]]
