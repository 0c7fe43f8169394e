"""Tuning a fused-MoE layer's vLLM table: each token count's GEMMs through `tune_shape` (cached, resumable),
and where one config serves both GEMMs, as vLLM runs them, the pair pass that chooses it.

`--gemm both` (vLLM's table: one entry per M serves the gate_up and the down GEMM). Each GEMM is tuned on its
own first, exactly as `--gemm gate_up` or `down` tunes it (the same cache entries, at most `budget` configs
each: the search the replay evaluation scores); then the pair pass times the PAIR_TOP fastest configs of each
GEMM's tune on both GEMMs, side by side in one batch per GEMM, and the entry is the config whose two times sum
least (the fused layer's time, the objective vLLM's own tuner times). So each GEMM measures at most PAIR_TOP
configs beyond its budget (the other GEMM's fastest), and the pair pass re-times its own fastest beside them.
A config is carried to the other GEMM as its GROUP_SIZE_M twin there (`group_twin`: the same binary running
the same programs in the same order); one the other GEMM's legality drops (a tile wider than its N or K needs)
is not a candidate. Tuning the pair jointly (one search over summed times) was not chosen: it would share no
work or cache entry with the per-GEMM tunes and with replay, which scores each GEMM's search. The pass reports
what the shared config costs against each GEMM's own winner, timed in the same batches (`pair_cost`: above 1
where the GEMMs want different configs, below 1 where one GEMM's config beats the other's own winner there).

`--gemm gate_up` / `down`: each GEMM's own winner per M, written to vLLM's file name (gate_up; vLLM would serve
the down GEMM with it too) or SGLang's name for a separate down-projection table (`..._down.json`).
"""

from __future__ import annotations

import hashlib
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from rooftune.candidates import MOE_SPACE, Config, MoeShape, Trial, kernel_spec, legal_configs
from rooftune.candidates.moe_space import group_twin
from rooftune.candidates.shapes import MOE_GEMMS, ShapeError
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.outputs import OutputError
from rooftune.tuner.cache import TuneCache, cache_key, tune_key
from rooftune.tuner.live_tune import tune_shape
from rooftune.tuner.llm.moe_tables import table_file_name
from rooftune.tuner.llm.tune import NO_LEGAL_CONFIG, MeasurerFactory, Reporter, live_measurers
from rooftune.tuner.residual_choice import ranking_residual
from rooftune.tuner.tune import CONFIRM_TOP, TuneError, TuneResult

TABLE_GEMMS = ("both", *MOE_GEMMS)
# Configs of each GEMM's tune the pair pass carries to both GEMMs: the ones `tune` confirmed side by side.
PAIR_TOP = CONFIRM_TOP
PAIR_STRATEGY = "moe-pair"


@dataclass(frozen=True)
class MoeEntry:
    """One token count of the table: its config (None where `skipped` says why there is none), its time on each
    GEMM it serves (the pair pass's side-by-side times with --gemm both), each GEMM's own tune, and with both
    the pair pass's times of each GEMM's own winner (`separate_us`)."""

    tokens: int
    config: Config | None
    times_us: dict[str, float] = field(default_factory=dict)
    tunes: dict[str, TuneResult] = field(default_factory=dict)
    separate_us: dict[str, float] | None = None
    skipped: str | None = None

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
        """--gemm both: the shared config's summed time ÷ each GEMM's own winner's (both from the pair pass):
        what serving both GEMMs with one config costs (1 where one config wins both)."""
        return self.time_us / sum(self.separate_us.values()) if self.separate_us else None


@dataclass(frozen=True)
class MoeTableTune:
    """The outcome of `tune_moe_table`: one entry per token count, in the order given."""

    experts: int
    topk: int
    hidden: int
    intermediate: int            # per tensor-parallel shard: vLLM's N
    gemm: str                    # 'both', 'gate_up' or 'down'
    profile: str
    budget: int
    entries: tuple[MoeEntry, ...]
    tuned: int                   # GEMM shapes measured in this run (tunes and pair passes)
    cached: int                  # found in the cache
    residual_note: str | None = None  # which residual ranked, and why (`ranking_residual`'s line; None: as given)

    def table(self) -> dict[int, Config]:
        """Token count -> config, for the entries that have one."""
        return {e.tokens: e.config for e in self.entries if e.config is not None}

    @property
    def file_name(self) -> str:
        """vLLM's file name for the layer on this GPU; SGLang's `_down` table with --gemm down."""
        return table_file_name(self.experts, self.intermediate, self.profile, down=self.gemm == "down")


def shard_intermediate(intermediate: int, tp: int) -> int:
    """The intermediate size one tensor-parallel shard holds, vLLM's N: intermediate / tp (a ShapeError where tp
    does not divide it)."""
    if tp < 1 or intermediate % tp:
        raise ShapeError(f"--tp {tp} must be at least 1 and divide the intermediate size {intermediate}")
    return intermediate // tp


def moe_shapes(experts: int, topk: int, hidden: int, intermediate: int, tokens: int, gemm: str,
               dtype: str = "bf16") -> dict[str, MoeShape]:
    """The GEMM shapes one table entry serves (`gemm` 'both': gate_up and down), by GEMM name."""
    if gemm not in TABLE_GEMMS:
        raise ShapeError(f"--gemm must be one of {', '.join(TABLE_GEMMS)}, got {gemm!r}")
    names = MOE_GEMMS if gemm == "both" else (gemm,)
    return {g: MoeShape(experts, topk, hidden, intermediate, tokens, gemm=g, dtype=dtype) for g in names}


class _OnDemand:
    """The kernel's measurer from `factory`, opened at its first use (a table whose tunes are all cached needs no
    GPU) and closed with `close`."""

    def __init__(self, factory: MeasurerFactory):
        self.factory, self.stack, self.inner = factory, ExitStack(), None

    def _open(self):
        if self.inner is None:
            self.inner = self.stack.enter_context(self.factory("moe"))
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


def pair_candidates(shapes: dict[str, MoeShape], tunes: dict[str, TuneResult], profile: HardwareProfile
                    ) -> list[tuple[Config, dict[str, Config]]]:
    """(config, its twin on each GEMM) for the PAIR_TOP fastest successful trials of each GEMM's tune (gate_up's
    first), each config once, leaving out those the other GEMM's legality drops."""
    legal = {g: set(legal_configs(MOE_SPACE, s, profile).configs) for g, s in shapes.items()}
    out, seen = [], set()
    for g, result in tunes.items():
        for t in sorted((t for t in result.trials if t.ok), key=lambda t: t.time_us)[:PAIR_TOP]:
            twins = {other: group_twin(s, t.config) for other, s in shapes.items()}
            key = tuple(twins.values())
            if key not in seen and all(twins[o] in legal[o] for o in shapes):
                seen.add(key)
                out.append((t.config, twins))
    return out


def _pair_key(shape: MoeShape, configs: list[Config], profile: HardwareProfile, budget: int, sms: int | None) -> str:
    """The tune cache's key for a pair pass of `configs` on `shape` (the configs' list names the pass)."""
    digest = hashlib.sha256("|".join(map(str, configs)).encode()).hexdigest()[:12]
    return cache_key(shape, profile, budget, sms, tuner=f"{PAIR_STRATEGY}:{digest}")


def pair_trials(shape: MoeShape, configs: list[Config], measurer, profile: HardwareProfile, budget: int,
                cache: Path | None, sms: int | None) -> tuple[dict[Config, Trial], bool]:
    """`configs` timed side by side on `shape` (one batch), from the tune cache where this pass is there (and
    stored there where some config ran); (config -> trial, whether it was cached)."""
    key = _pair_key(shape, configs, profile, budget, sms) if cache else None
    store = TuneCache(cache) if cache else None
    hit = store.get(key) if store else None
    if hit is not None:
        return {t.config: t for t in hit.trials}, True
    trials = measurer.measure(shape, list(configs))
    ok = [t for t in trials if t.ok]
    if cache and ok:
        best = min(ok, key=lambda t: t.time_us)
        result = TuneResult(shape, best.config, best.time_us, tuple(trials), PAIR_STRATEGY, profile.name,
                            MOE_SPACE.version, kernel="moe", triton=installed_triton())
        try:
            store.put(key, result)
        except OutputError:
            pass  # the pass stands; a rerun times it again
    return {t.config: t for t in trials}, False


def choose_pair(candidates: list[tuple[Config, dict[str, Config]]], trials: dict[str, dict[Config, Trial]]
                ) -> tuple[Config, dict[str, float]] | None:
    """The candidate whose twins' times sum least over the GEMMs (ties: the first listed), with its times; None
    where no candidate ran on every GEMM."""
    best = None
    for config, twins in candidates:
        ran = [trials[g].get(twin) for g, twin in twins.items()]
        if all(t is not None and t.ok for t in ran):
            times = {g: t.time_us for g, t in zip(twins, ran)}
            if best is None or sum(times.values()) < sum(best[1].values()):
                best = (config, times)
    return best


def tune_moe_table(experts: int, topk: int, hidden: int, intermediate: int, tokens: list[int],
                   profile: HardwareProfile, budget: int = 20, *, gemm: str = "both", tp: int = 1,
                   measurer_for: MeasurerFactory | None = None, cache: str | Path | None = None,
                   sms: int | None = None, reporter: Reporter | None = None, dtype: str = "bf16",
                   residual="shipped") -> MoeTableTune:
    """Tune the fused-MoE table of a layer (`intermediate` the whole layer's, split over `tp` shards) for each
    token count: every GEMM shape through `tune_shape` (the `rooftune` strategy; with `cache`, shapes already
    there are not measured), then with `gemm` 'both' the pair pass (module docstring). The kernel's measurer is
    opened by `measurer_for` (default: the live GPU one) only where something is measured. A token count whose
    GEMM has no legal config, or whose measured configs all failed, is an entry without a config that says why.
    `residual`: "shipped" (the one fitted for this GPU, if any), "none" or None (the model alone), or a Residual.
    Raises ShapeError (the sizes), ValueError (budget, residual), and what a live measurer raises."""
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    shard = shard_intermediate(intermediate, tp)
    plans = [(m, moe_shapes(experts, topk, hidden, shard, m, gemm, dtype)) for m in tokens]  # sizes checked first
    residual, note = ranking_residual(residual, kernel_spec("moe"), profile, installed_triton())
    path = Path(cache) if cache is not None else None
    measurer = _OnDemand(measurer_for or live_measurers(profile, sms))
    if reporter is not None:
        reporter.start(len(plans), 0)
    entries, tuned, cached = [], 0, 0
    try:
        for m, shapes in plans:
            t0 = time.perf_counter()
            if reporter is not None:
                reporter.phase(f"M={m}", f"tuning {' and '.join(shapes)} ({budget} configs at most each)")
            entry, measured, hits = _tune_entry(m, shapes, profile, budget, measurer, path, sms, residual)
            entries.append(entry)
            tuned, cached = tuned + measured, cached + hits
            if reporter is not None:
                reporter.finished(f"M={m}", time.perf_counter() - t0)
    finally:
        measurer.close()
    return MoeTableTune(experts, topk, hidden, shard, gemm, profile.name, budget, tuple(entries), tuned, cached,
                        note)


def _tune_entry(tokens: int, shapes: dict[str, MoeShape], profile: HardwareProfile, budget: int, measurer: _OnDemand,
                cache: Path | None, sms: int | None, residual) -> tuple[MoeEntry, int, int]:
    """One token count's entry, and how many GEMM shapes were measured and found in the cache for it."""
    tunes, measured, hits = {}, 0, 0
    for g, shape in shapes.items():
        if not legal_configs(MOE_SPACE, shape, profile).configs:
            return MoeEntry(tokens, None, tunes=tunes, skipped=f"{g}: {NO_LEGAL_CONFIG}"), measured, hits
        was_cached = cache is not None and TuneCache(cache).get(tune_key(shape, profile, budget, residual, sms)) is not None
        try:
            tunes[g] = tune_shape(shape, profile, budget, measurer=measurer, cache=cache, sms=sms, residual=residual)
        except TuneError as exc:
            return MoeEntry(tokens, None, tunes=tunes, skipped=f"{g}: {exc}"), measured, hits
        measured, hits = measured + (not was_cached), hits + was_cached
    if len(shapes) == 1:
        (g, result), = tunes.items()
        return MoeEntry(tokens, result.winner, {g: result.time_us}, tunes), measured, hits
    candidates = pair_candidates(shapes, tunes, profile)
    trials = {}
    for g, shape in shapes.items():  # each GEMM's own winner too, where the other GEMM drops it
        batch = list(dict.fromkeys([*(tw[g] for _, tw in candidates), tunes[g].winner]))
        trials[g], was_cached = pair_trials(shape, batch, measurer, profile, budget, cache, sms)
        measured, hits = measured + (not was_cached), hits + was_cached
    chosen = choose_pair(candidates, trials)
    if chosen is None:
        why = (f"none of the {PAIR_TOP} fastest configs of each GEMM is legal on the other ("
               + ", ".join(f"{g} N={s.n} K={s.k}" for g, s in shapes.items()) + ")" if not candidates
               else f"none of the {len(candidates)} configs legal on both GEMMs ran on both")
        return MoeEntry(tokens, None, tunes=tunes, skipped=f"no config serves both GEMMs: {why}"), measured, hits
    own = {g: trials[g][tunes[g].winner] for g in shapes}
    separate = {g: t.time_us for g, t in own.items() if t is not None and t.ok}
    return (MoeEntry(tokens, chosen[0], chosen[1], tunes, separate if len(separate) == len(shapes) else None),
            measured, hits)
