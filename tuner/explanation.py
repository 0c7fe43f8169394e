"""What `rooftune explain` shows: a shape's configs ranked as rooftune ranks them (model × residual), a config's
terms, and a recorded shape's predicted-vs-measured points with the configs a search measures there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rooftune import roofline
from rooftune.candidates import Config, ConfigError, check_in_grid, configs_to_columns, kernel_of, parse_config
from rooftune.eval.datasets.readers import load_records
from rooftune.eval.scoring.replay import RecordedMeasurer
from rooftune.tuner.search.strategies import centred, corrected_prior, rooftune_strategy, zero_trial_pick
from rooftune.tuner.tune import TuneError, tune

# The breakdown's fields a named config's table lists, where the family's model has them.
BREAKDOWN_FIELDS = ("time_us", "bound", "compute_us", "memory_us", "latency_us", "launch_us", "splitk_us",
                    "softmax_us", "smem_us", "l2_us", "indirection_us", "empty_us", "dram_bytes", "weight_bytes",
                    "weight_passes", "gather_bytes", "l2_bytes", "padded_flops", "padding_efficiency",
                    "row_efficiency", "padded_rows", "programs", "empty_programs", "ctas_per_sm", "occupancy", "waves",
                    "wave_efficiency", "uses_wgmma", "load_path", "schedule", "splitk_sum", "store_path",
                    "accumulators")
# The budget whose search `explain --plot` replays: the mission's.
EXPLAIN_PLOT_BUDGET = 20


class ExplainError(ValueError):
    """A shape `explain --plot` cannot draw: not in the data, or none of its configs ran there."""


def complete_config(space, legal: list, text: str):
    """The config `text` names, its missing parameters filled in where `legal` (the shape's legal configs)
    leaves each one value given the rest (e.g. TMA from the rows' alignment, FIXUP from M and SPLIT_K),
    with what was filled in; a clear error where a missing parameter could take several values, or none."""
    given = parse_config(text)
    unknown = set(given.kernel_params()) - set(space.param_names)
    missing = [n for n in space.param_names if n not in given.kernel_params()]
    if unknown or not missing:
        return parse_config(text, space.param_names), {}
    check_in_grid(space, given, complete=False)  # a bad value first: no legal config could have it
    fits = {tuple(c[n] for n in missing) for c in legal if all(c[k] == v for k, v in given.items())}
    if len(fits) != 1:
        options = "; ".join(", ".join(f"{n}={v}" for n, v in zip(missing, f)) for f in sorted(fits)[:6])
        raise ConfigError(f"missing parameter(s) {', '.join(missing)}: "
                          + (f"legal here with {options}; name one" if fits else
                             "no legal config of this shape has the others as given; name them all"))
    filled = dict(zip(missing, fits.pop()))
    values = {**given.kernel_params(), **filled}
    return Config(tuple((n, values[n]) for n in space.param_names), given.num_warps, given.num_stages), filled


@dataclass(frozen=True)
class Ranking:
    """`configs` of a shape as rooftune ranks them: the model's breakdown `bd`, the residual's factor on the model's
    absolute scale (centred over the legal configs), the corrected time and the order, best first."""

    configs: list
    bd: object
    factor: np.ndarray
    corrected_us: np.ndarray
    order: list[int]


def rank_configs(shape, configs: list, legal_count: int, profile, residual) -> Ranking:
    """Rank `configs` (the shape's `legal_count` legal configs first) by the model × `residual` (None: the model
    alone), as rooftune ranks them."""
    bd = roofline.predict(shape, configs_to_columns(configs), profile)
    correction = residual.correction(shape, configs, bd, profile=profile) if residual else np.zeros(len(configs))
    factor = np.exp(centred(correction, over=legal_count))
    corrected = bd.time_us * factor  # the model alone without a residual
    return Ranking(configs, bd, factor, corrected, [int(i) for i in corrected.argsort(kind="stable")])


def config_terms(ranking: Ranking, shape, config: Config, profile, residual) -> list[tuple[str, object]]:
    """(term, value) of `config` (one of the ranked): its breakdown, dominant term, the residual's factor and each
    feature's contribution (as a factor)."""
    i, bd = ranking.configs.index(config), ranking.bd
    terms = [(field, getattr(bd, field)[i]) for field in BREAKDOWN_FIELDS if hasattr(bd, field)]
    terms.append(("dominant", roofline.cost_model(shape).terms[int(bd.dominant[i])]))
    if residual is not None:
        terms.append(("residual factor", f"{ranking.factor[i]:.4g}"))
        own = roofline.predict(shape, configs_to_columns([config]), profile)
        terms += [(f"  residual: {name}", f"×{np.exp(value):.4g}")
                  for name, value in residual.contributions(shape, [config], own)[0]]
        if residual.neighbours is not None:
            vote = float(residual.vote(shape, ranking.configs, profile)[i])
            terms.append(("  neighbour vote", f"×{np.exp(residual.neighbours.settings.w_search * vote):.4g} in the "
                                              f"search, ×{np.exp(residual.neighbours.settings.w_pick * vote):.4g} "
                                              f"in the zero-trial pick (miss {vote:+.3f})"))
    return terms


@dataclass(frozen=True)
class PlotPoints:
    """A recorded shape's configs: predicted µs (model × residual) and recorded µs, the indices `tune` measured
    within EXPLAIN_PLOT_BUDGET, its winner, the zero-trial pick and the best, and the picks' scores."""

    predicted_us: list[float]
    times_us: list[float]
    tried: list[int]
    winner: int | None
    zero_trial: int | None
    best: int
    scores: list[str]


def plot_points(shape, profile, residual, data: Path) -> PlotPoints:
    """Predicted vs recorded time over `shape`'s recorded space in `data`, with the configs `tune` measures there
    at EXPLAIN_PLOT_BUDGET (replayed with the recorded measurer), the zero-trial pick and the exhaustive best.
    Raises ExplainError."""
    records = next((r for r in load_records(data, kernel=kernel_of(shape).name) if r.shape == shape), None)
    if records is None:
        raise ExplainError(f"{data}: {shape} is not recorded there (check --layout and --dtype)")
    candidates = records.candidate_configs()
    allowed = set(candidates)
    measured = {t.config: t.time_us for t in records.trials if t.ok and t.config in allowed}
    configs, prior = corrected_prior(shape, [c for c in candidates if c in measured], profile, residual)
    if not configs:
        raise ExplainError(f"{data}: no config of {shape}'s space ran successfully there")
    index = {c: i for i, c in enumerate(configs)}
    times = [measured[c] for c in configs]
    try:
        result = tune(shape, RecordedMeasurer(records), rooftune_strategy(residual), EXPLAIN_PLOT_BUDGET,
                      profile=profile, candidates=candidates)
        tried, winner = [index[t.config] for t in result.trials if t.config in index], index.get(result.winner)
    except TuneError:
        tried, winner = [], None
    zero = index.get(zero_trial_pick(shape, candidates, profile, residual))
    best = int(np.argmin(times))
    scores = [f"{name} {times[best] / times[i]:.3f}" for name, i in
              (("zero-trial pick", zero), (f"search within {EXPLAIN_PLOT_BUDGET} configs", winner)) if i is not None]
    return PlotPoints(np.exp(prior).tolist(), times, tried, winner, zero, best, scores)
