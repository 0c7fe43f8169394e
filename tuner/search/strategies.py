"""Search strategies: plain functions that choose configs, measure them in batches and return the trials.

strategy(shape, candidates, measure, budget, profile) -> trials, where measure(configs) -> trials is
one shape's measurer (live GPU or recorded dataset). `rooftune` is the product (tuner/search/gp.py on the
model + residual prior); the others are the baselines `rooftune eval` compares it with.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Iterable

import numpy as np

from rooftune.candidates import Config, MeasureBatch, Trial, configs_to_columns
from rooftune.candidates.tutorial import param_names, tutorial_configs
from rooftune.hwprofiles import HardwareProfile
from rooftune.roofline import predict
from rooftune.tuner.search.gp import SearchSettings, config_embedding, search

# strategy(shape, candidates, measure, budget, profile) -> the trials it made, in order
Strategy = Callable[[object, list[Config], MeasureBatch, int, HardwareProfile], list[Trial]]

RANDOM_SEEDS = tuple(range(10))
# Share of the tutorial's configs every shape of a dataset must have recorded for the tutorial method.
TUTORIAL_MIN_RECORDED = 0.5


def best_trial(trials: list[Trial]) -> Trial | None:
    """The fastest successful trial, or None."""
    ok = [t for t in trials if t.ok]
    return min(ok, key=lambda t: t.time_us) if ok else None


def measure_in_order(configs: Iterable[Config], measure: MeasureBatch, budget: int) -> list[Trial]:
    """The first `budget` configs (islice: an order may be lazy over the whole space), as one batch."""
    batch = list(itertools.islice(configs, max(budget, 0)))
    return measure(batch) if batch else []


def model_ranking(shape, candidates: list[Config], profile: HardwareProfile) -> list[tuple[Config, float]]:
    """The candidates the model judges possible on `profile` (e.g. shared memory within the per-block
    limit), predicted fastest first (stable on ties), each with its predicted time in µs."""

    if not candidates:
        return []
    breakdown = predict(shape, configs_to_columns(candidates), profile)
    order = np.argsort(breakdown.time_us, kind="stable")
    return [(candidates[i], float(breakdown.time_us[i])) for i in order if breakdown.fits[i]]


def _terms(shape, candidates: list[Config], profile: HardwareProfile,
           residual) -> tuple[list[Config], np.ndarray, np.ndarray, np.ndarray]:
    """The launchable candidates, log(model µs) of each, and the residual's search and zero-trial-pick
    corrections (zeros where `residual` is None; with its neighbour vote where it has one), from one evaluation of
    the model."""

    if not candidates:
        return [], np.zeros(0), np.zeros(0), np.zeros(0)
    bd = predict(shape, configs_to_columns(candidates), profile)
    keep = np.flatnonzero(bd.fits)
    search, pick = (residual.corrections(shape, candidates, bd, profile) if residual is not None
                    else (np.zeros(len(candidates)),) * 2)
    return ([candidates[i] for i in keep], np.log(bd.time_us)[keep], np.asarray(search, dtype=float)[keep],
            np.asarray(pick, dtype=float)[keep])


def corrected_terms(shape, candidates: list[Config], profile: HardwareProfile, residual,
                    for_pick: bool = False) -> tuple[list[Config], np.ndarray, np.ndarray]:
    """The launchable candidates, log(model µs) of each, and the residual's correction (zeros where
    `residual` is None): the search's, or `for_pick` the zero-trial pick's."""
    configs, log_model, search, pick = _terms(shape, candidates, profile, residual)
    return configs, log_model, pick if for_pick else search


def corrected_prior(shape, candidates: list[Config], profile: HardwareProfile, residual) -> tuple[list[Config], np.ndarray]:
    """The launchable candidates and their corrected predicted log time, log(model µs) + residual
    correction (the model alone where `residual` is None)."""
    configs, log_model, correction = corrected_terms(shape, candidates, profile, residual)
    return configs, log_model + correction


def centred(correction: np.ndarray, over: int | None = None) -> np.ndarray:
    """The residual's correction with its mean over the first `over` configs (default all) taken out.
    The residual is fitted within each shape (roofline/fit.py), so it ranks a shape's configs but a
    shape-wide factor in it is not identified and means nothing (it can be 3x); centred, corrected
    times keep the model's absolute scale. The ranking is the same."""
    base = correction[:over]
    return correction - base.mean() if len(base) else correction


def shown_us(log_model: np.ndarray, correction: np.ndarray) -> np.ndarray:
    """Predicted µs to show a user: the model's times × the residual's centred factors."""
    return np.exp(log_model + centred(correction))


def zero_trial_pick(shape, candidates: list[Config], profile: HardwareProfile, residual) -> Config | None:
    """The config rooftune would run without measuring: the best by the model and the residual's pick
    correction (its search correction where it has none; the model alone without a residual)."""
    configs, log_model, correction = corrected_terms(shape, candidates, profile, residual, for_pick=True)
    return configs[int(np.argmin(log_model + correction))] if configs else None


# The search without a residual (a GPU profiled but not fitted): rounds by the posterior mean alone
# (κ = 0), so the first round is the model's own top eight and later rounds follow measured evidence.
# Chosen as the setting no worse than model order at 5 and 10 configs on the model-only H200 training
# set and on the AutoHeuristic A100 and H100 logs (which therefore do not validate it independently).
MODEL_ONLY_SEARCH = SearchSettings(kappa=0.0)


def rooftune_strategy(residual, settings: SearchSettings | None = None, leave_own_out: bool = False) -> Strategy:
    """The product: the zero-trial pick first, then Gaussian-process rounds (tuner/search/gp.py) on the
    corrected model, with the search constants fitted beside the residual (MODEL_ONLY_SEARCH without one).
    `leave_own_out`: each shape is left out of the residual's neighbour vote, as a shape it was not fitted on
    (replays on training shapes, which are their own nearest neighbours)."""
    if settings is None:
        settings = SearchSettings.from_dict(residual.strategy) if residual is not None else MODEL_ONLY_SEARCH

    def strategy(shape, candidates, measure, budget, profile):
        ranking = residual.without_neighbour(shape) if leave_own_out and residual is not None else residual
        configs, log_model, correction, pick = _terms(shape, candidates, profile, ranking)
        annotate = getattr(measure, "annotate", None)
        if annotate is not None:  # `tune` keeps each trial's prediction beside its measurement
            annotate(dict(zip(configs, shown_us(log_model, correction).tolist())))
        # The pick has its own ranking where the residual has a pick change or a vote weighed apart from the search's.
        first = int(np.argmin(log_model + pick)) if configs and not np.array_equal(pick, correction) else None
        return search(configs, log_model + correction, measure, budget, settings, first)

    strategy.__name__ = "rooftune"
    return strategy


def model_order(shape, candidates: list[Config], measure: MeasureBatch, budget: int,
                profile: HardwareProfile) -> list[Trial]:
    """Measure the `budget` candidates the model predicts fastest (`model_ranking`), no residual."""
    return measure_in_order((c for c, _ in model_ranking(shape, candidates, profile)), measure, budget)


def _shape_salt(shape) -> int:
    return zlib.crc32(str(shape).encode())


def random_order(seed: int) -> Strategy:
    """`budget` candidates drawn uniformly without replacement, drawn independently per shape (the seed
    is mixed with the shape, so shapes with as many candidates do not share one permutation)."""

    def strategy(shape, candidates, measure, budget, profile):
        rng = np.random.default_rng([seed, _shape_salt(shape)])
        order = rng.permutation(len(candidates))
        return measure_in_order((candidates[i] for i in order), measure, budget)

    strategy.__name__ = f"random_order({seed})"
    return strategy


def tutorial(shape, candidates: list[Config], measure: MeasureBatch, budget: int, profile: HardwareProfile) -> list[Trial]:
    """The Triton tutorial's 8 GEMM configs in their listed order (candidates are ignored); a GEMM method
    (`gemm_eval_methods` lists it)."""
    return measure_in_order(tutorial_configs(param_names(candidates[:1])), measure, budget)


def nearest_legal_twins(listed: list[Config], candidates: list[Config]) -> list[Config]:
    """Each listed config itself where it is among `candidates`, else (illegal for this shape) the
    candidate nearest to it in the search's embedding (first on ties)."""
    if not candidates or not listed:
        return []
    have = set(candidates)
    z = config_embedding(candidates)
    away = [i for i, c in enumerate(listed) if c not in have]
    twins = list(listed)
    if away:
        d = ((config_embedding([listed[i] for i in away])[:, None, :] - z[None, :, :]) ** 2).sum(-1)
        for i, j in zip(away, d.argmin(axis=1)):
            twins[i] = candidates[int(j)]
    return twins


def nearest_legal(listed: list[Config], candidates: list[Config]) -> list[Config]:
    """`nearest_legal_twins` without repeats, in list order."""
    return list(dict.fromkeys(nearest_legal_twins(listed, candidates)))


def static_list(configs: list[Config]) -> Strategy:
    """A fixed list (learned on training data: tuner/search/static.py), illegal entries replaced by their
    nearest legal twin."""

    def strategy(shape, candidates, measure, budget, profile):
        return measure_in_order(nearest_legal(configs, candidates), measure, budget)

    strategy.__name__ = "static"
    return strategy


# The tutorial-style attention list of the H200 probe's README: BLOCK_M {64, 128} × BLOCK_N {32, 64}
# × num_stages {2, 3, 4} × num_warps {4, 8}, query blocks first-to-last (ORDER 0), in that order.
STATIC_ATTENTION = tuple((bm, bn, stages, warps) for bm in (64, 128) for bn in (32, 64)
                         for stages in (2, 3, 4) for warps in (4, 8))


def static_attention_configs() -> list[Config]:
    """The 24 static attention configs with the attention space's parameter names (ORDER 0)."""
    return [Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, ORDER=0) for bm, bn, s, w in STATIC_ATTENTION]


def static_attention(shape, candidates: list[Config], measure: MeasureBatch, budget: int,
                     profile: HardwareProfile) -> list[Trial]:
    """The static attention list in its order, each config as the candidates hold it (`nearest_legal`:
    the probe's configs are the list's own; in today's space, which adds TMA, its pointer-load twin); an
    attention method (`attention_eval_methods` lists it)."""
    return measure_in_order(nearest_legal(static_attention_configs(), candidates), measure, budget)
