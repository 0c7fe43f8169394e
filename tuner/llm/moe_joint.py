"""Choosing a fused-MoE table entry by the layer's time: one config for both GEMMs searched on their summed time
(`--gemm both`), and a down-projection config searched under the up entry's BLOCK_SIZE_M (`--gemm split`, `down`).

Both GEMMs of a layer run one entry (vLLM), so the objective is their summed time. `joint_candidates` are the
configs legal on both GEMMs (each runs on a GEMM as its GROUP_SIZE_M twin there; the table names the twin with the
larger GROUP_SIZE_M, which runs as each twin), so a complete table exists wherever one config can serve the layer,
whatever each GEMM's fastest are. The model ranks them by the sum of each GEMM's predicted time (roofline/moe.py,
times the residual's centred correction: a residual fixes no scale across shapes), and `gp.search` spends its
trials on that prior, each trial timing the config on both GEMMs (one batch a GEMM), so `budget` trials time at
most 2 × budget configs; the fastest CONFIRM_TOP sums are timed again side by side and the least sum is the entry.

SGLang runs an up table and a `_down` table whose entries must share BLOCK_SIZE_M (the align step runs once a
layer: older releases assert it, newer overwrite the down entry's), so the down GEMM is searched among its legal
configs with the up entry's BLOCK_SIZE_M (`down_under`): every down entry was timed as it will run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from rooftune.candidates import Config, MoeShape, Trial, kernel_of, legal_configs
from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.outputs import OutputError
from rooftune.tuner.cache import TuneCache, cache_key, residual_digest
from rooftune.tuner.search.gp import SearchSettings, search
from rooftune.tuner.search.strategies import MODEL_ONLY_SEARCH, centred, corrected_terms, rooftune_strategy
from rooftune.tuner.tune import CONFIRM_TOP, TuneError, TuneResult, tune

JOINT_STRATEGY = "moe-joint"
DOWN_STRATEGY = "rooftune-block-m"


def table_config(twins: dict[str, Config]) -> Config:
    """The config a table names for GEMM twins that differ at most in GROUP_SIZE_M: the one with the larger value,
    which each GEMM runs as its own twin (a smaller GROUP_SIZE_M is the one value left where a GEMM's grid makes
    the larger one a twin of it)."""
    return max(twins.values(), key=lambda c: c["GROUP_SIZE_M"])


def joint_candidates(shapes: dict[str, MoeShape], profile: HardwareProfile) -> dict[Config, dict[str, Config]]:
    """Table config -> its twin on each GEMM, for every config legal on all of `shapes` (each pair of twins once; the
    shapes' family's space and `twin`: bf16 or FP8 fused MoE)."""
    legal = {g: legal_configs(kernel_of(s).space, s, profile).configs for g, s in shapes.items()}
    kept = {g: set(configs) for g, configs in legal.items()}
    out: dict[Config, dict[str, Config]] = {}
    for configs in legal.values():
        for c in configs:
            twins = {g: kernel_of(s).twin(s, c) for g, s in shapes.items()}
            if all(twins[g] in kept[g] for g in shapes):
                out.setdefault(table_config(twins), twins)
    return out


def joint_prior(shapes: dict[str, MoeShape], candidates: dict[Config, dict[str, Config]], profile: HardwareProfile,
                residual, for_pick: bool = False) -> tuple[list[Config], np.ndarray]:
    """The candidates every GEMM's model can launch, and log(Σ over the GEMMs of the predicted µs): each GEMM's
    model time × its residual's centred correction (the search's, or `for_pick` the zero-trial pick's)."""
    log_us = {}
    for g, shape in shapes.items():
        twins = list(dict.fromkeys(tw[g] for tw in candidates.values()))
        configs, log_model, correction = corrected_terms(shape, twins, profile, residual, for_pick)
        log_us[g] = dict(zip(configs, (log_model + centred(correction)).tolist()))
    kept = [c for c, tw in candidates.items() if all(tw[g] in log_us[g] for g in shapes)]
    total = [math.log(sum(math.exp(log_us[g][candidates[c][g]]) for g in shapes)) for c in kept]
    return kept, np.asarray(total, dtype=float)


@dataclass
class JointMeasure:
    """A MeasureBatch over table configs: each timed on every GEMM as its twin there (one batch a GEMM), the
    trial's time the sum (an error where a GEMM's failed); every GEMM's trials kept in the order measured."""

    shapes: dict[str, MoeShape]
    candidates: dict[Config, dict[str, Config]]
    measurer: object
    budget: int

    def __post_init__(self):
        self.trials: list[Trial] = []
        self.per_gemm: dict[str, list[Trial]] = {g: [] for g in self.shapes}
        self.baselines_us: dict[str, float | None] = {}

    def timed(self, configs: list[Config]) -> tuple[list[Trial], dict[str, list[Trial]]]:
        """`configs` timed on every GEMM: the summed trials and each GEMM's (and the library's time on each GEMM,
        where the measurer times it beside the configs: its `baseline_us()` after that GEMM's batch)."""
        each = {}
        for g, s in self.shapes.items():
            each[g] = self.measurer.measure(s, [self.candidates[c][g] for c in configs])
            baseline = getattr(self.measurer, "baseline_us", None)
            self.baselines_us[g] = baseline() if baseline is not None else None
        summed = []
        for i, c in enumerate(configs):
            ran = [each[g][i] for g in self.shapes]
            failed = next((f"{g}: {t.error}" for g, t in zip(self.shapes, ran) if not t.ok), None)
            summed.append(Trial(c, None, error=failed) if failed else Trial(c, sum(t.time_us for t in ran)))
        return summed, each

    def prefetch(self, configs: list[Config]) -> None:
        ahead = getattr(self.measurer, "prefetch", None)
        if ahead is not None:
            for g, s in self.shapes.items():
                ahead(s, [self.candidates[c][g] for c in configs])

    def __call__(self, configs: list[Config]) -> list[Trial]:
        seen = {t.config for t in self.trials}
        if len(seen | set(configs)) > self.budget:
            raise ValueError(f"joint search asked for more than {self.budget} configs")
        summed, each = self.timed(configs)
        for i, c in enumerate(configs):
            if c not in seen:
                self.trials.append(summed[i])
                for g in self.shapes:
                    self.per_gemm[g].append(each[g][i])
        return summed


def joint_search(shapes: dict[str, MoeShape], profile: HardwareProfile, budget: int, measurer, residual
                 ) -> tuple[Config, dict[str, TuneResult]]:
    """One token count's entry for both GEMMs: the table config and each GEMM's result (its trials in the order
    measured; its winner the entry's twin, timed in the confirming pass). Raises TuneError where no config is
    legal on every GEMM or every one measured failed on some GEMM."""
    candidates = joint_candidates(shapes, profile)
    configs, prior = joint_prior(shapes, candidates, profile, residual)
    if not configs:
        raise TuneError("no config is legal on both GEMMs")
    settings = SearchSettings.from_dict(residual.strategy) if residual is not None else MODEL_ONLY_SEARCH
    first = None
    if residual is not None and residual.pick:
        picks, pick_prior = joint_prior(shapes, candidates, profile, residual, for_pick=True)
        first = configs.index(picks[int(np.argmin(pick_prior))]) if picks else None
    measure = JointMeasure(shapes, candidates, measurer, budget)
    search(configs, prior, measure, budget, settings, first)
    ok = sorted((t for t in measure.trials if t.ok), key=lambda t: t.time_us)[:CONFIRM_TOP]
    if not ok:
        first_error = next((t.error for t in measure.trials), "no trial")
        raise TuneError(f"all {len(measure.trials)} configs legal on both GEMMs failed; first error: {first_error}")
    again, each = measure.timed([t.config for t in ok]) if len(ok) > 1 else ([ok[0]], None)
    best = min(range(len(again)), key=lambda i: again[i].time_us if again[i].ok else math.inf)
    winner = again[best].config if again[best].ok else ok[0].config
    results = {}
    for g, shape in shapes.items():
        twin, spec = candidates[winner][g], kernel_of(shape)
        confirmed = each[g][best] if each is not None and each[g][best].ok else \
            next(t for t in measure.per_gemm[g] if t.config == twin)
        results[g] = TuneResult(shape, twin, confirmed.time_us, tuple(measure.per_gemm[g]), JOINT_STRATEGY,
                                profile.name, spec.space.version, measure.baselines_us.get(g), kernel=spec.name,
                                triton=installed_triton())
    return winner, results


def joint_key(shape: MoeShape, other: MoeShape, profile: HardwareProfile, budget: int, residual, sms) -> str:
    """The tune cache's key for one GEMM's part of a joint search with `other`."""
    return cache_key(shape, profile, budget, sms,
                     tuner=f"{JOINT_STRATEGY}:{residual_digest(residual)}:with:{other}", triton=installed_triton())


def cached_joint(shapes: dict[str, MoeShape], profile: HardwareProfile, budget: int, measurer, residual,
                 cache: Path | None, sms: int | None) -> tuple[Config, dict[str, TuneResult], bool]:
    """`joint_search`, from the tune cache where both GEMMs' parts are there (and stored there); the last item says
    whether it came from the cache."""
    (g1, s1), (g2, s2) = shapes.items()
    keys = {g1: joint_key(s1, s2, profile, budget, residual, sms), g2: joint_key(s2, s1, profile, budget, residual, sms)}
    if cache is not None:
        hits = {g: TuneCache(cache).get(k) for g, k in keys.items()}
        if all(hits.values()):
            return table_config({g: r.winner for g, r in hits.items()}), hits, True
    winner, results = joint_search(shapes, profile, budget, measurer, residual)
    if cache is not None:
        try:
            for g, key in keys.items():
                TuneCache(cache).put(key, results[g])
        except OutputError as exc:
            results = {g: replace(r, cache_error=str(exc)) for g, r in results.items()}
    return winner, results, False


def down_under(shape: MoeShape, block_m: int, profile: HardwareProfile, budget: int, measurer, residual,
               cache: Path | None, sms: int | None) -> tuple[TuneResult, bool]:
    """The down GEMM tuned (the `rooftune` strategy) among its legal configs with BLOCK_SIZE_M `block_m`, from the
    tune cache where it is there; (result, whether cached). Raises TuneError where none is legal or all failed."""
    key = cache_key(shape, profile, budget, sms,
                    tuner=f"{DOWN_STRATEGY}={block_m}:{residual_digest(residual)}", triton=installed_triton())
    hit = TuneCache(cache).get(key) if cache is not None else None
    if hit is not None:
        return hit, True
    space = kernel_of(shape).space
    candidates = [c for c in legal_configs(space, shape, profile).configs if c["BLOCK_SIZE_M"] == block_m]
    if not candidates:
        raise TuneError(f"no config of the down GEMM is legal with the up entry's BLOCK_SIZE_M {block_m}")
    result = tune(shape, measurer, rooftune_strategy(residual), budget, profile=profile, candidates=candidates,
                  space=space, baseline=getattr(measurer, "baseline_us", None))
    result = replace(result, triton=installed_triton())
    if cache is not None:
        try:
            TuneCache(cache).put(key, result)
        except OutputError as exc:
            result = replace(result, cache_error=str(exc))
    return result, False
